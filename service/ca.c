/* The CA service object: keys, store, issuer, policy; authentication and
 * the single issuance path every endpoint goes through. */
#include <string.h>
#include <time.h>

#include <openssl/pem.h>

#include "ca-internal.h"
#include "error.h"
#include "fsutil.h"
#include "log.h"
#include "ossl-util.h"
#include "secret.h"
#include "token.h"
#include "x509-util.h"

#define CA_PEM_MAX (256 * 1024)

static int load_ca_cert(ca_service *ca, const hwidd_config *cfg) {
        _cleanup_free_ char *pem = NULL, *chain = NULL;
        _cleanup_(BIO_free_allp) BIO *b = NULL;
        size_t len, clen = 0;
        int r;

        if ((r = read_file_capped(cfg->ca_cert, CA_PEM_MAX, &pem, &len)) < 0)
                return r;
        b = BIO_new_mem_buf(pem, (int) len);
        ca->ca_cert = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
        if (!ca->ca_cert)
                return hwid_fail_ossl(HWID_E_CONFIG, "%s holds no PEM certificate", cfg->ca_cert);
        if (cfg->ca_chain && (r = read_file_capped(cfg->ca_chain, CA_PEM_MAX, &chain, &clen)) < 0)
                return r;
        if (asprintf(&ca->ca_pem, "%s%s%s", pem, (len && pem[len - 1] != '\n') ? "\n" : "",
                     chain ? chain : "") < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        return 0;
}

int ca_service_new(hwidd_config *cfg, ca_service **ret) {
        _cleanup_(ca_service_freep) ca_service *ca = calloc(1, sizeof(*ca));
        hsm_options ho = { .tcti = cfg->tcti };
        int r;

        if (!ca)
                return hwid_fail(HWID_E_NOMEM, NULL);
        pthread_rwlock_init(&ca->cfg_lock, NULL);
        pthread_mutex_init(&ca->crl_lock, NULL);
        ca->cfg = cfg;
        if ((r = load_ca_cert(ca, cfg)) < 0 ||
            (r = hwid_key_open(cfg->ca_key, &ho, &ca->ca_key)) < 0 ||
            (r = issuer_new(ca->ca_key, ca->ca_cert, cfg->crl_url, &ca->issuer)) < 0 ||
            (r = store_open(cfg->database, &ca->store)) < 0)
                return r;
        *ret = TAKE_PTR(ca);
        return 0;
}

void ca_service_free(ca_service *ca) {
        if (!ca)
                return;
        issuer_free(ca->issuer);
        store_free(ca->store);
        hwid_key_free(ca->ca_key);
        X509_free(ca->ca_cert);
        free(ca->ca_pem);
        OPENSSL_free(ca->crl_der);
        pthread_rwlock_destroy(&ca->cfg_lock);
        pthread_mutex_destroy(&ca->crl_lock);
        free(ca);
}

hwidd_config *ca_service_set_config(ca_service *ca, hwidd_config *cfg) {
        hwidd_config *old;

        pthread_rwlock_wrlock(&ca->cfg_lock);
        old = ca->cfg;
        ca->cfg = cfg;
        pthread_rwlock_unlock(&ca->cfg_lock);
        return old;
}

const char *ca_service_ca_pem(const ca_service *ca) {
        return ca->ca_pem;
}

void ca_auth_clear(ca_auth *a) {
        store_token_clear(&a->token);
        store_cert_clear(&a->cert);
        *a = (ca_auth) { 0 };
}

static int token_problem(store_token_state st, const char *id) {
        switch (st) {
        case TOKEN_EXPIRED: return hwid_fail(HWID_E_TOKEN_INVALID, "bootstrap token %s has expired", id);
        case TOKEN_USED_UP: return hwid_fail(HWID_E_TOKEN_INVALID, "bootstrap token %s has been used up", id);
        case TOKEN_REVOKED: return hwid_fail(HWID_E_TOKEN_INVALID, "bootstrap token %s has been revoked", id);
        default: return 0;
        }
}

int ca_auth_token(ca_service *ca, const http_request *req, int64_t now, ca_auth *ret) {
        _cleanup_secret_ char *secret = NULL;
        char id[TOKEN_ID_LEN + 1];
        int r;

        if ((r = token_parse(req->authorization, true, id, &secret)) < 0)
                return r;
        snprintf(ret->actor, sizeof(ret->actor), "token:%s", id);
        r = store_token_get(ca->store, id, &ret->token);
        /* A wrong secret looks exactly like an unknown id: no probing. */
        if (r == -HWID_E_NOT_FOUND || (r == 0 && !token_secret_matches(secret, ret->token.secret_hash)))
                return hwid_fail(HWID_E_TOKEN_INVALID, "unknown bootstrap token");
        if (r < 0)
                return r;
        ret->token_spent = store_token_state_at(&ret->token, now) == TOKEN_USED_UP;
        if ((r = token_problem(store_token_state_at(&ret->token, now), id)) < 0)
                return r;
        ret->who = (policy_requester) {
                .role = ROLE_TOKEN,
                .token_id = ret->token.id,
                .token_profile = ret->token.profile,
                .token_name_pattern = ret->token.name_pattern,
        };
        return 0;
}

static bool has_admin_group(X509 *x, const char *group) {
        const X509_NAME *n = X509_get_subject_name(x);

        for (int i = -1; group && (i = X509_NAME_get_index_by_NID(n, NID_organizationName, i)) >= 0;) {
                const ASN1_STRING *v = X509_NAME_ENTRY_get_data(X509_NAME_get_entry(n, i));
                if ((size_t) ASN1_STRING_length(v) == strlen(group) &&
                    memcmp(ASN1_STRING_get0_data(v), group, strlen(group)) == 0)
                        return true;
        }
        return false;
}

/* The client certificate must be one hwidd issued and still VALID. */
static int peer_record(ca_service *ca, X509 *x, int64_t now, ca_auth *ret) {
        _cleanup_free_ char *serial = NULL;
        int r;

        if ((r = serial_to_hex(X509_get0_serialNumber(x), &serial)) < 0)
                return r;
        r = store_cert_get(ca->store, serial, &ret->cert);
        if (r == -HWID_E_NOT_FOUND)
                return hwid_fail(HWID_E_UNAUTHENTICATED, "client certificate %s was not issued by this CA", serial);
        if (r < 0)
                return r;
        if (ret->cert.status == CERT_REVOKED)
                return hwid_fail(HWID_E_REVOKED, "certificate %s of %s is revoked: bootstrap again with a new token",
                                 serial, ret->cert.identity);
        if (ret->cert.status == CERT_SUPERSEDED)
                return hwid_fail(HWID_E_SUPERSEDED, "certificate %s of %s has been replaced by a newer one",
                                 serial, ret->cert.identity);
        if (now >= ret->cert.not_after)
                return hwid_fail(HWID_E_EXPIRED, "certificate %s of %s has expired: bootstrap again with a new token",
                                 serial, ret->cert.identity);
        return 0;
}

int ca_auth_peer(ca_service *ca, const http_request *req, int64_t now, ca_auth *ret) {
        _cleanup_(X509_freep) X509 *x = NULL;
        const unsigned char *p = req->peer_cert;
        int r;

        snprintf(ret->actor, sizeof(ret->actor), "anonymous");
        if (!req->peer_cert)
                return 0;
        if (req->peer_expired)
                return hwid_fail(HWID_E_EXPIRED, "client certificate has expired: bootstrap again with a new token");
        if (!req->peer_verified)
                return hwid_fail(HWID_E_UNAUTHENTICATED, "client certificate does not verify against this CA");
        x = d2i_X509(NULL, &p, (long) req->peer_cert_len);
        if (!x)
                return hwid_fail(HWID_E_UNAUTHENTICATED, "client certificate cannot be parsed");
        if ((r = peer_record(ca, x, now, ret)) < 0)
                return r;
        ret->who = (policy_requester) {
                .role = has_admin_group(x, policy_admin_group(ca->cfg->policy)) ? ROLE_ADMIN : ROLE_NODE,
                .identity = ret->cert.identity,
                .cert_profile = ret->cert.profile,
                .cert_not_before = ret->cert.not_before,
                .cert_not_after = ret->cert.not_after,
                .cert_spki_sha256 = ret->cert.spki_sha256,
        };
        snprintf(ret->actor, sizeof(ret->actor), "%s:%s", ret->who.role == ROLE_ADMIN ? "admin" : "node",
                 ret->cert.identity);
        return 0;
}

void ca_audit(ca_service *ca, const char *actor, const char *action, const char *target,
              const char *outcome, const char *reason, const char *token_id) {
        store_audit a = {
                .at = (int64_t) time(NULL), .actor = actor, .action = action, .target = target,
                .outcome = outcome, .reason = reason, .token_id = token_id,
        };
        int r = store_audit_append(ca->store, &a);

        log_msg(strcmp(outcome, "allow") == 0 ? LOG_LVL_INFO : LOG_LVL_NOTICE, "%s %s %s: %s%s%s",
                actor, action, target ? target : "-", outcome, reason ? " — " : "", reason ? reason : "");
        if (r < 0)
                log_error("cannot write the audit record: %s", hwid_strerror(r));
}

int ca_decision(ca_service *ca, ca_auth *a, const char *action, const char *target,
                const policy_decision *d) {
        if (d->verdict == VERDICT_ALLOW && !d->audit_only)
                return 0;
        if (d->verdict == VERDICT_ALLOW) {
                /* Audit-only mode: what policy would have denied goes through, loudly. */
                ca_audit(ca, a->actor, action, target, "would-deny", d->reason, a->who.token_id);
                return 0;
        }
        atomic_fetch_add(&ca->n_denied, 1);
        ca_audit(ca, a->actor, action, target, "deny", d->reason, a->who.token_id);
        a->audited = true;
        return hwid_fail(d->error ? (hwid_err) -d->error : HWID_E_FORBIDDEN, "%s", d->reason);
}

void ca_fail_request(ca_service *ca, ca_auth *a, const char *action, const char *target,
                     http_response *resp, int r) {
        /* Copy the detail first: auditing may fail and overwrite it. */
        char reason[512];

        snprintf(reason, sizeof(reason), "%s", hwid_strerror(r));
        /* When the store itself failed, auditing to it would wait out the
         * same lock again: the log line has to do. */
        if (r == -HWID_E_STORE) {
                log_error("%s %s %s: %s", a->actor, action, target ? target : "-", reason);
                a->audited = true;
        }
        if (!a->audited)
                ca_audit(ca, a->actor, action, target, hwid_err_http_status(r) >= 500 ? "error" : "deny",
                         reason, a->who.token_id);
        hwid_fail((hwid_err) -r, "%s", reason);
        ca_respond_error(ca, resp, r);
}
