/* policy/: the operator roles and a provisioner's scope.
 *   - who may perform each admin action: every requester kind against an
 *     expected table written out here (not read from roles.c), strict
 *     and in audit-only mode (a role is never lifted), with reasons;
 *   - operators renew and read their own identity like nodes; an auditor
 *     reads any identity;
 *   - token creation: a provisioner within its recorded scope only, by
 *     the documented rule for globs; admins anything valid;
 *   - the scopes a configuration may hold (policy_check_scopes);
 *   - four eyes: nobody approves a request for its own key (the current
 *     one or any its identity held before) or identity, only an admin
 *     approves one for an operator profile (or a profile gone), in
 *     audit-only mode too; denying is left to the role;
 *   - an approver with a recorded scope approves and denies only the
 *     requests within it (profile listed, name matched), in audit-only
 *     mode too; one without a scope decides any, as before scopes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "error.h"
#include "policy-fixture.h"
#include "policy.h"

static const char *const scope_profiles[] = { "edge", "device", NULL };
static const char *const scope_patterns[] = { "edge-3-*", "Lab-?", NULL };

static policy_requester as(policy_role role, const char *identity) {
        return (policy_requester) {
                .role = role, .identity = identity, .cert_profile = "edge", .cert_not_before = NB,
                .cert_not_after = NA, .cert_spki_sha256 = OLD_KEY,
                .scope_profiles = role == ROLE_PROVISIONER ? scope_profiles : NULL,
                .scope_name_patterns = role == ROLE_PROVISIONER ? scope_patterns : NULL,
        };
}

/* ---------- who may do what ---------- */

static const struct {
        policy_action action;
        const char *may;  /* roles, space-separated */
        const char *need; /* as the reason says it */
} expected[] = {
        { ACTION_TOKEN_CREATE, "admin provisioner", "admin or provisioner" },
        { ACTION_TOKEN_LIST, "admin auditor", "admin or auditor" },
        { ACTION_TOKEN_REVOKE, "admin", "admin" },
        { ACTION_REQUEST_LIST, "admin approver auditor", "admin, approver or auditor" },
        { ACTION_REQUEST_APPROVE, "admin approver", "admin or approver" },
        { ACTION_REQUEST_DENY, "admin approver", "admin or approver" },
        { ACTION_CERT_LIST, "admin auditor", "admin or auditor" },
        { ACTION_CERT_SHOW, "admin auditor", "admin or auditor" },
        { ACTION_CERT_REVOKE, "admin", "admin" },
        { ACTION_AUDIT_READ, "admin auditor", "admin or auditor" },
        { ACTION_EK_LIST, "admin auditor", "admin or auditor" },
        { ACTION_EK_ADD, "admin", "admin" },
        { ACTION_EK_IMPORT, "admin", "admin" },
        { ACTION_EK_REMOVE, "admin", "admin" },
        { ACTION_IDENTITY_LIST, "admin auditor", "admin or auditor" },
        { ACTION_IDENTITY_RELEASE, "admin", "admin" },
        { ACTION_ADMIN, "admin", "admin" },
        { ACTION_METRICS, "admin", "admin" },
};

static const policy_role requesters[] = {
        ROLE_ANONYMOUS, ROLE_TOKEN, ROLE_NODE, ROLE_ADMIN, ROLE_APPROVER, ROLE_PROVISIONER, ROLE_AUDITOR,
};

static bool listed(const char *list, const char *name) {
        char padded[64], needle[32];

        snprintf(padded, sizeof(padded), " %s ", list);
        snprintf(needle, sizeof(needle), " %s ", name ? name : "-");
        return strstr(padded, needle) != NULL;
}

static void one_cell(policy *p, policy_role role, size_t i) {
        policy_requester who = as(role, "op-1");
        const char *name = policy_cert_role_name(role);
        bool may = name && listed(expected[i].may, name);
        char want[160];
        policy_decision d;

        policy_authorize(p, &who, expected[i].action, "x", &d);
        if ((d.verdict == VERDICT_ALLOW) != may || d.audit_only) {
                fprintf(stderr, "role %d, action %s: verdict %d audit_only %d, expected %s\n", role,
                        policy_action_name(expected[i].action), d.verdict, d.audit_only, may ? "allow" : "deny");
                check_failures++;
                return;
        }
        if (may)
                return;
        /* "it needs the X role", "(X role)" without a certificate. */
        snprintf(want, sizeof(want), "%s role", expected[i].need);
        CHECK_CONTAINS(d.reason, want);
        if (name && role != ROLE_ADMIN && expected[i].action != ACTION_ADMIN && expected[i].action != ACTION_METRICS) {
                snprintf(want, sizeof(want), "%s 'op-1' may not perform '%s': it needs the %s role", name,
                         policy_action_name(expected[i].action), expected[i].need);
                CHECK_CONTAINS(d.reason, want);
        }
        /* Without a certificate an operators' action (the admin API,
         * /metrics) is a 401, not a 403. */
        if (!name && (policy_action_is_admin_api(expected[i].action) || expected[i].action == ACTION_ADMIN ||
                      expected[i].action == ACTION_METRICS))
                CHECK(d.error == -HWID_E_UNAUTHENTICATED);
        else
                CHECK(d.error == -HWID_E_FORBIDDEN);
}

static void role_table(policy *p) {
        for (size_t i = 0; i < ELEMENTSOF(expected); i++)
                for (size_t r = 0; r < ELEMENTSOF(requesters); r++)
                        one_cell(p, requesters[r], i);
        /* Every admin API action is in the table above. */
        for (policy_action a = ACTION_ADMIN_API_FIRST; a <= ACTION_ADMIN_API_LAST; a++) {
                bool found = false;
                for (size_t i = 0; i < ELEMENTSOF(expected); i++)
                        found = found || expected[i].action == a;
                CHECK(found && strcmp(policy_action_name(a), "unknown") != 0);
        }
}

/* Operators are certificate holders: their own identity, like a node. */
static void own_identity(policy *strict, policy *audit) {
        policy_requester approver = as(ROLE_APPROVER, "op-1"), auditor = as(ROLE_AUDITOR, "op-2");
        policy_decision d;

        policy_authorize(strict, &approver, ACTION_RENEW, "OP-1", &d);
        CHECK(d.verdict == VERDICT_ALLOW);
        CHECK_STREQ(d.reason, "approver 'op-1' acts on its own identity");
        policy_authorize(strict, &approver, ACTION_READ_IDENTITY, "edge-7", &d);
        CHECK(d.verdict == VERDICT_DENY && d.error == -HWID_E_FORBIDDEN);
        CHECK_STREQ(d.reason, "approver 'op-1' may not act on identity 'edge-7'");
        policy_authorize(audit, &approver, ACTION_READ_IDENTITY, "edge-7", &d);
        CHECK(d.verdict == VERDICT_ALLOW && d.audit_only); /* a scoping rule, as for nodes */
        policy_authorize(strict, &auditor, ACTION_READ_IDENTITY, "edge-7", &d);
        CHECK(d.verdict == VERDICT_ALLOW && !d.audit_only);
        CHECK_STREQ(d.decided_by, "operator");
        policy_authorize(strict, &auditor, ACTION_GET_CRL, NULL, &d);
        CHECK(d.verdict == VERDICT_ALLOW);
}

static void operators_renew(policy *p) {
        policy_requester who = as(ROLE_PROVISIONER, "edge-7");
        policy_attr cn = { "CN", "edge-7", 6 };
        policy_csr csr = { .subject = &cn, .n_subject = 1, .key_alg = "EC", .curve = "P-256", .spki_sha256 = NEW_KEY };
        policy_issue iss;
        policy_decision d;

        policy_check_renew(p, &who, &csr, IN_WINDOW, &iss, &d);
        CHECK(d.verdict == VERDICT_ALLOW && iss.profile);
        who.role = ROLE_TOKEN;
        policy_check_renew(p, &who, &csr, IN_WINDOW, &iss, &d);
        CHECK(d.verdict == VERDICT_DENY && d.error == -HWID_E_UNAUTHENTICATED);
}

/* ---------- token creation ---------- */

static const struct {
        const char *name;
        policy_role role;
        bool no_scope;
        const char *profile, *pattern;
        int error;        /* 0: allowed */
        const char *reason;
} tokens[] = {
        { "equal to a scope pattern", ROLE_PROVISIONER, false, "edge", "edge-3-*", 0, "within the scope" },
        { "equal but for ASCII case", ROLE_PROVISIONER, false, "edge", "EDGE-3-*", 0, "('edge-3-*')" },
        { "a single name the scope matches", ROLE_PROVISIONER, false, "device", "edge-3-0042", 0, NULL },
        { "a single name of the second pattern", ROLE_PROVISIONER, false, "edge", "lab-7", 0, "('Lab-?')" },
        { "another line", ROLE_PROVISIONER, false, "edge", "edge-4-*", HWID_E_FORBIDDEN,
          "name pattern 'edge-4-*' is outside the scope of provisioner 'station' ('edge-3-*', 'Lab-?')" },
        { "a narrower glob is not proven within", ROLE_PROVISIONER, false, "edge", "edge-3-00*", HWID_E_FORBIDDEN,
          "outside the scope" },
        { "a name the scope does not match", ROLE_PROVISIONER, false, "edge", "edge-30", HWID_E_FORBIDDEN,
          "outside the scope" },
        { "an escaped star is a glob character", ROLE_PROVISIONER, false, "edge", "edge-3-\\*", HWID_E_FORBIDDEN,
          "outside the scope" },
        { "no pattern: any name", ROLE_PROVISIONER, false, "edge", NULL, HWID_E_FORBIDDEN,
          "must give a name pattern within its scope ('edge-3-*', 'Lab-?')" },
        { "a profile outside the scope", ROLE_PROVISIONER, false, "server", "edge-3-*", HWID_E_FORBIDDEN,
          "profile 'server' is outside the scope of provisioner 'station' (profiles 'edge', 'device')" },
        { "no scope recorded", ROLE_PROVISIONER, true, "edge", "edge-3-*", HWID_E_FORBIDDEN,
          "has no scope recorded with its certificate" },
        { "an unknown profile", ROLE_PROVISIONER, false, "gone", "edge-3-*", HWID_E_INVALID, "no profile 'gone'" },
        { "a pattern with a control character", ROLE_PROVISIONER, false, "edge", "edge-3-\n", HWID_E_INVALID,
          "control character" },
        { "an admin, any profile, no pattern", ROLE_ADMIN, false, "server", NULL, 0, NULL },
        { "an admin still names a real profile", ROLE_ADMIN, false, "gone", NULL, HWID_E_INVALID, "no profile" },
        { "an approver", ROLE_APPROVER, false, "edge", "edge-3-*", HWID_E_FORBIDDEN,
          "it needs the admin or provisioner role" },
        { "a node", ROLE_NODE, false, "edge", "edge-3-*", HWID_E_FORBIDDEN, "node 'station' may not perform" },
        { "anonymous", ROLE_ANONYMOUS, false, "edge", "edge-3-*", HWID_E_UNAUTHENTICATED, "mutual TLS" },
};

static void token_creation(policy *strict, policy *audit) {
        for (size_t i = 0; i < ELEMENTSOF(tokens); i++)
                for (int mode = 0; mode < 2; mode++) {
                        policy_requester who = as(tokens[i].role, "station");
                        policy_decision d;

                        if (tokens[i].no_scope)
                                who.scope_profiles = who.scope_name_patterns = NULL;
                        policy_check_token_create(mode ? audit : strict, &who, tokens[i].profile, tokens[i].pattern, &d);
                        if ((d.verdict == VERDICT_ALLOW) != !tokens[i].error || d.audit_only ||
                            (tokens[i].error && d.error != -tokens[i].error) ||
                            (tokens[i].reason && !strstr(d.reason, tokens[i].reason))) {
                                fprintf(stderr, "token row '%s'%s: verdict %d error %d audit_only %d reason \"%s\"\n",
                                        tokens[i].name, mode ? " (audit-only)" : "", d.verdict, d.error, d.audit_only,
                                        d.reason);
                                check_failures++;
                        }
                }
}

/* A provisioner never mints for a profile that issues operators, even if
 * its recorded scope names one (the configuration changed since). */
static void scope_names_an_admin_profile(policy *p) {
        static const char *const admin_scope[] = { "admin", NULL };
        policy_requester who = as(ROLE_PROVISIONER, "station");
        policy_decision d;

        who.scope_profiles = admin_scope;
        policy_check_token_create(p, &who, "admin", "edge-3-*", &d);
        CHECK(d.verdict == VERDICT_DENY && d.error == -HWID_E_FORBIDDEN);
        CHECK_CONTAINS(d.reason, "profile 'admin' issues admin certificates");
}

static void pattern_rule(void) {
        CHECK(policy_pattern_within("line-3-*", "line-3-*"));
        CHECK(policy_pattern_within("LINE-3-*", "line-3-*"));
        CHECK(policy_pattern_within("line-3-0042", "line-3-*"));
        CHECK(policy_pattern_within("Line-3-7", "line-3-?"));
        CHECK(!policy_pattern_within("line-3-0042", "line-3-?"));
        CHECK(!policy_pattern_within("line-3-00*", "line-3-*"));
        CHECK(!policy_pattern_within("line-3-?", "line-3-*"));
        CHECK(!policy_pattern_within("*", "line-3-*"));
        CHECK(!policy_pattern_within("line-4-1", "line-3-*"));
        CHECK(policy_pattern_within("line-3-\\*", "line-3-\\*"));
        CHECK(!policy_pattern_within("line-3-\\*", "line-3-*"));
        CHECK(!policy_pattern_within("", "*"));
        CHECK(!policy_pattern_within(NULL, "*"));
}

/* ---------- scopes in a configuration ---------- */

static char **strv1(const char *s) {
        char **v = calloc(2, sizeof(*v));

        v[0] = strdup(s);
        return v;
}

static int scopes_of(policy_role role, bool with_scope, const char *scoped_profile) {
        _cleanup_(policy_freep) policy *p = make_policy(false);
        policy_profile *station = new_profile("station");

        station->role = role;
        station->role_given = true;
        if (with_scope) {
                station->scope_profiles = strv1(scoped_profile);
                station->scope_name_patterns = strv1("edge-3-*");
        }
        CHECK(policy_add_profile(p, station) == 0);
        return policy_check_scopes(p);
}

static void scope_rules(void) {
        CHECK(scopes_of(ROLE_PROVISIONER, true, "edge") == 0);
        CHECK(scopes_of(ROLE_NODE, false, NULL) == 0);
        CHECK(scopes_of(ROLE_PROVISIONER, false, NULL) == -HWID_E_CONFIG);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_CONFIG), "needs a scope");
        CHECK(scopes_of(ROLE_PROVISIONER, true, "gone") == -HWID_E_CONFIG);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_CONFIG), "'gone', which is not a profile");
        CHECK(scopes_of(ROLE_PROVISIONER, true, "admin") == -HWID_E_CONFIG); /* admin by its O */
        CHECK_CONTAINS(hwid_strerror(-HWID_E_CONFIG), "issues admin certificates");
        CHECK(scopes_of(ROLE_AUDITOR, true, "edge") == -HWID_E_CONFIG);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_CONFIG), "has a scope but its role is neither provisioner nor approver");
        /* An approver: a scope if it likes, of node profiles. */
        CHECK(scopes_of(ROLE_APPROVER, true, "edge") == 0);
        CHECK(scopes_of(ROLE_APPROVER, false, NULL) == 0);
        CHECK(scopes_of(ROLE_APPROVER, true, "gone") == -HWID_E_CONFIG);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_CONFIG), "'gone', which is not a profile");
        CHECK(scopes_of(ROLE_APPROVER, true, "admin") == -HWID_E_CONFIG);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_CONFIG), "an approver decides requests for node profiles only");
}

static void role_names(void) {
        policy_role r = ROLE_ANONYMOUS;

        CHECK(policy_cert_role_parse("approver", &r) == 0 && r == ROLE_APPROVER);
        CHECK(policy_cert_role_parse("provisioner", &r) == 0 && r == ROLE_PROVISIONER);
        CHECK(policy_cert_role_parse("auditor", &r) == 0 && r == ROLE_AUDITOR);
        CHECK_STREQ(policy_cert_role_name(ROLE_AUDITOR), "auditor");
        CHECK(policy_role_has_certificate(ROLE_APPROVER) && !policy_role_has_certificate(ROLE_TOKEN) &&
              !policy_role_has_certificate(ROLE_ANONYMOUS));
}

/* ---------- four eyes ---------- */

static void decide(const policy *p, policy_role role, const char *me, const char *key, policy_action action,
                   const char *identity, const char *profile, bool allowed, const char *why) {
        policy_requester who = as(role, me);
        policy_decision d;

        who.cert_spki_sha256 = key;
        policy_check_request_decide(p, &who, action,
                                    &(policy_pending) { .identity = identity, .profile = profile,
                                                        .spki_sha256 = NEW_KEY }, &d);
        CHECK(d.verdict == (allowed ? VERDICT_ALLOW : VERDICT_DENY));
        if (!allowed) {
                CHECK(d.error == -HWID_E_FORBIDDEN && !d.audit_only);
                CHECK_CONTAINS(d.reason, why);
        }
}

#define EARLIER_1 "1111111111111111111111111111111111111111111111111111111111111111"
#define EARLIER_2 "ABCDEFABCDEFABCDEFABCDEFABCDEFABCDEFABCDEFABCDEFABCDEFABCDEFABCD"

static policy_decision approve_key(const policy *p, const policy_requester *who, policy_action action,
                                   const char *key) {
        policy_decision d;

        policy_check_request_decide(p, who, action,
                                    &(policy_pending) { .identity = "edge-1", .profile = "edge", .spki_sha256 = key },
                                    &d);
        return d;
}

/* A key the approver's identity held before (a renewal rotated it away)
 * is still its own: each earlier one, in either case of hex; a key none
 * of its certificates carried is another's; denying stays the role's. */
static void earlier_keys(const policy *p) {
        static const char *const held[] = { EARLIER_1, EARLIER_2, NULL };
        static const char *const earlier[] = {
                EARLIER_1, "abcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcd",
        };
        policy_requester who = as(ROLE_APPROVER, "bob");
        policy_decision d;

        who.cert_spki_sha256 = OLD_KEY;
        who.identity_spki_sha256 = held;
        for (size_t i = 0; i < ELEMENTSOF(earlier); i++) {
                d = approve_key(p, &who, ACTION_REQUEST_APPROVE, earlier[i]);
                CHECK(d.verdict == VERDICT_DENY && d.error == -HWID_E_FORBIDDEN && !d.audit_only);
                CHECK_CONTAINS(d.reason, "'bob' may not approve a request for its own key (the request's key is one "
                               "an earlier certificate of 'bob' carried)");
                CHECK(approve_key(p, &who, ACTION_REQUEST_DENY, earlier[i]).verdict == VERDICT_ALLOW);
        }
        CHECK(approve_key(p, &who, ACTION_REQUEST_APPROVE, NEW_KEY).verdict == VERDICT_ALLOW);
}

static void four_eyes(const policy *strict, const policy *audit) {
        const policy *both[] = { strict, audit };

        for (size_t i = 0; i < ELEMENTSOF(both); i++) {
                const policy *p = both[i];

                /* Its own key, or its own identity (any case): nobody, not even an admin. */
                decide(p, ROLE_APPROVER, "bob", NEW_KEY, ACTION_REQUEST_APPROVE, "edge-1", "edge", false,
                       "'bob' may not approve a request for its own key");
                decide(p, ROLE_ADMIN, "admin-1", NEW_KEY, ACTION_REQUEST_APPROVE, "edge-1", "edge", false,
                       "its own key");
                decide(p, ROLE_APPROVER, "Edge-1", OLD_KEY, ACTION_REQUEST_APPROVE, "edge-1", "edge", false,
                       "'Edge-1' may not approve a request for its own identity");
                decide(p, ROLE_ADMIN, "admin-1", OLD_KEY, ACTION_REQUEST_APPROVE, "ADMIN-1", "admin", false,
                       "its own identity");
                /* Operator profiles: an admin only. */
                decide(p, ROLE_APPROVER, "bob", OLD_KEY, ACTION_REQUEST_APPROVE, "admin-2", "admin", false,
                       "profile 'admin' issues admin certificates: only an admin may approve");
                decide(p, ROLE_APPROVER, "bob", OLD_KEY, ACTION_REQUEST_APPROVE, "x", "gone", false,
                       "profile 'gone' is no longer configured: only an admin");
                decide(p, ROLE_ADMIN, "admin-1", OLD_KEY, ACTION_REQUEST_APPROVE, "admin-2", "admin", true, NULL);
                decide(p, ROLE_ADMIN, "admin-1", OLD_KEY, ACTION_REQUEST_APPROVE, "x", "gone", true, NULL);
                decide(p, ROLE_APPROVER, "bob", OLD_KEY, ACTION_REQUEST_APPROVE, "edge-1", "edge", true, NULL);
                /* A denial grants nothing: the role decides, own requests included. */
                decide(p, ROLE_APPROVER, "bob", NEW_KEY, ACTION_REQUEST_DENY, "bob", "admin", true, NULL);
                /* The role still comes first. */
                decide(p, ROLE_AUDITOR, "carol", OLD_KEY, ACTION_REQUEST_APPROVE, "edge-1", "edge", false,
                       "auditor 'carol' may not perform 'request.approve'");
                earlier_keys(p);
        }
}

/* An approver scoped to profiles edge/device and names edge-3-* / Lab-?. */
static void scoped(const policy *p, policy_action action, const char *identity, const char *profile, bool allowed,
                   const char *why) {
        policy_requester who = as(ROLE_APPROVER, "bob");
        policy_pending rq = { .identity = identity, .profile = profile, .spki_sha256 = NEW_KEY };
        policy_decision d;

        who.scope_profiles = scope_profiles;
        who.scope_name_patterns = scope_patterns;
        policy_check_request_decide(p, &who, action, &rq, &d);
        CHECK(d.verdict == (allowed ? VERDICT_ALLOW : VERDICT_DENY) && !d.audit_only);
        CHECK_STREQ(d.decided_by, "approver.scope");
        CHECK(allowed || d.error == -HWID_E_FORBIDDEN);
        CHECK_CONTAINS(d.reason, why);
        CHECK(policy_request_in_scope(&who, &rq) == allowed);
}

static void approver_scope(const policy *strict, const policy *audit) {
        const policy *both[] = { strict, audit };
        static const policy_action actions[] = { ACTION_REQUEST_APPROVE, ACTION_REQUEST_DENY };

        for (size_t i = 0; i < ELEMENTSOF(both); i++)
                for (size_t j = 0; j < ELEMENTSOF(actions); j++) {
                        const policy *p = both[i];
                        policy_action a = actions[j];

                        scoped(p, a, "edge-3-7", "edge", true,
                               "name 'edge-3-7' of profile 'edge' is within the scope of approver 'bob' ('edge-3-*')");
                        scoped(p, a, "EDGE-3-7", "device", true, "within the scope");
                        scoped(p, a, "lab-1", "edge", true, "('Lab-?')");
                        scoped(p, a, "edge-4-7", "edge", false,
                               "name 'edge-4-7' is outside the scope of approver 'bob' ('edge-3-*', 'Lab-?')");
                        scoped(p, a, "lab-12", "edge", false, "outside the scope");
                        scoped(p, a, "edge-3-7", "server", false,
                               "profile 'server' is outside the scope of approver 'bob' (profiles 'edge', 'device')");
                        if (a == ACTION_REQUEST_DENY) /* an approval: four eyes refuse first */
                                scoped(p, a, "edge-3-7", "gone", false, "profile 'gone' is outside the scope");
                        /* A name with glob characters is matched as itself. */
                        scoped(p, a, "edge-3-*", "edge", true, "within the scope");
                        scoped(p, a, "edge-*", "edge", false, "outside the scope");
                }
        /* Four eyes come first, and still hold within the scope. */
        {
                policy_requester who = as(ROLE_APPROVER, "edge-3-1");
                policy_decision d;

                who.scope_profiles = scope_profiles;
                who.scope_name_patterns = scope_patterns;
                policy_check_request_decide(strict, &who, ACTION_REQUEST_APPROVE,
                                            &(policy_pending) { .identity = "edge-3-1", .profile = "edge",
                                                                .spki_sha256 = NEW_KEY }, &d);
                CHECK(d.verdict == VERDICT_DENY && strcmp(d.decided_by, "request.four_eyes") == 0);
        }
        /* Without a scope (unscoped approvers, admins, auditors) every
         * request is shown; the role and four eyes decide as before. */
        CHECK(policy_request_in_scope(&(policy_requester) { .role = ROLE_APPROVER },
                                      &(policy_pending) { .identity = "x", .profile = "server" }));
        CHECK(policy_request_in_scope(&(policy_requester) { .role = ROLE_ADMIN, .scope_profiles = scope_profiles,
                                                            .scope_name_patterns = scope_patterns },
                                      &(policy_pending) { .identity = "x", .profile = "server" }));
        decide(strict, ROLE_APPROVER, "bob", OLD_KEY, ACTION_REQUEST_DENY, "x", "server", true, NULL);
}

int main(void) {
        _cleanup_(policy_freep) policy *strict = make_policy(false);
        _cleanup_(policy_freep) policy *audit = make_policy(true);

        role_table(strict);
        role_table(audit);
        own_identity(strict, audit);
        operators_renew(strict);
        token_creation(strict, audit);
        scope_names_an_admin_profile(strict);
        pattern_rule();
        scope_rules();
        role_names();
        four_eyes(strict, audit);
        approver_scope(strict, audit);
        if (!check_failures)
                printf("test-policy-roles: %zu actions x %zu requesters, %zu token rows and the rest passed\n",
                       ELEMENTSOF(expected), ELEMENTSOF(requesters), ELEMENTSOF(tokens));
        return check_done("test-policy-roles");
}
