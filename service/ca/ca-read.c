/* The read-only operations (CA_OP_READ, CA_OP_READ_IDENTITY): the CA
 * certificate, the CRL, health, readiness and metrics, what a profile
 * wants of a request, and an identity's live certificate.  Each goes
 * through the authorizer as whoever asks (ca_allow_read()). */
#include <stdlib.h>
#include <string.h>

#include "ca-internal.h"
#include "error.h"
#include "x509-util.h"

/* Each served generation's notAfter and state, and when the active
 * one's CRL was made. */
static void generation_sources(ca_service *ca, metrics_sources *src) {
        const ca_gens *g = ca->gens;

        for (size_t i = 0; i < g->n && src->n_gens < METRICS_GENS_MAX; i++)
                src->gens[src->n_gens++] = (metrics_gen) { .generation = g->v[i].n, .not_after = g->v[i].not_after,
                                                           .state = store_ca_state_name(g->v[i].state) };
        src->ca_not_after = g->active->not_after;
        pthread_mutex_lock(&ca->crl_lock);
        for (size_t i = 0; i < CA_CRL_CACHES; i++)
                if (ca->crls[i].generation == g->active->n)
                        src->crl_made_at = ca->crls[i].made_at;
        pthread_mutex_unlock(&ca->crl_lock);
}

int ca_metrics(ca_service *ca, int64_t now, buf *out) {
        metrics_sources src = {
                .now = now,
                .requests = atomic_load(&ca->n_requests),
                .issued = atomic_load(&ca->n_issued),
                .renewed = atomic_load(&ca->n_renewed),
                .pending = atomic_load(&ca->n_pending),
                .denied = atomic_load(&ca->n_denied),
                .errors = atomic_load(&ca->n_errors),
                .unauthenticated = refusals_total(ca->refusals),
                .ca_key = ca_active(ca)->key,
                .tls_key = ca->tls_key,
                .tls_not_after = ca->tls_not_after,
        };

        int r;

        generation_sources(ca, &src);
        /* Without the store the rest is still worth showing. */
        src.have_stats = store_stats_get(ca->store, src.now, &src.stats) >= 0;
        r = metrics_render(ca->metrics, &src, out);
        return r < 0 ? r : ca_ocsp_metrics(ca, out);
}

/* GET /crl (generation 1) and GET /crl/N: N as the door gave it. */
static int crl_generation(const char *arg, int *ret) {
        char *end = NULL;
        long n = arg ? strtol(arg, &end, 10) : 1;

        if (arg && (!*arg || *end || arg[0] == '0' || n < 1 || n > 1000))
                return hwid_fail(HWID_E_NOT_FOUND, "no such CRL: /crl/N names a CA generation (2, 3, ...)");
        *ret = (int) n;
        return 0;
}

static int read_crl(ca_service *ca, const ca_request *req) {
        int n, r = crl_generation(req->arg, &n);

        return r < 0 ? r : ca_crl(ca, n, req->now, req->out);
}

static void read_update(const ca_service *ca, ca_result *res) {
        ca_gens_update u;

        ca_gens_update_get(ca->gens, &u);
        res->update = (ca_update) { .new_with_new = u.new_with_new, .new_with_old = u.new_with_old,
                                    .old_with_new = u.old_with_new };
}

/* The profile a template describes: the label's, else the token's (CMP's
 * MAC), else (EST) the one of the client certificate presented; NULL:
 * none. */
static const policy_profile *template_profile(ca_service *ca, const ca_request *req) {
        const policy_profile *p = NULL;
        ca_auth a = { 0 };

        if (req->label)
                return policy_profile_find(ca->cfg->policy, req->label);
        if (req->token_id && store_token_get(ca->store, req->token_id, &a.token) == 0)
                p = policy_profile_find(ca->cfg->policy, a.token.profile);
        else if (!req->token_id && req->door == CA_DOOR_EST && ca_auth_peer(ca, &req->peer, req->now, &a) >= 0 &&
                 a.cert.profile)
                p = policy_profile_find(ca->cfg->policy, a.cert.profile);
        ca_auth_clear(&a);
        return p;
}

static void profile_template(const policy_profile *p, ca_template *ret) {
        *ret = (ca_template) {
                .ec_p256 = p->key_algs & KEYALG_EC_P256,
                .ec_p384 = p->key_algs & KEYALG_EC_P384,
                .rsa = p->key_algs & KEYALG_RSA,
                .rsa_bits = p->rsa_min_bits > 0 ? p->rsa_min_bits : 2048,
                .pop_linking = p->est_pop_linking,
                .grants_sans = (p->dns_patterns && p->dns_patterns[0]) || p->n_ip_ranges > 0 ||
                               (p->uri_templates && p->uri_templates[0]),
        };
}

static int read_one(ca_service *ca, const ca_request *req, ca_result *res) {
        const policy_profile *p;

        switch (req->what) {
        case CA_READ_CA:
                res->text = ca->gens->ca_pem;
                return 0;
        case CA_READ_CRL:
                return read_crl(ca, req);
        case CA_READ_HEALTH:
                return store_ping(ca->store);
        case CA_READ_READY:
                return ca_readiness_get(ca, &res->ready);
        case CA_READ_METRICS:
                return ca_metrics(ca, req->now, req->out);
        case CA_READ_TEMPLATE:
                read_update(ca, res);
                if (!(p = template_profile(ca, req)))
                        res->outcome = CA_NONE;
                else
                        profile_template(p, &res->tmpl);
                return 0;
        }
        return hwid_fail(HWID_E_INTERNAL, "no such read");
}

static const policy_action read_actions[] = {
        [CA_READ_CA] = ACTION_GET_CA,     [CA_READ_CRL] = ACTION_GET_CRL,         [CA_READ_HEALTH] = ACTION_HEALTH,
        [CA_READ_READY] = ACTION_HEALTH,  [CA_READ_METRICS] = ACTION_METRICS,    [CA_READ_TEMPLATE] = ACTION_GET_CA,
};

void ca_read_call(ca_service *ca, const ca_request *req, ca_result *res) {
        int r = (size_t) req->what < ELEMENTSOF(read_actions) ? ca_allow_read(ca, &req->peer, read_actions[req->what])
                                                               : hwid_fail(HWID_E_INTERNAL, "no such read");

        if (r >= 0)
                r = read_one(ca, req, res);
        if (r < 0)
                ca_refuse(ca, res, r);
}

/* What a device needs to renew well: when the window opens, whether its
 * profile wants a new key, and whether it wants TPM attestation. */
static void renewal_info(ca_service *ca, ca_identity *id) {
        static const char *const modes[] = { "none", "optional", "required" };
        const policy_profile *p = policy_profile_find(ca->cfg->policy, id->cert.profile);

        if (!p)
                return;
        id->has_profile = true;
        id->renew_after = policy_renewal_opens_at(p, id->cert.not_before, id->cert.not_after);
        id->rotate_key = p->rotate_key;
        id->attestation = modes[p->attestation];
}

/* GET /v1/identities/{name}: a node may read only its own status. */
void ca_read_identity(ca_service *ca, const ca_request *req, ca_result *res) {
        const char *name = req->arg;
        ca_auth a = { 0 };
        policy_decision d;
        int r;

        if ((r = ca_auth_peer(ca, &req->peer, req->now, &a)) >= 0) {
                policy_authorize(ca->cfg->policy, &a.who, ACTION_READ_IDENTITY, name, &d);
                r = ca_decision(ca, &a, "read-identity", name, &d);
        }
        if (r >= 0 && (r = store_cert_live_for(ca->store, name, req->now, &res->id.cert)) == -HWID_E_NOT_FOUND)
                r = hwid_fail(HWID_E_NOT_FOUND, "%s has no live certificate", name);
        if (r >= 0)
                renewal_info(ca, &res->id);
        if (r < 0)
                ca_fail(ca, &a, "read-identity", name, res, r);
        ca_auth_clear(&a);
}
