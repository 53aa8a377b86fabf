/* A CSR against a profile: subject, SANs, key and requested extensions;
 * and what goes into the certificate, which only ever comes from the
 * profile (names the profile allows, its key usage and EKU, never CA).
 *
 * Two kinds of "no": check_soft() for the rules of a profile or a scope
 * (audit-only mode lets them through, flagged), check_hard() for what is
 * malformed or never issued whatever the mode. */
#include <string.h>
#include <strings.h>

#include "error.h"
#include "policy-internal.h"

#define URI_MAX 1024

/* ---------- subject ---------- */

static bool fixed_type(const policy_profile *prof, const char *type) {
        return (prof->fixed_o && prof->fixed_o[0] && rdn_is(type, "O")) ||
               (prof->fixed_ou && prof->fixed_ou[0] && rdn_is(type, "OU"));
}

/* CN is always allowed (and required); NULL allowed_rdns means CN only. */
static bool rdn_allowed(const policy_profile *prof, const char *type) {
        const char *canon = policy_rdn_canonical(type);

        if (!canon)
                return false;
        if (strcmp(canon, "CN") == 0)
                return true;
        for (size_t i = 0; prof->allowed_rdns && prof->allowed_rdns[i]; i++) {
                const char *a = policy_rdn_canonical(prof->allowed_rdns[i]);
                if (a && strcmp(a, canon) == 0)
                        return true;
        }
        return false;
}

static bool is_letters2(const policy_attr *a) {
        return a->len == 2 && ((a->value[0] | 0x20) >= 'a' && (a->value[0] | 0x20) <= 'z') &&
               ((a->value[1] | 0x20) >= 'a' && (a->value[1] | 0x20) <= 'z');
}

static bool type_printable(const char *s) {
        return ascii_printable(s, strlen(s));
}

/* Every value must be a printable name; exactly one CN. */
static int check_values(check *c, const policy_attr **ret_cn) {
        const policy_csr *csr = c->csr;
        const policy_attr *cn = NULL;
        char q[QUOTE_BUF];

        if (csr->n_subject > ELEMENTSOF(c->issue->subject))
                return check_hard(c, -HWID_E_CSR_INVALID, "subject", "the subject has %zu attributes (at most %zu)",
                                  csr->n_subject, ELEMENTSOF(c->issue->subject));
        for (size_t i = 0; i < csr->n_subject; i++) {
                const policy_attr *a = &csr->subject[i];
                const char *type = a->type;
                name_fault f = name_check(a->value, a->len, POLICY_NAME_MAX);

                if (!type || !type[0] || !type_printable(type))
                        return check_hard(c, -HWID_E_CSR_INVALID, "subject", "subject attribute %zu has no usable type",
                                          i + 1);
                if (f != NAME_OK)
                        return check_hard(c, -HWID_E_CSR_INVALID, "subject", "%s '%s' %s", type,
                                          name_quote(q, sizeof(q), a->value, a->len), name_fault_str(f));
                if (rdn_is(a->type, "C") && !is_letters2(a))
                        return check_hard(c, -HWID_E_CSR_INVALID, "subject", "C '%s' is not a two-letter country code",
                                          name_quote(q, sizeof(q), a->value, a->len));
                if (!rdn_is(a->type, "CN"))
                        continue;
                if (cn)
                        return check_hard(c, -HWID_E_CSR_INVALID, "subject.cn",
                                          "the subject has more than one CN ('%s' and another); exactly one is allowed",
                                          name_quote(q, sizeof(q), cn->value, cn->len));
                cn = a;
        }
        if (!cn)
                return check_hard(c, -HWID_E_CSR_INVALID, "subject.cn", "the subject has no CN");
        *ret_cn = cn;
        return 0;
}

static bool cn_equals(const policy_attr *cn, const char *s) {
        return strlen(s) == cn->len && memcmp(cn->value, s, cn->len) == 0;
}

/* An identity pattern: a glob, ASCII case ignored as identities are. */
static bool cn_matches(const char *pattern, const policy_attr *cn) {
        return glob_match_ex(pattern, NULL, 0, cn->value, cn->len, GLOB_NOCASE);
}

/* Who the CN may be: the node itself (renewal), the token's pattern, the
 * profile's pattern -- compared as identities are, without ASCII case. */
static int check_cn(check *c, const policy_attr *cn) {
        char q[QUOTE_BUF];

        name_quote(q, sizeof(q), cn->value, cn->len);
        if (c->identity && !policy_identity_equal(cn->value, cn->len, c->identity) &&
            check_soft(c, "renew.identity", "node '%s' may not renew identity '%s'", c->identity, q) < 0)
                return -1;
        if (c->name_pattern && !cn_matches(c->name_pattern, cn) &&
            check_soft(c, "token.name_pattern", "CN '%s' does not match the token's name pattern '%s'", q,
                       c->name_pattern) < 0)
                return -1;
        if (c->prof->cn_pattern && !cn_matches(c->prof->cn_pattern, cn) &&
            check_soft(c, "subject.cn_pattern", "CN '%s' does not match the CN pattern '%s' of profile '%s'", q,
                       c->prof->cn_pattern, c->prof->name) < 0)
                return -1;
        return 0;
}

static int check_rdns(check *c) {
        const char *admin = c->p->admin_group;
        char q[QUOTE_BUF];

        for (size_t i = 0; i < c->csr->n_subject; i++) {
                const policy_attr *a = &c->csr->subject[i];

                if (fixed_type(c->prof, a->type))
                        continue; /* replaced by the profile's values */
                if (admin && rdn_is(a->type, "O") && cn_equals(a, admin))
                        return check_hard(c, -HWID_E_FORBIDDEN, "subject.admin_group",
                                          "O '%s' is the admin group; only a profile that fixes O can grant it", admin);
                if (!rdn_allowed(c->prof, a->type) &&
                    check_soft(c, "subject.rdns", "subject attribute %s ('%s') is not allowed by profile '%s'",
                               a->type, name_quote(q, sizeof(q), a->value, a->len),
                               c->prof->name) < 0)
                        return -1;
        }
        return 0;
}

static int push_attr(check *c, const char *type, const char *value, size_t len) {
        policy_issue *iss = c->issue;

        if (iss->n_subject >= ELEMENTSOF(iss->subject))
                return check_hard(c, -HWID_E_CSR_INVALID, "subject", "the subject would have more than %zu attributes",
                                  ELEMENTSOF(iss->subject));
        iss->subject[iss->n_subject++] = (policy_attr) { type, value, len };
        return 0;
}

static int push_fixed(check *c, const char *type, char **values) {
        for (size_t i = 0; values && values[i]; i++)
                if (push_attr(c, type, values[i], strlen(values[i])) < 0)
                        return -1;
        return 0;
}

/* The CSR's other attributes in their order (the profile's O/OU replace
 * the CSR's), then the profile's O and OU values, then the CN. */
static int build_subject(check *c, const policy_attr *cn) {
        for (size_t i = 0; i < c->csr->n_subject; i++) {
                const policy_attr *a = &c->csr->subject[i];
                const char *canon = policy_rdn_canonical(a->type);

                if (a == cn || fixed_type(c->prof, a->type))
                        continue;
                if (push_attr(c, canon ? canon : a->type, a->value, a->len) < 0)
                        return -1;
        }
        if (push_fixed(c, "O", c->prof->fixed_o) < 0 || push_fixed(c, "OU", c->prof->fixed_ou) < 0)
                return -1;
        return push_attr(c, "CN", cn->value, cn->len);
}

static int check_subject(check *c, const policy_attr **ret_cn) {
        const policy_attr *cn = NULL;

        if (check_values(c, &cn) < 0 || !cn || check_cn(c, cn) < 0 || check_rdns(c) < 0 || build_subject(c, cn) < 0)
                return -1;
        *ret_cn = cn;
        return 0;
}

/* ---------- SANs ---------- */

static int dns_rule(check *c, const policy_san *s, const policy_attr *cn) {
        const policy_profile *prof = c->prof;
        bool wildcard = false;
        const char *why = dns_name_problem(s->value, s->len, &wildcard);
        char q[QUOTE_BUF];

        name_quote(q, sizeof(q), s->value, s->len);
        if (why)
                return check_hard(c, -HWID_E_CSR_INVALID, "san.dns", "DNS SAN '%s' %s", q, why);
        for (size_t i = 0; prof->dns_patterns && prof->dns_patterns[i]; i++)
                if (glob_match_ex(prof->dns_patterns[i], cn->value, cn->len, s->value, s->len,
                                  GLOB_NOCASE | GLOB_STAR_LITERAL))
                        return 0;
        if (wildcard)
                return check_soft(c, "san.dns", "DNS SAN '%s' is a wildcard; no DNS pattern of profile '%s' allows '*'",
                                  q, prof->name);
        return check_soft(c, "san.dns", "DNS SAN '%s' does not match any DNS pattern of profile '%s'", q, prof->name);
}

static int ip_rule(check *c, const policy_san *s) {
        char ip[64];

        if (s->ip_len != 4 && s->ip_len != 16)
                return check_hard(c, -HWID_E_CSR_INVALID, "san.ip", "an IP SAN has %d bytes (4 or 16 expected)",
                                  s->ip_len);
        for (size_t i = 0; i < c->prof->n_ip_ranges; i++)
                if (cidr_contains(&c->prof->ip_ranges[i], s->ip, s->ip_len))
                        return 0;
        return check_soft(c, "san.ip", "IP SAN %s is outside the IP ranges of profile '%s'",
                          ip_format(ip, sizeof(ip), s->ip, s->ip_len), c->prof->name);
}

static bool uri_template_matches(const char *tmpl, const policy_attr *cn, const policy_san *s) {
        char buf[URI_MAX + 1];
        size_t n;

        if (template_has_cn(tmpl) && !cn_uri_safe(cn->value, cn->len))
                return false;
        return template_expand(tmpl, cn->value, cn->len, buf, sizeof(buf), &n) == 0 && n == s->len &&
               memcmp(buf, s->value, n) == 0;
}

static int text_san_valid(check *c, const policy_san *s, const char *kind, const char *rule) {
        char q[QUOTE_BUF];

        name_quote(q, sizeof(q), s->value, s->len);
        if (!s->value || s->len == 0)
                return check_hard(c, -HWID_E_CSR_INVALID, rule, "%s SAN is empty", kind);
        if (memchr(s->value, '\0', s->len))
                return check_hard(c, -HWID_E_CSR_INVALID, rule, "%s SAN '%s' contains a NUL byte", kind, q);
        if (s->len > URI_MAX || !ascii_printable(s->value, s->len))
                return check_hard(c, -HWID_E_CSR_INVALID, rule,
                                  "%s SAN '%s' is not printable ASCII of at most %d bytes", kind, q, URI_MAX);
        return 0;
}

static int uri_rule(check *c, const policy_san *s, const policy_attr *cn) {
        char q[QUOTE_BUF];

        if (text_san_valid(c, s, "URI", "san.uri") < 0)
                return -1;
        for (size_t i = 0; c->prof->uri_templates && c->prof->uri_templates[i]; i++)
                if (uri_template_matches(c->prof->uri_templates[i], cn, s))
                        return 0;
        return check_soft(c, "san.uri", "URI SAN '%s' does not match any URI template of profile '%s'",
                          name_quote(q, sizeof(q), s->value, s->len), c->prof->name);
}

static bool san_equal(const policy_san *a, const policy_san *b) {
        if (a->type != b->type)
                return false;
        if (a->type == SAN_IP)
                return a->ip_len == b->ip_len && memcmp(a->ip, b->ip, (size_t) a->ip_len) == 0;
        return a->len == b->len && memcmp(a->value, b->value, a->len) == 0;
}

static int push_san(check *c, const policy_san *s) {
        policy_issue *iss = c->issue;

        for (size_t i = 0; i < iss->n_sans; i++)
                if (san_equal(&iss->sans[i], s))
                        return 0;
        if (iss->n_sans >= ELEMENTSOF(iss->sans))
                return check_hard(c, -HWID_E_CSR_INVALID, "san", "the certificate would have more than %zu SANs",
                                  ELEMENTSOF(iss->sans));
        iss->sans[iss->n_sans++] = *s;
        return 0;
}

/* One requested SAN: allowed (kept), refused, or — in audit-only mode —
 * kept although refused.  Types hwid cannot write are never kept. */
static int check_san(check *c, const policy_san *s, const policy_attr *cn) {
        char q[QUOTE_BUF];
        int r;

        switch (s->type) {
        case SAN_DNS: r = dns_rule(c, s, cn); break;
        case SAN_IP: r = ip_rule(c, s); break;
        case SAN_URI: r = uri_rule(c, s, cn); break;
        case SAN_EMAIL:
                if (text_san_valid(c, s, "email", "san.email") < 0)
                        return -1;
                r = check_soft(c, "san.email", "email SAN '%s' is not allowed: profile '%s' has no email rule",
                               name_quote(q, sizeof(q), s->value, s->len), c->prof->name);
                break;
        default:
                return check_soft(c, "san.other",
                                  "a SAN of a type hwid does not issue (otherName, directoryName, ...) is not allowed");
        }
        return r < 0 ? -1 : push_san(c, s);
}

/* san_from_templates: every URI template, expanded, whether asked or not. */
static int add_uri_templates(check *c, const policy_attr *cn, size_t *used) {
        policy_issue *iss = c->issue;
        char q[QUOTE_BUF];

        for (size_t i = 0; c->prof->uri_templates && c->prof->uri_templates[i]; i++) {
                const char *t = c->prof->uri_templates[i];
                size_t n;

                if (template_has_cn(t) && !cn_uri_safe(cn->value, cn->len)) {
                        if (check_soft(c, "san.uri", "CN '%s' cannot be put into URI template '%s' of profile '%s' "
                                       "(letters, digits, '-', '.', '_' and '~' only)",
                                       name_quote(q, sizeof(q), cn->value, cn->len), t, c->prof->name) < 0)
                                return -1;
                        continue;
                }
                if (template_expand(t, cn->value, cn->len, iss->san_buf + *used, sizeof(iss->san_buf) - *used, &n) < 0)
                        return check_hard(c, -HWID_E_CSR_INVALID, "san.uri", "the URI SANs of profile '%s' are too long",
                                          c->prof->name);
                if (push_san(c, &(policy_san) { .type = SAN_URI, .value = iss->san_buf + *used, .len = n }) < 0)
                        return -1;
                *used += n + 1;
        }
        return 0;
}

/* san_dns_from_templates: every DNS pattern that names one name (no glob
 * character), {cn} expanded, whether asked or not -- so that verifiers
 * that check host names accept the certificate.  The expansion must be a
 * DNS name, and never a wildcard (a CN's '*' is a character, not a glob). */
static int add_dns_templates(check *c, const policy_attr *cn, size_t *used) {
        policy_issue *iss = c->issue;
        char q[QUOTE_BUF];

        for (size_t i = 0; c->prof->dns_patterns && c->prof->dns_patterns[i]; i++) {
                const char *t = c->prof->dns_patterns[i], *why;
                char *name = iss->san_buf + *used;
                bool wildcard = false;
                size_t n;

                if (!policy_dns_is_template(t))
                        continue;
                if (template_expand(t, cn->value, cn->len, name, sizeof(iss->san_buf) - *used, &n) < 0)
                        return check_hard(c, -HWID_E_CSR_INVALID, "san.dns", "the DNS SANs of profile '%s' are too long",
                                          c->prof->name);
                why = dns_name_problem(name, n, &wildcard);
                if (why || wildcard) {
                        if (check_soft(c, "san.dns", "CN '%s' cannot be put into DNS template '%s' of profile '%s': "
                                       "the name %s", name_quote(q, sizeof(q), cn->value, cn->len), t,
                                       c->prof->name, why ? why : "would be a wildcard") < 0)
                                return -1;
                        continue;
                }
                if (push_san(c, &(policy_san) { .type = SAN_DNS, .value = name, .len = n }) < 0)
                        return -1;
                *used += n + 1;
        }
        return 0;
}

int policy_dns_candidates(const policy *p, const policy_csr *csr, policy_name_fn fn, void *userdata) {
        const policy_attr *cn = policy_csr_cn(csr);
        char name[256];
        size_t n;
        int r;

        for (size_t i = 0; i < csr->n_sans; i++)
                if (csr->sans[i].type == SAN_DNS && (r = fn(csr->sans[i].value, csr->sans[i].len, userdata)) != 0)
                        return r;
        for (size_t i = 0; cn && i < p->n_profiles; i++)
                for (char **t = p->profiles[i]->dns_patterns; t && *t; t++)
                        if (policy_dns_is_template(*t) &&
                            template_expand(*t, cn->value, cn->len, name, sizeof(name), &n) == 0 &&
                            (r = fn(name, n, userdata)) != 0)
                                return r;
        return 0;
}

static int check_sans(check *c, const policy_attr *cn) {
        size_t used = 0;

        if (c->csr->n_sans > ELEMENTSOF(c->issue->sans))
                return check_hard(c, -HWID_E_CSR_INVALID, "san", "the request has %zu SANs (at most %zu)",
                                  c->csr->n_sans, ELEMENTSOF(c->issue->sans));
        for (size_t i = 0; i < c->csr->n_sans; i++)
                if (check_san(c, &c->csr->sans[i], cn) < 0)
                        return -1;
        if (c->prof->san_dns_from_templates && add_dns_templates(c, cn, &used) < 0)
                return -1;
        return c->prof->san_from_templates ? add_uri_templates(c, cn, &used) : 0;
}

/* ---------- key ---------- */

#define RSA_FLOOR 2048
#define RSA_CEILING 16384

static int check_ec(check *c, const char *curve) {
        uint32_t bit;

        if (curve && (strcmp(curve, "P-256") == 0 || strcmp(curve, "prime256v1") == 0))
                bit = KEYALG_EC_P256, curve = "P-256";
        else if (curve && (strcmp(curve, "P-384") == 0 || strcmp(curve, "secp384r1") == 0))
                bit = KEYALG_EC_P384, curve = "P-384";
        else
                return check_hard(c, -HWID_E_KEY_TYPE, "key", "EC curve '%s' is not supported (P-256 and P-384 are)",
                                  curve ? curve : "(unnamed)");
        if (c->prof->key_algs & bit)
                return 0;
        return check_soft(c, "key", "EC %s keys are not allowed by profile '%s'", curve, c->prof->name);
}

static int check_rsa(check *c, int bits) {
        if (bits < RSA_FLOOR)
                return check_hard(c, -HWID_E_FORBIDDEN, "key", "an RSA key of %d bits is too weak (at least %d)", bits,
                                  RSA_FLOOR);
        if (bits > RSA_CEILING)
                return check_hard(c, -HWID_E_KEY_TYPE, "key", "an RSA key of %d bits is too large (at most %d)", bits,
                                  RSA_CEILING);
        if (!(c->prof->key_algs & KEYALG_RSA))
                return check_soft(c, "key", "RSA keys are not allowed by profile '%s'", c->prof->name);
        if (bits < c->prof->rsa_min_bits)
                return check_soft(c, "key", "an RSA key of %d bits is below the minimum of %d bits of profile '%s'",
                                  bits, c->prof->rsa_min_bits, c->prof->name);
        return 0;
}

static int check_key(check *c) {
        const char *alg = c->csr->key_alg;

        if (alg && strcmp(alg, "EC") == 0)
                return check_ec(c, c->csr->curve);
        if (alg && strcmp(alg, "RSA") == 0)
                return check_rsa(c, c->csr->key_bits);
        return check_hard(c, -HWID_E_KEY_TYPE, "key", "key type '%s' is not supported (EC and RSA are)",
                          alg ? alg : "(unknown)");
}

/* ---------- requested extensions ---------- */

/* Nothing a CSR asks for is copied: the certificate gets the profile's key
 * usage and EKU, and the issuer always writes CA:FALSE.  So a request for
 * a CA certificate is refused (UNGRANTED_REFUSE) or issued without it
 * (UNGRANTED_DROP) — and in audit-only mode a refusal lets the request
 * through *without* what it asked for: audit-only never makes a CA.  Other
 * extensions (asks_other_ext) are dropped silently under every profile. */
static int check_extensions(check *c) {
        const char *what;

        if (!c->csr->asks_ca && !c->csr->asks_cert_sign)
                return 0;
        what = c->csr->asks_ca ? "a CA certificate" : "the keyCertSign/cRLSign key usage";
        if (c->prof->ungranted == UNGRANTED_DROP) {
                c->ungranted_note = c->csr->asks_ca ? "CA:TRUE" : "keyCertSign/cRLSign";
                return 0;
        }
        return check_soft(c, "ext.ungranted", "CSR asks for %s; profile '%s' does not grant it", what, c->prof->name);
}

/* ---------- all of it ---------- */

int profile_check(check *c) {
        const policy_attr *cn = NULL;
        policy_issue *iss = c->issue;

        iss->profile = c->prof;
        if (check_subject(c, &cn) < 0 || check_sans(c, cn) < 0 || check_key(c) < 0 || check_extensions(c) < 0)
                return -1;
        iss->key_usage = c->prof->key_usage & ~(uint32_t) (KU_KEY_CERT_SIGN | KU_CRL_SIGN);
        iss->eku = c->prof->eku;
        iss->validity = c->prof->validity;
        return 0;
}
