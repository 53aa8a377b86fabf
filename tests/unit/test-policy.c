/* policy/: table-driven.  Each row is a profile (through the token or the
 * certificate that names it), a requester, a CSR or an API action, and the
 * decision expected: verdict, error, audit-only flag and a piece of the
 * reason.  Hostile CSRs included: NUL and control characters, overlong
 * and duplicate CNs, wildcards, IPs outside the ranges, CA:TRUE, weak or
 * unsupported keys. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "error.h"
#include "policy-internal.h"
#include "policy.h"

#define DAY 86400
#define NB ((int64_t) 1700000000)
#define NA (NB + 30 * DAY)
#define IN_WINDOW (NB + 25 * DAY) /* edge: the last third opens at NB + 20d */
#define OLD_KEY "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define NEW_KEY "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

/* ---------- fixtures: the profiles ---------- */

static char **strv(const char *first, ...) {
        char **v = calloc(17, sizeof(*v));
        va_list ap;
        size_t n = 0;

        va_start(ap, first);
        for (const char *s = first; s && n < 16; s = va_arg(ap, const char *))
                v[n++] = strdup(s);
        va_end(ap);
        return v;
}

static policy_cidr cidr4(uint8_t a, uint8_t b, uint8_t c, uint8_t d, int prefix) {
        return (policy_cidr) { .family = 4, .addr = { a, b, c, d }, .prefix = prefix };
}

static policy_profile *new_profile(const char *name) {
        policy_profile *p = calloc(1, sizeof(*p));

        p->name = strdup(name);
        p->validity = 30 * DAY;
        p->key_algs = KEYALG_EC_P256 | KEYALG_EC_P384;
        p->rsa_min_bits = 2048;
        p->key_usage = KU_DIGITAL_SIGNATURE;
        p->eku = EKU_CLIENT_AUTH;
        p->renew_window = 1.0 / 3.0;
        return p;
}

/* edge: devices; fixed O, names derived from the CN, key rotation. */
static policy_profile *profile_edge(void) {
        policy_profile *p = new_profile("edge");

        p->allowed_rdns = strv("CN", "O", "OU", "C", NULL);
        p->cn_pattern = strdup("edge-*");
        p->fixed_o = strv("edge-nodes", NULL);
        p->dns_patterns = strv("{cn}.edge.example.org", NULL);
        p->ip_ranges = calloc(2, sizeof(policy_cidr));
        p->ip_ranges[0] = cidr4(10, 20, 0, 0, 16);
        p->ip_ranges[1] = (policy_cidr) { .family = 6, .addr = { 0xfd, 0x00, 0x00, 0x20 }, .prefix = 48 };
        p->n_ip_ranges = 2;
        p->uri_templates = strv("spiffe://example.org/node/{cn}", NULL);
        p->san_from_templates = true;
        p->rotate_key = true;
        p->ungranted = UNGRANTED_REFUSE;
        return p;
}

/* server: manual approval, RSA >= 3072 or P-256, an explicit wildcard. */
static policy_profile *profile_server(void) {
        policy_profile *p = new_profile("server");

        p->key_algs = KEYALG_EC_P256 | KEYALG_RSA;
        p->rsa_min_bits = 3072;
        p->key_usage = KU_DIGITAL_SIGNATURE | KU_KEY_ENCIPHERMENT;
        p->eku = EKU_SERVER_AUTH | EKU_CLIENT_AUTH;
        p->dns_patterns = strv("{cn}", "\\*.apps.example.org", "*.svc.example.org", NULL);
        p->ip_ranges = calloc(1, sizeof(policy_cidr));
        p->ip_ranges[0] = cidr4(192, 0, 2, 10, 32);
        p->n_ip_ranges = 1;
        p->approval = APPROVAL_MANUAL;
        p->renew_window = 0.5;
        p->allow_reenroll = true;
        p->ungranted = UNGRANTED_DROP;
        return p;
}

/* lab: a careless profile (grants keyCertSign, lets the CSR choose O). */
static policy_profile *profile_lab(void) {
        policy_profile *p = new_profile("lab");

        p->key_algs = KEYALG_EC_P256 | KEYALG_EC_P384 | KEYALG_RSA;
        p->key_usage = KU_DIGITAL_SIGNATURE | KU_KEY_CERT_SIGN | KU_CRL_SIGN;
        p->allowed_rdns = strv("CN", "O", NULL);
        p->dns_patterns = strv("*.lab.example.org", NULL);
        p->ungranted = UNGRANTED_DROP;
        return p;
}

static policy_profile *profile_admin(void) {
        policy_profile *p = new_profile("admin");

        p->cn_pattern = strdup("admin-*");
        p->fixed_o = strv("hwid-admins", NULL);
        p->approval = APPROVAL_MANUAL;
        return p;
}

static policy *make_policy(bool audit_only) {
        policy *p = NULL;

        CHECK(policy_new(&p) == 0);
        CHECK(policy_add_profile(p, profile_edge()) == 0);
        CHECK(policy_add_profile(p, profile_server()) == 0);
        CHECK(policy_add_profile(p, profile_lab()) == 0);
        CHECK(policy_add_profile(p, profile_admin()) == 0);
        CHECK(policy_set_admin_group(p, "hwid-admins") == 0);
        policy_set_audit_only(p, audit_only);
        return p;
}

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

static const policy_attr *issue_attr(const policy_issue *iss, const char *type, size_t nth) {
        for (size_t i = 0; i < iss->n_subject; i++)
                if (strcmp(iss->subject[i].type, type) == 0 && nth-- == 0)
                        return &iss->subject[i];
        return NULL;
}

static bool issue_has_san(const policy_issue *iss, policy_san_type type, const char *value) {
        for (size_t i = 0; i < iss->n_sans; i++)
                if (iss->sans[i].type == type && type != SAN_IP && iss->sans[i].len == strlen(value) &&
                    memcmp(iss->sans[i].value, value, iss->sans[i].len) == 0)
                        return true;
        return false;
}

#define EXPECT(r, cond)                                                                           \
        do {                                                                                      \
                if (!(cond)) {                                                                    \
                        fprintf(stderr, "row '%s': CHECK failed: %s\n", (r)->name, #cond);        \
                        check_failures++;                                                         \
                }                                                                                 \
        } while (0)

static void edge_issue(const row *r, const policy_issue *iss) {
        const policy_attr *o = issue_attr(iss, "O", 0), *cn = issue_attr(iss, "CN", 0);

        EXPECT(r, iss->profile && strcmp(iss->profile->name, "edge") == 0);
        EXPECT(r, o && o->len == 10 && memcmp(o->value, "edge-nodes", 10) == 0);
        EXPECT(r, !issue_attr(iss, "O", 1));
        EXPECT(r, cn && cn->len == 6 && memcmp(cn->value, "edge-7", 6) == 0);
        EXPECT(r, strcmp(iss->subject[iss->n_subject - 1].type, "CN") == 0);
        EXPECT(r, issue_has_san(iss, SAN_URI, "spiffe://example.org/node/edge-7"));
        EXPECT(r, iss->n_sans == 1);
        EXPECT(r, iss->key_usage == KU_DIGITAL_SIGNATURE && iss->eku == EKU_CLIENT_AUTH);
        EXPECT(r, iss->validity == 30 * DAY && !iss->manual_approval);
}

static void fixed_o_wins(const row *r, const policy_issue *iss) {
        edge_issue(r, iss);
        for (size_t i = 0; i < iss->n_subject; i++)
                EXPECT(r, iss->subject[i].len != 9 || memcmp(iss->subject[i].value, "evil-corp", 9) != 0);
}

static void keeps_country(const row *r, const policy_issue *iss) {
        const policy_attr *c = issue_attr(iss, "C", 0);

        EXPECT(r, c && c->len == 2 && memcmp(c->value, "DE", 2) == 0);
        EXPECT(r, strcmp(iss->subject[0].type, "C") == 0);
}

static void one_uri_san(const row *r, const policy_issue *iss) {
        EXPECT(r, iss->n_sans == 1 && issue_has_san(iss, SAN_URI, "spiffe://example.org/node/edge-7"));
}

static void has_dns(const row *r, const policy_issue *iss) {
        EXPECT(r, iss->n_sans >= 1 && iss->sans[0].type == SAN_DNS);
}

static void has_ip(const row *r, const policy_issue *iss) {
        EXPECT(r, iss->n_sans >= 1 && iss->sans[0].type == SAN_IP);
}

static void server_issue(const row *r, const policy_issue *iss) {
        EXPECT(r, iss->manual_approval);
        EXPECT(r, iss->key_usage == (KU_DIGITAL_SIGNATURE | KU_KEY_ENCIPHERMENT));
        EXPECT(r, iss->eku == (EKU_SERVER_AUTH | EKU_CLIENT_AUTH));
        EXPECT(r, !(iss->key_usage & (KU_KEY_CERT_SIGN | KU_CRL_SIGN)));
}

static void never_signs(const row *r, const policy_issue *iss) {
        EXPECT(r, iss->key_usage == KU_DIGITAL_SIGNATURE);
}

static void admin_group_fixed(const row *r, const policy_issue *iss) {
        const policy_attr *o = issue_attr(iss, "O", 0);

        EXPECT(r, o && strcmp(o->value, "hwid-admins") == 0);
}

static void renewal_auto(const row *r, const policy_issue *iss) {
        EXPECT(r, !iss->manual_approval && iss->profile && iss->validity > 0);
}

static void kept_ip_outside(const row *r, const policy_issue *iss) {
        EXPECT(r, iss->n_sans == 2 && iss->sans[0].type == SAN_IP && iss->sans[0].ip[1] == 99);
}

static void no_other_san(const row *r, const policy_issue *iss) {
        for (size_t i = 0; i < iss->n_sans; i++)
                EXPECT(r, iss->sans[i].type != SAN_OTHER);
}

static void cn_type_canonical(const row *r, const policy_issue *iss) {
        EXPECT(r, issue_attr(iss, "CN", 0) != NULL);
}

static const row rows[] = {
        /* ---- enrollment: the happy path and the token's scope ---- */
        { "edge: a valid CSR is allowed", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-7")) }, ALLOW,
          .reason = "profile 'edge' allows enrollment of CN 'edge-7'", .by = "profile", .also = edge_issue },
        { "token pattern edge-* accepts edge-7", ENROLL, TOKEN("edge"), .pattern = "edge-*",
          .csr = { SUBJ(CN("edge-7")) }, ALLOW, .also = edge_issue },
        { "token pattern edge-* refuses other-1", ENROLL, TOKEN("edge"), .pattern = "edge-*",
          .csr = { SUBJ(CN("other-1")) }, DENY(HWID_E_FORBIDDEN),
          .reason = "CN 'other-1' does not match the token's name pattern 'edge-*'", .by = "token.name_pattern" },
        { "token pattern edge-? refuses edge-10", ENROLL, TOKEN("edge"), .pattern = "edge-?",
          .csr = { SUBJ(CN("edge-10")) }, DENY(HWID_E_FORBIDDEN), .reason = "name pattern 'edge-?'" },
        { "token for edge cannot obtain server", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), .requested_profile = "server" }, DENY(HWID_E_FORBIDDEN),
          .reason = "token 'abc123' is bound to profile 'edge'; it cannot obtain profile 'server'" },
        { "token naming its own profile is fine", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), .requested_profile = "edge" }, ALLOW },
        { "token for server cannot get edge's names", ENROLL, TOKEN("server"),
          .csr = { SUBJ(CN("edge-7")), SANS(URI("spiffe://example.org/node/edge-7")) }, DENY(HWID_E_FORBIDDEN),
          .reason = "does not match any URI template of profile 'server'" },
        { "token bound to a profile that does not exist", ENROLL, TOKEN("ghost"), .csr = { SUBJ(CN("edge-7")) },
          DENY(HWID_E_FORBIDDEN), .reason = "profile 'ghost', which does not exist" },
        { "enrollment without a token", ENROLL, .role = ROLE_ANONYMOUS, .csr = { SUBJ(CN("edge-7")) },
          DENY(HWID_E_UNAUTHENTICATED), .reason = "enrollment needs a bootstrap token" },
        { "a node cannot enroll without a token", ENROLL, NODE("edge-7", "edge"), .csr = { SUBJ(CN("edge-7")) },
          DENY(HWID_E_UNAUTHENTICATED), .reason = "bootstrap token" },
        /* ---- subject ---- */
        { "CN outside the profile's pattern", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("gateway-1")) },
          DENY(HWID_E_FORBIDDEN), .reason = "CN 'gateway-1' does not match the CN pattern 'edge-*' of profile 'edge'" },
        { "fixed O overrides the CSR's O", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(A("O", "evil-corp"), CN("edge-7")) }, ALLOW, .also = fixed_o_wins },
        { "an attribute the profile does not allow (L)", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(A("L", "Berlin"), CN("edge-7")) }, DENY(HWID_E_FORBIDDEN),
          .reason = "subject attribute L ('Berlin') is not allowed by profile 'edge'" },
        { "an allowed attribute (C) is kept", ENROLL, TOKEN("edge"), .csr = { SUBJ(A("C", "DE"), CN("edge-7")) },
          ALLOW, .also = keeps_country },
        { "C must be a two-letter code", ENROLL, TOKEN("edge"), .csr = { SUBJ(A("C", "Germany"), CN("edge-7")) },
          DENY(HWID_E_CSR_INVALID), .reason = "two-letter" },
        { "CN given by OID is a CN", ENROLL, TOKEN("edge"), .csr = { SUBJ(A("2.5.4.3", "edge-7")) }, ALLOW,
          .also = cn_type_canonical },
        { "duplicate CN", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-7"), CN("edge-8")) },
          DENY(HWID_E_CSR_INVALID), .reason = "more than one CN" },
        { "duplicate CN, one by OID", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-7"), A("2.5.4.3", "edge-8")) },
          DENY(HWID_E_CSR_INVALID), .reason = "more than one CN" },
        { "duplicate CN, lower-case type", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-7"), A("cn", "edge-8")) },
          DENY(HWID_E_CSR_INVALID), .reason = "more than one CN" },
        { "no CN", ENROLL, TOKEN("edge"), .csr = { SUBJ(A("O", "acme")) }, DENY(HWID_E_CSR_INVALID),
          .reason = "no CN" },
        { "no subject at all", ENROLL, TOKEN("edge"), .csr = { .n_subject = 0 }, DENY(HWID_E_CSR_INVALID),
          .reason = "no CN" },
        { "CN with a NUL byte", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-7\0.evil.com")) },
          DENY(HWID_E_CSR_INVALID), .reason = "CN 'edge-7\\x00.evil.com' contains a NUL byte" },
        { "CN with a newline", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-\n7")) }, DENY(HWID_E_CSR_INVALID),
          .reason = "contains a control character" },
        { "CN with DEL", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-7\x7f")) }, DENY(HWID_E_CSR_INVALID),
          .reason = "control character" },
        { "CN with an escape sequence", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-\x1b[31m7")) },
          DENY(HWID_E_CSR_INVALID), .reason = "control character" },
        { "CN with a C1 control (U+0085)", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-\xc2\x85")) },
          DENY(HWID_E_CSR_INVALID), .reason = "control character" },
        { "CN with a bidi override", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-\xe2\x80\xae" "7")) },
          DENY(HWID_E_CSR_INVALID), .reason = "formatting character" },
        { "CN that is not UTF-8", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-\xff")) },
          DENY(HWID_E_CSR_INVALID), .reason = "not valid UTF-8" },
        { "CN with an overlong UTF-8 '/'", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-\xc0\xaf")) },
          DENY(HWID_E_CSR_INVALID), .reason = "not valid UTF-8" },
        { "CN of 65 bytes", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN(CN65)) }, DENY(HWID_E_CSR_INVALID),
          .reason = "longer than 64 bytes" },
        { "CN of 64 bytes", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN(CN64)) }, ALLOW },
        { "empty CN", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("")) }, DENY(HWID_E_CSR_INVALID), .reason = "is empty" },
        { "O with a NUL byte (even when replaced)", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(A("O", "a\0b"), CN("edge-7")) }, DENY(HWID_E_CSR_INVALID), .reason = "O 'a\\x00b'" },
        { "an attribute without a type", ENROLL, TOKEN("edge"), .csr = { SUBJ({ NULL, "x", 1 }, CN("edge-7")) },
          DENY(HWID_E_CSR_INVALID), .reason = "no usable type" },
        { "an attribute OpenSSL names (title) not in the profile", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(A("title", "boss"), CN("edge-7")) }, DENY(HWID_E_FORBIDDEN),
          .reason = "subject attribute title ('boss')" },
        { "O naming the admin group", ENROLL, TOKEN("lab"), .csr = { SUBJ(A("O", "hwid-admins"), CN("x1")) },
          DENY(HWID_E_FORBIDDEN), .reason = "O 'hwid-admins' is the admin group" },
        { "admin profile fixes O to the admin group", ENROLL, TOKEN("admin"), .csr = { SUBJ(CN("admin-ann")) },
          ALLOW, .also = admin_group_fixed },
        /* ---- SANs ---- */
        { "DNS SAN from the {cn} pattern", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), SANS(DNS("edge-7.edge.example.org")) }, ALLOW, .also = has_dns },
        { "DNS SAN compared without case", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), SANS(DNS("EDGE-7.Edge.Example.ORG")) }, ALLOW },
        { "DNS SAN of another CN", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), SANS(DNS("edge-8.edge.example.org")) }, DENY(HWID_E_FORBIDDEN),
          .reason = "DNS SAN 'edge-8.edge.example.org' does not match any DNS pattern of profile 'edge'", .by = "san.dns" },
        { "wildcard DNS SAN refused", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), SANS(DNS("*.edge.example.org")) }, DENY(HWID_E_FORBIDDEN),
          .reason = "DNS SAN '*.edge.example.org' is a wildcard; no DNS pattern of profile 'edge' allows '*'" },
        { "a glob '*' does not allow a wildcard", ENROLL, TOKEN("lab"),
          .csr = { SUBJ(CN("x1")), SANS(DNS("*.lab.example.org")) }, DENY(HWID_E_FORBIDDEN), .reason = "is a wildcard" },
        { "a glob '*' allows a plain name", ENROLL, TOKEN("lab"),
          .csr = { SUBJ(CN("x1")), SANS(DNS("host1.lab.example.org")) }, ALLOW },
        { "a '\\*' pattern allows the wildcard", ENROLL, TOKEN("server"),
          .csr = { SUBJ(CN("api.svc.example.org")), SANS(DNS("*.apps.example.org")) }, ALLOW, .also = server_issue },
        { "a CN of '*' cannot smuggle a wildcard through {cn}", ENROLL, TOKEN("server"),
          .csr = { SUBJ(CN("*.example.com")), SANS(DNS("*.example.com")) }, DENY(HWID_E_FORBIDDEN),
          .reason = "is a wildcard" },
        { "partial wildcard is malformed", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), SANS(DNS("edge*.edge.example.org")) }, DENY(HWID_E_CSR_INVALID),
          .reason = "'*' inside a label" },
        { "DNS SAN with a NUL byte", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), SANS(DNS("edge-7.edge.example.org\0.evil.com")) }, DENY(HWID_E_CSR_INVALID),
          .reason = "contains a NUL byte" },
        { "DNS SAN with a space", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), SANS(DNS("edge 7.example.org")) }, DENY(HWID_E_CSR_INVALID),
          .reason = "other than letters" },
        { "DNS SAN with a 64-byte label", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")),
                   SANS(DNS("a123456789012345678901234567890123456789012345678901234567890123.example.org")) },
          DENY(HWID_E_CSR_INVALID), .reason = "longer than 63" },
        { "IPv4 SAN inside the range", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), SANS(IP4(10, 20, 3, 4)) }, ALLOW, .also = has_ip },
        { "IPv4 SAN outside the range", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-7")), SANS(IP4(10, 21, 0, 1)) },
          DENY(HWID_E_FORBIDDEN), .reason = "IP SAN 10.21.0.1 is outside the IP ranges of profile 'edge'" },
        { "IPv6 SAN inside the range", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), SANS(IP6(0xfd, 0, 0, 0x20, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5)) }, ALLOW },
        { "IPv6 SAN outside the range", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), SANS(IP6(0xfd, 0, 0, 0x21, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1)) },
          DENY(HWID_E_FORBIDDEN), .reason = "IP SAN fd00:21::1 is outside" },
        { "IPv4-mapped IPv6 is not an IPv4 range", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), SANS(IP6(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 10, 20, 0, 1)) },
          DENY(HWID_E_FORBIDDEN), .reason = "::ffff:10.20.0.1" },
        { "a /32 range is one address", ENROLL, TOKEN("server"),
          .csr = { SUBJ(CN("a.svc.example.org")), SANS(IP4(192, 0, 2, 10)) }, ALLOW },
        { "next to a /32 range", ENROLL, TOKEN("server"),
          .csr = { SUBJ(CN("a.svc.example.org")), SANS(IP4(192, 0, 2, 11)) }, DENY(HWID_E_FORBIDDEN),
          .reason = "192.0.2.11" },
        { "IP SAN of a bad length", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), SANS({ .type = SAN_IP, .ip_len = 5 }) }, DENY(HWID_E_CSR_INVALID),
          .reason = "5 bytes" },
        { "URI SAN equal to the template (and not doubled)", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), SANS(URI("spiffe://example.org/node/edge-7")) }, ALLOW, .also = one_uri_san },
        { "URI SAN of another node", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), SANS(URI("spiffe://example.org/node/edge-8")) }, DENY(HWID_E_FORBIDDEN),
          .reason = "URI SAN 'spiffe://example.org/node/edge-8' does not match any URI template" },
        { "URI SAN with a path traversal", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), SANS(URI("spiffe://example.org/node/edge-7/../admin")) },
          DENY(HWID_E_FORBIDDEN), .reason = "URI SAN" },
        { "CN that cannot go into a URI template", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-a/b")) },
          DENY(HWID_E_FORBIDDEN), .reason = "CN 'edge-a/b' cannot be put into URI template" },
        { "email SAN refused", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-7")), SANS(EMAIL("ops@example.org")) },
          DENY(HWID_E_FORBIDDEN), .reason = "email SAN 'ops@example.org' is not allowed" },
        { "otherName SAN refused", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-7")), SANS(OTHER) },
          DENY(HWID_E_FORBIDDEN), .reason = "SAN of a type hwid does not issue" },
        /* ---- keys ---- */
        { "RSA-1024 refused", ENROLL, TOKEN("server"), .csr = { SUBJ(CN("a.svc.example.org")), RSA(1024) },
          DENY(HWID_E_FORBIDDEN), .reason = "RSA key of 1024 bits is too weak" },
        { "RSA-2048 below the profile's 3072", ENROLL, TOKEN("server"),
          .csr = { SUBJ(CN("a.svc.example.org")), RSA(2048) }, DENY(HWID_E_FORBIDDEN),
          .reason = "below the minimum of 3072 bits of profile 'server'" },
        { "RSA-3072 allowed", ENROLL, TOKEN("server"), .csr = { SUBJ(CN("a.svc.example.org")), RSA(3072) }, ALLOW },
        { "RSA where the profile allows EC only", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-7")), RSA(4096) },
          DENY(HWID_E_FORBIDDEN), .reason = "RSA keys are not allowed by profile 'edge'" },
        { "RSA-32768 refused", ENROLL, TOKEN("lab"), .csr = { SUBJ(CN("x1")), RSA(32768) }, DENY(HWID_E_KEY_TYPE),
          .reason = "too large" },
        { "P-384 allowed", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-7")), EC("P-384") }, ALLOW },
        { "P-384 where the profile allows P-256", ENROLL, TOKEN("server"),
          .csr = { SUBJ(CN("a.svc.example.org")), EC("P-384") }, DENY(HWID_E_FORBIDDEN),
          .reason = "EC P-384 keys are not allowed by profile 'server'" },
        { "P-521 refused", ENROLL, TOKEN("lab"), .csr = { SUBJ(CN("x1")), EC("P-521") }, DENY(HWID_E_KEY_TYPE),
          .reason = "EC curve 'P-521' is not supported" },
        { "secp256k1 refused", ENROLL, TOKEN("lab"), .csr = { SUBJ(CN("x1")), EC("secp256k1") },
          DENY(HWID_E_KEY_TYPE), .reason = "EC curve 'secp256k1' is not supported" },
        { "EC key without a named curve", ENROLL, TOKEN("lab"), .csr = { SUBJ(CN("x1")), .key_alg = "EC" },
          DENY(HWID_E_KEY_TYPE), .reason = "not supported" },
        { "DSA refused", ENROLL, TOKEN("lab"), .csr = { SUBJ(CN("x1")), .key_alg = "DSA", .key_bits = 3072 },
          DENY(HWID_E_KEY_TYPE), .reason = "key type 'DSA' is not supported" },
        { "Ed25519 refused", ENROLL, TOKEN("lab"), .csr = { SUBJ(CN("x1")), .key_alg = "ED25519" },
          DENY(HWID_E_KEY_TYPE), .reason = "'ED25519'" },
        /* ---- requested extensions ---- */
        { "CA:TRUE refused (UNGRANTED_REFUSE)", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-7")), .asks_ca = true },
          DENY(HWID_E_FORBIDDEN), .reason = "CSR asks for a CA certificate; profile 'edge' does not grant it",
          .by = "ext.ungranted" },
        { "keyCertSign refused (UNGRANTED_REFUSE)", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), .asks_cert_sign = true }, DENY(HWID_E_FORBIDDEN),
          .reason = "keyCertSign/cRLSign key usage; profile 'edge' does not grant it" },
        { "CA:TRUE dropped (UNGRANTED_DROP)", ENROLL, TOKEN("server"),
          .csr = { SUBJ(CN("a.svc.example.org")), .asks_ca = true, .asks_cert_sign = true }, ALLOW,
          .reason = "dropped: CA:TRUE", .also = server_issue },
        { "a profile's keyCertSign is never granted", ENROLL, TOKEN("lab"), .csr = { SUBJ(CN("x1")) }, ALLOW,
          .also = never_signs },
        { "a profile's keyCertSign, asked for and dropped", ENROLL, TOKEN("lab"),
          .csr = { SUBJ(CN("x1")), .asks_cert_sign = true }, ALLOW, .also = never_signs },
        { "other extensions are dropped silently", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), .asks_other_ext = true }, ALLOW, .also = edge_issue },
        /* ---- renewal ---- */
        { "renewal inside the window with a new key", RENEW, NODE("edge-7", "edge"), .csr = { SUBJ(CN("edge-7")) },
          ALLOW, .reason = "renewal of CN 'edge-7'", .also = renewal_auto },
        { "an admin's certificate renews like a node's", RENEW, .role = ROLE_ADMIN, .identity = "edge-7",
          .profile = "edge", .csr = { SUBJ(CN("edge-7")) }, ALLOW, .reason = "renewal of CN 'edge-7'" },
        { "renewal of another identity", RENEW, NODE("edge-7", "edge"), .csr = { SUBJ(CN("edge-8")) },
          DENY(HWID_E_FORBIDDEN), .reason = "node 'edge-7' may not renew identity 'edge-8'", .by = "renew.identity" },
        { "renewal before the window", RENEW, NODE("edge-7", "edge"), .now = NB + 10 * DAY,
          .csr = { SUBJ(CN("edge-7")) }, DENY(HWID_E_FORBIDDEN),
          .reason = "renewal of 'edge-7' opens at 2023-12-04T22:13:20Z", .by = "renew.window" },
        { "renewal right when the window opens", RENEW, NODE("edge-7", "edge"), .now = NB + 20 * DAY,
          .csr = { SUBJ(CN("edge-7")) }, ALLOW },
        { "renewal a second before the window", RENEW, NODE("edge-7", "edge"), .now = NB + 20 * DAY - 1,
          .csr = { SUBJ(CN("edge-7")) }, DENY(HWID_E_FORBIDDEN), .reason = "last 33%" },
        { "renewal with the same key when the profile rotates", RENEW, NODE("edge-7", "edge"), .same_key = true,
          .csr = { SUBJ(CN("edge-7")) }, DENY(HWID_E_FORBIDDEN), .reason = "requires a new key on renewal" },
        { "renewal with the same key when it need not rotate", RENEW, NODE("a.svc.example.org", "server"),
          .same_key = true, .csr = { SUBJ(CN("a.svc.example.org")) }, ALLOW, .also = renewal_auto },
        { "renewal of an expired certificate", RENEW, NODE("edge-7", "edge"), .now = NA,
          .csr = { SUBJ(CN("edge-7")) }, DENY(HWID_E_EXPIRED), .reason = "has expired" },
        { "renewal without a client certificate", RENEW, .role = ROLE_ANONYMOUS, .csr = { SUBJ(CN("edge-7")) },
          DENY(HWID_E_UNAUTHENTICATED), .reason = "renewal needs mutual TLS with the current certificate" },
        { "renewal with a token", RENEW, TOKEN("edge"), .csr = { SUBJ(CN("edge-7")) }, DENY(HWID_E_UNAUTHENTICATED),
          .reason = "mutual TLS" },
        { "renewal asking for another profile", RENEW, NODE("edge-7", "edge"),
          .csr = { SUBJ(CN("edge-7")), .requested_profile = "server" }, DENY(HWID_E_FORBIDDEN),
          .reason = "the certificate of 'edge-7' is bound to profile 'edge'; it cannot obtain profile 'server'" },
        { "renewal under a profile that is gone", RENEW, NODE("edge-7", "gone"), .csr = { SUBJ(CN("edge-7")) },
          DENY(HWID_E_FORBIDDEN), .reason = "profile 'gone', which does not exist" },
        { "renewal asking for CA:TRUE", RENEW, NODE("edge-7", "edge"), .csr = { SUBJ(CN("edge-7")), .asks_ca = true },
          DENY(HWID_E_FORBIDDEN), .reason = "CSR asks for a CA certificate" },
        { "renewal keeps the SAN rules", RENEW, NODE("edge-7", "edge"),
          .csr = { SUBJ(CN("edge-7")), SANS(DNS("edge-8.edge.example.org")) }, DENY(HWID_E_FORBIDDEN),
          .reason = "DNS SAN 'edge-8.edge.example.org'" },
        { "renewal keeps the key rules", RENEW, NODE("a.svc.example.org", "server"),
          .csr = { SUBJ(CN("a.svc.example.org")), RSA(1024) }, DENY(HWID_E_FORBIDDEN), .reason = "too weak" },
        /* ---- audit-only mode ---- */
        { "audit: a valid request is not flagged", ENROLL, .audit = true, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")) }, ALLOW, .also = edge_issue },
        { "audit: token pattern mismatch is allowed, flagged", ENROLL, .audit = true, TOKEN("edge"),
          .pattern = "edge-*", .csr = { SUBJ(CN("other-1")) }, FLAGGED,
          .reason = "CN 'other-1' does not match the token's name pattern 'edge-*'", .by = "token.name_pattern" },
        { "audit: renewal of another identity, flagged", RENEW, .audit = true, NODE("edge-7", "edge"),
          .csr = { SUBJ(CN("edge-8")) }, FLAGGED, .reason = "node 'edge-7' may not renew identity 'edge-8'" },
        { "audit: renewal before the window, flagged", RENEW, .audit = true, NODE("edge-7", "edge"),
          .now = NB + DAY, .csr = { SUBJ(CN("edge-7")) }, FLAGGED, .reason = "opens at" },
        { "audit: CA:TRUE goes through without CA", ENROLL, .audit = true, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), .asks_ca = true, .asks_cert_sign = true }, FLAGGED,
          .reason = "CSR asks for a CA certificate", .also = edge_issue },
        { "audit: IP outside the range is kept, flagged", ENROLL, .audit = true, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), SANS(IP4(10, 99, 0, 1)) }, FLAGGED, .reason = "10.99.0.1",
          .also = kept_ip_outside },
        { "audit: the first reason is kept", ENROLL, .audit = true, TOKEN("edge"), .pattern = "edge-*",
          .csr = { SUBJ(CN("other-1")), SANS(IP4(10, 99, 0, 1)) }, FLAGGED, .reason = "name pattern 'edge-*'" },
        { "audit: an otherName is never copied", ENROLL, .audit = true, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), SANS(OTHER) }, FLAGGED, .reason = "SAN of a type", .also = no_other_san },
        { "audit: another profile is flagged", ENROLL, .audit = true, TOKEN("edge"),
          .csr = { SUBJ(CN("a.svc.example.org")), .requested_profile = "server" }, FLAGGED,
          .reason = "cannot obtain profile 'server'" },
        { "audit: a NUL in the CN is still refused", ENROLL, .audit = true, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7\0x")) }, DENY(HWID_E_CSR_INVALID), .reason = "NUL" },
        { "audit: a duplicate CN is still refused", ENROLL, .audit = true, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7"), CN("edge-8")) }, DENY(HWID_E_CSR_INVALID), .reason = "more than one CN" },
        { "audit: RSA-1024 is still refused", ENROLL, .audit = true, TOKEN("server"),
          .csr = { SUBJ(CN("a.svc.example.org")), RSA(1024) }, DENY(HWID_E_FORBIDDEN), .reason = "too weak" },
        { "audit: secp256k1 is still refused", ENROLL, .audit = true, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), EC("secp256k1") }, DENY(HWID_E_KEY_TYPE), .reason = "secp256k1" },
        { "audit: the admin group is still refused", ENROLL, .audit = true, TOKEN("lab"),
          .csr = { SUBJ(A("O", "hwid-admins"), CN("x1")) }, DENY(HWID_E_FORBIDDEN), .reason = "admin group" },
        { "audit: an expired certificate still cannot renew", RENEW, .audit = true, NODE("edge-7", "edge"),
          .now = NA + 1, .csr = { SUBJ(CN("edge-7")) }, DENY(HWID_E_EXPIRED), .reason = "expired" },
        /* ---- the authorizer chain ---- */
        { "node renews itself", AUTHZ, NODE("edge-7", "edge"), .action = ACTION_RENEW, .target = "edge-7", ALLOW,
          .by = "node" },
        { "node renews another identity", AUTHZ, NODE("edge-7", "edge"), .action = ACTION_RENEW, .target = "edge-8",
          DENY(HWID_E_FORBIDDEN), .reason = "node 'edge-7' may not act on identity 'edge-8'", .by = "node" },
        { "node reads its own identity", AUTHZ, NODE("edge-7", "edge"), .action = ACTION_READ_IDENTITY,
          .target = "edge-7", ALLOW },
        { "node reads another identity", AUTHZ, NODE("edge-7", "edge"), .action = ACTION_READ_IDENTITY,
          .target = "edge-70", DENY(HWID_E_FORBIDDEN), .reason = "may not act on identity 'edge-70'" },
        { "a hostile target is quoted in the reason", AUTHZ, NODE("edge-7", "edge"), .action = ACTION_READ_IDENTITY,
          .target = "x\n\x1b[2J", DENY(HWID_E_FORBIDDEN), .reason = "identity 'x\\x0a\\x1b[2J'" },
        { "a hostile profile name is quoted in the reason", ENROLL, TOKEN("edge"),
          .csr = { SUBJ(CN("edge-7")), .requested_profile = "srv\r\n" }, DENY(HWID_E_FORBIDDEN),
          .reason = "profile 'srv\\x0d\\x0a'" },
        { "node reads an unnamed identity", AUTHZ, NODE("edge-7", "edge"), .action = ACTION_READ_IDENTITY,
          DENY(HWID_E_FORBIDDEN), .reason = "(none named)" },
        { "node gets the CA", AUTHZ, NODE("edge-7", "edge"), .action = ACTION_GET_CA, ALLOW, .by = "node" },
        { "node polls a request", AUTHZ, NODE("edge-7", "edge"), .action = ACTION_POLL_REQUEST, ALLOW },
        { "node administers", AUTHZ, NODE("edge-7", "edge"), .action = ACTION_ADMIN, DENY(HWID_E_FORBIDDEN),
          .reason = "node 'edge-7' does not have the admin role" },
        { "node reads metrics", AUTHZ, NODE("edge-7", "edge"), .action = ACTION_METRICS, DENY(HWID_E_FORBIDDEN),
          .reason = "needs the admin role", .by = "default" },
        { "node enrolls without a token", AUTHZ, NODE("edge-7", "edge"), .action = ACTION_ENROLL,
          DENY(HWID_E_UNAUTHENTICATED), .reason = "enrollment needs a bootstrap token" },
        { "anonymous gets the CA", AUTHZ, .role = ROLE_ANONYMOUS, .action = ACTION_GET_CA, ALLOW, .by = "anonymous" },
        { "anonymous gets the CRL", AUTHZ, .role = ROLE_ANONYMOUS, .action = ACTION_GET_CRL, ALLOW },
        { "anonymous checks health", AUTHZ, .role = ROLE_ANONYMOUS, .action = ACTION_HEALTH, ALLOW },
        { "anonymous polls a request", AUTHZ, .role = ROLE_ANONYMOUS, .action = ACTION_POLL_REQUEST, ALLOW },
        { "anonymous enrolls", AUTHZ, .role = ROLE_ANONYMOUS, .action = ACTION_ENROLL, DENY(HWID_E_UNAUTHENTICATED),
          .reason = "enrollment needs a bootstrap token" },
        { "token holder enrolls", AUTHZ, TOKEN("edge"), .action = ACTION_ENROLL, ALLOW, .reason = "token 'abc123'" },
        { "anonymous renews", AUTHZ, .role = ROLE_ANONYMOUS, .action = ACTION_RENEW, .target = "edge-7",
          DENY(HWID_E_UNAUTHENTICATED), .reason = "renewal needs mutual TLS with the current certificate" },
        { "token holder renews", AUTHZ, TOKEN("edge"), .action = ACTION_RENEW, .target = "edge-7",
          DENY(HWID_E_UNAUTHENTICATED), .reason = "mutual TLS" },
        { "anonymous reads an identity", AUTHZ, .role = ROLE_ANONYMOUS, .action = ACTION_READ_IDENTITY,
          .target = "edge-7", DENY(HWID_E_UNAUTHENTICATED), .reason = "mutual TLS" },
        { "anonymous reads metrics", AUTHZ, .role = ROLE_ANONYMOUS, .action = ACTION_METRICS, DENY(HWID_E_FORBIDDEN),
          .reason = "an anonymous client may not perform 'metrics': it needs the admin role" },
        { "anonymous administers", AUTHZ, .role = ROLE_ANONYMOUS, .action = ACTION_ADMIN, DENY(HWID_E_FORBIDDEN),
          .reason = "admin role" },
        { "token holder administers", AUTHZ, TOKEN("edge"), .action = ACTION_ADMIN, DENY(HWID_E_FORBIDDEN),
          .reason = "admin role" },
        { "admin administers", AUTHZ, .role = ROLE_ADMIN, .identity = "root", .action = ACTION_ADMIN, ALLOW,
          .reason = "'root' has the admin role", .by = "admin" },
        { "admin acts on any identity", AUTHZ, .role = ROLE_ADMIN, .identity = "root", .action = ACTION_RENEW,
          .target = "edge-7", ALLOW },
        { "audit: node renews another identity, flagged", AUTHZ, .audit = true, NODE("edge-7", "edge"),
          .action = ACTION_RENEW, .target = "edge-8", FLAGGED, .reason = "node 'edge-7' may not act on identity 'edge-8'",
          .by = "node" },
        { "audit: node reads another identity, flagged", AUTHZ, .audit = true, NODE("edge-7", "edge"),
          .action = ACTION_READ_IDENTITY, .target = "edge-8", FLAGGED, .reason = "may not act on identity" },
        { "audit: token holder reads an identity, flagged", AUTHZ, .audit = true, TOKEN("edge"),
          .action = ACTION_POLL_REQUEST, ALLOW },
        { "audit: anonymous still cannot administer", AUTHZ, .audit = true, .role = ROLE_ANONYMOUS,
          .action = ACTION_ADMIN, DENY(HWID_E_FORBIDDEN) },
        { "audit: a node still cannot administer", AUTHZ, .audit = true, NODE("edge-7", "edge"),
          .action = ACTION_ADMIN, DENY(HWID_E_FORBIDDEN) },
        { "audit: anonymous still cannot renew", AUTHZ, .audit = true, .role = ROLE_ANONYMOUS, .action = ACTION_RENEW,
          .target = "edge-7", DENY(HWID_E_UNAUTHENTICATED) },
        { "audit: anonymous still cannot read metrics", AUTHZ, .audit = true, .role = ROLE_ANONYMOUS,
          .action = ACTION_METRICS, DENY(HWID_E_FORBIDDEN) },
        { "audit: anonymous still cannot enroll", AUTHZ, .audit = true, .role = ROLE_ANONYMOUS,
          .action = ACTION_ENROLL, DENY(HWID_E_UNAUTHENTICATED) },
};

static void run(const row *r, policy *strict, policy *audit) {
        policy *p = r->audit ? audit : strict;
        policy_requester who = {
                .role = r->role,
                .token_id = "abc123",
                .token_profile = r->profile,
                .token_name_pattern = r->pattern,
                .identity = r->identity,
                .cert_profile = r->profile,
                .cert_not_before = NB,
                .cert_not_after = NA,
                .cert_spki_sha256 = OLD_KEY,
        };
        policy_csr csr = r->csr;
        policy_issue iss;
        policy_decision d;

        if (!csr.key_alg) {
                csr.key_alg = "EC";
                csr.curve = "P-256";
                csr.key_bits = 256;
        }
        if (!csr.spki_sha256)
                csr.spki_sha256 = r->same_key ? OLD_KEY : NEW_KEY;
        memset(&iss, 0xa5, sizeof(iss)); /* must be overwritten */
        memset(&d, 0xa5, sizeof(d));
        switch (r->op) {
        case ENROLL: policy_check_enroll(p, &who, &csr, &iss, &d); break;
        case RENEW: policy_check_renew(p, &who, &csr, r->now ? r->now : IN_WINDOW, &iss, &d); break;
        case AUTHZ: policy_authorize(p, &who, r->action, r->target, &d); break;
        }
        EXPECT(r, d.verdict == r->verdict);
        EXPECT(r, d.error == (r->verdict == VERDICT_DENY ? r->error : 0));
        EXPECT(r, d.audit_only == r->audit_only);
        EXPECT(r, d.reason[0] != '\0' && memchr(d.reason, '\0', sizeof(d.reason)));
        EXPECT(r, d.decided_by[0] != '\0' && memchr(d.decided_by, '\0', sizeof(d.decided_by)));
        if (r->reason && !strstr(d.reason, r->reason))
                fprintf(stderr, "row '%s': reason \"%s\" lacks \"%s\"\n", r->name, d.reason, r->reason),
                        check_failures++;
        if (r->by && strcmp(d.decided_by, r->by) != 0)
                fprintf(stderr, "row '%s': decided by \"%s\", not \"%s\"\n", r->name, d.decided_by, r->by),
                        check_failures++;
        if (r->op == AUTHZ)
                return;
        if (d.verdict == VERDICT_ALLOW) {
                EXPECT(r, iss.profile != NULL);
                EXPECT(r, !(iss.key_usage & (KU_KEY_CERT_SIGN | KU_CRL_SIGN))); /* never a CA */
                EXPECT(r, iss.n_subject >= 1 && iss.n_subject <= ELEMENTSOF(iss.subject));
                EXPECT(r, iss.n_sans <= ELEMENTSOF(iss.sans));
                if (r->also)
                        r->also(r, &iss);
        } else {
                EXPECT(r, iss.profile == NULL && iss.n_subject == 0 && iss.n_sans == 0);
        }
}

/* ---------- beyond the table ---------- */

static void admin_may_do_everything(policy *p) {
        policy_requester who = { .role = ROLE_ADMIN, .identity = "root" };
        policy_decision d;

        for (policy_action a = ACTION_GET_CA; a <= ACTION_ADMIN; a++) {
                policy_authorize(p, &who, a, "edge-7", &d);
                CHECK(d.verdict == VERDICT_ALLOW && !d.audit_only);
                CHECK_STREQ(d.decided_by, "admin");
        }
}

static void anonymous_may_do_little(policy *p) {
        policy_requester who = { .role = ROLE_ANONYMOUS };
        policy_decision d;

        for (policy_action a = ACTION_GET_CA; a <= ACTION_ADMIN; a++) {
                bool open = a == ACTION_GET_CA || a == ACTION_GET_CRL || a == ACTION_HEALTH ||
                            a == ACTION_POLL_REQUEST;
                policy_authorize(p, &who, a, "edge-7", &d);
                CHECK((d.verdict == VERDICT_ALLOW) == open);
                CHECK(strcmp(policy_action_name(a), "unknown") != 0);
        }
}

static void public_metrics_switch(policy *p) {
        policy_requester who = { .role = ROLE_ANONYMOUS };
        policy_decision d;

        CHECK(!policy_public_metrics(p));
        policy_set_public_metrics(p, true);
        policy_authorize(p, &who, ACTION_METRICS, NULL, &d);
        CHECK(d.verdict == VERDICT_ALLOW);
        policy_set_public_metrics(p, false);
        policy_authorize(p, &who, ACTION_METRICS, NULL, &d);
        CHECK(d.verdict == VERDICT_DENY);
}

static void limits(policy *p) {
        policy_requester who = { .role = ROLE_TOKEN, .token_id = "abc123", .token_profile = "lab" };
        policy_attr attrs[17];
        policy_san sans[33];
        policy_csr csr = { .subject = attrs, .n_subject = 17, .key_alg = "EC", .curve = "P-256" };
        policy_issue iss;
        policy_decision d;

        attrs[0] = (policy_attr) { "CN", "x1", 2 };
        for (size_t i = 1; i < ELEMENTSOF(attrs); i++)
                attrs[i] = (policy_attr) { "O", "acme", 4 };
        policy_check_enroll(p, &who, &csr, &iss, &d);
        CHECK(d.verdict == VERDICT_DENY && d.error == -HWID_E_CSR_INVALID);
        CHECK_CONTAINS(d.reason, "17 attributes");

        csr.n_subject = 1;
        for (size_t i = 0; i < ELEMENTSOF(sans); i++)
                sans[i] = (policy_san) { .type = SAN_DNS, .value = "a.lab.example.org", .len = 17 };
        csr.sans = sans;
        csr.n_sans = 33;
        policy_check_enroll(p, &who, &csr, &iss, &d);
        CHECK(d.verdict == VERDICT_DENY && d.error == -HWID_E_CSR_INVALID);
        CHECK_CONTAINS(d.reason, "33 SANs");
        /* 32 identical SANs are one in the certificate. */
        csr.n_sans = 32;
        policy_check_enroll(p, &who, &csr, &iss, &d);
        CHECK(d.verdict == VERDICT_ALLOW && iss.n_sans == 1);
}

static void globs(void) {
        static const struct {
                const char *pattern, *s;
                bool match;
        } t[] = {
                { "edge-*", "edge-7", true },     { "edge-*", "edge-", true },     { "edge-*", "edg", false },
                { "edge-?", "edge-7", true },     { "edge-?", "edge-77", false },  { "*", "", true },
                { "", "", true },                 { "", "a", false },              { "a*b*c", "aXXbYYc", true },
                { "a*b*c", "aXXbYY", false },     { "*.x.org", "a.b.x.org", true }, { "Edge-*", "edge-1", false },
                { "\\*", "*", true },             { "\\*", "a", false },           { "a\\?", "a?", true },
                { "a\\?", "ab", false },          { "**a", "bba", true },          { "{cn}", "{cn}", true },
                { "a*", "a\nb", true },
        };

        for (size_t i = 0; i < ELEMENTSOF(t); i++)
                if (policy_glob_match(t[i].pattern, t[i].s, strlen(t[i].s)) != t[i].match)
                        fprintf(stderr, "glob '%s' on '%s' should be %d\n", t[i].pattern, t[i].s, t[i].match),
                                check_failures++;
        /* A NUL is never absorbed by a wildcard, and never the end. */
        CHECK(!policy_glob_match("edge-*", "edge-7\0x", 8));
        CHECK(!policy_glob_match("edge-?", "edge-\0", 6));
        /* {cn} is the CN, literally: its '*' is no wildcard. */
        CHECK(glob_match_ex("{cn}.x", "a*", 2, "a*.x", 4, 0));
        CHECK(!glob_match_ex("{cn}.x", "*", 1, "zz.x", 4, 0));
        CHECK(!glob_match_ex("{cn}.x", "*", 1, "*.x", 3, GLOB_STAR_LITERAL));
        CHECK(glob_match_ex("{cn}{cn}", "ab", 2, "abab", 4, 0));
        CHECK(glob_match_ex("x{cn}y", "", 0, "xy", 2, 0));
        CHECK(glob_match_ex("*.{cn}.org", "Edge", 4, "a.b.edge.ORG", 12, GLOB_NOCASE));
        CHECK(!glob_match_ex("*", NULL, 0, "a*b", 3, GLOB_STAR_LITERAL));
        CHECK(glob_match_ex("*\\**", NULL, 0, "a*b", 3, GLOB_STAR_LITERAL));
}

static void names(void) {
        char q[QUOTE_BUF];
        uint8_t v4[4] = { 10, 20, 255, 1 }, v4b[4] = { 10, 21, 0, 0 };
        policy_cidr c = { .family = 4, .addr = { 10, 20 }, .prefix = 16 }, c0 = { .family = 4, .prefix = 0 };
        policy_cidr c9 = { .family = 4, .addr = { 10, 0x80 }, .prefix = 9 };
        bool wild = false;

        CHECK_STREQ(name_quote(q, sizeof(q), "a'b\\c\x01", 6), "a\\x27b\\x5cc\\x01");
        CHECK(strlen(name_quote(q, sizeof(q), CN65 CN65, 130)) == POLICY_QUOTE_MAX + 3);
        CHECK(cidr_contains(&c, v4, 4) && !cidr_contains(&c, v4b, 4) && cidr_contains(&c0, v4b, 4));
        CHECK(cidr_contains(&c9, (uint8_t[]) { 10, 0xff, 0, 0 }, 4) && !cidr_contains(&c9, v4, 4));
        CHECK(!dns_name_problem("*.a.org", 7, &wild) && wild);
        CHECK(dns_name_problem("a.*.org", 7, &wild) != NULL);
        CHECK(dns_name_problem("-a.org", 6, &wild) != NULL);
        CHECK(dns_name_problem("a..org", 6, &wild) != NULL);
        CHECK(dns_name_problem("a.org.", 6, &wild) != NULL);
        CHECK(name_check("\xf0\x9f\x94\x91", 4, 64) == NAME_OK); /* a key emoji */
        CHECK(name_check("\xed\xa0\x80", 3, 64) == NAME_BAD_UTF8); /* a surrogate */
        CHECK(name_check("\xf4\x90\x80\x80", 4, 64) == NAME_BAD_UTF8); /* beyond U+10FFFF */
        CHECK(name_check("\xe2\x82", 2, 64) == NAME_BAD_UTF8); /* truncated */
        CHECK(!cn_uri_safe("..", 2) && !cn_uri_safe("a b", 3) && cn_uri_safe("edge-7.x_y~z", 12));
        CHECK_STREQ(policy_rdn_canonical("cn"), "CN");
        CHECK_STREQ(policy_rdn_canonical("2.5.4.10"), "O");
        CHECK_STREQ(policy_rdn_canonical("1.2.3.4"), "1.2.3.4");
        CHECK(policy_rdn_canonical("bogus") == NULL && policy_rdn_canonical("1.") == NULL);
        CHECK(policy_rdn_canonical("12") == NULL);
}

static void the_object(void) {
        _cleanup_(policy_freep) policy *p = NULL;

        CHECK(policy_new(&p) == 0);
        CHECK(policy_profile_find(p, "edge") == NULL);
        CHECK(policy_add_profile(p, profile_edge()) == 0);
        CHECK(policy_add_profile(p, profile_edge()) == -HWID_E_EXISTS); /* freed, not leaked */
        CHECK(policy_add_profile(p, new_profile("")) == -HWID_E_INVALID);
        CHECK(policy_profile_find(p, "edge") != NULL);
        CHECK(policy_admin_group(p) == NULL);
        CHECK(policy_set_admin_group(p, "g") == 0);
        CHECK_STREQ(policy_admin_group(p), "g");
        CHECK(policy_set_admin_group(p, NULL) == 0 && policy_admin_group(p) == NULL);
        CHECK(!policy_audit_only(p));
        policy_set_audit_only(p, true);
        CHECK(policy_audit_only(p));
}

int main(void) {
        _cleanup_(policy_freep) policy *strict = make_policy(false);
        _cleanup_(policy_freep) policy *audit = make_policy(true);

        for (size_t i = 0; i < ELEMENTSOF(rows); i++)
                run(&rows[i], strict, audit);
        admin_may_do_everything(strict);
        admin_may_do_everything(audit);
        anonymous_may_do_little(strict);
        public_metrics_switch(strict);
        limits(strict);
        globs();
        names();
        the_object();
        if (!check_failures)
                printf("test-policy: %zu rows and the rest passed\n", ELEMENTSOF(rows));
        return check_done("test-policy");
}
