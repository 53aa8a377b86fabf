/* Shared by the files of the CA core (service/ca/); the front doors see
 * ca.h only. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>

#include "attest-record.h"
#include "ca-gens.h"
#include "ca.h"
#include "csr-check.h"
#include "issuer.h"
#include "metrics.h"
#include "refusals.h"
#include "store.h"
#include "token-memo.h"

/* A generation's CRL as last made (under crl_lock). */
typedef struct ca_crl_cache {
        int generation;             /* 0: unused */
        uint8_t *der;
        size_t len;
        int64_t seq;                /* the revocation sequence it was made at */
        int64_t refresh_at;
        int64_t made_at;
} ca_crl_cache;
#define CA_CRL_CACHES 8
/* Derived tokens the memo holds at once (token-memo.h): 4,096 x 80 bytes. */
#define TOKEN_MEMO_SLOTS 4096

struct ca_service {
        hwidd_config *cfg;          /* policy lives here; swapped under cfg_lock */
        bool host;                  /* ca_service_new_host(): the CA host's administrator's */
        pthread_rwlock_t cfg_lock;  /* read-held for the whole of a request */
        hwid_key *ca_key;
        /* ca.token_key: what bootstrap tokens are derived with (token.h);
         * NULL: none configured, only legacy tokens can be checked. */
        hwid_mac_key *token_key;
        token_memo *token_memo;     /* derived tokens checked: no HMAC again (token-memo.h) */
        X509 *ca_cert;              /* ca.certificate: generation 1 */
        char *ca_chain_pem;         /* ca.chain, NULL: none */
        /* The CA's generations (ca-gens.h): the active one issues; swapped
         * by the housekeeping tick under cfg_lock's write lock when the
         * store's sequence moves (ca-gens-switch.c). */
        ca_gens *gens;
        int gens_error;             /* the last reload failed (-hwid_err): /readyz says so */
        char gens_why[256];
        int64_t gens_retry_at;      /* when a failed reload is tried again */
        int64_t gens_warned_at;     /* the last log line of the active CA's end */
        store *store;
        /* CRL caches, one per generation: regenerated when a revocation
         * happened or it nears nextUpdate. */
        pthread_mutex_t crl_lock;
        ca_crl_cache crls[CA_CRL_CACHES];
        /* Refusals of requests without valid credentials (refusals.h). */
        refusals *refusals;
        /* Audit retention: when the next pruning pass is due. */
        int64_t prune_at;
        /* The last signed checkpoint of the audit chain's head (record id,
         * and when); the main thread's alone (ca-maintain.c). */
        int64_t checkpoint_id, checkpoint_at;
        /* The last linking of queued audit records failed (ca-maintain.c). */
        bool link_failing;
        /* Attestation challenges replaced (a requester past its bound) or
         * refused (max_pending) since the last summary (ca-maintain.c). */
        pthread_mutex_t chal_lock;
        unsigned long chal_replaced, chal_refused;
        char chal_last[80];   /* the requester of the last one */
        int64_t chal_since;   /* 0: nothing to report */
        /* The OCSP responder's cache, signing budgets and counters
         * (ca-ocsp.c); NULL for the CA host's administrator. */
        struct ca_ocsp_state *ocsp;
        /* Prometheus counters. */
        atomic_ulong n_issued, n_renewed, n_pending, n_denied, n_errors, n_requests;
        /* Histograms and the rest (metrics.c). */
        metrics *metrics;
        /* hwidd's TLS identity (ca_service_set_tls()), for /readyz, metrics
         * and CMP's answers. */
        hwid_key *tls_key;
        int64_t tls_not_after;
        X509 *tls_cert;
        char *tls_pem;              /* as configured: its chain is made with the generations' links */
        /* /readyz: the last verdict, reused for a second (ca-ready.c). */
        pthread_mutex_t ready_lock;
        uint64_t ready_checked_ms;
        bool ready_known;
        ca_readiness ready;
};

/* Who is asking, as established by authentication. */
typedef struct ca_auth {
        policy_requester who;
        char actor[96];       /* for the audit log: "token:abc123", "node:edge-1", "approver:alice" */
        store_token token;    /* ROLE_TOKEN */
        bool token_spent;     /* the token is genuine and still in its lifetime, but used up */
        bool token_genuine;   /* the secret matched (whatever the token's state) */
        store_cert cert;      /* a certificate's role: the client's certificate record */
        char **scope_profiles;      /* ROLE_PROVISIONER: its recorded scope (who points here) */
        char **scope_name_patterns;
        store_ek ek;          /* ROLE_EK: its EK allowlist entry (or, coming back by its
                               * last certificate, that certificate's identity and profile) */
        /* ROLE_EK coming back by attestation (ek-return.c): the evidence
         * for the audit record, "" for any other enrollment; and whether
         * the identity's live certificate is replaced. */
        char reenroll[400];
        bool reenroll_replace;
        policy_attestation cert_attestation; /* ROLE_NODE: what who.cert_attestation points to */
        bool audited;         /* the failure has been audited already */
        store_reads *reads;   /* what was read ahead (ca_reads_fetch()), NULL: nothing */
} ca_auth;

void ca_auth_clear(ca_auth *a);

/* The request's CSR, parsed once (ca_csr_parse()): csr, or why not (r,
 * with its detail kept for when it is reported). */
typedef struct ca_csr {
        csr_info *csr;
        int r;
        char why[512];
} ca_csr;

void ca_csr_parse(const ca_request *req, ca_csr *ret);
/* The CN the request is for (policy insists on exactly one), into out. */
const char *ca_request_cn(const csr_info *csr, char *out, size_t n);
void ca_csr_clear(ca_csr *c);
/* The CSR, or its parse error (the detail it had). */
int ca_csr_get(const ca_csr *c, const csr_info **ret);

/* What ca_reads_fetch() reads ahead for a request (ca-reads.c). */
#define CA_READS_TOKEN 1u  /* the token it presents */
#define CA_READS_PEER 2u   /* the record of its client certificate */
#define CA_READS_NAMES 4u  /* its CSR's CN's live certificate, its DNS names' holders */
/* Reads what the request (its CSR: csr, NULL if it does not parse) will
 * look up, into a->reads, in one go (with whether its CSR's key is
 * blocked). */
void ca_reads_fetch(ca_service *ca, const ca_request *req, const csr_info *csr, unsigned what, ca_auth *a);

/* Authentication.  All return -HWID_E_TOKEN_INVALID / -HWID_E_UNAUTHENTICATED /
 * -HWID_E_EXPIRED / -HWID_E_NOT_YET_VALID / -HWID_E_REVOKED with a reason.
 * A presented token: an Authorization header ("Bearer ...", bearer) or
 * "<id>.<secret>". */
int ca_auth_token(ca_service *ca, const char *presented, bool bearer, int64_t now, ca_auth *ret);
/* The same for a token whose secret was proven another way (CMP's
 * password-based MAC): its state is checked as above. */
int ca_auth_token_id(ca_service *ca, const char *id, int64_t now, ca_auth *ret);
/* Mutual TLS (or a CMP signer); anonymous (ROLE_ANONYMOUS) when no
 * certificate was sent.  The certificate must be, byte for byte, one
 * this CA issued and recorded; the role is the one recorded with it. */
int ca_auth_peer(ca_service *ca, const ca_peer *peer, int64_t now, ca_auth *ret);

/* Writes an audit record (and a log line); failures to audit are logged. */
void ca_audit(ca_service *ca, const char *actor, const char *action, const char *target,
              const char *outcome, const char *reason, const char *token_id);
/* Audits a decision and turns a deny into its error (0 when allowed). */
int ca_decision(ca_service *ca, ca_auth *a, const char *action, const char *target,
                const policy_decision *d);
/* Writes the summary of refusals without valid credentials, if one is
 * due (or force): one audit record per interval, not one per refusal. */
void ca_refusals_flush(ca_service *ca, int64_t now, bool force);
/* Audits a failed request (unless already audited) and refuses it with
 * r; without valid credentials it is only counted (ca_refusals_flush()). */
void ca_fail(ca_service *ca, ca_auth *a, const char *action, const char *target, ca_result *res, int r);
/* res refuses with r (its public message), counted and logged when it
 * is the CA's fault (5xx). */
void ca_refuse(ca_service *ca, ca_result *res, int r);
/* res carries a certificate (the DER and serial are taken). */
int ca_result_cert(ca_result *res, ca_outcome outcome, uint8_t **der, size_t der_len, char **serial);
/* res says: held for approval as request rq. */
void ca_result_pending(ca_service *ca, ca_result *res, const store_request *rq);

/* Signs a certificate for csr as the policy decided and commits it with
 * the given bookkeeping; returns the certificate (DER) and its serial. */
int ca_issue(ca_service *ca, const csr_info *csr, const policy_issue *iss, store_issue *how,
             const char *identity, int64_t now, uint8_t **ret_der, size_t *ret_len, char **ret_serial);

/* Read-only endpoints go through the authorizer as whoever the client is
 * (the public endpoints, health and metrics, EST's CA certificates); 0
 * when allowed. */
int ca_allow_read(ca_service *ca, const ca_peer *peer, policy_action action);

/* The door's own refusal of the request (ca_request_refuse()), with its
 * detail. */
int ca_door_refusal(const ca_request *req);

/* The operations (ca_call()). */
void ca_enroll(ca_service *ca, const ca_request *req, ca_result *res);
void ca_renew(ca_service *ca, const ca_request *req, ca_result *res);
void ca_poll(ca_service *ca, const char *id, int64_t now, ca_result *res);
void ca_revoke_own(ca_service *ca, const ca_request *req, ca_result *res);
void ca_confirm(ca_service *ca, const ca_request *req, ca_result *res);
void ca_challenge(ca_service *ca, const ca_request *req, ca_result *res);
void ca_read_call(ca_service *ca, const ca_request *req, ca_result *res);
void ca_read_identity(ca_service *ca, const ca_request *req, ca_result *res);
void ca_admin(ca_service *ca, const ca_request *req, ca_result *res);
void ca_admin_result_clear(ca_admin_result *r);
/* /readyz (ca-ready.c). */
int ca_readiness_get(ca_service *ca, ca_readiness *ret);

/* The request token_id made for csr's key and name, if any, answered as a
 * poll of it would be (*ret_done); nothing and *ret_done false otherwise. */
int ca_answer_request_of(ca_service *ca, const char *token_id, const csr_info *csr, int64_t now, ca_result *res,
                         bool *ret_done);

/* TPM attestation (ca-attest.c).  Verifies ev for the key of csr (using
 * up its challenge): -HWID_E_ATTESTATION (403) saying which proof
 * failed, -HWID_E_INVALID (400) if malformed. */
int ca_attest_verify(ca_service *ca, const ca_evidence *ev, const csr_info *csr, int64_t now, ca_attested *ret);
/* Authenticates a request without a token for cn by its verified
 * attestation: the TPM's EK must be on the EK allowlist, or cn's profile
 * lets it come back by attestation (ca_auth_returning()); a becomes
 * ROLE_EK with the name and profile it enrolls under. */
int ca_auth_ek(ca_service *ca, const ca_attested *att, const char *cn, int64_t now, ca_auth *a);
/* Who a TPM is when it asks without a bootstrap token (ek-return.c): the
 * TPM with this EK (hex SHA-256 of its certificate and of its public key)
 * asks for name (NULL: the name its EK allowlist entry gives it).  a
 * becomes ROLE_EK with the name and profile it enrolls under, and
 * a->reenroll says which rule let it come back, if it is coming back
 * (audited as `reenroll`).  -HWID_E_UNAUTHENTICATED (401): neither listed
 * nor the TPM of name's last certificate; -HWID_E_FORBIDDEN (403): name's
 * last certificate was revoked for keyCompromise or privilegeWithdrawn
 * ("do not return"), or its profile does not let it come back by
 * attestation. */
int ca_auth_returning(ca_service *ca, const char *ek_cert_hex, const char *ek_pub_hex, const char *name,
                      int64_t now, ca_auth *a);
/* Whether name may be enrolled with a certificate recording the
 * attestation att (NULL: none): 0, or -HWID_E_FORBIDDEN (403) naming the
 * TPM name is bound to and `hwid identity release` (store.h, "A name is
 * bound to its TPM").  Read through a->reads when it was read ahead. */
int ca_binding_check(ca_service *ca, const ca_auth *a, const char *name, const policy_attestation *att);

/* EST's proof-of-possession linking (ca-est.c): with profile p's
 * est.pop_linking, the CSR's challengePassword must be the base64 of the
 * connection's channel binding. */
int ca_pop_check(const ca_request *req, const ca_csr *csr, const policy_profile *p);

/* The syslog copy of the audit records counts what it could not deliver
 * (userdata: the metrics). */
void ca_syslog_dropped(void *userdata);

/* A challenge requester asked for: made (r >= 0) after replacing
 * `replaced` of its older ones, or refused with r; counted in /metrics,
 * and what was replaced or refused summed up in one audit record a
 * minute (ca-maintain.c). */
void ca_challenge_note(ca_service *ca, const char *requester, int r, size_t replaced, int64_t now);

/* The OCSP responder (ca-ocsp.c): its state for cfg's cache and
 * budgets, the operation, and its Prometheus series (appended to out). */
typedef struct ca_ocsp_state ca_ocsp_state;
int ca_ocsp_new(const hwidd_config *cfg, ca_ocsp_state **ret);
void ca_ocsp_free(ca_ocsp_state *o);
void ca_ocsp(ca_service *ca, const ca_request *req, ca_result *res);
int ca_ocsp_metrics(ca_service *ca, buf *out);

/* The current CRL (DER) of generation (ca_read's arg: 1 for GET /crl,
 * n for GET /crl/n), regenerated on change, appended to out;
 * -HWID_E_NOT_FOUND for a generation not served. */
int ca_crl(ca_service *ca, int generation, int64_t now, buf *out);
/* The CRL caches at shutdown. */
void ca_crl_free(ca_service *ca);

/* ---- the generations (ca-gens-switch.c) ---- */
/* Loads them from the store at start. */
int ca_gens_start(ca_service *ca);
/* At the tick: reloads them when the store's sequence moved (another
 * replica, or the CA host's hwid ca rollover), swapped under the write
 * lock; a failure keeps the ones there are and shows in /readyz.  Logs
 * the active CA's nearing end at start and once a day. */
void ca_gens_tick(ca_service *ca, int64_t now);
/* The active generation (under cfg_lock, read or write). */
ca_gen *ca_active(const ca_service *ca);
/* The CA's Prometheus series (metrics.c renders them), appended to out. */
int ca_metrics(ca_service *ca, int64_t now, buf *out);
