/* What the policy tests share: the profiles (edge, server, lab, admin),
 * the row type of their tables with its shorthands, and run(), which puts
 * one row to the policy and checks the decision and what would be issued.
 * Each test-policy-*.c holds the rows of one area and the checks beyond
 * the table that go with them. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "policy.h"

#define DAY 86400
#define NB ((int64_t) 1700000000)
#define NA (NB + 30 * DAY)
#define IN_WINDOW (NB + 25 * DAY) /* edge: the last third opens at NB + 20d */
#define OLD_KEY "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define NEW_KEY "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

/* ---------- fixtures: the profiles ---------- */

policy_profile *new_profile(const char *name);
/* edge: devices; fixed O, names derived from the CN, key rotation. */
policy_profile *profile_edge(void);
/* edge, server (manual approval), lab (careless), admin and device (the
 * default of hwid ca init), with the admin group hwid-admins; audit-only
 * or not. */
policy *make_policy(bool audit_only);

/* ---------- the table ---------- */

typedef enum op {
        ENROLL,
        RENEW,
        AUTHZ,
} op;

typedef struct row {
        const char *name;
        op op;
        bool audit;              /* policy in audit-only mode */
        /* requester */
        policy_role role;
        const char *profile;     /* the token's or the certificate's profile */
        const char *pattern;     /* the token's name pattern */
        const char *identity;    /* the node's or admin's CN */
        bool same_key;           /* renewal: the CSR presents the current key */
        int64_t now;             /* renewal: 0 means inside the window */
        /* request */
        policy_csr csr;
        policy_action action;
        const char *target;
        /* expected */
        policy_verdict verdict;
        int error;               /* for a deny */
        bool audit_only;
        const char *reason;      /* a piece of it */
        const char *by;          /* decided_by, if given */
        int64_t retry_at;        /* a deny for now only (TOO_EARLY): when it would be allowed */
        void (*also)(const struct row *r, const policy_issue *iss);
} row;

#define A(t, v) { t, v, sizeof(v) - 1 }
#define CN(v) A("CN", v)
#define SUBJ(...)                                              \
        .subject = (const policy_attr[]) { __VA_ARGS__ },      \
        .n_subject = sizeof((const policy_attr[]) { __VA_ARGS__ }) / sizeof(policy_attr)
#define SANS(...)                                              \
        .sans = (const policy_san[]) { __VA_ARGS__ },          \
        .n_sans = sizeof((const policy_san[]) { __VA_ARGS__ }) / sizeof(policy_san)
#define DNS(v) { .type = SAN_DNS, .value = v, .len = sizeof(v) - 1 }
#define URI(v) { .type = SAN_URI, .value = v, .len = sizeof(v) - 1 }
#define EMAIL(v) { .type = SAN_EMAIL, .value = v, .len = sizeof(v) - 1 }
#define IP4(a, b, c, d) { .type = SAN_IP, .ip = { a, b, c, d }, .ip_len = 4 }
#define IP6(...) { .type = SAN_IP, .ip = { __VA_ARGS__ }, .ip_len = 16 }
#define OTHER { .type = SAN_OTHER }
#define RSA(bits) .key_alg = "RSA", .key_bits = bits
#define EC(c) .key_alg = "EC", .curve = c

#define TOKEN(prof) .role = ROLE_TOKEN, .profile = prof
#define NODE(id, prof) .role = ROLE_NODE, .identity = id, .profile = prof
#define ALLOW .verdict = VERDICT_ALLOW
#define DENY(err) .verdict = VERDICT_DENY, .error = -(err)
#define FLAGGED .verdict = VERDICT_ALLOW, .audit_only = true

#define CN64 "edge-01234567890123456789012345678901234567890123456789012345678"
#define CN65 CN64 "8"

/* ---------- checks on what would be issued ---------- */

const policy_attr *issue_attr(const policy_issue *iss, const char *type, size_t nth);
bool issue_has_san(const policy_issue *iss, policy_san_type type, const char *value);

#define EXPECT(r, cond)                                                                           \
        do {                                                                                      \
                if (!(cond)) {                                                                    \
                        fprintf(stderr, "row '%s': CHECK failed: %s\n", (r)->name, #cond);        \
                        check_failures++;                                                         \
                }                                                                                 \
        } while (0)

void edge_issue(const row *r, const policy_issue *iss);

/* Decides r on strict, or on audit if r->audit, and checks the decision. */
void run(const row *r, policy *strict, policy *audit);
