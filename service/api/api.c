/* Routing of hwidd's HTTP API and the small read-only endpoints. */
#include <string.h>
#include <time.h>

#include <json-c/json.h>

#include "admin-api.h"
#include "api.h"
#include "attest-api.h"
#include "error.h"

static void get_ca(ca_service *ca, const http_request *req, http_response *resp) {
        int r = ca_allow_read(ca, req, ACTION_GET_CA);

        if (r < 0)
                {
                ca_respond_error(ca, resp, r);
                return;
        }
        http_respond_pem(resp, 200, ca->ca_pem);
}

static void get_crl(ca_service *ca, const http_request *req, http_response *resp) {
        int r = ca_allow_read(ca, req, ACTION_GET_CRL);

        if (r >= 0)
                r = ca_crl(ca, (int64_t) time(NULL), &resp->body);
        if (r < 0)
                {
                ca_respond_error(ca, resp, r);
                return;
        }
        resp->status = 200;
        resp->content_type = "application/pkix-crl";
}

static const char *cert_status_name(store_cert_status s) {
        return s == CERT_VALID ? "valid" : s == CERT_REVOKED ? "revoked" : "superseded";
}

/* What a device needs to renew well: when the window opens, whether its
 * profile wants a new key, and whether it wants TPM attestation (and if
 * this certificate was attested: then the same key needs no new proof). */
static void add_renewal_info(ca_service *ca, const store_cert *c, json_object *o) {
        static const char *const modes[] = { "none", "optional", "required" };
        const policy_profile *p = policy_profile_find(ca->cfg->policy, c->profile);

        json_object_object_add(o, "attested", json_object_new_boolean(store_attested(&c->attestation)));
        if (!p)
                return;
        json_object_object_add(o, "renew_after",
                               json_object_new_int64(policy_renewal_opens_at(p, c->not_before, c->not_after)));
        json_object_object_add(o, "rotate_key", json_object_new_boolean(p->rotate_key));
        json_object_object_add(o, "attestation", json_object_new_string(modes[p->attestation]));
}

static int identity_json(ca_service *ca, const char *name, int64_t now, http_response *resp) {
        store_cert c = { 0 };
        json_object *o;
        int r = store_cert_live_for(ca->store, name, now, &c);

        if (r == -HWID_E_NOT_FOUND)
                return hwid_fail(HWID_E_NOT_FOUND, "%s has no live certificate", name);
        if (r < 0)
                return r;
        o = json_object_new_object();
        json_object_object_add(o, "identity", json_object_new_string(c.identity));
        json_object_object_add(o, "serial", json_object_new_string(c.serial));
        json_object_object_add(o, "status", json_object_new_string(cert_status_name(c.status)));
        json_object_object_add(o, "profile", json_object_new_string(c.profile));
        json_object_object_add(o, "not_before", json_object_new_int64(c.not_before));
        json_object_object_add(o, "not_after", json_object_new_int64(c.not_after));
        json_object_object_add(o, "spki_sha256", json_object_new_string(c.spki_sha256));
        add_renewal_info(ca, &c, o);
        http_respond_json(resp, 200, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
        store_cert_clear(&c);
        return 0;
}

/* GET /v1/identities/{name}: a node may read only its own status. */
static void get_identity(ca_service *ca, const http_request *req, const char *name, http_response *resp) {
        int64_t now = (int64_t) time(NULL);
        ca_auth a = { 0 };
        policy_decision d;
        int r;

        if ((r = ca_auth_peer(ca, req, now, &a)) >= 0) {
                policy_authorize(ca->cfg->policy, &a.who, ACTION_READ_IDENTITY, name, &d);
                r = ca_decision(ca, &a, "read-identity", name, &d);
        }
        if (r >= 0)
                r = identity_json(ca, name, now, resp);
        if (r < 0)
                ca_fail_request(ca, &a, "read-identity", name, resp, r);
        ca_auth_clear(&a);
}

static bool is(const http_request *req, const char *method, const char *path) {
        return strcmp(req->method, method) == 0 && strcmp(req->path, path) == 0;
}

static const char *suffix(const http_request *req, const char *method, const char *prefix) {
        size_t n = strlen(prefix);

        if (strcmp(req->method, method) != 0 || strncmp(req->path, prefix, n) != 0 || !req->path[n] ||
            strchr(req->path + n, '/'))
                return NULL;
        return req->path + n;
}

static void route(ca_service *ca, const http_request *req, http_response *resp) {
        const char *arg;

        if (is(req, "GET", "/ca"))
                get_ca(ca, req, resp);
        else if (is(req, "POST", "/csr"))
                ca_enroll(ca, req, resp);
        else if ((arg = suffix(req, "GET", "/v1/requests/")))
                ca_poll(ca, arg, resp);
        else if (is(req, "POST", "/v1/renew"))
                ca_renew(ca, req, resp);
        else if (is(req, "POST", "/v1/attest"))
                ca_attest(ca, req, resp);
        else if (is(req, "GET", "/crl"))
                get_crl(ca, req, resp);
        else if (is(req, "GET", "/healthz"))
                ca_get_healthz(ca, req, resp);
        else if (is(req, "GET", "/readyz"))
                ca_get_readyz(ca, req, resp);
        else if (is(req, "GET", "/metrics"))
                ca_get_metrics(ca, req, resp);
        else if ((arg = suffix(req, "GET", "/v1/identities/")))
                get_identity(ca, req, arg, resp);
        else if (!ca_admin_route(ca, req, resp) && !ca_est_route(ca, req, resp))
                http_error(resp, 404, "not_found", "no such endpoint");
}

static void route_public(ca_service *ca, const http_request *req, http_response *resp) {
        if (is(req, "GET", "/crl"))
                get_crl(ca, req, resp);
        else if (is(req, "GET", "/ca"))
                get_ca(ca, req, resp);
        else
                http_error(resp, 404, "not_found", "this plain-HTTP listener serves GET /crl and GET /ca only");
}

/* Every request is timed and counted by endpoint and outcome, and an
 * error by its slug, whichever handler answered it. */
static void handle(ca_service *ca, const http_request *req, http_response *resp,
                   void (*router)(ca_service *, const http_request *, http_response *)) {
        uint64_t t0 = histogram_now_ns();

        atomic_fetch_add(&ca->n_requests, 1);
        /* A SIGHUP reload waits until no request uses the old policy. */
        pthread_rwlock_rdlock(&ca->cfg_lock);
        router(ca, req, resp);
        pthread_rwlock_unlock(&ca->cfg_lock);
        metrics_request(ca->metrics, metrics_endpoint_of(req->method, req->path), resp->status,
                        resp->status >= 400 ? resp->error : NULL, histogram_now_ns() - t0);
}

void ca_service_handle(void *userdata, const http_request *req, http_response *resp) {
        handle(userdata, req, resp, route);
}

void ca_service_handle_public(void *userdata, const http_request *req, http_response *resp) {
        handle(userdata, req, resp, route_public);
}

void ca_service_on_refusal(void *userdata, int status, const char *error) {
        ca_service *ca = userdata;

        metrics_refusal(ca->metrics, error);
}
