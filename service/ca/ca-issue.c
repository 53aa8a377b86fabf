/* The one issuance path (enrollment, approved requests, renewal) and the
 * CRL cache.  A certificate exists for a client only after the store has
 * committed it: signing happens first, the commit decides. */
#include <string.h>
#include <time.h>

#include <openssl/pem.h>

#include "attest-record.h"
#include "ca-internal.h"
#include "cert-scope.h"
#include "error.h"
#include "log.h"
#include "ossl-util.h"
#include "x509-util.h"

/* Regenerate the CRL when less than this fraction of its validity is left. */
#define CRL_REFRESH_FRACTION 0.5

/* Fills the store record for c, whose key is the request's (its SPKI
 * fingerprint is the one already taken of the request) and whose subject
 * is subject; strings are allocated into rec, c's DER moves there. */
static int cert_record(issued_cert *c, const X509_NAME *subject, const csr_info *csr, const char *identity,
                       const policy_profile *profile, policy_role role, int generation, int64_t now, store_cert *rec) {
        const char *role_name = policy_cert_role_name(role);
        int r;

        if ((r = name_to_string(subject, &rec->subject)) < 0)
                return r;
        rec->serial = strdup(c->serial);
        rec->not_before = c->not_before;
        rec->not_after = c->not_after;
        snprintf(rec->spki_sha256, sizeof(rec->spki_sha256), "%s", csr_info_facts(csr)->spki_sha256);
        rec->der = TAKE_PTR(c->der);
        rec->der_len = c->der_len;
        rec->identity = strdup(identity);
        rec->profile = strdup(profile->name);
        rec->status = CERT_VALID;
        rec->created_at = now;
        rec->generation = generation;
        if (!role_name)
                return hwid_fail(HWID_E_INTERNAL, "profile %s gives no certificate role", profile->name);
        snprintf(rec->role, sizeof(rec->role), "%s", role_name);
        /* A provisioner's scope is recorded like its role: what it may do
         * is what its profile said when the certificate was issued. */
        if ((r = cert_scope_encode(profile, &rec->scope)) < 0)
                return r;
        return rec->serial && rec->identity && rec->profile ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}

/* Signs the certificate iss decided on for csr's key with the active
 * generation, whose CRL it names; its subject and names are handed out
 * too, for the record. */
static int sign_for(ca_service *ca, const csr_info *csr, const policy_issue *iss, int64_t now,
                    X509_NAME **ret_subject, GENERAL_NAMES **ret_sans, issued_cert *ret) {
        _cleanup_(X509_NAME_freep) X509_NAME *subject = NULL;
        _cleanup_(GENERAL_NAMES_freep) GENERAL_NAMES *sans = NULL;
        _cleanup_free_ char *crl_url = NULL;
        const ca_gen *gen = ca_active(ca);
        issue_request in;
        int r;

        if ((r = issue_names(iss, &subject, &sans)) < 0 || (r = ca_gen_crl_url(ca->cfg->crl_url, gen->n, &crl_url)) < 0)
                return r;
        /* An attested key: the certificate names the TPM it lives in. */
        if (iss->attestation && (r = attest_san_append(sans, iss->attestation->ek_pub_sha256)) < 0)
                return r;
        in = (issue_request) {
                .subject_key = csr_info_pubkey(csr),
                .subject_spki = csr_info_spki(csr),
                .subject = subject,
                .sans = sans,
                .key_usage = iss->key_usage,
                .eku = iss->eku,
                .validity = iss->validity,
                .now = now,
                .backdate = ca->cfg->clock_skew,
                .crl_url = crl_url,
                .ocsp_url = ca->cfg->ocsp_url,
        };
        if ((r = issuer_sign(gen->issuer, &in, ret)) < 0)
                return r;
        *ret_subject = TAKE_PTR(subject);
        *ret_sans = TAKE_PTR(sans);
        return 0;
}

/* The commit, timed for metrics (its group commit's wait included). */
static int commit_timed(ca_service *ca, const store_issue *how, int64_t now) {
        uint64_t t0 = histogram_now_ns();
        int r = store_cert_commit(ca->store, how, now);

        metrics_commit_observe(ca->metrics, COMMIT_CERTIFICATE, histogram_now_ns() - t0);
        return r;
}

int ca_issue(ca_service *ca, const csr_info *csr, const policy_issue *iss, store_issue *how,
             const char *identity, int64_t now, uint8_t **ret_der, size_t *ret_len, char **ret_serial) {
        _cleanup_(X509_NAME_freep) X509_NAME *subject = NULL;
        _cleanup_(GENERAL_NAMES_freep) GENERAL_NAMES *sans = NULL;
        issued_cert cert = { 0 };
        store_cert rec = { 0 };
        char **dns = NULL;
        size_t n_dns = 0;
        int r;

        if ((r = sign_for(ca, csr, iss, now, &subject, &sans, &cert)) < 0)
                return r;
        /* The DNS names the certificate carries: the store keeps each
         * with one live certificate at most. */
        if ((r = cert_record(&cert, subject, csr, identity, iss->profile,
                             policy_profile_role(ca->cfg->policy, iss->profile), ca_active(ca)->n, now, &rec)) < 0 ||
            (r = general_names_dns(sans, &dns, &n_dns)) < 0)
                goto out;
        rec.request_id = how->request_id ? strdup(how->request_id) : NULL;
        ca_attestation_record(iss->attestation, &rec.attestation);
        how->cert = &rec;
        how->dns_names = (const char *const *) dns;
        how->n_dns_names = n_dns;
        r = commit_timed(ca, how, now);
        /* Nothing of this frame stays in the caller's how. */
        how->cert = NULL;
        how->dns_names = NULL;
        how->n_dns_names = 0;
        if (r < 0)
                goto out;
        *ret_serial = TAKE_PTR(rec.serial);
        *ret_len = rec.der_len;
        *ret_der = TAKE_PTR(rec.der);
out:
        strv_free_n(dns, n_dns);
        issued_cert_clear(&cert);
        store_cert_clear(&rec);
        return r;
}

typedef struct crl_fill {
        crl_builder *b;
        int r;
} crl_fill;

static int add_revoked(const char *serial, int64_t revoked_at, int reason, void *userdata) {
        crl_fill *f = userdata;
        crl_entry e = { .serial_hex = serial, .revoked_at = revoked_at, .reason = reason };

        f->r = crl_builder_add(f->b, &e);
        return f->r;
}

/* Generation n's cache (a free one when it has none yet; the oldest
 * generation's when all are taken). */
static ca_crl_cache *crl_cache(ca_service *ca, int n) {
        ca_crl_cache *free_one = NULL, *oldest = &ca->crls[0];

        for (size_t i = 0; i < CA_CRL_CACHES; i++) {
                ca_crl_cache *c = &ca->crls[i];

                if (c->generation == n)
                        return c;
                if (!c->generation && !free_one)
                        free_one = c;
                if (c->generation && c->generation < oldest->generation)
                        oldest = c;
        }
        if (!free_one) {
                OPENSSL_free(oldest->der);
                *oldest = (ca_crl_cache) { 0 };
        }
        return free_one ? free_one : oldest;
}

static int build_crl(ca_service *ca, const ca_gen *gen, ca_crl_cache *cache, int64_t now, int64_t seq) {
        crl_builder *b = NULL;
        crl_fill fill = { 0 };
        uint8_t *der = NULL;
        size_t len = 0;
        int64_t number;
        int r;

        /* From the store, so that CRL numbers grow across replicas too. */
        if ((r = store_crl_number_next(ca->store, now, &number)) < 0 ||
            (r = crl_builder_new(gen->issuer, now, ca->cfg->crl_validity, number, &b)) < 0)
                return r;
        fill.b = b;
        r = store_cert_foreach_revoked(ca->store, gen->n, now, add_revoked, &fill);
        if (r >= 0 && fill.r >= 0)
                r = crl_builder_finish(b, &der, &len);
        crl_builder_free(b);
        if (r < 0 || fill.r < 0)
                return r < 0 ? r : fill.r;
        OPENSSL_free(cache->der);
        *cache = (ca_crl_cache) { .generation = gen->n, .der = der, .len = len, .seq = seq, .made_at = now,
                                  .refresh_at = now + (int64_t) ((double) ca->cfg->crl_validity * CRL_REFRESH_FRACTION) };
        log_info("CRL of CA generation %d regenerated (revocation sequence %lld)", gen->n, (long long) seq);
        return 0;
}

/* Copies generation n's current CRL into out, regenerating it first if a
 * revocation happened since it was made or it is getting old. */
int ca_crl(ca_service *ca, int n, int64_t now, buf *out) {
        const ca_gen *gen = ca_gens_find(ca->gens, n);
        ca_crl_cache *cache;
        int64_t seq = 0;
        int r;

        if (!gen)
                return hwid_fail(HWID_E_NOT_FOUND, "CA generation %d is not served (never made, or retired): no CRL",
                                 n);
        if ((r = store_revocation_seq(ca->store, &seq)) < 0)
                return r;
        pthread_mutex_lock(&ca->crl_lock);
        cache = crl_cache(ca, n);
        if (!cache->der || seq != cache->seq || now >= cache->refresh_at)
                r = build_crl(ca, gen, cache, now, seq);
        if (r >= 0)
                r = buf_append(out, cache->der, cache->len);
        pthread_mutex_unlock(&ca->crl_lock);
        return r;
}

void ca_crl_free(ca_service *ca) {
        for (size_t i = 0; i < CA_CRL_CACHES; i++)
                OPENSSL_free(ca->crls[i].der);
}
