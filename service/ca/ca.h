/* The CA service, as its front doors see it: the service's lifetime, and
 * one call per request.  A front door (service/api/: the native API, EST,
 * CMP, the admin API) parses what came in its own wire format into a
 * ca_request -- the operation, the credentials, the CSR, the profile
 * label -- makes one ca_call(), and answers the ca_result in its own
 * format.  Who the requester is, what the policy allows, replay,
 * confirmation, revocation, four eyes, the identity's binding to a TPM,
 * the names and the audit record are the core's alone (ca-*.c); it knows
 * nothing of HTTP.  Flow per request, one way only: authenticate (token,
 * certificate, attestation) -> policy decision -> issuer (signs through
 * hsm/) -> store (commit) -> result. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "attest-verify.h"
#include "buf.h"
#include "ca-admin.h"
#include "config.h"
#include "hsm.h"
#include "ocsp-wire.h"
#include "store.h"

typedef struct ca_service ca_service;

/* Opens the CA key, the store and the issuer described by cfg (borrowed
 * for the service's lifetime; the policy inside may be swapped by
 * ca_service_set_config()). */
int ca_service_new(hwidd_config *cfg, ca_service **ret);
/* For the CA host's own administrator (`hwid token create --config`
 * ..., run in process by hwid-admin): the store and the policy of cfg
 * (borrowed), and no CA key or issuer, since nothing it does signs;
 * token_key (taken; NULL: none) for the tokens it creates.  Its requests
 * name the administrator (ca_request.host_admin) instead of a client
 * certificate. */
int ca_service_new_host(hwidd_config *cfg, hwid_mac_key *token_key, ca_service **ret);
void ca_service_free(ca_service *ca);
DEFINE_TRIVIAL_CLEANUP_FUNC(ca_service *, ca_service_free)

/* SIGHUP: adopts the policy (profiles, audit-only, admin group) of a
 * freshly loaded config; returns the old config for the caller to free
 * once no request can still use it (after this returns, none does). */
hwidd_config *ca_service_set_config(ca_service *ca, hwidd_config *cfg);

/* Housekeeping, called about once a second from one thread, never from a
 * request: summaries of refused unauthenticated requests, audit retention. */
void ca_service_tick(ca_service *ca, int64_t now);
/* At start, before any request, and at shutdown, once no request is
 * served: the last refusals' summary, then a signed checkpoint of the
 * audit chain's head (if it moved since the last). */
void ca_service_checkpoint(ca_service *ca, int64_t now);

/* hwidd's TLS key (borrowed for the service's lifetime) and certificate
 * (PEM, first certificate is hwidd's): /readyz has the key sign, metrics
 * show when the certificate expires, CMP signs its answers with it. */
int ca_service_set_tls(ca_service *ca, hwid_key *tls_key, const char *tls_pem);
/* The key and certificate set above (NULL until then). */
hwid_key *ca_service_tls_key(const ca_service *ca);
X509 *ca_service_tls_cert(const ca_service *ca);

/* The CA's generations (a rollover, docs/OPERATIONS.md): what follows is
 * of the set the service holds now, which the housekeeping tick swaps
 * when the store says the generations changed; a request sees one set
 * from start to end (the tick's thread, and every request, may call
 * these).  ca_service_generations() changes with every swap: hwidd then
 * gives its TLS listener the chain and trust anchors anew. */
int64_t ca_service_generations(const ca_service *ca);
/* The PEM the TLS layer trusts for client certificates: the CA
 * certificate of every generation served, never a root or other member
 * of a chain (hwid signs every client certificate with one of its CAs
 * directly). */
const char *ca_service_client_ca_pem(const ca_service *ca);
/* The active CA certificate, and the PEM served at /ca: it and its
 * chain, then the other generations served and the link certificates. */
X509 *ca_service_ca_cert(const ca_service *ca);
const char *ca_service_ca_pem(const ca_service *ca);
/* hwidd's TLS chain: its certificate (ca_service_set_tls()) and the link
 * from its issuer to the other generation served, if any. */
int ca_service_tls_chain(const ca_service *ca, char **ret);
/* Whether a served generation's key signed x (naming it as issuer). */
bool ca_service_signed(const ca_service *ca, X509 *x);
/* Whether name is a served generation's subject. */
bool ca_service_ca_name(const ca_service *ca, const X509_NAME *name);

/* ---------- one request ---------- */

/* Every request runs between these two (a SIGHUP reload waits until no
 * request uses the old policy); leave counts it for /metrics: what it
 * was (ca_endpoint), its status, the error slug of a refusal, how long
 * it took. */
typedef enum ca_endpoint {
        CA_EP_CA,
        CA_EP_ENROLL,
        CA_EP_POLL,
        CA_EP_RENEW,
        CA_EP_CRL,
        CA_EP_HEALTHZ,
        CA_EP_READYZ,
        CA_EP_METRICS,
        CA_EP_IDENTITY,
        CA_EP_ADMIN,
        CA_EP_EST,
        CA_EP_ATTEST,
        CA_EP_CMP,
        CA_EP_OCSP,
        CA_EP_OTHER,
        _CA_EP_MAX,
} ca_endpoint;
void ca_service_enter(ca_service *ca);
void ca_service_leave(ca_service *ca, ca_endpoint ep, int status, const char *error, uint64_t ns);
/* A refusal counted by its error slug where the answer that carries it
 * is no HTTP error (CMP answers 200), or that the transport made before
 * any handler ran (413, 429, 431). */
void ca_service_count_refusal(ca_service *ca, const char *error);
/* A failure of a front door's own making (an answer that could not be
 * made): counted and logged ("<what> failed: ...") when it is the CA's
 * fault (5xx), as the core's own failures are. */
void ca_service_count_error(ca_service *ca, const char *what, int r);
/* CMP's PasswordBasedMac (its room checks it): computed, or refused
 * before any computing (parameters outside the allow-list, no such
 * token). */
void ca_service_count_pbm(ca_service *ca, bool computed);

typedef enum ca_op {
        CA_OP_ENROLL,        /* POST /csr; EST simpleenroll; CMP ir, cr, p10cr by token */
        CA_OP_RENEW,         /* POST /v1/renew; EST simplereenroll; CMP cr, kur by signature */
        CA_OP_POLL,          /* GET /v1/requests/ID (arg); CMP pollReq */
        CA_OP_REVOKE_OWN,    /* CMP rr: the peer certificate revokes itself (arg: its serial) */
        CA_OP_CONFIRM,       /* CMP certConf of certificate arg */
        CA_OP_CHALLENGE,     /* POST /v1/attest */
        CA_OP_READ_IDENTITY, /* GET /v1/identities/NAME (arg) */
        CA_OP_READ,          /* a read-only endpoint: what */
        CA_OP_ADMIN,         /* /v1/admin/...: admin */
        CA_OP_OCSP,          /* POST /ocsp, GET /ocsp/...: ocsp, client; the answer's DER appended to out */
} ca_op;

typedef enum ca_door {
        CA_DOOR_NATIVE,      /* hwid's own API (and the admin API) */
        CA_DOOR_EST,         /* RFC 7030 */
        CA_DOOR_CMP,         /* RFC 9483 */
} ca_door;

typedef enum ca_read {
        CA_READ_CA,          /* the CA certificate and its chain (res.text) */
        CA_READ_CRL,         /* a generation's CRL (arg: "N", NULL: 1), DER, appended to req.out */
        CA_READ_HEALTH,      /* liveness: the store reads */
        CA_READ_READY,       /* readiness (res.ready) */
        CA_READ_METRICS,     /* the CA's Prometheus series, appended to req.out */
        /* What a profile wants of a request (res.tmpl), and what a CA
         * rollover offers (res.update): EST csrattrs, CMP genm. */
        CA_READ_TEMPLATE,
} ca_read;

/* What a CA rollover offers (RFC 4210 §5.3.19.15, RootCaKeyUpdateContent):
 * the newest generation served and its links with the one before, if
 * that one is served too; all NULL when no rollover is under way.
 * Borrowed, for the request's time. */
typedef struct ca_update {
        X509 *new_with_new, *new_with_old, *old_with_new;
} ca_update;

/* The client certificate the transport verified (TLS), or a CMP
 * message's signer, with the transport's verdict on its validity. */
typedef struct ca_peer {
        const uint8_t *der;  /* NULL: none */
        size_t len;
        bool verified;       /* signed by the CA certificate itself, within its validity */
        bool expired;        /* would have verified, but is past notAfter */
        bool not_yet_valid;  /* would have verified, but is before notBefore (valid_from) */
        int64_t valid_from;
} ca_peer;

/* TPM attestation evidence: the answer to a challenge (docs/ATTESTATION.md),
 * decoded by the door. */
typedef struct ca_evidence {
        char id[33];
        uint8_t *activated, *certify_info, *signature, *key_public;
        size_t activated_len, certify_info_len, signature_len, key_public_len;
} ca_evidence;

/* What POST /v1/attest asks a challenge for. */
typedef struct ca_attest_ask {
        const uint8_t *ek_cert, *ek_public, *ak_public;
        size_t ek_cert_len, ek_public_len, ak_public_len;
        const char *identity; /* NULL: the name the EK allowlist gives the TPM */
} ca_attest_ask;

/* A TLS channel binding (EST's proof-of-possession linking, RFC 7030
 * §3.5), computed only when a profile asks for it: *ret_len 0 for none. */
#define CA_BINDING_MAX 64
typedef void (*ca_binding_fn)(void *userdata, uint8_t ret[CA_BINDING_MAX], size_t *ret_len, const char **ret_type);

typedef struct ca_request {
        ca_op op;
        ca_door door;
        int64_t now;
        /* The door's own refusal of what it could not parse (-hwid_err, 0:
         * none; ca_request_refuse()): the core answers it where the
         * operation ranks it (after authentication for the admin API),
         * audited or counted as any. */
        int refused;
        char refused_why[512];
        /* Credentials.  authorization: an Authorization header as sent
         * ("Bearer <id>.<secret>"), or with bearer false a token
         * "<id>.<secret>" presented otherwise (EST's Basic credentials).
         * token_id: a token whose secret the door proved itself (CMP's
         * MAC).  by_certificate: enroll by the peer certificate (EST without
         * Basic credentials, CMP ir by signature). */
        const char *authorization;
        bool bearer;
        const char *token_id;
        bool by_certificate;
        ca_peer peer;
        const ca_evidence *evidence;  /* NULL: none */
        /* The certification request, DER or PEM, PKCS#10 or (CMP) CRMF:
         * parsed once, by the core. */
        const uint8_t *csr;
        size_t csr_len;
        /* The profile an EST or CMP path names (NULL: none). */
        const char *label;
        /* EST: the connection's channel binding, for profiles with
         * est.pop_linking. */
        ca_binding_fn binding;
        void *binding_userdata;
        /* The operation's argument: a request id, a serial, an identity. */
        const char *arg;
        /* CA_OP_CONFIRM: accepted, or rejected (then revoked only if it was
         * recorded at or after since, when the rejecting transaction began). */
        bool accepted;
        int64_t since;
        const ca_attest_ask *attest;  /* CA_OP_CHALLENGE */
        ca_read what;                 /* CA_OP_READ */
        buf *out;                     /* CA_OP_READ of a CRL or metrics; CA_OP_OCSP */
        /* CA_OP_OCSP: the request as ocsp-wire.h read it (NULL: the door
         * refused it, refused says why), and the client's address, whose
         * share of the responder's signatures it spends. */
        const ocsp_query *ocsp;
        const char *client;
        const ca_admin_args *admin;   /* CA_OP_ADMIN */
        /* CA_OP_ADMIN from the CA host's administrator ("admin:<login>"),
         * in process, to a service of ca_service_new_host() (any other
         * refuses it): the admin role, told every refusal in full, its
         * reads not audited (the store is its own to read), as when the
         * host's commands worked on the store themselves. */
        const char *host_admin;
} ca_request;

typedef enum ca_outcome {
        CA_REFUSED,   /* error, message (and retry_at for a renewal too early) */
        CA_DONE,      /* the operation's answer is in the result */
        CA_ISSUED,    /* a certificate issued now */
        CA_AGAIN,     /* a certificate issued before, given again (a replay whose answer was lost) */
        CA_PENDING,   /* held for an administrator's approval: request_id, retry_after */
        CA_NONE,      /* nothing to say (EST csrattrs without a profile: 204) */
} ca_outcome;

/* What a profile wants of a request (EST csrattrs, CMP certReqTemplate). */
typedef struct ca_template {
        bool ec_p256, ec_p384, rsa;
        int rsa_bits;         /* the least RSA modulus it takes */
        bool pop_linking;     /* est.pop_linking: a challengePassword */
        bool grants_sans;     /* it may grant subjectAltNames */
} ca_template;

/* GET /v1/identities/NAME: the live certificate, and what a device needs
 * to renew well. */
typedef struct ca_identity {
        store_cert cert;
        bool has_profile;     /* the rest is known only if its profile still exists */
        int64_t renew_after;
        bool rotate_key;
        const char *attestation; /* "none", "optional", "required" */
} ca_identity;

#define CA_READY_CHECKS 4
/* GET /readyz: each check, and the verdict. */
typedef struct ca_readiness {
        bool ok;
        int64_t checked_at;
        char summary[256];          /* "not ready: store ca_key" (when not ok) */
        char warning[512];          /* the active CA nears its end (rollover.h), "" otherwise */
        struct {
                const char *name;   /* "store", "ca_key", "tls_key" */
                int error;          /* 0, or -hwid_err */
                char message[256];  /* the public message of error */
        } checks[CA_READY_CHECKS];
} ca_readiness;

/* What an OCSP answer said (CA_OP_OCSP), as /metrics counts it: a
 * certificate's status, signed; or an unsigned refusal. */
typedef enum ca_ocsp_status {
        CA_OCSP_GOOD,
        CA_OCSP_REVOKED,
        CA_OCSP_UNKNOWN,
        CA_OCSP_UNAUTHORIZED, /* about another issuer's certificate */
        CA_OCSP_MALFORMED,    /* the door could not read it (HTTP 400) */
        CA_OCSP_TRYLATER,     /* over the signing budget, or the store or the key failed */
        _CA_OCSP_MAX,
} ca_ocsp_status;

#define CA_MESSAGE_MAX 1024

typedef struct ca_result {
        ca_op op;                        /* the request's: what the union below holds */
        ca_outcome outcome;
        /* CA_REFUSED */
        int error;                       /* -hwid_err */
        char message[CA_MESSAGE_MAX];    /* what the requester may be told */
        int64_t retry_at;                /* renewal_not_open: when the window opens, else 0 */
        bool about_label;                /* the credential is for another profile than the label's */
        /* CA_ISSUED, CA_AGAIN: the certificate (owned) */
        char *pem;
        uint8_t *der;
        size_t der_len;
        char *serial;
        /* CA_PENDING */
        char request_id[33];
        char identity[256];
        char spki_sha256[65];
        int64_t retry_after;
        /* CA_DONE, by operation */
        const char *text;                /* CA_READ_CA: the PEM (the service's) */
        ca_update update;                /* CA_READ_TEMPLATE (whatever the profile) */
        union {
                ca_template tmpl;          /* CA_READ_TEMPLATE */
                ca_readiness ready;        /* CA_READ_READY */
                ca_identity id;            /* CA_OP_READ_IDENTITY */
                attest_challenge challenge; /* CA_OP_CHALLENGE */
                ca_admin_result admin;     /* CA_OP_ADMIN */
                ca_ocsp_status ocsp;       /* CA_OP_OCSP */
        };
} ca_result;

/* The door could not parse the request: r (-hwid_err) with this thread's
 * detail of it is the answer, refused where the operation ranks it. */
void ca_request_refuse(ca_request *req, int r);

/* Answers req into res (cleared first), whatever the outcome; release
 * res with ca_result_clear().  Returns res->outcome. */
ca_outcome ca_call(ca_service *ca, const ca_request *req, ca_result *res);
void ca_result_clear(ca_result *res);

/* Whether name is a profile of the current policy (an EST or CMP label). */
bool ca_profile_exists(ca_service *ca, const char *name);
/* The secret a CMP client shares with hwidd for the password-based MAC
 * of the token id: for a derived token its secret as printed (`openssl
 * cmp -ref ID -secret pass:SECRET`), computed in the HSM/TPM (one HMAC);
 * for a legacy token the lower-case hex SHA-256 of its secret, as before,
 * until it expires.  Release *ret_secret with secret_free().
 * -HWID_E_NOT_FOUND for an unknown id (which costs no HSM operation);
 * -HWID_E_CONFIG for a derived token when hwidd has no token key; the
 * device's error if it fails. */
int ca_token_secret(ca_service *ca, const char *token_id, char **ret_secret);
/* Whether a certificate with this serial (hex) was issued by this CA:
 * 0, -HWID_E_NOT_FOUND, or the store's error. */
int ca_cert_known(ca_service *ca, const char *serial);
