/* policy/: pure decisions.  No I/O, no logging, no OpenSSL, no SQL.
 *
 * The service turns what it received into the plain structs below (a
 * parsed CSR, who is asking, what they ask to do); policy answers with a
 * decision and a reason that reaches both the client's JSON error body and
 * the audit log. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cleanup.h"

/* ---------- profiles ---------- */

/* Who asks (see policy_requester).  Certificates carry NODE, or one of
 * the operator roles: ADMIN and the three it is split into for remote
 * administration (policy/roles.c holds what each may do). */
typedef enum policy_role {
        ROLE_ANONYMOUS,
        ROLE_TOKEN,       /* holds a valid bootstrap token */
        ROLE_NODE,        /* mutual TLS with a certificate hwid issued */
        ROLE_ADMIN,       /* everything */
        ROLE_APPROVER,    /* requests: list, approve, deny */
        ROLE_PROVISIONER, /* tokens: create, within the scope recorded with its certificate */
        ROLE_AUDITOR,     /* reads: tokens, requests, certificates, identities, the audit log */
        ROLE_EK,          /* a TPM on the EK allowlist, proven by attestation (no token) */
} policy_role;

/* TPM attestation a profile asks of the keys it certifies
 * (docs/ATTESTATION.md). */
typedef enum policy_attestation_mode {
        ATTESTATION_NONE,     /* not asked for; evidence sent anyway is not recorded */
        ATTESTATION_OPTIONAL, /* recorded, and put in the certificate, when the request carries it */
        ATTESTATION_REQUIRED, /* an enrollment, and a renewal with a new key, must carry it */
} policy_attestation_mode;

/* Whether an identity whose certificate expired (or was superseded) may
 * enroll again by TPM attestation alone, without a bootstrap token
 * (docs/ATTESTATION.md, "Coming back by attestation"). */
typedef enum policy_reenroll_mode {
        REENROLL_OFF,              /* it needs a token (default) */
        REENROLL_ALLOWLIST,        /* its TPM must be on the EK allowlist for it */
        REENROLL_LAST_CERTIFICATE, /* that, or its last certificate was attested by the same EK */
} policy_reenroll_mode;

/* What verified TPM attestation proved of a key (the service checked the
 * evidence; policy only weighs the fact): lower-case hex. */
typedef struct policy_attestation {
        const char *ek_pub_sha256;  /* the TPM: SHA-256 of its EK's SubjectPublicKeyInfo */
        const char *ek_cert_sha256; /* SHA-256 of the EK certificate it presented */
        const char *ak_name;        /* TPM name of the AK that certified the key */
} policy_attestation;


typedef enum policy_approval {
        APPROVAL_AUTO,
        APPROVAL_MANUAL,
} policy_approval;

/* What to do when a CSR asks for something the profile does not grant
 * (CA:TRUE, keyCertSign, ...): never copied either way. */
typedef enum policy_ungranted {
        UNGRANTED_REFUSE, /* 403 with the reason */
        UNGRANTED_DROP,   /* issue without it */
} policy_ungranted;

/* Key usage bits, as in RFC 5280.  The names and values are OpenSSL's
 * (<openssl/x509v3.h> defines the same macros, token for token), so this
 * header and OpenSSL's may be included in either order; policy itself
 * knows nothing of OpenSSL. */
#define KU_DIGITAL_SIGNATURE 0x0080
#define KU_KEY_ENCIPHERMENT 0x0020
#define KU_KEY_AGREEMENT 0x0008
#define KU_KEY_CERT_SIGN 0x0004
#define KU_CRL_SIGN 0x0002

enum {
        EKU_CLIENT_AUTH = 1u << 0,
        EKU_SERVER_AUTH = 1u << 1,
};

/* Key algorithms a profile may allow. */
enum {
        KEYALG_EC_P256 = 1u << 0,
        KEYALG_EC_P384 = 1u << 1,
        KEYALG_RSA = 1u << 2,
};

typedef struct policy_cidr {
        int family;       /* 4 or 6 */
        uint8_t addr[16];
        int prefix;
} policy_cidr;

typedef struct policy_profile {
        char *name;
        int64_t validity;            /* seconds */
        uint32_t key_algs;           /* KEYALG_* */
        int rsa_min_bits;            /* e.g. 2048 */
        uint32_t key_usage;          /* KU_* granted */
        uint32_t eku;                /* EKU_* granted */
        /* Subject rules. */
        char **allowed_rdns;         /* short names ("CN","O","OU",...); NULL-terminated */
        char *cn_pattern;            /* glob ('*', '?'), NULL: any valid name */
        char **fixed_o;              /* O values set by the profile (groups); CSR's O ignored */
        char **fixed_ou;
        /* SAN rules: a requested SAN must match one of these. */
        char **dns_patterns;         /* globs, "{cn}" expands to the CN */
        policy_cidr *ip_ranges;
        size_t n_ip_ranges;
        char **uri_templates;        /* "spiffe://example.org/node/{cn}" */
        bool san_from_templates;     /* add every uri template (expanded) even if not requested */
        bool san_dns_from_templates; /* add every DNS pattern without glob characters (expanded), likewise */
        policy_approval approval;
        double renew_window;         /* renewal allowed only in the last fraction of the lifetime (0..1] */
        bool rotate_key;             /* renewal must present a new key */
        bool allow_reenroll;         /* token enrollment may replace a live certificate */
        policy_ungranted ungranted;
        /* What certificates of this profile may do, recorded in the store
         * at issuance (never read from a presented certificate): ROLE_NODE
         * or an operator role.  Unless role_given, see policy_profile_role(). */
        policy_role role;
        bool role_given;
        policy_attestation_mode attestation;
        policy_reenroll_mode reenroll_by_attestation;
        /* EST (docs/EST.md): the CSR's challengePassword must carry the
         * TLS channel binding of the connection (RFC 7030 §3.5). */
        bool est_pop_linking;
        /* EST simpleenroll by a client certificate instead of a token
         * (est.enroll_by_certificate): a live certificate hwid issued under
         * one of these profiles (NULL-terminated; NULL: not accepted) may
         * enroll the CN est_enroll_name, "{cn}" being that certificate's
         * recorded identity. */
        char **est_enroll_from;
        char *est_enroll_name;
        /* ROLE_PROVISIONER: the token profiles and name patterns its
         * certificates may create tokens for; ROLE_APPROVER: the profiles
         * and names of the requests they may approve or deny.  Recorded
         * with each certificate at issuance like the role.
         * NULL-terminated; both non-empty for a provisioner profile, both
         * non-empty or both NULL (unscoped) for an approver profile, NULL
         * otherwise. */
        char **scope_profiles;
        char **scope_name_patterns;
} policy_profile;

/* ---------- the parsed request ---------- */

typedef struct policy_attr {
        const char *type;  /* short name: "CN", "O", ... or a dotted OID */
        const char *value; /* UTF-8, may contain NUL: see len */
        size_t len;
} policy_attr;

typedef enum policy_san_type {
        SAN_DNS,
        SAN_IP,
        SAN_URI,
        SAN_EMAIL,
        SAN_OTHER,
} policy_san_type;

typedef struct policy_san {
        policy_san_type type;
        const char *value; /* text for DNS/URI/EMAIL (may contain NUL: see len) */
        size_t len;
        uint8_t ip[16];    /* SAN_IP */
        int ip_len;        /* 4 or 16 */
} policy_san;

typedef struct policy_csr {
        const policy_attr *subject;
        size_t n_subject;
        const policy_san *sans;
        size_t n_sans;
        const char *key_alg;   /* "EC", "RSA", or anything else */
        const char *curve;     /* "P-256", "P-384", ... for EC */
        int key_bits;
        bool asks_ca;          /* basicConstraints CA:TRUE requested */
        bool asks_cert_sign;   /* keyUsage keyCertSign or cRLSign requested */
        bool asks_other_ext;   /* any other extension requested (never copied) */
        const char *spki_sha256;
        /* The profile the request names (e.g. a query parameter), NULL: the
         * one the token or the current certificate is bound to.  A token or
         * a node never obtains a profile other than its own. */
        const char *requested_profile;
        /* The request's verified TPM attestation, NULL: it carried none. */
        const policy_attestation *attestation;
} policy_csr;

/* ---------- who asks ---------- */

typedef struct policy_requester {
        policy_role role;
        const char *token_id;           /* ROLE_TOKEN */
        const char *token_profile;      /* ROLE_TOKEN */
        const char *token_name_pattern; /* ROLE_TOKEN, NULL: none */
        const char *identity;           /* ROLE_NODE/ROLE_ADMIN: the certificate's CN */
        const char *cert_profile;       /* ROLE_NODE: profile it was issued under */
        int64_t cert_not_before;        /* ROLE_NODE */
        int64_t cert_not_after;         /* ROLE_NODE */
        const char *cert_spki_sha256;   /* ROLE_NODE: current key */
        /* A certificate's role deciding a held request: the keys (hex
         * SHA-256 of the SPKI) of every certificate its identity was ever
         * issued, its earlier keys included (NULL-terminated; NULL: not
         * looked up, only the current key is known). */
        const char *const *identity_spki_sha256;
        /* ROLE_NODE: the attestation recorded with the current certificate,
         * NULL if it has none. */
        const policy_attestation *cert_attestation;
        /* ROLE_EK: identity is the one name the EK allowlist gives the TPM,
         * ek_profile the profile it enrolls under. */
        const char *ek_profile;
        /* ROLE_PROVISIONER: the scope recorded with its certificate
         * (NULL-terminated; NULL: none recorded, so no token at all).
         * ROLE_APPROVER: likewise, the requests it may decide (NULL: none
         * recorded, so any request its role may decide, as before
         * approvers had scopes). */
        const char *const *scope_profiles;
        const char *const *scope_name_patterns;
} policy_requester;

/* The roles a certificate can carry, by name: "node", "admin",
 * "approver", "provisioner", "auditor" (the list grows with new roles).
 * NULL / -HWID_E_INVALID for any other. */
const char *policy_cert_role_name(policy_role role);
int policy_cert_role_parse(const char *name, policy_role *ret);
/* Whether the role is one a certificate carries (not anonymous, not a token). */
bool policy_role_has_certificate(policy_role role);

/* ---------- decisions ---------- */

typedef enum policy_verdict {
        VERDICT_NO_OPINION, /* only between authorizers; never returned to the caller */
        VERDICT_ALLOW,
        VERDICT_DENY,
} policy_verdict;

typedef struct policy_decision {
        policy_verdict verdict;
        bool audit_only;   /* denied by policy but allowed because audit-only mode is on */
        int error;         /* -hwid_err for a deny (FORBIDDEN, UNAUTHENTICATED, ...) */
        char reason[256];  /* always set: why it is allowed or denied */
        char decided_by[32]; /* authorizer or rule that decided */
        /* A deny for now only (-HWID_E_TOO_EARLY): the moment (Unix
         * seconds) from which the same request can be allowed; 0 otherwise. */
        int64_t retry_at;
} policy_decision;

/* What to put in the certificate: only what the profile grants.  The
 * subject is the CSR's other attributes in their order (O/OU replaced by
 * the profile's fixed values when it has them), then the fixed O and OU
 * values, then the CN.  Key usage never holds keyCertSign or cRLSign and
 * there is no CA flag: the issuer always writes CA:FALSE.  sans may point
 * into san_buf: use the struct where policy filled it, do not copy it.
 * Zeroed on DENY. */
typedef struct policy_issue {
        const policy_profile *profile;
        policy_attr subject[16];  /* points into the csr or the profile */
        size_t n_subject;
        policy_san sans[32];
        size_t n_sans;
        char san_buf[2048];       /* storage for expanded templates */
        uint32_t key_usage;
        uint32_t eku;
        int64_t validity;
        bool manual_approval;
        /* The attestation to record with the certificate and to name in it
         * (its hardware identity); NULL: none. */
        const policy_attestation *attestation;
} policy_issue;

/* ---------- the policy ---------- */

typedef struct policy policy;

int policy_new(policy **ret);
void policy_free(policy *p);
DEFINE_TRIVIAL_CLEANUP_FUNC(policy *, policy_free)
/* Takes ownership of prof (its strings and arrays are freed with the policy). */
int policy_add_profile(policy *p, policy_profile *prof);
const policy_profile *policy_profile_find(const policy *p, const char *name);
/* The longest validity any profile gives (seconds; 0: no profile). */
int64_t policy_longest_validity(const policy *p);
void policy_set_audit_only(policy *p, bool on);
bool policy_audit_only(const policy *p);
/* Compatibility with configurations written before profiles had a role:
 * a profile without an explicit role whose fixed_o holds this O value
 * issues admin certificates.  A CSR can never put it in O itself. */
int policy_set_admin_group(policy *p, const char *o_value);
const char *policy_admin_group(const policy *p);
/* GET /metrics without credentials (default off: admin role only). */
void policy_set_public_metrics(policy *p, bool on);
bool policy_public_metrics(const policy *p);
/* The role certificates issued under prof carry: its explicit role, else
 * ROLE_ADMIN if its fixed_o holds the admin group, else ROLE_NODE. */
policy_role policy_profile_role(const policy *p, const policy_profile *prof);
void policy_profile_free(policy_profile *prof);
DEFINE_TRIVIAL_CLEANUP_FUNC(policy_profile *, policy_profile_free)

/* ---------- API actions and the authorizer chain ---------- */

typedef enum policy_action {
        ACTION_GET_CA,
        ACTION_GET_CRL,
        ACTION_HEALTH,
        ACTION_METRICS,
        ACTION_ENROLL,        /* POST /csr with a bootstrap token */
        ACTION_POLL_REQUEST,  /* GET /v1/requests/{id}: the id is the capability */
        ACTION_RENEW,         /* POST /v1/renew: target = requested identity */
        ACTION_READ_IDENTITY, /* GET /v1/identities/{name}: target = name */
        ACTION_ADMIN,         /* anything administrative not listed below */
        /* The admin API (/v1/admin/...): which roles may do what is the
         * table in policy/roles.c.  target: what is acted on (a token id,
         * request id, serial, identity), or NULL. */
        ACTION_TOKEN_CREATE,  /* see policy_check_token_create() for a provisioner's scope */
        ACTION_TOKEN_LIST,
        ACTION_TOKEN_REVOKE,
        ACTION_REQUEST_LIST,
        ACTION_REQUEST_APPROVE,
        ACTION_REQUEST_DENY,
        ACTION_CERT_LIST,
        ACTION_CERT_SHOW,
        ACTION_CERT_REVOKE,
        ACTION_AUDIT_READ,
        ACTION_EK_LIST,       /* the EK allowlist of TPM attestation */
        ACTION_EK_ADD,
        ACTION_EK_IMPORT,     /* a factory manifest, all entries or none */
        ACTION_EK_REMOVE,
        ACTION_IDENTITY_LIST,    /* the identities bound to the TPM that attested them */
        ACTION_IDENTITY_RELEASE, /* one set free of its TPM (a replaced TPM or board) */
        ACTION_ATTEST,        /* POST /v1/attest: a challenge for a TPM */
} policy_action;

#define ACTION_ADMIN_API_FIRST ACTION_TOKEN_CREATE
#define ACTION_ADMIN_API_LAST ACTION_IDENTITY_RELEASE

/* Whether action is one of the admin API's. */
bool policy_action_is_admin_api(policy_action action);

/* "get-ca", "enroll", "renew", "token.create", ...: for audit records
 * and reasons. */
const char *policy_action_name(policy_action action);
/* The roles that may perform an admin action, for a reason: "admin or
 * auditor", "admin, approver or auditor".  Returns buf. */
const char *policy_roles_allowed(policy_action action, char *buf, size_t size);

/* Decides whether who may perform action on target (an identity, or NULL).
 * Authorizers run in order (admin, node, anonymous/token); each allows,
 * denies or has no opinion; the first decisive answer wins; no answer is
 * a deny.  decided_by names the authorizer ("admin", "node", "anonymous",
 * "default").  In audit-only mode a deny is returned as ALLOW with
 * audit_only set and the would-be reason kept — except a deny for want of
 * credentials (-HWID_E_UNAUTHENTICATED, or any deny of an anonymous
 * requester) and a deny for want of the admin role: audit-only rolls out
 * scoping rules, it never authenticates anyone nor makes anyone admin. */
void policy_authorize(const policy *p, const policy_requester *who, policy_action action,
                      const char *target, policy_decision *ret);

/* Creating a bootstrap token for profile, limited to names matching
 * name_pattern (NULL: any name the profile allows): policy_authorize()
 * for ACTION_TOKEN_CREATE, then
 *   - the profile must exist (-HWID_E_INVALID) and the pattern be a
 *     printable UTF-8 glob of at most 255 bytes (-HWID_E_INVALID);
 *   - a provisioner only within the scope recorded with its certificate
 *     (-HWID_E_FORBIDDEN, decided_by "provisioner.scope"): profile is one
 *     of scope_profiles and issues node certificates, and name_pattern is
 *     given and within one of scope_name_patterns
 *     (policy_pattern_within()).
 * None of these is lifted by audit-only mode: a scope is a privilege. */
void policy_check_token_create(const policy *p, const policy_requester *who, const char *profile,
                               const char *name_pattern, policy_decision *ret);

/* A request held for manual approval, as far as deciding it goes. */
typedef struct policy_pending {
        const char *identity;    /* the CN it asks for */
        const char *profile;     /* the profile it was made under */
        const char *spki_sha256; /* its key (hex) */
} policy_pending;

/* Approving or denying a held request (ACTION_REQUEST_APPROVE or
 * ACTION_REQUEST_DENY): policy_authorize() for the action, then, for an
 * approval, four eyes (decided_by "request.four_eyes", -HWID_E_FORBIDDEN):
 *   - never by a certificate whose key is the request's key, nor by one
 *     whose identity held that key before (any of
 *     identity_spki_sha256: a key rotated away is still its own), nor by
 *     the identity the request names: nobody approves their own request;
 *   - a request under a profile whose role is an operator role (admin,
 *     approver, provisioner, auditor) by an admin only: approvers do not
 *     mint operators;
 *   - a profile no longer configured by an admin only (its role is not
 *     known).
 * A denial grants nothing, so four eyes leave it alone: an approver may
 * deny its own request.  Then, for an approval and a denial alike, an
 * approver with a recorded scope decides only the requests within it
 * (policy_request_in_scope(); decided_by "approver.scope",
 * -HWID_E_FORBIDDEN, the reason naming the scope); an approver without
 * one decides any request its role allows.  The one place that says who
 * may decide what request; not lifted by audit-only mode. */
void policy_check_request_decide(const policy *p, const policy_requester *who, policy_action action,
                                 const policy_pending *rq, policy_decision *ret);

/* Whether rq is within who's scope: always, unless who is an approver
 * with a recorded scope; then rq's profile must be one of its
 * scope_profiles and rq's identity a name one of its scope_name_patterns
 * matches (ignoring ASCII case; policy_pattern_within()).  What a scoped
 * approver is shown of the requests, too. */
bool policy_request_in_scope(const policy_requester *who, const policy_pending *rq);

/* Whether every name a token's pattern admits is admitted by a scope's
 * pattern, by the one rule simple enough to be sound: the pattern equals
 * the scope pattern (ignoring ASCII case, as identities do), or it is a
 * single literal name (no '*', '?' or '\\') that the scope pattern
 * matches.  "line-3-*" is within "line-3-*"; "line-3-0042" is within it;
 * "line-3-00*" is not (a narrower glob, but proving glob inclusion in
 * general is not worth the risk of getting it wrong). */
bool policy_pattern_within(const char *pattern, const char *scope_pattern);

/* Checks what ties profiles to each other, once all are loaded: each
 * provisioner profile has a scope, an approver profile may have one,
 * each profile a scope names exists and issues node certificates, and
 * no other profile has one.
 * -HWID_E_CONFIG naming the profile otherwise. */
int policy_check_scopes(const policy *p);

/* Enrollment with a token (its profile and name pattern) or by a TPM on
 * the EK allowlist (ROLE_EK: its profile, and the CN must be its name),
 * the profile's subject/SAN/key rules and its attestation mode.  Fills
 * issue on ALLOW.  A profile's EK allowlist enrollment never waits for
 * manual approval: an admin listed that TPM under that name.
 *
 * Attestation (rules "attestation.*"): under `required` a request without
 * evidence is denied with -HWID_E_ATTESTATION (a scoping rule: audit-only
 * mode lets it through, marked would-deny); under `optional` and
 * `required` the evidence is recorded (issue->attestation), and for a
 * TPM on the EK allowlist whatever the mode. 
 *
 * Errors of a DENY: -HWID_E_CSR_INVALID for malformed names (no or two
 * CNs, NUL or control characters, invalid UTF-8, over 64 bytes, malformed
 * DNS names, too many attributes or SANs); -HWID_E_KEY_TYPE for keys hwid
 * does not support (curves other than P-256/P-384, RSA over 16384 bits,
 * other algorithms); -HWID_E_UNAUTHENTICATED without a token (renewal:
 * without a certificate); -HWID_E_EXPIRED for an expired certificate;
 * -HWID_E_FORBIDDEN for everything else.  decided_by names the rule
 * ("token.name_pattern", "san.ip", "ext.ungranted", ...; "profile" when
 * allowed).
 *
 * Audit-only mode turns the FORBIDDEN denials of profile and scope rules
 * into ALLOW + audit_only with the first reason kept, and issues what was
 * asked — but never what hwid never issues: malformed names, unsupported
 * or weak (RSA < 2048) keys, an O equal to the admin group, and an unknown
 * profile are denied whatever the mode, and a CA certificate is never
 * granted (the request goes through without CA:TRUE or keyCertSign). */
void policy_check_enroll(const policy *p, const policy_requester *who, const policy_csr *csr,
                         policy_issue *issue, policy_decision *ret);

/* Enrollment by certificate (EST simpleenroll over mutual TLS without a
 * token) goes through policy_check_enroll() with who the certificate's
 * holder (a role with a certificate: its recorded identity and profile,
 * never the presented subject) and csr->requested_profile the EST label
 * (NULL: policy_cert_enroll_target()).  Rules "est.enroll_by_certificate*",
 * all -HWID_E_FORBIDDEN and hard (audit-only mode lifts none: it is a
 * privilege, like a scope): the profile must list the certificate's
 * profile in est_enroll_from; the CN must be est_enroll_name with {cn}
 * replaced by the holder's identity (ignoring ASCII case); the profile
 * must not wait for manual approval (requests wait under a token).  Then
 * the profile's own rules, attestation included, as for a token.
 *
 * The profile a certificate of cert_profile enrolls under when no label
 * names one: the one profile that lists cert_profile; NULL if none or
 * several (*ret_n: how many). */
const policy_profile *policy_cert_enroll_target(const policy *p, const char *cert_profile, size_t *ret_n);
/* Whether prof accepts enrollment by certificates of cert_profile. */
bool policy_cert_enroll_accepts(const policy_profile *prof, const char *cert_profile);

/* Renewal over mutual TLS: same identity, inside the renewal window, key
 * rotation if the profile requires it, same rules as enrollment for the
 * rest.  now is Unix seconds.  Before the window opens the deny is
 * -HWID_E_TOO_EARLY with retry_at = policy_renewal_opens_at().
 *
 * Attestation: under `required` a new key, or any key when the current
 * certificate was not attested, needs evidence; a key attested in another
 * TPM than the current certificate's is refused (a hardware identity does
 * not move); the same key keeps its certificate's attestation. */
void policy_check_renew(const policy *p, const policy_requester *who, const policy_csr *csr,
                        int64_t now, policy_issue *issue, policy_decision *ret);

/* When renewal opens for a certificate valid from not_before to
 * not_after under prof: the last renew_window of its lifetime, to the
 * nearest second.  The one rule for the renewal check and for what the
 * service tells devices (GET /v1/identities renew_after), so that the two
 * never disagree. */
int64_t policy_renewal_opens_at(const policy_profile *prof, int64_t not_before, int64_t not_after);

/* Whether a DNS pattern names one name once {cn} is expanded (no '*',
 * '?' or '\\'): only such a pattern can be added to a certificate unasked. */
bool policy_dns_is_template(const char *pattern);

/* Whether v[0..len) may be a DNS SAN: LDH labels, "*" only as a whole
 * first label, not an IP address (an IPv6 literal, or a last label that
 * is a number, as in 127.0.0.1 or 127.1).  NULL if so, else what is
 * wrong ("is an IPv4 address ..."): the policy's one rule, which the
 * issuer applies again to what it signs. */
const char *policy_dns_name_problem(const char *v, size_t len);

/* The CN of a subject (first CN attribute), or NULL. */
const policy_attr *policy_csr_cn(const policy_csr *csr);

/* Calls fn (stopping at its first non-zero return, which is returned)
 * with each DNS name an issuance for csr may carry under any profile of
 * p: the request's own DNS names, and every profile's DNS templates with
 * its CN put in.  Candidates, not decisions: what a CA looks up ahead,
 * before it knows who asks and so which profile applies. */
typedef int (*policy_name_fn)(const char *name, size_t len, void *userdata);
int policy_dns_candidates(const policy *p, const policy_csr *csr, policy_name_fn fn, void *userdata);

/* Glob match ('*' any run, '?' one char, '\' makes the next character
 * literal), case-sensitive; a NUL in s is never matched.  Exported for the
 * store's token name patterns and tests. */
bool policy_glob_match(const char *pattern, const char *s, size_t len);

/* Identities (CNs) compare without regard to ASCII case, everywhere: a
 * token's or profile's CN pattern, a node acting on its own identity, a
 * renewal's CN, the store's one live certificate per identity.  a holds
 * a_len bytes (it may be a CSR's value, not NUL-terminated); b is a
 * string.  A NUL in a is never equal to anything in b. */
bool policy_identity_equal(const char *a, size_t a_len, const char *b);

/* The canonical short name of a subject attribute type given as a short
 * name (any case) or its OID ("2.5.4.3" -> "CN"); a dotted OID of another
 * type as it is; NULL if neither. */
const char *policy_rdn_canonical(const char *type);
