/* The two issuance checks: enrollment (with a token, an EK allowlist
 * entry or, enroll-cert.c, a certificate) and renewal over mutual TLS;
 * what a CSR may hold under a profile is profile.c's.  Pure: no I/O, no
 * logging. */
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "error.h"
#include "policy-internal.h"

/* After profile_check() went through: allowed, or allowed in audit-only
 * mode with the first would-be denial kept as the reason. */
static void finish(check *c, const char *what) {
        char q[QUOTE_BUF];
        const policy_attr *cn = policy_csr_cn(c->csr);

        if (c->soft_denied) {
                c->d->verdict = VERDICT_ALLOW;
                c->d->audit_only = true;
                c->d->error = 0;
                return;
        }
        decision_set(c->d, VERDICT_ALLOW, 0, "profile", "profile '%s' allows %s of CN '%s'%s%s", c->prof->name,
                     what, cn ? name_quote(q, sizeof(q), cn->value, cn->len) : "",
                     c->ungranted_note ? "; dropped: " : "", c->ungranted_note ? c->ungranted_note : "");
}

static void start(check *c, const policy *p, const policy_csr *csr, policy_issue *issue, policy_decision *ret) {
        memset(issue, 0, sizeof(*issue));
        memset(ret, 0, sizeof(*ret));
        *c = (check) { .p = p, .csr = csr, .issue = issue, .d = ret, .audit = p->audit_only };
}

static void end(check *c, int r, const char *what) {
        if (r < 0)
                memset(c->issue, 0, sizeof(*c->issue));
        else
                finish(c, what);
}

/* The profile the request is issued under: its own, unless it names
 * another one (never granted; in audit-only mode the named one is used,
 * as it would be without the rule). */
static int pick_profile(check *c, const char *bound, const char *whose, const char *rule) {
        const char *want = c->csr->requested_profile;
        char q[QUOTE_BUF];

        c->prof = policy_profile_find(c->p, bound);
        if (!c->prof)
                return check_hard(c, -HWID_E_FORBIDDEN, rule, "%s is bound to profile '%s', which does not exist",
                                  whose, bound ? bound : "(none)");
        if (!want || strcmp(want, bound) == 0)
                return 0;
        if (check_soft(c, rule, "%s is bound to profile '%s'; it cannot obtain profile '%s'", whose, bound,
                       name_quote(q, sizeof(q), want, strlen(want))) < 0)
                return -1;
        if (policy_profile_find(c->p, want))
                c->prof = policy_profile_find(c->p, want);
        return 0;
}

/* ---------- attestation ---------- */

/* A soft denial for want of attestation: -HWID_E_ATTESTATION (403
 * attestation_failed) when it is the one that stands. */
static int attestation_soft(check *c, const char *rule, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
static int attestation_soft(check *c, const char *rule, const char *fmt, ...) {
        bool first = !c->soft_denied;
        char reason[sizeof(c->d->reason)];
        va_list ap;
        int r;

        va_start(ap, fmt);
        vsnprintf(reason, sizeof(reason), fmt, ap);
        va_end(ap);
        r = check_soft(c, rule, "%s", reason);
        if (first)
                c->d->error = -HWID_E_ATTESTATION;
        return r;
}

static const char *hex_prefix(char *buf, size_t size, const char *hex) {
        snprintf(buf, size, "%.16s...", hex ? hex : "");
        return buf;
}

/* Enrollment: the key's attestation, required or recorded (always for a
 * TPM that enrolls by its EK: that is who it is). */
static int check_attestation_enroll(check *c, const policy_requester *who) {
        if (c->prof->attestation == ATTESTATION_REQUIRED && !c->csr->attestation)
                return attestation_soft(c, "attestation.required",
                                        "profile '%s' requires TPM attestation of the key, and the request carries "
                                        "none (a software key, or a device that did not attest: hwid join --attest)",
                                        c->prof->name);
        if (c->prof->attestation != ATTESTATION_NONE || who->role == ROLE_EK)
                c->issue->attestation = c->csr->attestation;
        return 0;
}

/* Renewal: a new key needs its own proof, and from the same TPM. */
static int check_attestation_renew(check *c, const policy_requester *who) {
        const policy_attestation *now = c->csr->attestation, *was = who->cert_attestation;
        bool same_key = c->csr->spki_sha256 && who->cert_spki_sha256 &&
                        strcasecmp(c->csr->spki_sha256, who->cert_spki_sha256) == 0;
        char a[24], b[24];

        if (c->prof->attestation == ATTESTATION_NONE)
                return 0;
        if (now && was && strcmp(now->ek_pub_sha256, was->ek_pub_sha256) != 0)
                return attestation_soft(c, "attestation.same_ek",
                                        "the key of '%s' is attested in another TPM (EK %s) than its certificate's "
                                        "(EK %s): a hardware identity does not move to another TPM",
                                        who->identity, hex_prefix(a, sizeof(a), now->ek_pub_sha256),
                                        hex_prefix(b, sizeof(b), was->ek_pub_sha256));
        if (c->prof->attestation == ATTESTATION_REQUIRED && !now && (!same_key || !was))
                return attestation_soft(c, "attestation.required",
                                        same_key ? "profile '%s' requires TPM attestation, and the certificate of "
                                                   "'%s' was issued without it: renew with attestation"
                                                 : "profile '%s' requires TPM attestation of a renewal's new key, "
                                                   "and the renewal of '%s' carries none",
                                        c->prof->name, who->identity);
        c->issue->attestation = now ? now : same_key ? was : NULL;
        return 0;
}

/* ---------- enrollment ---------- */

/* A TPM on the EK allowlist enrolls its own name only. */
static int check_ek_name(check *c, const policy_requester *who) {
        const policy_attr *cn = policy_csr_cn(c->csr);
        char q[QUOTE_BUF];

        if (!cn || policy_identity_equal(cn->value, cn->len, who->identity))
                return 0; /* no CN: profile_check refuses it */
        return check_soft(c, "ek.identity", "the EK allowlist lists this TPM as '%s'; it cannot enroll '%s'",
                          who->identity, name_quote(q, sizeof(q), cn->value, cn->len));
}

/* Who may enroll, and under which profile: a token's, or an EK's. */
static int enroll_scope(check *c, const policy_requester *who) {
        char whose[QUOTE_BUF + 64];
        int r;

        if (who->role == ROLE_EK && who->identity) {
                snprintf(whose, sizeof(whose), "the EK allowlist entry of '%s'", who->identity);
                r = pick_profile(c, who->ek_profile, whose, "ek.profile");
                return r < 0 ? r : check_ek_name(c, who);
        }
        if (policy_role_has_certificate(who->role))
                return enroll_by_certificate(c, who);
        if (who->role != ROLE_TOKEN)
                return check_hard(c, -HWID_E_UNAUTHENTICATED, "role", "enrollment needs a bootstrap token");
        snprintf(whose, sizeof(whose), "token '%s'", who->token_id ? who->token_id : "?");
        c->name_pattern = who->token_name_pattern;
        return pick_profile(c, who->token_profile, whose, "token.profile");
}

void policy_check_enroll(const policy *p, const policy_requester *who, const policy_csr *csr,
                         policy_issue *issue, policy_decision *ret) {
        check c;
        int r;

        start(&c, p, csr, issue, ret);
        r = enroll_scope(&c, who);
        if (r >= 0)
                r = profile_check(&c);
        if (r >= 0)
                r = check_attestation_enroll(&c, who);
        /* An EK allowlist entry is an admin's approval of that TPM under that name. */
        if (r >= 0)
                issue->manual_approval = c.prof->approval == APPROVAL_MANUAL && who->role != ROLE_EK;
        end(&c, r, "enrollment");
}

/* ---------- renewal ---------- */

static const char *utc(char *buf, size_t size, int64_t t) {
        time_t tt = (time_t) t;
        struct tm tm;

        if (!gmtime_r(&tt, &tm) || strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
                snprintf(buf, size, "@%lld", (long long) t);
        return buf;
}

int64_t policy_renewal_opens_at(const policy_profile *prof, int64_t not_before, int64_t not_after) {
        int64_t life = not_after > not_before ? not_after - not_before : 0;

        /* Rounded to the nearest second: a third of 30 days is 10 days, not a second less. */
        return not_after - (int64_t) ((double) life * prof->renew_window + 0.5);
}

/* Renewal opens in the last renew_window of the certificate's lifetime;
 * before that, the deny says when (retry_at) for the client to wait. */
static int check_window(check *c, const policy_requester *who, int64_t now) {
        int64_t opens = policy_renewal_opens_at(c->prof, who->cert_not_before, who->cert_not_after);
        char when[40];
        int r;

        if (now >= opens)
                return 0;
        r = check_soft(c, "renew.window",
                       "renewal of '%s' opens at %s: profile '%s' allows it only in the last %.0f%% of the "
                       "certificate's lifetime",
                       who->identity, utc(when, sizeof(when), opens), c->prof->name, c->prof->renew_window * 100.0);
        if (r < 0) {
                c->d->error = -HWID_E_TOO_EARLY;
                c->d->retry_at = opens;
        }
        return r;
}

static int check_rotation(check *c, const policy_requester *who) {
        const char *now_key = c->csr->spki_sha256, *old_key = who->cert_spki_sha256;

        if (!c->prof->rotate_key)
                return 0;
        if (!now_key || !old_key)
                return check_soft(c, "renew.rotate_key",
                                  "profile '%s' requires a new key on renewal, and the keys cannot be compared",
                                  c->prof->name);
        if (strcasecmp(now_key, old_key) != 0)
                return 0;
        return check_soft(c, "renew.rotate_key",
                          "profile '%s' requires a new key on renewal; the request reuses the current key",
                          c->prof->name);
}

void policy_check_renew(const policy *p, const policy_requester *who, const policy_csr *csr,
                        int64_t now, policy_issue *issue, policy_decision *ret) {
        char whose[QUOTE_BUF + 32];
        check c;
        int r;

        start(&c, p, csr, issue, ret);
        /* An operator's certificate renews like any other (its role is
         * its profile's, recorded again with the new certificate). */
        if (!policy_role_has_certificate(who->role) || !who->identity) {
                end(&c, check_hard(&c, -HWID_E_UNAUTHENTICATED, "role",
                                   "renewal needs mutual TLS with the current certificate"), NULL);
                return;
        }
        /* The service rejects expired certificates first; never renew one. */
        if (now >= who->cert_not_after) {
                end(&c, check_hard(&c, -HWID_E_EXPIRED, "renew.expired",
                                   "the certificate of '%s' has expired: bootstrap again with a new token",
                                   who->identity), NULL);
                return;
        }
        snprintf(whose, sizeof(whose), "the certificate of '%s'", who->identity);
        c.identity = who->identity;
        r = pick_profile(&c, who->cert_profile, whose, "renew.profile");
        if (r >= 0)
                r = profile_check(&c);
        if (r >= 0)
                r = check_window(&c, who, now);
        if (r >= 0)
                r = check_rotation(&c, who);
        if (r >= 0)
                r = check_attestation_renew(&c, who);
        /* Same identity: renewals are approved automatically. */
        end(&c, r, "renewal");
}
