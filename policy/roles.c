/* The operator roles: what each may do through the admin API, and the
 * scope of a provisioner.  A role is the one recorded with the
 * certificate at issuance (its profile's `role`), and so is a
 * provisioner's scope; nothing a client presents adds to either.
 *
 * admin        everything
 * approver     requests: list, approve, deny (within its scope if it has one)
 * provisioner  tokens: create, within its scope (a factory station)
 * auditor      reads: tokens, requests, certificates, identities, audit,
 *              the EK allowlist, the identities bound to a TPM
 * (the EK allowlist's entries are added and removed, and identities
 * released from their TPM, by admin alone) */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "error.h"
#include "policy-internal.h"

#define ROLE_BIT(r) (1u << (r))

/* Who besides admin may perform each action.  An action not listed is
 * for admin alone (token and certificate revocation, /metrics, ...). */
static const struct {
        policy_action action;
        unsigned roles;
} grants[] = {
        { ACTION_TOKEN_CREATE, ROLE_BIT(ROLE_PROVISIONER) },
        { ACTION_TOKEN_LIST, ROLE_BIT(ROLE_AUDITOR) },
        { ACTION_REQUEST_LIST, ROLE_BIT(ROLE_APPROVER) | ROLE_BIT(ROLE_AUDITOR) },
        { ACTION_REQUEST_APPROVE, ROLE_BIT(ROLE_APPROVER) },
        { ACTION_REQUEST_DENY, ROLE_BIT(ROLE_APPROVER) },
        { ACTION_CERT_LIST, ROLE_BIT(ROLE_AUDITOR) },
        { ACTION_CERT_SHOW, ROLE_BIT(ROLE_AUDITOR) },
        { ACTION_AUDIT_READ, ROLE_BIT(ROLE_AUDITOR) },
        { ACTION_EK_LIST, ROLE_BIT(ROLE_AUDITOR) },
        { ACTION_IDENTITY_LIST, ROLE_BIT(ROLE_AUDITOR) },
        { ACTION_READ_IDENTITY, ROLE_BIT(ROLE_AUDITOR) }, /* any identity, not only its own */
};

/* The roles listed in reasons, in this order. */
static const policy_role operator_roles[] = { ROLE_ADMIN, ROLE_APPROVER, ROLE_PROVISIONER, ROLE_AUDITOR };

bool role_may(policy_role role, policy_action action) {
        if (role == ROLE_ADMIN)
                return true;
        for (size_t i = 0; i < ELEMENTSOF(grants); i++)
                if (grants[i].action == action)
                        return (grants[i].roles & ROLE_BIT(role)) != 0;
        return false;
}

const char *policy_roles_allowed(policy_action action, char *buf, size_t size) {
        const char *names[ELEMENTSOF(operator_roles)];
        size_t n = 0, used = 0;

        for (size_t i = 0; i < ELEMENTSOF(operator_roles); i++)
                if (role_may(operator_roles[i], action))
                        names[n++] = policy_cert_role_name(operator_roles[i]);
        buf[0] = '\0';
        for (size_t i = 0; i < n && used < size; i++) {
                const char *sep = i == 0 ? "" : i + 1 == n ? " or " : ", ";
                int w = snprintf(buf + used, size - used, "%s%s", sep, names[i]);
                if (w < 0)
                        break;
                used += (size_t) w;
        }
        return buf;
}

/* ---------- a provisioner's scope ---------- */

static bool is_literal(const char *s) {
        return !strpbrk(s, "*?\\");
}

bool policy_pattern_within(const char *pattern, const char *scope_pattern) {
        if (!pattern || !scope_pattern || !pattern[0])
                return false;
        if (strcasecmp(pattern, scope_pattern) == 0)
                return true;
        return is_literal(pattern) && glob_match_ex(scope_pattern, NULL, 0, pattern, strlen(pattern), GLOB_NOCASE);
}

static bool strv_has(const char *const *v, const char *s) {
        for (size_t i = 0; v && v[i]; i++)
                if (strcmp(v[i], s) == 0)
                        return true;
        return false;
}

/* "a, b, c" of a list, for a reason; cut to fit. */
static const char *strv_join(const char *const *v, char *buf, size_t size) {
        size_t used = 0;

        buf[0] = '\0';
        for (size_t i = 0; v && v[i] && used < size; i++) {
                int w = snprintf(buf + used, size - used, "%s'%s'", i ? ", " : "", v[i]);
                if (w < 0)
                        break;
                used += (size_t) w;
        }
        return buf;
}

/* A denial decided by rule `by`; returns -1, for `return deny_by(...)` in
 * checks that stop at the first. */
static int deny_by(policy_decision *d, const char *by, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int deny_by(policy_decision *d, const char *by, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        decision_vset(d, VERDICT_DENY, -HWID_E_FORBIDDEN, by, fmt, ap);
        va_end(ap);
        return -1;
}

#define scope_deny(d, ...) deny_by(d, "provisioner.scope", __VA_ARGS__)
#define four_eyes_deny(d, ...) deny_by(d, "request.four_eyes", __VA_ARGS__)

int provisioner_scope_check(const policy *p, const policy_requester *who, const policy_profile *prof,
                            const char *pattern, policy_decision *d) {
        const char *me = who->identity ? who->identity : "?";
        char list[192], q[QUOTE_BUF];

        if (!who->scope_profiles || !who->scope_profiles[0] || !who->scope_name_patterns ||
            !who->scope_name_patterns[0])
                return scope_deny(d, "provisioner '%s' has no scope recorded with its certificate: it may create "
                                  "no token (renew it under a profile with a scope)", me);
        if (!strv_has(who->scope_profiles, prof->name))
                return scope_deny(d, "profile '%s' is outside the scope of provisioner '%s' (profiles %s)", prof->name,
                                  me, strv_join(who->scope_profiles, list, sizeof(list)));
        if (policy_profile_role(p, prof) != ROLE_NODE)
                return scope_deny(d, "profile '%s' issues %s certificates; a provisioner creates tokens for node "
                                  "profiles only", prof->name, policy_cert_role_name(policy_profile_role(p, prof)));
        if (!pattern)
                return scope_deny(d, "provisioner '%s' must give a name pattern within its scope (%s)", me,
                                  strv_join(who->scope_name_patterns, list, sizeof(list)));
        for (size_t i = 0; who->scope_name_patterns[i]; i++)
                if (policy_pattern_within(pattern, who->scope_name_patterns[i])) {
                        decision_set(d, VERDICT_ALLOW, 0, "provisioner.scope",
                                     "name pattern '%s' of profile '%s' is within the scope of provisioner '%s' "
                                     "('%s')", pattern, prof->name, me, who->scope_name_patterns[i]);
                        return 0;
                }
        return scope_deny(d, "name pattern '%s' is outside the scope of provisioner '%s' (%s): it must equal one of "
                   "those patterns or be a single name one of them matches",
                   name_quote(q, sizeof(q), pattern, strlen(pattern)), me,
                   strv_join(who->scope_name_patterns, list, sizeof(list)));
}

/* ---------- four eyes: who may decide a held request ---------- */

/* The role certificates of the request's profile would carry; -1 when the
 * profile is gone from the configuration. */
static int pending_role(const policy *p, const policy_pending *rq) {
        const policy_profile *prof = rq->profile ? policy_profile_find(p, rq->profile) : NULL;

        return prof ? (int) policy_profile_role(p, prof) : -1;
}

/* Whether key is one of the keys who's identity was ever issued a
 * certificate for. */
static bool held_before(const policy_requester *who, const char *key) {
        for (size_t i = 0; key && who->identity_spki_sha256 && who->identity_spki_sha256[i]; i++)
                if (strcasecmp(who->identity_spki_sha256[i], key) == 0)
                        return true;
        return false;
}

/* The approval of rq by who, already allowed by its role; the decision
 * is left alone when four eyes allow it too. */
int request_four_eyes_check(const policy *p, const policy_requester *who, const policy_pending *rq, policy_decision *d) {
        const char *me = who->identity ? who->identity : "?";
        char q[QUOTE_BUF];
        int role;

        if (who->cert_spki_sha256 && rq->spki_sha256 && strcasecmp(who->cert_spki_sha256, rq->spki_sha256) == 0)
                return four_eyes_deny(d, "'%s' may not approve a request for its own key (the request's key is "
                                      "the one of the certificate asking): another operator must", me);
        if (held_before(who, rq->spki_sha256))
                return four_eyes_deny(d, "'%s' may not approve a request for its own key (the request's key is "
                                      "one an earlier certificate of '%s' carried): another operator must", me, me);
        if (who->identity && rq->identity && strcasecmp(who->identity, rq->identity) == 0)
                return four_eyes_deny(d, "'%s' may not approve a request for its own identity: another operator "
                                      "must", me);
        if (who->role == ROLE_ADMIN)
                return 0;
        role = pending_role(p, rq);
        if (role < 0)
                return four_eyes_deny(d, "the request's profile '%s' is no longer configured: only an admin may "
                                      "approve it", rq->profile ? name_quote(q, sizeof(q), rq->profile,
                                                                             strlen(rq->profile)) : "");
        if ((policy_role) role != ROLE_NODE)
                return four_eyes_deny(d, "profile '%s' issues %s certificates: only an admin may approve a "
                                      "request for an operator role", rq->profile,
                                      policy_cert_role_name((policy_role) role));
        return 0;
}

/* ---------- an approver's scope: which requests it may decide ---------- */

static bool has_scope(const policy_requester *who) {
        return who->scope_profiles || who->scope_name_patterns;
}

/* The pattern of who's scope that admits rq's name, NULL if none does. */
static const char *scope_pattern_for(const policy_requester *who, const char *identity) {
        for (size_t i = 0; who->scope_name_patterns && who->scope_name_patterns[i]; i++)
                if (policy_pattern_within(identity, who->scope_name_patterns[i]))
                        return who->scope_name_patterns[i];
        return NULL;
}

bool policy_request_in_scope(const policy_requester *who, const policy_pending *rq) {
        if (who->role != ROLE_APPROVER || !has_scope(who))
                return true;
        return rq->profile && strv_has(who->scope_profiles, rq->profile) && rq->identity &&
               scope_pattern_for(who, rq->identity);
}

int approver_scope_check(const policy_requester *who, const policy_pending *rq, policy_decision *d) {
        const char *me = who->identity ? who->identity : "?", *within;
        char list[192], q[QUOTE_BUF];

        if (who->role != ROLE_APPROVER || !has_scope(who))
                return 0;
        if (!rq->profile || !strv_has(who->scope_profiles, rq->profile))
                return deny_by(d, "approver.scope", "profile '%s' is outside the scope of approver '%s' (profiles %s)",
                               rq->profile ? name_quote(q, sizeof(q), rq->profile, strlen(rq->profile)) : "",
                               me, strv_join(who->scope_profiles, list, sizeof(list)));
        within = rq->identity ? scope_pattern_for(who, rq->identity) : NULL;
        if (!within)
                return deny_by(d, "approver.scope", "name '%s' is outside the scope of approver '%s' (%s)",
                               rq->identity ? name_quote(q, sizeof(q), rq->identity, strlen(rq->identity)) : "",
                               me, strv_join(who->scope_name_patterns, list, sizeof(list)));
        decision_set(d, VERDICT_ALLOW, 0, "approver.scope",
                     "name '%s' of profile '%s' is within the scope of approver '%s' ('%s')", rq->identity,
                     rq->profile, me, within);
        return 0;
}

/* ---------- the scopes in a configuration ---------- */

/* A provisioner needs a scope (without one it could mint nothing); an
 * approver may have one (without, it decides any request, as before
 * approvers had scopes); no other role has a use for one. */
static int check_profile_scope(const policy *p, const policy_profile *prof) {
        policy_role role = policy_profile_role(p, prof);
        bool scoped = prof->scope_profiles || prof->scope_name_patterns;
        const char *what = role == ROLE_APPROVER ? "decides requests for" : "creates tokens for";

        if (scoped && role != ROLE_PROVISIONER && role != ROLE_APPROVER)
                return hwid_fail(HWID_E_CONFIG, "profile '%s' has a scope but its role is neither provisioner nor "
                                 "approver", prof->name);
        if (!scoped && role != ROLE_PROVISIONER)
                return 0;
        if (!prof->scope_profiles || !prof->scope_profiles[0] || !prof->scope_name_patterns ||
            !prof->scope_name_patterns[0])
                return hwid_fail(HWID_E_CONFIG, "profile '%s' (role %s) needs a scope with profiles and "
                                 "name_patterns", prof->name, policy_cert_role_name(role));
        for (size_t i = 0; prof->scope_profiles[i]; i++) {
                const policy_profile *t = policy_profile_find(p, prof->scope_profiles[i]);
                if (!t)
                        return hwid_fail(HWID_E_CONFIG, "profile '%s': scope.profiles names '%s', which is not a "
                                         "profile", prof->name, prof->scope_profiles[i]);
                if (policy_profile_role(p, t) != ROLE_NODE)
                        return hwid_fail(HWID_E_CONFIG, "profile '%s': scope.profiles names '%s', which issues %s "
                                         "certificates; a%s %s %s node profiles only", prof->name, t->name,
                                         policy_cert_role_name(policy_profile_role(p, t)),
                                         role == ROLE_APPROVER ? "n" : "", policy_cert_role_name(role), what);
        }
        return 0;
}

int policy_check_scopes(const policy *p) {
        int r;

        for (size_t i = 0; i < p->n_profiles; i++)
                if ((r = check_profile_scope(p, p->profiles[i])) < 0)
                        return r;
        return 0;
}
