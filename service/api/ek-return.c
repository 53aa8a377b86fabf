/* Token-less enrollment by TPM attestation: the EK allowlist, and an
 * identity coming back by itself (ek-return.h). */
#include <stdio.h>
#include <string.h>

#include "admin-json.h"
#include "error.h"
#include "ek-return.h"

/* What the decision needs to know of the TPM and of the name. */
typedef struct returning {
        const char *ek_pub_hex;
        const char *name;
        bool listed;            /* a->ek is the TPM's allowlist entry */
        bool has_last;
        store_cert last;        /* the name's newest certificate */
} returning;

static void returning_clear(returning *t) {
        store_cert_clear(&t->last);
}

/* keyCompromise (1) and privilegeWithdrawn (9, "do not return") keep an
 * identity out until a person brings a token, whatever the profile and
 * the EK allowlist say. */
static bool do_not_return(const store_cert *c) {
        return c->status == CERT_REVOKED && (c->revocation_reason == 1 || c->revocation_reason == 9);
}

/* Whether c was issued after best.  The store's times are seconds, and
 * certificates of one second list in serial order: of those, the live
 * one, else one revoked "do not return", else the one revoked last. */
static bool newer(const store_cert *c, const store_cert *best) {
        if (c->created_at != best->created_at)
                return c->created_at > best->created_at;
        if ((c->status == CERT_VALID) != (best->status == CERT_VALID))
                return c->status == CERT_VALID;
        if (do_not_return(c) != do_not_return(best))
                return do_not_return(c);
        return c->revoked_at >= best->revoked_at;
}

/* The name's newest certificate, if it ever had one. */
static int last_certificate(ca_service *ca, returning *t) {
        store_cert *all = NULL;
        size_t n = 0, last = 0;
        int r = store_cert_list(ca->store, t->name, &all, &n);

        if (r < 0)
                return r;
        for (size_t i = 1; i < n; i++)
                if (newer(&all[i], &all[last]))
                        last = i;
        if (n > 0) {
                t->last = all[last];
                all[last] = (store_cert) { 0 };
                t->has_last = true;
        }
        store_cert_list_free(all, n);
        return 0;
}

static void become(ca_auth *a) {
        a->who = (policy_requester) { .role = ROLE_EK, .identity = a->ek.identity, .ek_profile = a->ek.profile };
        snprintf(a->actor, sizeof(a->actor), "ek:%s", a->ek.identity);
}

static int not_listed(const returning *t) {
        return hwid_fail(HWID_E_UNAUTHENTICATED, "this TPM's EK (sha256:%s) is not on the CA's EK allowlist, and the "
                         "request carries no bootstrap token", t->ek_pub_hex);
}

/* The TPM's entry lists the name asked for. */
static bool entry_names(const returning *t, const ca_auth *a) {
        return t->listed && policy_identity_equal(t->name, strlen(t->name), a->ek.identity);
}

static int kept_out(const returning *t) {
        return hwid_fail(HWID_E_FORBIDDEN, "the last certificate of %s (%s) was revoked for %s: it comes back only "
                         "with a bootstrap token", t->name, t->last.serial,
                         t->last.revocation_reason == 1 ? "keyCompromise" : "privilegeWithdrawn (do not return)");
}

/* Which rule lets the TPM bring the name back under mode: its allowlist
 * entry, or (last-certificate) the EK that attested the last certificate;
 * "" if none does. */
static const char *rule_of(const returning *t, const ca_auth *a, policy_reenroll_mode mode) {
        if (mode != REENROLL_OFF && entry_names(t, a))
                return "ek-allowlist";
        if (mode == REENROLL_LAST_CERTIFICATE && store_attested(&t->last.attestation) &&
            strcmp(t->last.attestation.ek_pub_sha256, t->ek_pub_hex) == 0)
                return "last-certificate";
        return "";
}

/* A TPM that comes back by the last certificate alone (no entry for the
 * name) enrolls that certificate's identity under its profile. */
static int adopt_last(const returning *t, ca_auth *a) {
        store_ek_clear(&a->ek);
        a->ek.identity = strdup(t->last.identity);
        a->ek.profile = strdup(t->last.profile);
        if (!a->ek.identity || !a->ek.profile)
                return hwid_fail(HWID_E_NOMEM, NULL);
        snprintf(a->ek.ek_pub_sha256, sizeof(a->ek.ek_pub_sha256), "%s", t->ek_pub_hex);
        return 0;
}

/* What became of the last certificate, for the audit record. */
static const char *last_fate(const returning *t, bool live, char *out, size_t size) {
        if (live)
                return "live, superseding the device's";
        if (t->last.status != CERT_REVOKED)
                return "expired";
        snprintf(out, size, "revoked (%s)", revocation_reason_name(t->last.revocation_reason));
        return out;
}

/* live: the last certificate is still valid (this device's was
 * superseded by it): the new one replaces it. */
static int come_back(const returning *t, ca_auth *a, const char *rule, bool live) {
        int r = strcmp(rule, "last-certificate") == 0 && !entry_names(t, a) ? adopt_last(t, a) : 0;
        char fate[64];

        if (r < 0)
                return r;
        become(a);
        a->reenroll_replace = live;
        snprintf(a->reenroll, sizeof(a->reenroll), "re-enrollment by TPM attestation without a token: rule %s, EK "
                 "sha256:%s, last certificate %s (profile %s) %s", rule, t->ek_pub_hex, t->last.serial,
                 t->last.profile, last_fate(t, live, fate, sizeof(fate)));
        return 0;
}

/* The name had a certificate, no "do not return", and no rule brings it
 * back. */
static int stays_out(const returning *t, ca_auth *a, policy_reenroll_mode mode, bool live) {
        bool revoked = t->last.status == CERT_REVOKED;

        if (live || (t->listed && !entry_names(t, a))) {
                /* Not a return: its enrollment as before (409 or its
                 * replay; policy refuses a TPM listed for another name). */
                if (!t->listed)
                        return not_listed(t);
                become(a);
                return 0;
        }
        if (mode == REENROLL_OFF && revoked)
                return not_listed(t);
        if (mode == REENROLL_OFF)
                return hwid_fail(HWID_E_FORBIDDEN, "the certificate of %s expired, and its profile %s does not let it "
                                 "come back by TPM attestation (reenroll_by_attestation: off): it needs a bootstrap "
                                 "token", t->name, t->last.profile);
        return hwid_fail(HWID_E_UNAUTHENTICATED, "this TPM (EK sha256:%s) is not on the EK allowlist for %s%s, and "
                         "the request carries no bootstrap token", t->ek_pub_hex, t->name,
                         mode == REENROLL_LAST_CERTIFICATE ? " nor the TPM of its last certificate" : "");
}

static int decide(ca_service *ca, const returning *t, int64_t now, ca_auth *a) {
        const policy_profile *p;
        policy_reenroll_mode mode;
        const char *rule;
        bool live;

        if (!t->has_last) { /* a first enrollment: the allowlist alone */
                if (!t->listed)
                        return not_listed(t);
                become(a);
                return 0;
        }
        if (do_not_return(&t->last))
                return kept_out(t);
        p = policy_profile_find(ca->cfg->policy, t->last.profile);
        mode = p ? p->reenroll_by_attestation : REENROLL_OFF;
        live = t->last.status == CERT_VALID && t->last.not_after > now;
        /* After any other revocation (an admin's act) the name's allowlist
         * entry brings it back, as it always could, whatever the profile
         * says; and its profile's rule as after an expiry. */
        if (t->last.status == CERT_REVOKED && mode == REENROLL_OFF)
                rule = rule_of(t, a, REENROLL_ALLOWLIST);
        else
                rule = rule_of(t, a, mode);
        return rule[0] ? come_back(t, a, rule, live) : stays_out(t, a, mode, live);
}

int ca_auth_returning(ca_service *ca, const char *ek_cert_hex, const char *ek_pub_hex, const char *name,
                      int64_t now, ca_auth *a) {
        returning t = { .ek_pub_hex = ek_pub_hex, .name = name };
        int r = store_ek_find(ca->store, ek_cert_hex, ek_pub_hex, &a->ek);

        if (r < 0 && r != -HWID_E_NOT_FOUND)
                return r;
        t.listed = r >= 0;
        if (!t.name && !t.listed)
                return not_listed(&t);
        if (!t.name)
                t.name = a->ek.identity;
        r = last_certificate(ca, &t);
        if (r >= 0)
                r = decide(ca, &t, now, a);
        returning_clear(&t);
        return r;
}
