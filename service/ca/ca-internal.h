/* Shared by the files of the CA service (ca.c, api.c, enroll.c). */
#pragma once

#include <pthread.h>
#include <stdatomic.h>

#include <json-c/json.h>

#include "ca.h"
#include "csr-check.h"
#include "issuer.h"
#include "metrics.h"
#include "refusals.h"
#include "store.h"

struct ca_service {
        hwidd_config *cfg;          /* policy lives here; swapped under cfg_lock */
        pthread_rwlock_t cfg_lock;  /* read-held for the whole of a request */
        hwid_key *ca_key;
        /* ca.token_key: what bootstrap tokens are derived with (token.h);
         * NULL: none configured, only legacy tokens can be checked. */
        hwid_mac_key *token_key;
        X509 *ca_cert;
        char *ca_pem;               /* CA certificate + chain, served at /ca */
        char *client_ca_pem;        /* the CA certificate alone: the one client trust anchor */
        issuer *issuer;
        store *store;
        /* CRL cache: regenerated when a revocation happened or it nears nextUpdate. */
        pthread_mutex_t crl_lock;
        uint8_t *crl_der;
        size_t crl_len;
        int64_t crl_seq;
        int64_t crl_refresh_at;
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
        /* Prometheus counters. */
        atomic_ulong n_issued, n_renewed, n_pending, n_denied, n_errors, n_requests;
        /* Histograms and the rest (metrics.c). */
        metrics *metrics;
        int64_t crl_made_at;        /* under crl_lock */
        /* hwidd's TLS identity (ca_service_set_tls()), for /readyz and metrics. */
        hwid_key *tls_key;
        int64_t tls_not_after;
        X509 *tls_cert;             /* also CMP's protection certificate (api/cmp-srv.c) */
        /* The HTTPS listener, for its connection metrics (ca_service_set_transport()). */
        _Atomic(http_server *) transport;
        /* /readyz: the last verdict, reused for a second (health.c). */
        pthread_mutex_t ready_lock;
        uint64_t ready_checked_ms;
        int ready_status;
        char *ready_json;
        /* CMP's open transactions (api/cmp.c), made by the first CMP
         * request, which also sets cmp_free: ca/ does not call up into api/. */
        struct cmp_table *_Atomic cmp;
        void (*cmp_free)(struct cmp_table *t);
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
        /* ROLE_EK coming back by attestation (service/api/ek-return.h): the
         * evidence for the audit record, "" for any other enrollment; and
         * whether the identity's live certificate is replaced. */
        char reenroll[400];
        bool reenroll_replace;
        policy_attestation cert_attestation; /* ROLE_NODE: what who.cert_attestation points to */
        bool audited;         /* the failure has been audited already */
        store_reads *reads;   /* what was read ahead (ca_reads_fetch()), NULL: nothing */
} ca_auth;

void ca_auth_clear(ca_auth *a);

/* What ca_reads_fetch() reads ahead for a request (ca-reads.c). */
#define CA_READS_TOKEN 1u  /* the token of its Authorization header */
#define CA_READS_PEER 2u   /* the record of its client certificate */
#define CA_READS_NAMES 4u  /* its CSR's CN's live certificate, its DNS names' holders */
/* Reads what the request (its CSR: csr, csr_len) will look up, into
 * a->reads, in one go (with whether its CSR's key is blocked); *ret_csr
 * gets the CSR, parsed, or NULL if it does not parse. */
void ca_reads_fetch(ca_service *ca, const http_request *req, const uint8_t *csr, size_t csr_len, unsigned what,
                    int64_t now, ca_auth *a, csr_info **ret_csr);

/* Authentication.  Both return -HWID_E_TOKEN_INVALID / -HWID_E_UNAUTHENTICATED /
 * -HWID_E_EXPIRED / -HWID_E_NOT_YET_VALID / -HWID_E_REVOKED with a reason. */
int ca_auth_token(ca_service *ca, const http_request *req, int64_t now, ca_auth *ret);
/* The same for a token whose secret was proven another way (CMP's
 * password-based MAC, cmp-auth.c): its state is checked as above. */
int ca_auth_token_id(ca_service *ca, const char *id, int64_t now, ca_auth *ret);
/* The secret a CMP client shares with hwidd for the password-based MAC
 * of token tok (read from the store): for a derived token its secret as
 * printed (`openssl cmp -ref ID -secret pass:SECRET`), computed in the
 * HSM/TPM (one HMAC); for a legacy token the lower-case hex SHA-256 of
 * its secret, as before, until it expires.  Release *ret_secret with
 * secret_free().  -HWID_E_CONFIG for a derived token when hwidd has no
 * token key; the device's error if it fails.  Look the token up first:
 * an unknown id must cost no HSM operation. */
int ca_token_secret(ca_service *ca, const store_token *tok, char **ret_secret);
/* Mutual TLS; anonymous (ROLE_ANONYMOUS) when no certificate was sent.
 * The certificate must be, byte for byte, one this CA issued and
 * recorded; the role is the one recorded with it. */
int ca_auth_peer(ca_service *ca, const http_request *req, int64_t now, ca_auth *ret);

/* Writes an audit record (and a log line); failures to audit are logged. */
void ca_audit(ca_service *ca, const char *actor, const char *action, const char *target,
              const char *outcome, const char *reason, const char *token_id);
/* Audits a decision and turns a deny into its error (0 when allowed). */
int ca_decision(ca_service *ca, ca_auth *a, const char *action, const char *target,
                const policy_decision *d);
/* Writes the summary of refusals without valid credentials, if one is
 * due (or force): one audit record per interval, not one per refusal. */
void ca_refusals_flush(ca_service *ca, int64_t now, bool force);
/* Audits a failed request (unless already audited) and sends its error;
 * without valid credentials it is only counted (ca_refusals_flush()). */
void ca_fail_request(ca_service *ca, ca_auth *a, const char *action, const char *target,
                     http_response *resp, int r);

/* Signs a certificate for csr as the policy decided and commits it with
 * the given bookkeeping; returns the PEM certificate. */
int ca_issue(ca_service *ca, const csr_info *csr, const policy_issue *iss, store_issue *how,
             const char *identity, int64_t now, char **ret_pem, char **ret_serial);

/* Read-only endpoints go through the authorizer as whoever the client is
 * (the public endpoints, health and metrics, EST's CA certificates); 0
 * when allowed. */
int ca_allow_read(ca_service *ca, const http_request *req, policy_action action);

/* A certificate's holder revokes it (CMP rr, revoke-own.c): req's client
 * certificate authenticates, as for renewal, and must be the one named by
 * serial (hex); 200 {"serial", "revoked"} or the error. */
void ca_revoke_own(ca_service *ca, const http_request *req, const char *serial, http_response *resp);
/* The requester's word on a certificate issued to it (CMP certConf):
 * recorded when accepted; when rejected, revoked if it was recorded at or
 * after issued_since (when the rejecting transaction began), else left
 * as it is. */
void ca_confirm(ca_service *ca, const char *serial, const char *actor, int64_t issued_since, bool accepted);

/* An error response (http_respond_error()), counted and logged when it
 * is the CA's fault (5xx). */
void ca_respond_error(ca_service *ca, http_response *resp, int r);
/* An audit line the syslog collector did not take (userdata: the
 * metrics): counted in /metrics. */
void ca_syslog_dropped(void *userdata);

/* A challenge requester asked for: made (r >= 0) after replacing
 * `replaced` of its older ones, or refused with r; counted in /metrics,
 * and what was replaced or refused summed up in one audit record a
 * minute (ca-maintain.c). */
void ca_challenge_note(ca_service *ca, const char *requester, int r, size_t replaced, int64_t now);

/* The current CRL (DER), regenerated on change. */
int ca_crl(ca_service *ca, int64_t now, buf *out);
