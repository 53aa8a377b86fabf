/* policy/, TPM attestation: what a profile's `attestation: none |
 * optional | required` makes of a request's attestation fact, at
 * enrollment and at renewal (a new key needs its own proof, from the same
 * TPM); enrollment by a TPM on the EK allowlist (its profile, its name
 * only, no manual approval); audit-only mode; and who may ask for an
 * attestation challenge. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "error.h"
#include "policy-fixture.h"
#include "policy.h"

#define EK_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define EK_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static const policy_attestation in_a = { .ek_pub_sha256 = EK_A, .ek_cert_sha256 = EK_B, .ak_name = "000b00" };
static const policy_attestation in_b = { .ek_pub_sha256 = EK_B, .ek_cert_sha256 = EK_A, .ak_name = "000b01" };
static const policy_attr cn_dev1[] = { { "CN", "dev-1", 5 } };
static const policy_attr cn_dev2[] = { { "CN", "dev-2", 5 } };

static policy *make(bool audit_only) {
        static const struct {
                const char *name;
                policy_attestation_mode mode;
                bool manual;
        } profiles[] = {
                { "plain", ATTESTATION_NONE, false },
                { "opt", ATTESTATION_OPTIONAL, false },
                { "req", ATTESTATION_REQUIRED, false },
                { "req-manual", ATTESTATION_REQUIRED, true },
        };
        policy *p = NULL;

        CHECK(policy_new(&p) == 0);
        for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++) {
                policy_profile *prof = new_profile(profiles[i].name);
                prof->attestation = profiles[i].mode;
                prof->approval = profiles[i].manual ? APPROVAL_MANUAL : APPROVAL_AUTO;
                CHECK(policy_add_profile(p, prof) == 0);
        }
        policy_set_audit_only(p, audit_only);
        return p;
}

static policy_csr csr_of(const policy_attr *cn, const char *key, const policy_attestation *att) {
        return (policy_csr) { .subject = cn, .n_subject = 1, .key_alg = "EC", .curve = "P-256",
                              .spki_sha256 = key, .attestation = att };
}

static policy_requester token(const char *profile) {
        return (policy_requester) { .role = ROLE_TOKEN, .token_id = "tok001", .token_profile = profile };
}

static policy_requester node(const char *profile, const char *key, const policy_attestation *att) {
        return (policy_requester) { .role = ROLE_NODE, .identity = "dev-1", .cert_profile = profile,
                                    .cert_not_before = NB, .cert_not_after = NA, .cert_spki_sha256 = key,
                                    .cert_attestation = att };
}

/* Enrollment with a token under each mode. */
static void enroll_modes(policy *p) {
        policy_requester who;
        policy_csr csr;
        policy_issue iss;
        policy_decision d;

        who = token("req");
        csr = csr_of(cn_dev1, NEW_KEY, NULL);
        policy_check_enroll(p, &who, &csr, &iss, &d);
        CHECK(d.verdict == VERDICT_DENY && d.error == -HWID_E_ATTESTATION);
        CHECK_CONTAINS(d.reason, "profile 'req' requires TPM attestation of the key");
        CHECK_STREQ(d.decided_by, "attestation.required");
        csr.attestation = &in_a;
        policy_check_enroll(p, &who, &csr, &iss, &d);
        CHECK(d.verdict == VERDICT_ALLOW && iss.attestation == &in_a);
        /* optional: recorded when there is one, issued all the same without. */
        who = token("opt");
        policy_check_enroll(p, &who, &csr, &iss, &d);
        CHECK(d.verdict == VERDICT_ALLOW && iss.attestation == &in_a);
        csr.attestation = NULL;
        policy_check_enroll(p, &who, &csr, &iss, &d);
        CHECK(d.verdict == VERDICT_ALLOW && !iss.attestation);
        /* none: not recorded even when the request has one. */
        who = token("plain");
        csr.attestation = &in_a;
        policy_check_enroll(p, &who, &csr, &iss, &d);
        CHECK(d.verdict == VERDICT_ALLOW && !iss.attestation);
        /* Manual approval is kept for a token. */
        who = token("req-manual");
        policy_check_enroll(p, &who, &csr, &iss, &d);
        CHECK(d.verdict == VERDICT_ALLOW && iss.manual_approval && iss.attestation == &in_a);
}

/* Enrollment by a TPM on the EK allowlist. */
static void enroll_ek(policy *p) {
        policy_requester who = { .role = ROLE_EK, .identity = "DEV-1", .ek_profile = "req-manual" };
        policy_csr csr = csr_of(cn_dev1, NEW_KEY, &in_a);
        policy_issue iss;
        policy_decision d;

        policy_check_enroll(p, &who, &csr, &iss, &d);
        CHECK(d.verdict == VERDICT_ALLOW && !iss.manual_approval && iss.attestation == &in_a);
        CHECK(iss.profile && strcmp(iss.profile->name, "req-manual") == 0);
        /* Its name only. */
        csr = csr_of(cn_dev2, NEW_KEY, &in_a);
        policy_check_enroll(p, &who, &csr, &iss, &d);
        CHECK(d.verdict == VERDICT_DENY && d.error == -HWID_E_FORBIDDEN);
        CHECK_CONTAINS(d.reason, "lists this TPM as 'DEV-1'; it cannot enroll 'dev-2'");
        CHECK_STREQ(d.decided_by, "ek.identity");
        /* Its profile only. */
        csr = csr_of(cn_dev1, NEW_KEY, &in_a);
        csr.requested_profile = "plain";
        policy_check_enroll(p, &who, &csr, &iss, &d);
        CHECK(d.verdict == VERDICT_DENY);
        CHECK_CONTAINS(d.reason, "EK allowlist entry of 'DEV-1' is bound to profile 'req-manual'");
        /* Its profile gone from the configuration. */
        who.ek_profile = "gone";
        csr.requested_profile = NULL;
        policy_check_enroll(p, &who, &csr, &iss, &d);
        CHECK(d.verdict == VERDICT_DENY);
        CHECK_CONTAINS(d.reason, "'gone', which does not exist");
        /* Recorded under a profile without attestation too: it is who enrolled. */
        who.ek_profile = "plain";
        policy_check_enroll(p, &who, &csr, &iss, &d);
        CHECK(d.verdict == VERDICT_ALLOW && iss.attestation == &in_a);
        /* A role without a name is nobody. */
        who = (policy_requester) { .role = ROLE_EK, .ek_profile = "req" };
        policy_check_enroll(p, &who, &csr, &iss, &d);
        CHECK(d.verdict == VERDICT_DENY && d.error == -HWID_E_UNAUTHENTICATED);
}

static void renew_modes(policy *p) {
        policy_requester who;
        policy_csr csr;
        policy_issue iss;
        policy_decision d;
        int64_t now = IN_WINDOW;

        /* required, attested certificate, same key: no new proof needed, the old one carried over. */
        who = node("req", OLD_KEY, &in_a);
        csr = csr_of(cn_dev1, OLD_KEY, NULL);
        policy_check_renew(p, &who, &csr, now, &iss, &d);
        CHECK(d.verdict == VERDICT_ALLOW && iss.attestation == &in_a);
        /* A new key without proof: refused. */
        csr = csr_of(cn_dev1, NEW_KEY, NULL);
        policy_check_renew(p, &who, &csr, now, &iss, &d);
        CHECK(d.verdict == VERDICT_DENY && d.error == -HWID_E_ATTESTATION);
        CHECK_CONTAINS(d.reason, "requires TPM attestation of a renewal's new key");
        /* A new key attested in the same TPM: allowed, the new proof recorded. */
        policy_attestation same = in_a;
        same.ak_name = "000b99";
        csr.attestation = &same;
        policy_check_renew(p, &who, &csr, now, &iss, &d);
        CHECK(d.verdict == VERDICT_ALLOW && iss.attestation == &same);
        /* In another TPM: refused, under optional too. */
        csr.attestation = &in_b;
        policy_check_renew(p, &who, &csr, now, &iss, &d);
        CHECK(d.verdict == VERDICT_DENY && d.error == -HWID_E_ATTESTATION);
        CHECK_CONTAINS(d.reason, "attested in another TPM (EK bbbbbbbbbbbbbbbb...) than its certificate's "
                                 "(EK aaaaaaaaaaaaaaaa...)");
        CHECK_STREQ(d.decided_by, "attestation.same_ek");
        who = node("opt", OLD_KEY, &in_a);
        policy_check_renew(p, &who, &csr, now, &iss, &d);
        CHECK(d.verdict == VERDICT_DENY && d.error == -HWID_E_ATTESTATION);
        /* required, certificate issued without attestation: even the same key needs proof. */
        who = node("req", OLD_KEY, NULL);
        csr = csr_of(cn_dev1, OLD_KEY, NULL);
        policy_check_renew(p, &who, &csr, now, &iss, &d);
        CHECK(d.verdict == VERDICT_DENY && d.error == -HWID_E_ATTESTATION);
        CHECK_CONTAINS(d.reason, "was issued without it");
        csr.attestation = &in_b;
        policy_check_renew(p, &who, &csr, now, &iss, &d);
        CHECK(d.verdict == VERDICT_ALLOW && iss.attestation == &in_b);
        /* optional: a new key without proof is issued, unmarked. */
        who = node("opt", OLD_KEY, &in_a);
        csr = csr_of(cn_dev1, NEW_KEY, NULL);
        policy_check_renew(p, &who, &csr, now, &iss, &d);
        CHECK(d.verdict == VERDICT_ALLOW && !iss.attestation);
        /* none: nothing recorded, nothing compared. */
        who = node("plain", OLD_KEY, &in_a);
        csr = csr_of(cn_dev1, NEW_KEY, &in_b);
        policy_check_renew(p, &who, &csr, now, &iss, &d);
        CHECK(d.verdict == VERDICT_ALLOW && !iss.attestation);
}

/* Audit-only mode rolls the requirement out: allowed, flagged, nothing recorded. */
static void audit_only(policy *p) {
        policy_requester who = token("req");
        policy_csr csr = csr_of(cn_dev1, NEW_KEY, NULL);
        policy_issue iss;
        policy_decision d;

        policy_check_enroll(p, &who, &csr, &iss, &d);
        CHECK(d.verdict == VERDICT_ALLOW && d.audit_only && !iss.attestation);
        CHECK_CONTAINS(d.reason, "requires TPM attestation");
}

static void authorize(policy *p) {
        policy_requester who = { .role = ROLE_ANONYMOUS };
        policy_decision d;

        policy_authorize(p, &who, ACTION_ATTEST, NULL, &d);
        CHECK(d.verdict == VERDICT_DENY && d.error == -HWID_E_UNAUTHENTICATED);
        who = token("req");
        policy_authorize(p, &who, ACTION_ATTEST, NULL, &d);
        CHECK(d.verdict == VERDICT_ALLOW);
        who = (policy_requester) { .role = ROLE_EK, .identity = "dev-1", .ek_profile = "req" };
        policy_authorize(p, &who, ACTION_ATTEST, NULL, &d);
        CHECK(d.verdict == VERDICT_ALLOW);
        policy_authorize(p, &who, ACTION_ENROLL, NULL, &d);
        CHECK(d.verdict == VERDICT_ALLOW);
        CHECK_CONTAINS(d.reason, "EK allowlist as 'dev-1' may enroll");
        /* An EK is no node: it renews nothing, reads nothing, administers nothing. */
        policy_authorize(p, &who, ACTION_RENEW, "dev-1", &d);
        CHECK(d.verdict == VERDICT_DENY);
        policy_authorize(p, &who, ACTION_ADMIN, NULL, &d);
        CHECK(d.verdict == VERDICT_DENY);
        who = node("req", OLD_KEY, NULL);
        policy_authorize(p, &who, ACTION_ATTEST, NULL, &d);
        CHECK(d.verdict == VERDICT_ALLOW);
        CHECK_STREQ(policy_action_name(ACTION_ATTEST), "attest");
}

int main(void) {
        policy *strict = make(false), *audit = make(true);

        enroll_modes(strict);
        enroll_ek(strict);
        renew_modes(strict);
        audit_only(audit);
        authorize(strict);
        policy_free(strict);
        policy_free(audit);
        return check_done("test-policy-attest");
}
