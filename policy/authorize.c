/* The authorizer chain: every API action goes through it.  Each authorizer
 * allows, denies or has no opinion; the first decisive answer wins; when
 * none has an opinion the answer is no.
 *
 * Audit-only mode turns a denial into an allowance flagged audit_only —
 * except where there is nothing to scope: a requester without credentials
 * (401) and the admin role.  Audit-only rolls out *scoping* rules (a node
 * acts on itself, a token on its profile and pattern, the profiles' name
 * and key rules); it never authenticates anyone nor makes anyone admin. */
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
        }
        return "unknown";
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

/* A node acts on its own identity only (KubeEdge's node authorizer). */
static policy_verdict authz_node(authz *a) {
        const char *me = a->who->identity ? a->who->identity : "?";
        char reason[sizeof(a->d->reason)], q[QUOTE_BUF];

        if (a->who->role != ROLE_NODE)
                return VERDICT_NO_OPINION;
        switch (a->action) {
        case ACTION_RENEW:
        case ACTION_READ_IDENTITY:
                if (a->target && policy_identity_equal(a->target, strlen(a->target), a->who->identity))
                        return allow(a, "node '%s' acts on its own identity", me);
                snprintf(reason, sizeof(reason), "node '%s' may not act on identity '%s'", me,
                         a->target ? name_quote(q, sizeof(q), a->target, strlen(a->target)) : "(none named)");
                return deny(a, -HWID_E_FORBIDDEN, false, reason);
        case ACTION_GET_CA:
        case ACTION_GET_CRL:
        case ACTION_HEALTH:
        case ACTION_POLL_REQUEST:
                return allow(a, "node '%s' may read public resources", me);
        case ACTION_ADMIN:
                snprintf(reason, sizeof(reason), "node '%s' does not have the admin role", me);
                return deny(a, -HWID_E_FORBIDDEN, true, reason);
        default:
                return VERDICT_NO_OPINION;
        }
}

/* Anyone: the public resources; a token holder: enrollment. */
static policy_verdict authz_anonymous(authz *a) {
        bool has_cert = a->who->role == ROLE_NODE || a->who->role == ROLE_ADMIN;

        if (is_public(a))
                return allow(a, "%s is open to everyone", policy_action_name(a->action));
        switch (a->action) {
        case ACTION_ENROLL:
                if (a->who->role == ROLE_TOKEN)
                        return allow(a, "token '%s' may enroll", a->who->token_id ? a->who->token_id : "?");
                return deny(a, -HWID_E_UNAUTHENTICATED, a->who->role == ROLE_ANONYMOUS,
                            "enrollment needs a bootstrap token");
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
                return VERDICT_NO_OPINION;
        }
}

static const struct {
        const char *name;
        authorizer_fn fn;
} chain[] = {
        { "admin", authz_admin },
        { "node", authz_node },
        { "anonymous", authz_anonymous },
};

static const char *role_name(policy_role r) {
        switch (r) {
        case ROLE_ANONYMOUS: return "an anonymous client";
        case ROLE_TOKEN: return "a token holder";
        case ROLE_NODE: return "a node";
        case ROLE_ADMIN: return "an admin";
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
                bool admin_only = action == ACTION_ADMIN || action == ACTION_METRICS;
                decision_set(ret, VERDICT_DENY, -HWID_E_FORBIDDEN, "default", "%s may not perform '%s'%s",
                             role_name(who->role), policy_action_name(action),
                             admin_only ? ": it needs the admin role" : "");
                a.hard = admin_only || who->role == ROLE_ANONYMOUS;
        }
        if (ret->verdict == VERDICT_DENY && p->audit_only && !a.hard) {
                ret->verdict = VERDICT_ALLOW;
                ret->audit_only = true;
                ret->error = 0;
        }
}
