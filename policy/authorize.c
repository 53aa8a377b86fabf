/* The authorizer chain: every API action goes through it.  Each authorizer
 * allows, denies or has no opinion; the first decisive answer wins; when
 * none has an opinion the answer is no.
 *
 * Audit-only mode turns a denial into an allowance flagged audit_only —
 * except where there is nothing to scope: a requester without credentials
 * (401) and the operator roles.  Audit-only rolls out *scoping* rules (a
 * node acts on itself, a token on its profile and pattern, the profiles'
 * name and key rules); it never authenticates anyone nor gives anyone a
 * role or a provisioner's scope.
 *
 * Token creation, the one action whose arguments are checked too (the
 * profile, the name pattern, a provisioner's scope: roles.c), is decided
 * here on top of the chain. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "policy-internal.h"

typedef struct authz {
        const policy *p;
        const policy_requester *who;
        policy_action action;
        const char *target;
        policy_decision *d;
        bool hard; /* a denial audit-only mode must not lift */
} authz;

typedef policy_verdict (*authorizer_fn)(authz *a);

const char *policy_action_name(policy_action action) {
        switch (action) {
        case ACTION_GET_CA: return "get-ca";
        case ACTION_GET_CRL: return "get-crl";
        case ACTION_HEALTH: return "health";
        case ACTION_METRICS: return "metrics";
        case ACTION_ENROLL: return "enroll";
        case ACTION_POLL_REQUEST: return "poll-request";
        case ACTION_RENEW: return "renew";
        case ACTION_READ_IDENTITY: return "read-identity";
        case ACTION_ADMIN: return "admin";
        case ACTION_TOKEN_CREATE: return "token.create";
        case ACTION_TOKEN_LIST: return "token.list";
        case ACTION_TOKEN_REVOKE: return "token.revoke";
        case ACTION_REQUEST_LIST: return "request.list";
        case ACTION_REQUEST_APPROVE: return "request.approve";
        case ACTION_REQUEST_DENY: return "request.deny";
        case ACTION_CERT_LIST: return "cert.list";
        case ACTION_CERT_SHOW: return "cert.show";
        case ACTION_CERT_REVOKE: return "cert.revoke";
        case ACTION_AUDIT_READ: return "audit.list";
        case ACTION_EK_LIST: return "ek.list";
        case ACTION_EK_ADD: return "ek.add";
        case ACTION_EK_IMPORT: return "ek.import";
        case ACTION_EK_REMOVE: return "ek.remove";
        case ACTION_IDENTITY_LIST: return "identity.list";
        case ACTION_IDENTITY_RELEASE: return "identity.release";
        case ACTION_ATTEST: return "attest";
        }
        return "unknown";
}

bool policy_action_is_admin_api(policy_action action) {
        return action >= ACTION_ADMIN_API_FIRST && action <= ACTION_ADMIN_API_LAST;
}

/* Actions only operators may perform: a denial of them is never lifted. */
static bool operators_only(policy_action action) {
        return action == ACTION_ADMIN || action == ACTION_METRICS || policy_action_is_admin_api(action);
}

static policy_verdict allow(authz *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static policy_verdict allow(authz *a, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        decision_vset(a->d, VERDICT_ALLOW, 0, "", fmt, ap);
        va_end(ap);
        return VERDICT_ALLOW;
}

static policy_verdict deny(authz *a, int error, bool hard, const char *reason) {
        decision_set(a->d, VERDICT_DENY, error, "", "%s", reason);
        a->hard = hard;
        return VERDICT_DENY;
}

static bool is_public(const authz *a) {
        switch (a->action) {
        case ACTION_GET_CA:
        case ACTION_GET_CRL:
        case ACTION_HEALTH:
        case ACTION_POLL_REQUEST: /* the request id is the capability */
                return true;
        case ACTION_METRICS:
                return a->p->public_metrics;
        default:
                return false;
        }
}

/* The admin role may do everything. */
static policy_verdict authz_admin(authz *a) {
        if (a->who->role != ROLE_ADMIN)
                return VERDICT_NO_OPINION;
        return allow(a, "'%s' has the admin role", a->who->identity ? a->who->identity : "admin");
}

/* The operator roles split from admin: what the table in roles.c grants
 * them, and nothing else that is administrative.  Their own identity and
 * the public resources are the node authorizer's. */
static policy_verdict authz_operator(authz *a) {
        const char *role = policy_cert_role_name(a->who->role);
        const char *me = a->who->identity ? a->who->identity : "?";
        char reason[sizeof(a->d->reason)], roles[64];

        if (a->who->role != ROLE_APPROVER && a->who->role != ROLE_PROVISIONER && a->who->role != ROLE_AUDITOR)
                return VERDICT_NO_OPINION;
        if (a->action == ACTION_READ_IDENTITY && role_may(a->who->role, a->action))
                return allow(a, "%s '%s' may read any identity", role, me);
        if (!operators_only(a->action))
                return VERDICT_NO_OPINION;
        if (role_may(a->who->role, a->action))
                return allow(a, "%s '%s' may perform '%s'", role, me, policy_action_name(a->action));
        snprintf(reason, sizeof(reason), "%s '%s' may not perform '%s': it needs the %s role", role, me,
                 policy_action_name(a->action), policy_roles_allowed(a->action, roles, sizeof(roles)));
        return deny(a, -HWID_E_FORBIDDEN, true, reason);
}

/* A certificate holder acts on its own identity only (KubeEdge's node
 * authorizer); a node administers nothing. */
static policy_verdict authz_node(authz *a) {
        const char *me = a->who->identity ? a->who->identity : "?";
        const char *role = policy_cert_role_name(a->who->role);
        char reason[sizeof(a->d->reason)], q[QUOTE_BUF], roles[64];

        if (!policy_role_has_certificate(a->who->role) || a->who->role == ROLE_ADMIN)
                return VERDICT_NO_OPINION;
        switch (a->action) {
        case ACTION_RENEW:
        case ACTION_READ_IDENTITY:
                if (a->target && policy_identity_equal(a->target, strlen(a->target), a->who->identity))
                        return allow(a, "%s '%s' acts on its own identity", role, me);
                snprintf(reason, sizeof(reason), "%s '%s' may not act on identity '%s'", role, me,
                         a->target ? name_quote(q, sizeof(q), a->target, strlen(a->target)) : "(none named)");
                return deny(a, -HWID_E_FORBIDDEN, false, reason);
        case ACTION_GET_CA:
        case ACTION_GET_CRL:
        case ACTION_HEALTH:
        case ACTION_POLL_REQUEST:
                return allow(a, "%s '%s' may read public resources", role, me);
        case ACTION_ATTEST: /* for a renewal with a key attested in its TPM */
                return allow(a, "%s '%s' may attest its TPM", role, me);
        case ACTION_ADMIN:
                snprintf(reason, sizeof(reason), "%s '%s' does not have the admin role", role, me);
                return deny(a, -HWID_E_FORBIDDEN, true, reason);
        default:
                if (!policy_action_is_admin_api(a->action))
                        return VERDICT_NO_OPINION;
                snprintf(reason, sizeof(reason), "%s '%s' may not perform '%s': it needs the %s role", role, me,
                         policy_action_name(a->action), policy_roles_allowed(a->action, roles, sizeof(roles)));
                return deny(a, -HWID_E_FORBIDDEN, true, reason);
        }
}

/* Anyone: the public resources; a token holder, or a TPM on the EK
 * allowlist: enrollment, and the attestation challenge before it. */
static policy_verdict authz_anonymous(authz *a) {
        bool has_cert = policy_role_has_certificate(a->who->role);
        char reason[sizeof(a->d->reason)], roles[64];

        if (is_public(a))
                return allow(a, "%s is open to everyone", policy_action_name(a->action));
        switch (a->action) {
        case ACTION_ENROLL:
        case ACTION_ATTEST:
                if (a->who->role == ROLE_TOKEN)
                        return allow(a, "token '%s' may %s", a->who->token_id ? a->who->token_id : "?",
                                     a->action == ACTION_ENROLL ? "enroll" : "attest a TPM");
                if (a->who->role == ROLE_EK)
                        return allow(a, "the TPM listed on the EK allowlist as '%s' may %s",
                                     a->who->identity ? a->who->identity : "?",
                                     a->action == ACTION_ENROLL ? "enroll" : "attest itself");
                /* By certificate (EST): whether a profile accepts it is
                 * policy_check_enroll()'s (est.enroll_by_certificate). */
                if (a->action == ACTION_ENROLL && has_cert)
                        return allow(a, "%s '%s' may ask to enroll by its certificate",
                                     policy_cert_role_name(a->who->role), a->who->identity ? a->who->identity : "?");
                return deny(a, -HWID_E_UNAUTHENTICATED, a->who->role == ROLE_ANONYMOUS,
                            "enrollment needs a bootstrap token (or a TPM on the CA's EK allowlist)");
        case ACTION_RENEW:
                if (has_cert)
                        return VERDICT_NO_OPINION;
                return deny(a, -HWID_E_UNAUTHENTICATED, true, "renewal needs mutual TLS with the current certificate");
        case ACTION_READ_IDENTITY:
                if (has_cert)
                        return VERDICT_NO_OPINION;
                return deny(a, -HWID_E_UNAUTHENTICATED, true,
                            "reading an identity needs mutual TLS with that identity's certificate");
        default:
                /* Every operators' action, /metrics included: a client
                 * without credentials is told to bring them (401), as
                 * for the admin API, not that it may not (403). */
                if (has_cert || !operators_only(a->action))
                        return VERDICT_NO_OPINION;
                snprintf(reason, sizeof(reason), "'%s' needs mutual TLS with the certificate of an operator (%s role)",
                         policy_action_name(a->action), policy_roles_allowed(a->action, roles, sizeof(roles)));
                return deny(a, -HWID_E_UNAUTHENTICATED, true, reason);
        }
}

static const struct {
        const char *name;
        authorizer_fn fn;
} chain[] = {
        { "admin", authz_admin },
        { "operator", authz_operator },
        { "node", authz_node },
        { "anonymous", authz_anonymous },
};

static const char *role_name(policy_role r) {
        switch (r) {
        case ROLE_ANONYMOUS: return "an anonymous client";
        case ROLE_TOKEN: return "a token holder";
        case ROLE_NODE: return "a node";
        case ROLE_ADMIN: return "an admin";
        case ROLE_APPROVER: return "an approver";
        case ROLE_PROVISIONER: return "a provisioner";
        case ROLE_AUDITOR: return "an auditor";
        case ROLE_EK: return "a TPM on the EK allowlist";
        }
        return "an unknown requester";
}

void policy_authorize(const policy *p, const policy_requester *who, policy_action action,
                      const char *target, policy_decision *ret) {
        authz a = { .p = p, .who = who, .action = action, .target = target, .d = ret };
        policy_verdict v = VERDICT_NO_OPINION;

        memset(ret, 0, sizeof(*ret));
        for (size_t i = 0; i < ELEMENTSOF(chain) && v == VERDICT_NO_OPINION; i++) {
                v = chain[i].fn(&a);
                if (v != VERDICT_NO_OPINION)
                        snprintf(ret->decided_by, sizeof(ret->decided_by), "%s", chain[i].name);
        }
        if (v == VERDICT_NO_OPINION) {
                bool admin_only = operators_only(action);
                char roles[64];

                decision_set(ret, VERDICT_DENY, -HWID_E_FORBIDDEN, "default", "%s may not perform '%s'%s%s%s",
                             role_name(who->role), policy_action_name(action),
                             admin_only ? ": it needs the " : "",
                             admin_only ? policy_roles_allowed(action, roles, sizeof(roles)) : "",
                             admin_only ? " role" : "");
                a.hard = admin_only || who->role == ROLE_ANONYMOUS;
        }
        if (ret->verdict == VERDICT_DENY && p->audit_only && !a.hard) {
                ret->verdict = VERDICT_ALLOW;
                ret->audit_only = true;
                ret->error = 0;
        }
}

/* ---------- token creation: the action with arguments to check ---------- */

#define TOKEN_PATTERN_MAX 255

void policy_check_token_create(const policy *p, const policy_requester *who, const char *profile,
                               const char *name_pattern, policy_decision *ret) {
        const policy_profile *prof;
        char q[QUOTE_BUF];
        name_fault f;

        policy_authorize(p, who, ACTION_TOKEN_CREATE, profile, ret);
        if (ret->verdict != VERDICT_ALLOW || ret->audit_only)
                return;
        prof = policy_profile_find(p, profile);
        if (!prof) {
                decision_set(ret, VERDICT_DENY, -HWID_E_INVALID, "token.profile", "there is no profile '%s'",
                             profile ? name_quote(q, sizeof(q), profile, strlen(profile)) : "");
                return;
        }
        if (name_pattern && (f = name_check(name_pattern, strlen(name_pattern), TOKEN_PATTERN_MAX)) != NAME_OK) {
                decision_set(ret, VERDICT_DENY, -HWID_E_INVALID, "token.name_pattern", "name pattern '%s' %s",
                             name_quote(q, sizeof(q), name_pattern, strlen(name_pattern)),
                             f == NAME_TOO_LONG ? "is longer than 255 bytes" : name_fault_str(f));
                return;
        }
        if (who->role == ROLE_PROVISIONER)
                (void) provisioner_scope_check(p, who, prof, name_pattern, ret);
}

/* ---------- a held request: who may approve or deny it ---------- */

void policy_check_request_decide(const policy *p, const policy_requester *who, policy_action action,
                                 const policy_pending *rq, policy_decision *ret) {
        policy_authorize(p, who, action, NULL, ret);
        /* Even when audit-only mode let the role through: four eyes and a
         * scope are privileges, never merely reported. */
        if (ret->verdict == VERDICT_ALLOW && action == ACTION_REQUEST_APPROVE &&
            request_four_eyes_check(p, who, rq, ret) < 0)
                return;
        if (ret->verdict == VERDICT_ALLOW)
                (void) approver_scope_check(who, rq, ret);
}
