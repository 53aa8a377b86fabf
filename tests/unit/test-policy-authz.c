/* policy/, renewal, audit-only mode and authorization: table-driven.
 * Each row is a profile (through the token or the certificate that names
 * it), a requester, a CSR or an API action, and the decision expected:
 * verdict, error, audit-only flag and a piece of the reason.  Beyond the
 * table: what an admin and an anonymous client may do, public metrics and
 * the policy object.  Enrollment is in test-policy-enroll.c. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "error.h"
#include "policy-fixture.h"
#include "policy.h"

/* ---------- checks on what would be issued ---------- */

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

static const row rows[] = {
        /* ---- renewal ---- */
        { "renewal inside the window with a new key", RENEW, NODE("edge-7", "edge"), .csr = { SUBJ(CN("edge-7")) },
          ALLOW, .reason = "renewal of CN 'edge-7'", .also = renewal_auto },
        { "an admin's certificate renews like a node's", RENEW, .role = ROLE_ADMIN, .identity = "edge-7",
          .profile = "edge", .csr = { SUBJ(CN("edge-7")) }, ALLOW, .reason = "renewal of CN 'edge-7'" },
        { "renewal spelling the identity in upper case is the same identity", RENEW, NODE("edge-7", "edge"),
          .csr = { SUBJ(CN("Edge-7")) }, ALLOW },
        { "renewal of another identity", RENEW, NODE("edge-7", "edge"), .csr = { SUBJ(CN("edge-8")) },
          DENY(HWID_E_FORBIDDEN), .reason = "node 'edge-7' may not renew identity 'edge-8'", .by = "renew.identity" },
        { "renewal before the window", RENEW, NODE("edge-7", "edge"), .now = NB + 10 * DAY,
          .csr = { SUBJ(CN("edge-7")) }, DENY(HWID_E_TOO_EARLY), .retry_at = NB + 20 * DAY,
          .reason = "renewal of 'edge-7' opens at 2023-12-04T22:13:20Z", .by = "renew.window" },
        { "renewal right when the window opens", RENEW, NODE("edge-7", "edge"), .now = NB + 20 * DAY,
          .csr = { SUBJ(CN("edge-7")) }, ALLOW },
        { "renewal a second before the window", RENEW, NODE("edge-7", "edge"), .now = NB + 20 * DAY - 1,
          .csr = { SUBJ(CN("edge-7")) }, DENY(HWID_E_TOO_EARLY), .retry_at = NB + 20 * DAY, .reason = "last 33%" },
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
        { "identities ignore ASCII case: EDGE-7 is edge-7", AUTHZ, NODE("edge-7", "edge"),
          .action = ACTION_READ_IDENTITY, .target = "EDGE-7", ALLOW, .by = "node" },
        { "case folding is ASCII only, and a longer name is another", AUTHZ, NODE("edge-7", "edge"),
          .action = ACTION_RENEW, .target = "EDGE-7 ", DENY(HWID_E_FORBIDDEN), .reason = "may not act on identity" },
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
        /* By its certificate: whether a profile accepts it is policy_check_enroll()'s. */
        { "node asks to enroll by its certificate", AUTHZ, NODE("edge-7", "edge"), .action = ACTION_ENROLL,
          ALLOW, .reason = "node 'edge-7' may ask to enroll by its certificate" },
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
        { "anonymous reads metrics", AUTHZ, .role = ROLE_ANONYMOUS, .action = ACTION_METRICS,
          DENY(HWID_E_UNAUTHENTICATED),
          .reason = "'metrics' needs mutual TLS with the certificate of an operator (admin role)" },
        { "anonymous administers", AUTHZ, .role = ROLE_ANONYMOUS, .action = ACTION_ADMIN, DENY(HWID_E_UNAUTHENTICATED),
          .reason = "admin role" },
        { "token holder administers", AUTHZ, TOKEN("edge"), .action = ACTION_ADMIN, DENY(HWID_E_UNAUTHENTICATED),
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
          .action = ACTION_ADMIN, DENY(HWID_E_UNAUTHENTICATED) },
        { "audit: a node still cannot administer", AUTHZ, .audit = true, NODE("edge-7", "edge"),
          .action = ACTION_ADMIN, DENY(HWID_E_FORBIDDEN) },
        { "audit: anonymous still cannot renew", AUTHZ, .audit = true, .role = ROLE_ANONYMOUS, .action = ACTION_RENEW,
          .target = "edge-7", DENY(HWID_E_UNAUTHENTICATED) },
        { "audit: anonymous still cannot read metrics", AUTHZ, .audit = true, .role = ROLE_ANONYMOUS,
          .action = ACTION_METRICS, DENY(HWID_E_UNAUTHENTICATED) },
        { "audit: anonymous still cannot enroll", AUTHZ, .audit = true, .role = ROLE_ANONYMOUS,
          .action = ACTION_ENROLL, DENY(HWID_E_UNAUTHENTICATED) },
};

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

/* A certificate's role is its profile's; without one, fixed_o holding the
 * admin group makes admins (how files before roles said it). */
static void certificate_roles(policy *p) {
        _cleanup_(policy_profile_freep) policy_profile *own = profile_edge(); /* fixed_o: edge-nodes */
        policy_role r = ROLE_ANONYMOUS;

        CHECK(policy_profile_role(p, own) == ROLE_NODE);
        CHECK(policy_set_admin_group(p, "edge-nodes") == 0);
        CHECK(policy_profile_role(p, own) == ROLE_ADMIN);
        own->role = ROLE_NODE;
        own->role_given = true;
        CHECK(policy_profile_role(p, own) == ROLE_NODE);
        own->fixed_o[0][0] = 'X';
        own->role = ROLE_ADMIN;
        CHECK(policy_profile_role(p, own) == ROLE_ADMIN);
        CHECK(policy_set_admin_group(p, NULL) == 0);
        CHECK_STREQ(policy_cert_role_name(ROLE_NODE), "node");
        CHECK_STREQ(policy_cert_role_name(ROLE_ADMIN), "admin");
        CHECK(policy_cert_role_name(ROLE_TOKEN) == NULL && policy_cert_role_name(ROLE_ANONYMOUS) == NULL);
        CHECK(policy_cert_role_parse("admin", &r) == 0 && r == ROLE_ADMIN);
        CHECK(policy_cert_role_parse("node", &r) == 0 && r == ROLE_NODE);
        CHECK(policy_cert_role_parse("Admin", &r) == -HWID_E_INVALID && r == ROLE_NODE);
        CHECK(policy_cert_role_parse("token", &r) == -HWID_E_INVALID);
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
        certificate_roles(p);
        policy_set_audit_only(p, true);
        CHECK(policy_audit_only(p));
}

/* One rule for when renewal opens, which the renewal check denies by
 * (retry_at) and GET /v1/identities reports (renew_after): to the nearest
 * second, so 0.3333 of 30 days is 863913.6 s -> 863914 s. */
static void renewal_moment(policy *p) {
        _cleanup_(policy_profile_freep) policy_profile *prof = new_profile("w");
        policy_requester who = { .role = ROLE_NODE, .identity = "edge-7", .cert_profile = "edge",
                                 .cert_not_before = NB, .cert_not_after = NA, .cert_spki_sha256 = OLD_KEY };
        policy_attr cn = { "CN", "edge-7", 6 };
        policy_csr csr = { .subject = &cn, .n_subject = 1, .key_alg = "EC", .curve = "P-256", .spki_sha256 = NEW_KEY };
        int64_t opens = policy_renewal_opens_at(policy_profile_find(p, "edge"), NB, NA);
        policy_issue iss;
        policy_decision d;

        CHECK(opens == NB + 20 * DAY);
        prof->renew_window = 0.3333;
        CHECK(policy_renewal_opens_at(prof, NB, NA) == NA - 863914);
        prof->renew_window = 1.0;
        CHECK(policy_renewal_opens_at(prof, NB, NA) == NB);
        CHECK(policy_renewal_opens_at(prof, NA, NB) == NB); /* no lifetime: at the end */
        policy_check_renew(p, &who, &csr, opens - 1, &iss, &d);
        CHECK(d.verdict == VERDICT_DENY && d.error == -HWID_E_TOO_EARLY && d.retry_at == opens);
        policy_check_renew(p, &who, &csr, opens, &iss, &d);
        CHECK(d.verdict == VERDICT_ALLOW && d.retry_at == 0);
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
        the_object();
        renewal_moment(strict);
        if (!check_failures)
                printf("test-policy-authz: %zu rows and the rest passed\n", ELEMENTSOF(rows));
        return check_done("test-policy-authz");
}
