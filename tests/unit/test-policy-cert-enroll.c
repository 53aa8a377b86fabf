/* policy/, enrollment by a client certificate hwid issued (EST
 * simpleenroll over mutual TLS, est.enroll_by_certificate): which profile
 * (the EST label, else the only one that accepts the holder's profile),
 * which name (the template with {cn} = the holder's recorded identity),
 * and that the target profile's own rules -- name pattern, attestation --
 * still hold.  Audit-only mode lifts none of these denials. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "error.h"
#include "policy-fixture.h"
#include "policy.h"

static char **one(const char *s) {
        char **v = calloc(2, sizeof(*v));

        v[0] = strdup(s);
        return v;
}

static policy_profile *accepting(const char *name, const char *from, const char *tmpl) {
        policy_profile *p = new_profile(name);

        p->est_enroll_from = one(from);
        p->est_enroll_name = strdup(tmpl);
        return p;
}

/* device and gw issue the certificates presented; op accepts device's,
 * att (attestation required) and alt both accept gw's, held (manual
 * approval) accepts lab's. */
static policy *make(bool audit_only) {
        policy *p = NULL;
        policy_profile *op_prof = accepting("op", "device", "{cn}-op"), *att = accepting("att", "gw", "{cn}-att"),
                       *held = accepting("held", "lab", "{cn}");

        op_prof->cn_pattern = strdup("dev-*-op");
        att->attestation = ATTESTATION_REQUIRED;
        held->approval = APPROVAL_MANUAL;
        CHECK(policy_new(&p) == 0);
        CHECK(policy_add_profile(p, new_profile("device")) == 0);
        CHECK(policy_add_profile(p, new_profile("gw")) == 0);
        CHECK(policy_add_profile(p, new_profile("lab")) == 0);
        CHECK(policy_add_profile(p, op_prof) == 0);
        CHECK(policy_add_profile(p, att) == 0);
        CHECK(policy_add_profile(p, accepting("alt", "gw", "{cn}-alt")) == 0);
        CHECK(policy_add_profile(p, held) == 0);
        policy_set_audit_only(p, audit_only);
        return p;
}

static void op_issue(const row *r, const policy_issue *iss) {
        EXPECT(r, iss->profile && strcmp(iss->profile->name, "op") == 0);
        EXPECT(r, !iss->manual_approval && !iss->attestation);
}

static const policy_attestation ATTESTED = { .ek_pub_sha256 = OLD_KEY, .ek_cert_sha256 = NEW_KEY,
                                             .ak_name = "000b" };

#define RULE "est.enroll_by_certificate"

static const row rows[] = {
        { "the template's name, no label", ENROLL, NODE("dev-1", "device"), .csr = { SUBJ(CN("dev-1-op")) }, ALLOW,
          .by = "profile", .also = op_issue },
        { "the template's name, the label of the profile", ENROLL, NODE("dev-1", "device"),
          .csr = { SUBJ(CN("dev-1-op")), .requested_profile = "op" }, ALLOW, .also = op_issue },
        { "the name in another case is the same identity", ENROLL, NODE("dev-1", "device"),
          .csr = { SUBJ(CN("DEV-1-OP")) }, ALLOW },
        { "another identity's name", ENROLL, NODE("dev-1", "device"), .csr = { SUBJ(CN("dev-2-op")) },
          DENY(HWID_E_FORBIDDEN), .reason = "may enroll only as 'dev-1-op' under profile 'op', not as 'dev-2-op'",
          .by = RULE ".name" },
        { "its own name, not the template's", ENROLL, NODE("dev-1", "device"), .csr = { SUBJ(CN("dev-1")) },
          DENY(HWID_E_FORBIDDEN), .by = RULE ".name" },
        { "a label whose profile does not list the holder's", ENROLL, NODE("dev-1", "device"),
          .csr = { SUBJ(CN("dev-1-alt")), .requested_profile = "alt" }, DENY(HWID_E_FORBIDDEN),
          .reason = "profile 'alt' does not accept enrollment by certificates of profile 'device'", .by = RULE },
        { "a label naming no profile", ENROLL, NODE("dev-1", "device"),
          .csr = { SUBJ(CN("dev-1-op")), .requested_profile = "ghost" }, DENY(HWID_E_FORBIDDEN),
          .reason = "no profile 'ghost'", .by = RULE },
        { "no profile lists the holder's", ENROLL, NODE("op-1", "op"), .csr = { SUBJ(CN("op-1-op")) },
          DENY(HWID_E_FORBIDDEN), .reason = "no profile accepts enrollment by certificates of profile 'op'",
          .by = RULE },
        { "two profiles list the holder's and no label says which", ENROLL, NODE("gw-1", "gw"),
          .csr = { SUBJ(CN("gw-1-alt")) }, DENY(HWID_E_FORBIDDEN), .reason = "2 profiles accept", .by = RULE },
        { "the label picks one of them", ENROLL, NODE("gw-1", "gw"),
          .csr = { SUBJ(CN("gw-1-alt")), .requested_profile = "alt" }, ALLOW },
        { "attestation required still holds", ENROLL, NODE("gw-1", "gw"),
          .csr = { SUBJ(CN("gw-1-att")), .requested_profile = "att" }, DENY(HWID_E_ATTESTATION),
          .by = "attestation.required" },
        { "attested, it goes through", ENROLL, NODE("gw-1", "gw"),
          .csr = { SUBJ(CN("gw-1-att")), .requested_profile = "att", .attestation = &ATTESTED }, ALLOW },
        { "the profile's CN pattern still holds", ENROLL, NODE("xyz", "device"), .csr = { SUBJ(CN("xyz-op")) },
          DENY(HWID_E_FORBIDDEN), .reason = "does not match the CN pattern 'dev-*-op'" },
        { "no manual approval for it", ENROLL, NODE("lab-1", "lab"), .csr = { SUBJ(CN("lab-1")) },
          DENY(HWID_E_FORBIDDEN), .reason = "waits for manual approval", .by = RULE },
        { "an operator's certificate is a holder like any", ENROLL, .role = ROLE_AUDITOR, .identity = "dev-9",
          .profile = "device", .csr = { SUBJ(CN("dev-9-op")) }, ALLOW },
        { "a certificate role without a recorded identity", ENROLL, .role = ROLE_NODE, .profile = "device",
          .csr = { SUBJ(CN("dev-1-op")) }, DENY(HWID_E_UNAUTHENTICATED) },
        { "audit-only: another identity's name is still refused", ENROLL, .audit = true, NODE("dev-1", "device"),
          .csr = { SUBJ(CN("dev-2-op")) }, DENY(HWID_E_FORBIDDEN), .by = RULE ".name" },
        { "audit-only: a profile not listed is still refused", ENROLL, .audit = true, NODE("dev-1", "device"),
          .csr = { SUBJ(CN("dev-1-alt")), .requested_profile = "alt" }, DENY(HWID_E_FORBIDDEN), .by = RULE },
        { "audit-only: the CN pattern is flagged, as for a token", ENROLL, .audit = true, NODE("xyz", "device"),
          .csr = { SUBJ(CN("xyz-op")) }, FLAGGED },
        { "a node may ask", AUTHZ, NODE("dev-1", "device"), .action = ACTION_ENROLL, ALLOW },
        { "anonymous may not", AUTHZ, .role = ROLE_ANONYMOUS, .action = ACTION_ENROLL,
          DENY(HWID_E_UNAUTHENTICATED) },
};

static void targets(const policy *p) {
        size_t n = 9;

        CHECK(policy_cert_enroll_target(p, "device", &n) == policy_profile_find(p, "op") && n == 1);
        CHECK(!policy_cert_enroll_target(p, "gw", &n) && n == 2);
        CHECK(!policy_cert_enroll_target(p, "op", &n) && n == 0);
        CHECK(!policy_cert_enroll_target(p, NULL, &n) && n == 0);
        CHECK(policy_cert_enroll_accepts(policy_profile_find(p, "att"), "gw"));
        CHECK(!policy_cert_enroll_accepts(policy_profile_find(p, "att"), "device"));
        CHECK(!policy_cert_enroll_accepts(policy_profile_find(p, "device"), "device"));
}

int main(void) {
        policy *strict = make(false), *audit = make(true);

        for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++)
                run(&rows[i], strict, audit);
        targets(strict);
        policy_free(strict);
        policy_free(audit);
        return check_done("test-policy-cert-enroll");
}
