/* Enrollment by a client certificate hwid issued (EST simpleenroll over
 * mutual TLS, est.enroll_by_certificate): which profile, and which name.
 * Pure: no I/O, no logging.  The holder's identity and profile are the
 * ones recorded with its certificate; the service never fills them from
 * the presented subject. */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "policy-internal.h"

#define RULE "est.enroll_by_certificate"

bool policy_cert_enroll_accepts(const policy_profile *prof, const char *cert_profile) {
        for (size_t i = 0; prof && cert_profile && prof->est_enroll_from && prof->est_enroll_from[i]; i++)
                if (strcmp(prof->est_enroll_from[i], cert_profile) == 0)
                        return true;
        return false;
}

const policy_profile *policy_cert_enroll_target(const policy *p, const char *cert_profile, size_t *ret_n) {
        const policy_profile *found = NULL;
        size_t n = 0;

        for (size_t i = 0; p && i < p->n_profiles; i++)
                if (policy_cert_enroll_accepts(p->profiles[i], cert_profile)) {
                        found = p->profiles[i];
                        n++;
                }
        if (ret_n)
                *ret_n = n;
        return n == 1 ? found : NULL;
}

/* The profile named by the request (an EST label), else the only one
 * that accepts certificates of the holder's profile. */
static int pick_target(check *c, const policy_requester *who, const char *whose) {
        const char *want = c->csr->requested_profile;
        size_t n = 0;

        if (want) {
                c->prof = policy_profile_find(c->p, want);
                if (!c->prof)
                        return check_hard(c, -HWID_E_FORBIDDEN, RULE, "there is no profile '%s' to enroll under",
                                          want);
                if (!policy_cert_enroll_accepts(c->prof, who->cert_profile))
                        return check_hard(c, -HWID_E_FORBIDDEN, RULE,
                                          "profile '%s' does not accept enrollment by certificates of profile '%s' "
                                          "(est.enroll_by_certificate.from_profiles), and %s is one",
                                          want, who->cert_profile, whose);
                return 0;
        }
        c->prof = policy_cert_enroll_target(c->p, who->cert_profile, &n);
        if (n == 0)
                return check_hard(c, -HWID_E_FORBIDDEN, RULE,
                                  "no profile accepts enrollment by certificates of profile '%s' (%s): enroll "
                                  "with a bootstrap token", who->cert_profile, whose);
        if (n > 1)
                return check_hard(c, -HWID_E_FORBIDDEN, RULE,
                                  "%zu profiles accept enrollment by certificates of profile '%s': name one "
                                  "with an EST label (/.well-known/est/<profile>/simpleenroll)", n,
                                  who->cert_profile);
        return 0;
}

/* The CN must be the profile's template with {cn} = the holder's identity. */
static int check_name(check *c, const policy_requester *who) {
        const policy_attr *cn = policy_csr_cn(c->csr);
        char want[256], q[QUOTE_BUF];
        size_t n;

        if (!c->prof->est_enroll_name ||
            template_expand(c->prof->est_enroll_name, who->identity, strlen(who->identity), want, sizeof(want),
                            &n) < 0)
                return check_hard(c, -HWID_E_FORBIDDEN, RULE ".name",
                                  "profile '%s' has no name to give '%s' (est.enroll_by_certificate.name)",
                                  c->prof->name, who->identity);
        if (!cn)
                return 0; /* profile_check() refuses it */
        if (policy_identity_equal(cn->value, cn->len, want))
                return 0;
        return check_hard(c, -HWID_E_FORBIDDEN, RULE ".name",
                          "the certificate of '%s' may enroll only as '%s' under profile '%s', not as '%s'",
                          who->identity, want, c->prof->name, name_quote(q, sizeof(q), cn->value, cn->len));
}

int enroll_by_certificate(check *c, const policy_requester *who) {
        char whose[QUOTE_BUF + 64];
        int r;

        if (!who->identity || !who->cert_profile)
                return check_hard(c, -HWID_E_UNAUTHENTICATED, "role",
                                  "enrollment needs a bootstrap token or a certificate this CA issued");
        snprintf(whose, sizeof(whose), "the certificate of '%s'", who->identity);
        if ((r = pick_target(c, who, whose)) < 0 || (r = check_name(c, who)) < 0)
                return r;
        if (c->prof->approval == APPROVAL_MANUAL)
                return check_hard(c, -HWID_E_FORBIDDEN, RULE,
                                  "profile '%s' waits for manual approval, which enrollment by certificate does "
                                  "not offer", c->prof->name);
        return 0;
}
