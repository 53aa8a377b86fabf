/* The CA service object: keys, store, issuer, policy; authentication and
 * the single issuance path every endpoint goes through. */
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/pem.h>

#include "audit-syslog.h"
#include "ca-internal.h"
#include "cert-scope.h"
#include "error.h"
#include "fsutil.h"
#include "log.h"
#include "ossl-util.h"
#include "secret.h"
#include "token.h"
#include "x509-util.h"

#define CA_PEM_MAX (256 * 1024)

/* ca.certificate (generation 1) and ca.chain. */
static int load_ca_cert(ca_service *ca, const hwidd_config *cfg) {
        _cleanup_free_ char *pem = NULL;
        _cleanup_(BIO_free_allp) BIO *b = NULL;
        size_t len, clen = 0;
        int r;

        if ((r = read_file_capped(cfg->ca_cert, CA_PEM_MAX, &pem, &len)) < 0)
                return r;
        b = BIO_new_mem_buf(pem, (int) len);
        ca->ca_cert = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
        if (!ca->ca_cert)
                return hwid_fail_ossl(HWID_E_CONFIG, "%s holds no PEM certificate", cfg->ca_cert);
        if (cfg->ca_chain && (r = read_file_capped(cfg->ca_chain, CA_PEM_MAX, &ca->ca_chain_pem, &clen)) < 0)
                return r;
        return 0;
}

/* A store from before DNS names were kept: record those of its live
 * certificates, once, before serving anyone. */
static int record_old_dns_names(ca_service *ca) {
        size_t recorded = 0, skipped = 0;
        int r = store_cert_dns_backfill(ca->store, (int64_t) time(NULL), der_dns_names, &recorded, &skipped);

        if (r < 0)
                return r;
        if (recorded > 0 || skipped > 0)
                log_notice("recorded %zu DNS names of certificates issued before names were kept%s", recorded,
                           skipped ? "; some names were held by two live certificates and stay with the older" : "");
        return 0;
}

/* The syslog copy of the audit records counts what it could not deliver
 * (audit-syslog.h). */
void ca_syslog_dropped(void *userdata) {
        metrics_syslog_dropped(userdata);
}

/* The token key (ca.token_key), which must keep its value in its device.
 * Without one, tokens made before still work (legacy), new ones cannot
 * be made: said once at start. */
static int open_token_key(ca_service *ca, const hwidd_config *cfg, const hsm_options *ho) {
        hwid_custody c;
        int r;

        if (!cfg->token_key) {
                log_notice("no token key (ca.token_key): bootstrap tokens made before keep working until they "
                           "expire; new ones need one (hwid ca token-key, docs/CONFIG.md)");
                return 0;
        }
        if ((r = hwid_mac_key_open(cfg->token_key, ho, &ca->token_key)) < 0)
                return r;
        return token_key_check(ca->token_key, &c);
}

/* The service's counters and locks, for cfg. */
static int service_alloc(hwidd_config *cfg, ca_service **ret) {
        _cleanup_(ca_service_freep) ca_service *ca = calloc(1, sizeof(*ca));
        int r;

        if (!ca)
                return hwid_fail(HWID_E_NOMEM, NULL);
        pthread_rwlock_init(&ca->cfg_lock, NULL);
        pthread_mutex_init(&ca->crl_lock, NULL);
        pthread_mutex_init(&ca->chal_lock, NULL);
        pthread_mutex_init(&ca->ready_lock, NULL);
        ca->cfg = cfg;
        if ((r = metrics_new(&ca->metrics)) < 0 || (r = refusals_new(&ca->refusals)) < 0 ||
            (r = token_memo_new(TOKEN_MEMO_SLOTS, &ca->token_memo)) < 0)
                return r;
        *ret = TAKE_PTR(ca);
        return 0;
}

int ca_service_new(hwidd_config *cfg, ca_service **ret) {
        _cleanup_(ca_service_freep) ca_service *ca = NULL;
        hsm_options ho = { .tcti = cfg->tcti };
        int r;

        if ((r = service_alloc(cfg, &ca)) < 0 || (r = load_ca_cert(ca, cfg)) < 0 ||
            (r = hwid_key_open(cfg->ca_key, &ho, &ca->ca_key)) < 0 ||
            (r = open_token_key(ca, cfg, &ho)) < 0 ||
            (r = ca_ocsp_new(cfg, &ca->ocsp)) < 0 ||
            (r = store_open_pooled(cfg->database, cfg->database_connections, &ca->store)) < 0 ||
            (r = ca_gens_start(ca)) < 0 ||
            (r = audit_syslog_attach(ca->store, cfg->audit_syslog ? cfg->audit_syslog_socket : NULL, "hwidd",
                                     ca_syslog_dropped, ca->metrics)) < 0 ||
            (r = record_old_dns_names(ca)) < 0)
                return r;
        *ret = TAKE_PTR(ca);
        return 0;
}

int ca_service_new_host(hwidd_config *cfg, hwid_mac_key *token_key, ca_service **ret) {
        _cleanup_(ca_service_freep) ca_service *ca = NULL;
        int r;

        if ((r = service_alloc(cfg, &ca)) < 0) {
                hwid_mac_key_free(token_key);
                return r;
        }
        ca->host = true;
        ca->token_key = token_key;
        if ((r = store_open(cfg->database, &ca->store)) < 0 ||
            (r = audit_syslog_attach(ca->store, cfg->audit_syslog ? cfg->audit_syslog_socket : NULL, "hwid", NULL,
                                     NULL)) < 0)
                return r;
        *ret = TAKE_PTR(ca);
        return 0;
}

void ca_service_free(ca_service *ca) {
        if (!ca)
                return;
        /* What was counted since the last summary is not lost on shutdown. */
        if (ca->store && ca->refusals)
                ca_refusals_flush(ca, (int64_t) time(NULL), true);
        refusals_free(ca->refusals);
        X509_free(ca->tls_cert);
        ca_ocsp_free(ca->ocsp);
        free(ca->tls_pem);
        ca_gens_free(ca->gens);
        ca_crl_free(ca);
        store_free(ca->store);
        hwid_key_free(ca->ca_key);
        hwid_mac_key_free(ca->token_key);
        token_memo_free(ca->token_memo);
        X509_free(ca->ca_cert);
        free(ca->ca_chain_pem);
        metrics_free(ca->metrics);
        pthread_rwlock_destroy(&ca->cfg_lock);
        pthread_mutex_destroy(&ca->crl_lock);
        pthread_mutex_destroy(&ca->chal_lock);
        pthread_mutex_destroy(&ca->ready_lock);
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

int ca_service_set_tls(ca_service *ca, hwid_key *tls_key, const char *tls_pem) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new_mem_buf(tls_pem, -1);
        _cleanup_(X509_freep) X509 *x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
        _cleanup_free_ char *pem = strdup(tls_pem);
        int64_t not_after;
        int r;

        if (!x)
                return hwid_fail_ossl(HWID_E_CONFIG, "the TLS certificate file holds no PEM certificate");
        if (!pem)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = x509_not_after(x, &not_after)) < 0)
                return r;
        ca->tls_key = tls_key;
        ca->tls_not_after = not_after;
        X509_free(ca->tls_cert);
        ca->tls_cert = TAKE_PTR(x);
        free(ca->tls_pem);
        ca->tls_pem = TAKE_PTR(pem);
        return 0;
}

hwid_key *ca_service_tls_key(const ca_service *ca) {
        return ca->tls_key;
}

X509 *ca_service_tls_cert(const ca_service *ca) {
        return ca->tls_cert;
}

const char *ca_service_client_ca_pem(const ca_service *ca) {
        return ca->gens->client_ca_pem;
}

X509 *ca_service_ca_cert(const ca_service *ca) {
        return ca_active(ca)->cert;
}

const char *ca_service_ca_pem(const ca_service *ca) {
        return ca->gens->ca_pem;
}

void ca_auth_clear(ca_auth *a) {
        store_token_clear(&a->token);
        store_cert_clear(&a->cert);
        store_ek_clear(&a->ek);
        store_reads_free(a->reads);
        cert_scope_strv_free(a->scope_profiles);
        cert_scope_strv_free(a->scope_name_patterns);
        *a = (ca_auth) { 0 };
}

/* A genuine token: usable now, or why not. */
static int token_admit(int64_t now, ca_auth *ret) {
        const char *id = ret->token.id;
        int r;

        ret->token_genuine = true;
        ret->token_spent = store_token_state_at(&ret->token, now) == TOKEN_USED_UP;
        if ((r = store_token_refusal(store_token_state_at(&ret->token, now), id)) < 0)
                return r;
        ret->who = (policy_requester) {
                .role = ROLE_TOKEN,
                .token_id = ret->token.id,
                .token_profile = ret->token.profile,
                .token_name_pattern = ret->token.name_pattern,
        };
        return 0;
}

/* A derived token's secret: by the memo when it knows the token, else
 * one HMAC in the device, remembered when it matched. */
static int verify_token(ca_service *ca, const store_token *t, const char *secret) {
        int r;

        token_memo_verdict v = token_memo_check(ca->token_memo, t, secret);

        metrics_event_count(ca->metrics, !t->derived            ? EVENT_TOKEN_HASH
                                         : v == TOKEN_MEMO_UNKNOWN ? EVENT_TOKEN_DEVICE
                                                                   : EVENT_TOKEN_MEMORY);
        if (v != TOKEN_MEMO_UNKNOWN)
                return v == TOKEN_MEMO_MATCH ? 0 : hwid_fail(HWID_E_TOKEN_INVALID, "wrong bootstrap token secret");
        if ((r = token_verify(ca->token_key, t, secret)) == 0)
                token_memo_remember(ca->token_memo, t, secret);
        return r;
}

/* An unknown id costs nothing of the HSM/TPM; a known one at most one
 * HMAC (a derived token the memo does not know) or a SHA-256 (legacy).  A
 * wrong secret gets the answer an unknown id gets. */
int ca_auth_token(ca_service *ca, const char *presented, bool bearer, int64_t now, ca_auth *ret) {
        _cleanup_secret_ char *secret = NULL;
        char id[TOKEN_ID_LEN + 1];
        int r;

        if ((r = token_parse(presented, bearer, id, &secret)) < 0)
                return r;
        snprintf(ret->actor, sizeof(ret->actor), "token:%s", id);
        r = store_reads_token_get(ca->store, ret->reads, id, &ret->token);
        if (r == 0)
                r = verify_token(ca, &ret->token, secret);
        if (r == -HWID_E_NOT_FOUND || r == -HWID_E_TOKEN_INVALID)
                return hwid_fail(HWID_E_TOKEN_INVALID, "unknown bootstrap token");
        if (r < 0)
                return r;
        return token_admit(now, ret);
}

int ca_auth_token_id(ca_service *ca, const char *id, int64_t now, ca_auth *ret) {
        int r;

        snprintf(ret->actor, sizeof(ret->actor), "token:%s", id);
        r = store_reads_token_get(ca->store, ret->reads, id, &ret->token);
        if (r == -HWID_E_NOT_FOUND)
                return hwid_fail(HWID_E_TOKEN_INVALID, "unknown bootstrap token");
        if (r < 0)
                return r;
        return token_admit(now, ret);
}

int ca_token_secret(ca_service *ca, const char *token_id, char **ret_secret) {
        store_token tok = { 0 };
        int r = store_token_get(ca->store, token_id, &tok);

        if (r >= 0) {
                metrics_event_count(ca->metrics, tok.derived ? EVENT_TOKEN_DEVICE : EVENT_TOKEN_HASH);
                r = token_shared_secret(ca->token_key, &tok, ret_secret);
        }
        store_token_clear(&tok);
        return r;
}

int ca_cert_known(ca_service *ca, const char *serial) {
        store_cert c = { 0 };
        int r = store_cert_get(ca->store, serial, &c);

        store_cert_clear(&c);
        return r;
}

/* The presented certificate must be the very one recorded under its
 * serial (the DER holds the issuer, so this is also "and issuer"): a
 * certificate that merely chains somewhere, or reuses a serial, is not. */
static int peer_record(ca_service *ca, X509 *x, const ca_peer *peer, int64_t now, ca_auth *ret) {
        _cleanup_free_ char *serial = NULL;
        int r;

        if ((r = serial_to_hex(X509_get0_serialNumber(x), &serial)) < 0)
                return r;
        r = store_reads_cert_get(ca->store, ret->reads, serial, &ret->cert);
        if (r == -HWID_E_NOT_FOUND)
                return hwid_fail(HWID_E_UNAUTHENTICATED, "client certificate %s was not issued by this CA", serial);
        if (r < 0)
                return r;
        if (ret->cert.der_len != peer->len || CRYPTO_memcmp(ret->cert.der, peer->der, peer->len) != 0)
                return hwid_fail(HWID_E_UNAUTHENTICATED,
                                 "client certificate %s is not the certificate this CA issued with that serial", serial);
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

static void iso8601(int64_t t, char out[32]) {
        time_t tt = (time_t) t;
        struct tm tm;

        if (!gmtime_r(&tt, &tm) || !strftime(out, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
                snprintf(out, 32, "@%lld", (long long) t);
}

/* The time checks of a client certificate that verified otherwise: a
 * notBefore at most clock_skew ahead of our clock is a clock difference
 * we tolerate; more is "not yet valid", never "expired" (the device has
 * done nothing wrong: its clock, or ours, is off). */
static int peer_times(const ca_service *ca, const ca_peer *peer, int64_t now) {
        char from[32], ours[32];

        if (peer->expired)
                return hwid_fail(HWID_E_EXPIRED, "client certificate has expired: bootstrap again with a new token");
        if (!peer->not_yet_valid)
                return peer->verified ? 0 : 1;
        if (peer->valid_from <= now + ca->cfg->clock_skew)
                return 0;
        iso8601(peer->valid_from, from);
        iso8601(now, ours);
        return hwid_fail(HWID_E_NOT_YET_VALID,
                         "client certificate is not valid before %s; the server's time is %s (more than the "
                         "allowed clock skew of %lld s apart): check the clocks", from, ours,
                         (long long) ca->cfg->clock_skew);
}

int ca_auth_peer(ca_service *ca, const ca_peer *peer, int64_t now, ca_auth *ret) {
        _cleanup_(X509_freep) X509 *x = NULL;
        const unsigned char *p = peer->der;
        policy_role role;
        int r;

        snprintf(ret->actor, sizeof(ret->actor), "anonymous");
        if (!peer->der)
                return 0;
        if ((r = peer_times(ca, peer, now)) < 0)
                return r;
        if (r > 0)
                return hwid_fail(HWID_E_UNAUTHENTICATED, "client certificate does not verify against this CA "
                                 "(it must be signed by the CA certificate itself)");
        x = d2i_X509(NULL, &p, (long) peer->len);
        if (!x)
                return hwid_fail(HWID_E_UNAUTHENTICATED, "client certificate cannot be parsed");
        if ((r = peer_record(ca, x, peer, now, ret)) < 0)
                return r;
        if (policy_cert_role_parse(ret->cert.role, &role) < 0)
                return hwid_fail(HWID_E_UNAUTHENTICATED, "certificate %s carries role '%s', which this hwidd does not "
                                 "know", ret->cert.serial, ret->cert.role);
        if ((r = cert_scope_decode(ret->cert.scope, &ret->scope_profiles, &ret->scope_name_patterns)) < 0) {
                char why[256];

                snprintf(why, sizeof(why), "%s", hwid_strerror(r));
                return hwid_fail(HWID_E_UNAUTHENTICATED, "certificate %s: %s", ret->cert.serial, why);
        }
        ret->who = (policy_requester) {
                .role = role,
                .identity = ret->cert.identity,
                .cert_profile = ret->cert.profile,
                .cert_not_before = ret->cert.not_before,
                .cert_not_after = ret->cert.not_after,
                .cert_spki_sha256 = ret->cert.spki_sha256,
                .scope_profiles = (const char *const *) ret->scope_profiles,
                .scope_name_patterns = (const char *const *) ret->scope_name_patterns,
        };
        snprintf(ret->actor, sizeof(ret->actor), "%s:%s", ret->cert.role, ret->cert.identity);
        return 0;
}

void ca_audit(ca_service *ca, const char *actor, const char *action, const char *target,
              const char *outcome, const char *reason, const char *token_id) {
        store_audit a = {
                .at = (int64_t) time(NULL), .actor = actor, .action = action, .target = target,
                .outcome = outcome, .reason = reason, .token_id = token_id,
        };
        uint64_t t0 = histogram_now_ns();
        int r = store_audit_append(ca->store, &a);

        metrics_commit_observe(ca->metrics, COMMIT_AUDIT, histogram_now_ns() - t0);
        log_msg(strcmp(outcome, "allow") == 0 ? LOG_LVL_INFO : LOG_LVL_NOTICE, "%s %s %s: %s%s%s",
                actor, action, target ? target : "-", outcome, reason ? " — " : "", reason ? reason : "");
        if (r < 0)
                log_error("cannot write the audit record: %s", hwid_strerror(r));
}

/* Who has not shown a valid credential: no token or certificate was
 * accepted (authentication fills in a role only when it succeeds). */
static bool unauthenticated(const ca_auth *a) {
        return a->who.role == ROLE_ANONYMOUS;
}

/* A refusal of an unauthenticated request: counted, logged if few, and
 * summarized later (ca_refusals_flush()) instead of a record each. */
static void refuse_unauthenticated(ca_service *ca, ca_auth *a, const char *action, const char *target,
                                   const char *reason, int r) {
        if (refusals_note(ca->refusals, r, (int64_t) time(NULL)))
                log_notice("%s %s %s: deny — %s", a->actor, action, target ? target : "-", reason);
        a->audited = true;
}

void ca_refusals_flush(ca_service *ca, int64_t now, bool force) {
        char summary[512];

        if (!refusals_take_summary(ca->refusals, now, force, summary, sizeof(summary)))
                return;
        ca_audit(ca, "anonymous", "refused", NULL, "deny", summary, NULL);
}

int ca_decision(ca_service *ca, ca_auth *a, const char *action, const char *target,
                const policy_decision *d) {
        int r;

        if (d->verdict == VERDICT_ALLOW && !d->audit_only)
                return 0;
        if (d->verdict == VERDICT_ALLOW) {
                /* Audit-only mode: what policy would have denied goes through, loudly. */
                ca_audit(ca, a->actor, action, target, "would-deny", d->reason, a->who.token_id);
                return 0;
        }
        atomic_fetch_add(&ca->n_denied, 1);
        r = d->error ? d->error : -HWID_E_FORBIDDEN;
        if (unauthenticated(a))
                refuse_unauthenticated(ca, a, action, target, d->reason, r);
        else
                ca_audit(ca, a->actor, action, target, "deny", d->reason, a->who.token_id);
        a->audited = true;
        return hwid_fail((hwid_err) -r, "%s", d->reason);
}

void ca_fail(ca_service *ca, ca_auth *a, const char *action, const char *target, ca_result *res, int r) {
        /* Copy the detail first: auditing may fail and overwrite it. */
        char reason[512];

        snprintf(reason, sizeof(reason), "%s", hwid_strerror(r));
        /* When the store itself failed, auditing to it would wait out the
         * same lock again: the log line has to do. */
        if (r == -HWID_E_STORE) {
                log_error("%s %s %s: %s", a->actor, action, target ? target : "-", reason);
                a->audited = true;
        }
        if (!a->audited && unauthenticated(a))
                refuse_unauthenticated(ca, a, action, target, reason, r);
        if (!a->audited)
                ca_audit(ca, a->actor, action, target, hwid_err_http_status(r) >= 500 ? "error" : "deny",
                         reason, a->who.token_id);
        hwid_fail((hwid_err) -r, "%s", reason);
        ca_refuse(ca, res, r);
}

/* Read-only endpoints go through the authorizer like everything else,
 * as whoever the client is: anonymous, or the holder of a client
 * certificate (the admin role may read /metrics).  A client certificate
 * that fails authentication still gets the public endpoints, as
 * anonymous; for anything else the answer is why it failed (401), not
 * that anonymous clients may not. */
int ca_allow_read(ca_service *ca, const ca_peer *peer, policy_action action) {
        ca_auth a = { 0 };
        policy_decision d;
        char why[512] = "";
        int r = ca_auth_peer(ca, peer, (int64_t) time(NULL), &a), auth_r = r;

        if (r < 0) {
                snprintf(why, sizeof(why), "%s", hwid_strerror(r));
                ca_auth_clear(&a);
                a.who.role = ROLE_ANONYMOUS;
                snprintf(a.actor, sizeof(a.actor), "anonymous");
        }
        policy_authorize(ca->cfg->policy, &a.who, action, NULL, &d);
        if (auth_r < 0 && d.verdict != VERDICT_ALLOW) {
                ca_audit(ca, a.actor, policy_action_name(action), NULL, "deny", why, NULL);
                ca_auth_clear(&a);
                return hwid_fail((hwid_err) -auth_r, "%s", why);
        }
        r = ca_decision(ca, &a, policy_action_name(action), NULL, &d);
        ca_auth_clear(&a);
        return r;
}
