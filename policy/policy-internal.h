/* Inside policy/: shared between policy.c, profile.c, authorize.c and
 * names.c.  Pure code only: libc, no I/O, no logging. */
#pragma once

#include <stdarg.h>

#include "policy.h"

struct policy {
        policy_profile **profiles;
        size_t n_profiles;
        bool audit_only;
        bool public_metrics;
        char *admin_group;
};

/* Longest value accepted in any subject attribute (RFC 5280's ub-name
 * bounds are 64 for CN, O, OU, L, ST). */
#define POLICY_NAME_MAX 64
/* How much of a name is quoted in a reason before it is cut. */
#define POLICY_QUOTE_MAX 72

/* ---------- decisions (policy.c) ---------- */

void decision_vset(policy_decision *d, policy_verdict v, int error, const char *by, const char *fmt,
                   va_list ap) __attribute__((format(printf, 5, 0)));
void decision_set(policy_decision *d, policy_verdict v, int error, const char *by, const char *fmt, ...)
        __attribute__((format(printf, 5, 6)));

/* ---------- the operator roles (roles.c) ---------- */

/* Whether role may perform action by the grants table (admin: always). */
bool role_may(policy_role role, policy_action action);
/* The scope recorded with a provisioner's certificate against the token
 * it asks for (a profile, a name pattern); the decision is left alone
 * when within, else a denial and -1. */
int provisioner_scope_check(const policy *p, const policy_requester *who, const policy_profile *prof,
                            const char *pattern, policy_decision *d);
/* Four eyes on the approval of a held request rq by who, whose role
 * already allows it: nobody approves its own key or identity, and only an
 * admin approves a request for an operator role.  The decision is left
 * alone when allowed, else a denial and -1. */
int request_four_eyes_check(const policy *p, const policy_requester *who, const policy_pending *rq,
                            policy_decision *d);
/* The scope recorded with an approver's certificate against the request
 * it decides (approve or deny): an ALLOW naming the scope when within, a
 * denial and -1 when not; the decision is left alone for anyone else and
 * an unscoped approver. */
int approver_scope_check(const policy_requester *who, const policy_pending *rq, policy_decision *d);

/* ---------- checks of a CSR against a profile (profile.c) ---------- */

typedef struct check {
        const policy *p;
        const policy_profile *prof;
        const policy_csr *csr;
        policy_issue *issue;
        policy_decision *d;
        bool audit;                /* audit-only: record the first soft denial, go on */
        bool soft_denied;          /* a soft denial was recorded */
        const char *identity;      /* renewal: the CN must equal it */
        const char *name_pattern;  /* enrollment: the token's name pattern */
        const char *ungranted_note; /* UNGRANTED_DROP: what was dropped */
} check;

/* A rule of the profile (or a token's or node's scope) says no.  In
 * audit-only mode the denial is recorded (the first one wins) and the
 * check goes on; returns 0 to go on, -1 to stop. */
int check_soft(check *c, const char *rule, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Refused whatever the mode: malformed input, or something hwid never
 * issues.  Always returns -1. */
int check_hard(check *c, int error, const char *rule, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Runs the subject, SAN, key and extension rules and fills c->issue.
 * Returns 0 (possibly with a soft denial recorded) or -1 (denied). */
int profile_check(check *c);

/* Enrollment by a client certificate (enroll-cert.c): picks c->prof and
 * checks the name template; 0 to go on, -1 denied. */
int enroll_by_certificate(check *c, const policy_requester *who);

/* ---------- names (names.c) ---------- */

enum {
        GLOB_NOCASE = 1u << 0,      /* ASCII case-insensitive (DNS) */
        GLOB_STAR_LITERAL = 1u << 1, /* a '*' in s only matches an escaped "\*" in the pattern */
};

/* Glob with '*', '?', backslash escapes and, when cn is given, "{cn}"
 * matching the CN literally (never as a pattern). */
bool glob_match_ex(const char *pattern, const char *cn, size_t cn_len, const char *s, size_t len,
                   unsigned flags);

typedef enum name_fault {
        NAME_OK,
        NAME_EMPTY,
        NAME_NUL,
        NAME_TOO_LONG,
        NAME_CONTROL,
        NAME_BAD_UTF8,
        NAME_FORMAT_CHAR,
} name_fault;

/* Whether v[0..len) is a printable UTF-8 name of at most max bytes. */
name_fault name_check(const char *v, size_t len, size_t max);
const char *name_fault_str(name_fault f);

/* Quotes a name for a reason: printable ASCII kept, everything else as
 * \xNN, cut after POLICY_QUOTE_MAX bytes with "...".  Returns buf. */
const char *name_quote(char *buf, size_t size, const char *v, size_t len);
#define QUOTE_BUF (POLICY_QUOTE_MAX * 4 + 8)

/* A DNS name in a SAN: LDH labels, optionally "*" as the whole first
 * label, and not an IP address (an IPv6 literal, or a last label that is
 * a number: 127.0.0.1, 127.1, 0x7f.1).  NULL if valid (sets
 * *ret_wildcard), else what is wrong. */
const char *dns_name_problem(const char *v, size_t len, bool *ret_wildcard);
/* Whether v[0..len) consists of printable ASCII only. */
bool ascii_printable(const char *v, size_t len);

bool cidr_contains(const policy_cidr *c, const uint8_t *ip, int ip_len);
const char *ip_format(char *buf, size_t size, const uint8_t *ip, int ip_len);

/* Characters a CN may have to be put into a URI template. */
bool cn_uri_safe(const char *cn, size_t len);
/* Expands "{cn}" in tmpl into out.  0, -1 if out is too small. */
int template_expand(const char *tmpl, const char *cn, size_t cn_len, char *out, size_t size, size_t *ret_len);
bool template_has_cn(const char *tmpl);

/* Attribute types compare by canonical short name ("2.5.4.3" is "CN"). */
bool rdn_is(const char *type, const char *short_name);
