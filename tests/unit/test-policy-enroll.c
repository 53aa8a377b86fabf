/* policy/, enrollment: table-driven.  Each row is a profile (through the
 * token that names it), a requester, a CSR, and the decision expected:
 * verdict, error, audit-only flag and a piece of the reason.  Hostile CSRs
 * included: NUL and control characters, overlong and duplicate CNs,
 * wildcards, IPs outside the ranges, CA:TRUE, weak or unsupported keys.
 * Beyond the table: the limits on a CSR, globs and names.  Renewal,
 * audit-only mode and authorization are in test-policy-authz.c. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "error.h"
#include "policy-fixture.h"
#include "policy-internal.h"
#include "policy.h"

/* ---------- checks on what would be issued ---------- */

static void fixed_o_wins(const row *r, const policy_issue *iss) {
        edge_issue(r, iss);
        for (size_t i = 0; i < iss->n_subject; i++)
                EXPECT(r, iss->subject[i].len != 9 || memcmp(iss->subject[i].value, "evil-corp", 9) != 0);
}

/* The device profile's templates, each once, in the profile's order. */
static void device_sans(const row *r, const policy_issue *iss) {
        EXPECT(r, iss->n_sans == 3);
        EXPECT(r, issue_has_san(iss, SAN_DNS, "cam-1"));
        EXPECT(r, issue_has_san(iss, SAN_DNS, "cam-1.dev.example.org"));
        EXPECT(r, issue_has_san(iss, SAN_URI, "spiffe://example.org/device/cam-1"));
        EXPECT(r, !issue_has_san(iss, SAN_DNS, "*.dev.example.org"));
        EXPECT(r, iss->n_subject == 1 && strcmp(iss->subject[0].type, "CN") == 0);
}

static void no_sans(const row *r, const policy_issue *iss) {
        EXPECT(r, iss->n_sans == 0);
}

/* The templates that make a DNS name of 10.0.0.7 only. */
static void no_ip_dns(const row *r, const policy_issue *iss) {
        EXPECT(r, !issue_has_san(iss, SAN_DNS, "10.0.0.7"));
        EXPECT(r, issue_has_san(iss, SAN_DNS, "10.0.0.7.dev.example.org"));
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

static void cn_type_canonical(const row *r, const policy_issue *iss) {
        EXPECT(r, issue_attr(iss, "CN", 0) != NULL);
}

static const row rows[] = {
        /* ---- the default profile of hwid ca init: CN only, DNS templates added ---- */
        { "a device gets its profile's DNS templates unasked", ENROLL, TOKEN("device"),
          .csr = { SUBJ(CN("cam-1")) }, ALLOW, .also = device_sans },
        { "a requested template name is not doubled", ENROLL, TOKEN("device"),
          .csr = { SUBJ(CN("cam-1")), SANS(DNS("cam-1")) }, ALLOW, .also = device_sans },
        { "a requester never chooses its O under a CN-only profile", ENROLL, TOKEN("device"),
          .csr = { SUBJ(A("O", "system:masters"), CN("cam-1")) }, DENY(HWID_E_FORBIDDEN),
          .reason = "subject attribute O ('system:masters') is not allowed by profile 'device'", .by = "subject.rdns" },
        { "nor its OU", ENROLL, TOKEN("device"), .csr = { SUBJ(A("OU", "ops"), CN("cam-1")) },
          DENY(HWID_E_FORBIDDEN), .reason = "subject attribute OU" },
        { "a CN that cannot be a DNS name", ENROLL, TOKEN("device"), .csr = { SUBJ(CN("kitchen sensor")) },
          DENY(HWID_E_FORBIDDEN), .reason = "cannot be put into DNS template '{cn}' of profile 'device'", .by = "san.dns" },
        { "a CN '*' never makes a wildcard name", ENROLL, TOKEN("device"), .csr = { SUBJ(CN("*")) },
          DENY(HWID_E_FORBIDDEN), .reason = "would be a wildcard" },
        { "audit: a CN that cannot be a DNS name goes through without one", ENROLL, .audit = true, TOKEN("device"),
          .csr = { SUBJ(CN("kitchen sensor")) }, FLAGGED, .reason = "DNS template", .also = no_sans },
        /* An IP address is no DNS name: {cn} never makes one of it. */
        { "a CN that is an IPv4 address makes no DNS name", ENROLL, TOKEN("device"),
          .csr = { SUBJ(CN("127.0.0.1")) }, DENY(HWID_E_FORBIDDEN),
          .reason = "CN '127.0.0.1' cannot be put into DNS template '{cn}' of profile 'device': the name is an IPv4 "
                    "address (its last label is a number), not a DNS name", .by = "san.dns" },
        { "nor one that only ends in a number", ENROLL, TOKEN("device"), .csr = { SUBJ(CN("127.1")) },
          DENY(HWID_E_FORBIDDEN), .reason = "is an IPv4 address" },
        { "nor an IPv6 address", ENROLL, TOKEN("device"), .csr = { SUBJ(CN("fe80::1")) }, DENY(HWID_E_FORBIDDEN),
          .reason = "CN 'fe80::1' cannot be put into DNS template '{cn}' of profile 'device': the name is an IPv6 "
                    "address, not a DNS name", .by = "san.dns" },
        { "audit: an IPv4 CN goes through without a DNS name of it", ENROLL, .audit = true, TOKEN("device"),
          .csr = { SUBJ(CN("10.0.0.7")) }, FLAGGED, .reason = "is an IPv4 address", .also = no_ip_dns },

        /* ---- enrollment: the happy path and the token's scope ---- */
        { "edge: a valid CSR is allowed", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-7")) }, ALLOW,
          .reason = "profile 'edge' allows enrollment of CN 'edge-7'", .by = "profile", .also = edge_issue },
        { "token pattern edge-* accepts edge-7", ENROLL, TOKEN("edge"), .pattern = "edge-*",
          .csr = { SUBJ(CN("edge-7")) }, ALLOW, .also = edge_issue },
        { "token pattern edge-* refuses other-1", ENROLL, TOKEN("edge"), .pattern = "edge-*",
          .csr = { SUBJ(CN("other-1")) }, DENY(HWID_E_FORBIDDEN),
          .reason = "CN 'other-1' does not match the token's name pattern 'edge-*'", .by = "token.name_pattern" },
        { "token pattern edge-* accepts EDGE-7: identities ignore case", ENROLL, TOKEN("edge"), .pattern = "edge-*",
          .csr = { SUBJ(CN("EDGE-7")) }, ALLOW },
        { "profile CN pattern edge-* accepts Edge-7 too", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("Edge-7")) },
          ALLOW },
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
          DENY(HWID_E_FORBIDDEN), .reason = "no profile accepts enrollment by certificates of profile 'edge'",
          .by = "est.enroll_by_certificate" },
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
        /* The list escaping uses too (common/escape.c): the two had drifted. */
        { "CN with a line separator (U+2028)", ENROLL, TOKEN("edge"), .csr = { SUBJ(CN("edge-\xe2\x80\xa8" "7")) },
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
        { "a DNS SAN that is an IPv4 address", ENROLL, TOKEN("lab"),
          .csr = { SUBJ(CN("x1")), SANS(DNS("127.0.0.1")) }, DENY(HWID_E_CSR_INVALID),
          .reason = "DNS SAN '127.0.0.1' is an IPv4 address (its last label is a number), not a DNS name",
          .by = "san.dns" },
        { "a DNS SAN that is an IPv6 address", ENROLL, TOKEN("lab"),
          .csr = { SUBJ(CN("x1")), SANS(DNS("::1")) }, DENY(HWID_E_CSR_INVALID),
          .reason = "DNS SAN '::1' is an IPv6 address, not a DNS name" },
        { "audit mode lifts no IP address as a DNS SAN", ENROLL, .audit = true, TOKEN("lab"),
          .csr = { SUBJ(CN("x1")), SANS(DNS("10.1.lab.example.org"), DNS("0x7f.1")) }, DENY(HWID_E_CSR_INVALID),
          .reason = "DNS SAN '0x7f.1' is an IPv4 address" },
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
};

/* ---------- beyond the table ---------- */

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
        /* Addresses are not DNS names: IPv6 (bracketed too), and every name
         * whose last label is a number (what inet_aton and URL parsers read
         * as IPv4); a number elsewhere is a label like any. */
        {
                static const char *const ips[] = { "127.0.0.1", "127.1", "2130706433", "0x7f.1", "a.0X1F", "a.0x",
                                                   "*.10", "::1", "[::1]", "fe80::1", "::ffff:1.2.3.4" };
                static const char *const names_ok[] = { "1.example.org", "123.example.org", "0x.example.org",
                                                        "1e100", "*.1.example.org", "a.b1", "a.0xg" };

                for (size_t i = 0; i < ELEMENTSOF(ips); i++)
                        if (!dns_name_problem(ips[i], strlen(ips[i]), &wild) ||
                            !strstr(dns_name_problem(ips[i], strlen(ips[i]), &wild), "address"))
                                fprintf(stderr, "'%s' passed for a DNS name\n", ips[i]), check_failures++;
                for (size_t i = 0; i < ELEMENTSOF(names_ok); i++)
                        if (dns_name_problem(names_ok[i], strlen(names_ok[i]), &wild))
                                fprintf(stderr, "'%s' refused as a DNS name\n", names_ok[i]), check_failures++;
        }
        CHECK(name_check("\xf0\x9f\x94\x91", 4, 64) == NAME_OK); /* a key emoji */
        CHECK(name_check("\xed\xa0\x80", 3, 64) == NAME_BAD_UTF8); /* a surrogate */
        CHECK(name_check("\xf4\x90\x80\x80", 4, 64) == NAME_BAD_UTF8); /* beyond U+10FFFF */
        CHECK(name_check("\xe2\x82", 2, 64) == NAME_BAD_UTF8); /* truncated */
        CHECK(name_check("a\xe2\x80\xa9", 4, 64) == NAME_FORMAT_CHAR); /* U+2029, as escaping sees it */
        CHECK(!cn_uri_safe("..", 2) && !cn_uri_safe("a b", 3) && cn_uri_safe("edge-7.x_y~z", 12));
        CHECK_STREQ(policy_rdn_canonical("cn"), "CN");
        CHECK_STREQ(policy_rdn_canonical("2.5.4.10"), "O");
        CHECK_STREQ(policy_rdn_canonical("1.2.3.4"), "1.2.3.4");
        CHECK(policy_rdn_canonical("bogus") == NULL && policy_rdn_canonical("1.") == NULL);
        CHECK(policy_rdn_canonical("12") == NULL);
}

int main(void) {
        _cleanup_(policy_freep) policy *strict = make_policy(false);
        _cleanup_(policy_freep) policy *audit = make_policy(true);

        for (size_t i = 0; i < ELEMENTSOF(rows); i++)
                run(&rows[i], strict, audit);
        limits(strict);
        globs();
        names();
        if (!check_failures)
                printf("test-policy-enroll: %zu rows and the rest passed\n", ELEMENTSOF(rows));
        return check_done("test-policy-enroll");
}
