/* The profiles: section of hwidd's configuration, each profile checked
 * and handed to the policy object. */
#include <arpa/inet.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "config-internal.h"
#include "error.h"

#define PROF(f) offsetof(policy_profile, f)
#define DAY (24 * 3600)
#define MAX_PROFILES 256
#define PATTERN_MAX 255
#define TEMPLATE_MAX 512

static const cfg_name key_type_names[] = {
        { "ec-p256", KEYALG_EC_P256, NULL },
        { "ec-p384", KEYALG_EC_P384, NULL },
        { "rsa", KEYALG_RSA, NULL },
        { NULL, 0, NULL },
};

static const cfg_name key_usage_names[] = {
        { "digitalSignature", KU_DIGITAL_SIGNATURE, NULL },
        { "keyEncipherment", KU_KEY_ENCIPHERMENT, NULL },
        { "keyAgreement", KU_KEY_AGREEMENT, NULL },
        { "keyCertSign", 0, "hwid never issues CA certificates" },
        { "cRLSign", 0, "hwid never issues CA certificates" },
        { NULL, 0, NULL },
};

static const cfg_name eku_names[] = {
        { "clientAuth", EKU_CLIENT_AUTH, NULL },
        { "serverAuth", EKU_SERVER_AUTH, NULL },
        { NULL, 0, NULL },
};

static const cfg_name approval_names[] = {
        { "auto", APPROVAL_AUTO, NULL },
        { "manual", APPROVAL_MANUAL, NULL },
        { NULL, 0, NULL },
};

/* The roles a profile can give its certificates (policy_cert_role_name). */
static const cfg_name role_names[] = {
        { "node", ROLE_NODE, NULL },
        { "admin", ROLE_ADMIN, NULL },
        { "approver", ROLE_APPROVER, NULL },
        { "provisioner", ROLE_PROVISIONER, NULL },
        { "auditor", ROLE_AUDITOR, NULL },
        { NULL, 0, NULL },
};

static const cfg_name attestation_names[] = {
        { "none", ATTESTATION_NONE, NULL },
        { "optional", ATTESTATION_OPTIONAL, NULL },
        { "required", ATTESTATION_REQUIRED, NULL },
        { NULL, 0, NULL },
};

static const cfg_name reenroll_names[] = {
        { "off", REENROLL_OFF, NULL },
        { "allowlist", REENROLL_ALLOWLIST, NULL },
        { "last-certificate", REENROLL_LAST_CERTIFICATE, NULL },
        { NULL, 0, NULL },
};

static const cfg_name ungranted_names[] = {
        { "refuse", UNGRANTED_REFUSE, NULL },
        { "drop", UNGRANTED_DROP, NULL },
        { NULL, 0, NULL },
};

/* ---------- lists of strings ---------- */

/* What an item of a list must look like: NULL if fine, else the problem. */
typedef struct item_rule {
        const char *(*check)(const char *s);
} item_rule;

static void strv_free(char **v) {
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

/* Braces only as "{cn}"; backslashes (in globs) only before * ? \. */
static const char *placeholders_problem(const char *s, bool escapes) {
        for (const char *p = s; *p; p++) {
                if (*p == '{' && strncmp(p, "{cn}", 4) == 0)
                        p += 3;
                else if (*p == '{' || *p == '}')
                        return "has a '{' or '}' that is not part of {cn}";
                else if (escapes && *p == '\\' && p[1] && strchr("*?\\", p[1]))
                        p++;
                else if (*p == '\\')
                        return escapes ? "has a '\\' not followed by *, ? or \\" : "has a '\\'";
        }
        return NULL;
}

static const char *check_value(const char *s) {
        return strlen(s) > 64 || !cfg_printable(s, true) ? "must be printable and at most 64 bytes" : NULL;
}

static const char *check_dns_pattern(const char *s) {
        const char *why;

        if (strlen(s) > PATTERN_MAX)
                return "is longer than 255 bytes";
        for (const char *p = s; *p; p++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-.*?\\{}", *p))
                        return "may hold letters, digits, '-', '.', the globs * and ?, \\* and {cn} only";
        /* A fixed name is checked now as issuance would check it (an IP
         * address is no DNS name), not at the first request it fails. */
        if (!strpbrk(s, "*?{\\") && (why = policy_dns_name_problem(s, strlen(s))))
                return why;
        return placeholders_problem(s, true);
}

static const char *check_uri_template(const char *s) {
        const char *p = s;

        if (strlen(s) > TEMPLATE_MAX)
                return "is longer than 512 bytes";
        if (!cfg_printable(s, false))
                return "must not contain spaces or control characters";
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
                return "does not start with a URI scheme (e.g. spiffe://)";
        while (*p && strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+.-", *p))
                p++;
        if (*p != ':')
                return "does not start with a URI scheme (e.g. spiffe://)";
        return placeholders_problem(s, false);
}

/* A token name pattern: a glob as cn_pattern takes it. */
static const char *check_name_pattern(const char *s) {
        return strlen(s) > PATTERN_MAX || !cfg_printable(s, true) ? "must be printable and at most 255 bytes" : NULL;
}

static const char *check_profile_name(const char *s) {
        return strlen(s) > 64 || !cfg_printable(s, false) ? "is not a profile name" : NULL;
}

static const char *check_rdn(const char *s) {
        return policy_rdn_canonical(s) ? NULL
                                       : "is not a known attribute (CN, O, OU, C, ST, L, DC, serialNumber, ...) "
                                         "nor a dotted OID";
}

static const item_rule value_rule = { check_value };
static const item_rule dns_rule = { check_dns_pattern };
static const item_rule uri_rule = { check_uri_template };
static const item_rule rdn_rule = { check_rdn };
static const item_rule name_pattern_rule = { check_name_pattern };
static const item_rule profile_name_rule = { check_profile_name };

static int get_strv(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, char ***ret) {
        const item_rule *rule = f->aux;
        yaml_node_item_t *items;
        char **v;
        size_t count;
        int r;

        if ((r = cfg_sequence(x, n, path, f->max, &items, &count)) < 0)
                return r;
        if (!(v = calloc(count + 1, sizeof(*v))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (size_t i = 0; i < count; i++) {
                yaml_node_t *item = cfg_node(x, items[i]);
                const char *s, *why;
                char sub[280];

                snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
                if ((r = cfg_scalar(x, item, sub, false, &s)) < 0)
                        goto fail;
                if ((why = rule->check(s))) {
                        r = cfg_fail(x, item, sub, "'%s' %s", s, why);
                        goto fail;
                }
                if (!(v[i] = strdup(s))) {
                        r = hwid_fail(HWID_E_NOMEM, NULL);
                        goto fail;
                }
        }
        *ret = v;
        return 0;
fail:
        strv_free(v);
        return r;
}

static int fn_strv(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        char ***field = (char ***) ((char *) base + f->off);
        char **v = NULL;
        int r = get_strv(x, n, path, f, &v);

        if (r < 0)
                return r;
        strv_free(*field);
        *field = v;
        return 0;
}

/* Stored by canonical name; CN must be among them. */
static int fn_rdns(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        policy_profile *prof = base;
        bool has_cn = false;
        int r = fn_strv(x, n, path, f, base);

        if (r < 0)
                return r;
        for (size_t i = 0; prof->allowed_rdns[i]; i++) {
                const char *canon = policy_rdn_canonical(prof->allowed_rdns[i]);
                char *copy = strdup(canon);

                if (!copy)
                        return hwid_fail(HWID_E_NOMEM, NULL);
                free(prof->allowed_rdns[i]);
                prof->allowed_rdns[i] = copy;
                has_cn = has_cn || strcmp(copy, "CN") == 0;
        }
        if (!has_cn)
                return cfg_fail(x, n, path, "must include CN (every certificate has one)");
        return 0;
}

static int fn_cn_pattern(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        policy_profile *prof = base;
        const char *s;
        int r;

        if ((r = cfg_scalar(x, n, path, false, &s)) < 0)
                return r;
        if (strlen(s) > PATTERN_MAX || !cfg_printable(s, true))
                return cfg_fail(x, n, path, "must be printable and at most 255 bytes");
        free(prof->cn_pattern);
        if (!(prof->cn_pattern = strdup(s)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        return 0;
}

/* ---------- IP ranges ---------- */

static int parse_cidr(const char *s, policy_cidr *ret) {
        char addr[64];
        const char *slash = strchr(s, '/');
        size_t alen = slash ? (size_t) (slash - s) : strlen(s);
        policy_cidr c = { 0 };
        char *end;
        long prefix;

        if (alen >= sizeof(addr))
                return -1;
        memcpy(addr, s, alen);
        addr[alen] = '\0';
        if (inet_pton(AF_INET, addr, c.addr) == 1)
                c.family = 4;
        else if (inet_pton(AF_INET6, addr, c.addr) == 1)
                c.family = 6;
        else
                return -1;
        c.prefix = c.family == 4 ? 32 : 128;
        if (slash) {
                if (slash[1] < '0' || slash[1] > '9' || strlen(slash + 1) > 3)
                        return -1;
                prefix = strtol(slash + 1, &end, 10);
                if (*end || prefix > c.prefix)
                        return -1;
                c.prefix = (int) prefix;
        }
        *ret = c;
        return 0;
}

static bool host_bits_set(const policy_cidr *c) {
        int bytes = c->family == 4 ? 4 : 16;

        for (int bit = c->prefix; bit < bytes * 8; bit++)
                if (c->addr[bit / 8] & (0x80 >> (bit % 8)))
                        return true;
        return false;
}

static int fn_cidrs(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        policy_profile *prof = base;
        yaml_node_item_t *items;
        policy_cidr *v;
        size_t count;
        int r;

        if ((r = cfg_sequence(x, n, path, f->max, &items, &count)) < 0)
                return r;
        if (!(v = calloc(count ? count : 1, sizeof(*v))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        free(prof->ip_ranges);
        prof->ip_ranges = v;
        prof->n_ip_ranges = 0;
        for (size_t i = 0; i < count; i++) {
                yaml_node_t *item = cfg_node(x, items[i]);
                const char *s;
                char sub[280];

                snprintf(sub, sizeof(sub), "%s[%zu]", path, i);
                if ((r = cfg_scalar(x, item, sub, false, &s)) < 0)
                        return r;
                if (parse_cidr(s, &v[i]) < 0)
                        return cfg_fail(x, item, sub, "'%s' is not an address or ADDRESS/PREFIX range", s);
                if (host_bits_set(&v[i]))
                        return cfg_fail(x, item, sub, "'%s' has address bits set beyond its /%d prefix", s, v[i].prefix);
                prof->n_ip_ranges++;
        }
        return 0;
}

/* ---------- single values ---------- */

static int fn_approval(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        uint32_t v;
        int r = cfg_pick(x, n, path, approval_names, &v);

        if (r >= 0)
                ((policy_profile *) base)->approval = (policy_approval) v;
        return r;
}

static int fn_ungranted(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        uint32_t v;
        int r = cfg_pick(x, n, path, ungranted_names, &v);

        if (r >= 0)
                ((policy_profile *) base)->ungranted = (policy_ungranted) v;
        return r;
}

static int fn_role(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        policy_profile *prof = base;
        uint32_t v;
        int r = cfg_pick(x, n, path, role_names, &v);

        if (r >= 0) {
                prof->role = (policy_role) v;
                prof->role_given = true;
        }
        return r;
}

/* A profile mode picked from names; any but the first (0: "none",
 * "off") verifies TPM attestation, and so needs attestation.ek_roots (the
 * first such node is named if they are missing). */
static int pick_attest_mode(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_name *names, uint32_t *ret) {
        int r = cfg_pick(x, n, path, names, ret);

        if (r >= 0 && *ret != 0 && !x->attest_profile_node) {
                x->attest_profile_node = n;
                snprintf(x->attest_profile_path, sizeof(x->attest_profile_path), "%s", path);
        }
        return r;
}

static int fn_reenroll(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        uint32_t v;
        int r = pick_attest_mode(x, n, path, reenroll_names, &v);

        if (r >= 0)
                ((policy_profile *) base)->reenroll_by_attestation = (policy_reenroll_mode) v;
        return r;
}

static int fn_attestation(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        uint32_t v;
        int r = pick_attest_mode(x, n, path, attestation_names, &v);

        if (r >= 0)
                ((policy_profile *) base)->attestation = (policy_attestation_mode) v;
        return r;
}

/* A fraction in (0, 1] or a percentage: 0.33, 33%. */
static int fn_window(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        const char *s;
        char *end;
        double v;
        int r;

        if ((r = cfg_scalar(x, n, path, false, &s)) < 0)
                return r;
        v = strtod(s, &end);
        if (end == s || s[0] == ' ' || s[0] == '+' || (*end && strcmp(end, "%") != 0) || !isfinite(v))
                return cfg_fail(x, n, path, "'%s' is not a fraction (0.33) or a percentage (33%%)", s);
        if (*end)
                v /= 100.0;
        if (!(v > 0.0 && v <= 1.0))
                return cfg_fail(x, n, path, "'%s' is out of range: more than 0 and at most 1 (100%%)", s);
        ((policy_profile *) base)->renew_window = v;
        return 0;
}

/* ---------- a profile ---------- */

static const cfg_field subject_fields[] = {
        FIELD("allowed_rdns", fn_rdns, PROF(allowed_rdns), .max = 16, .aux = &rdn_rule),
        FIELD("cn_pattern", fn_cn_pattern, 0),
        FIELD("fixed_o", fn_strv, PROF(fixed_o), .max = 6, .aux = &value_rule),
        FIELD("fixed_ou", fn_strv, PROF(fixed_ou), .max = 6, .aux = &value_rule),
        FIELD_END,
};

static const cfg_field san_fields[] = {
        FIELD("dns", fn_strv, PROF(dns_patterns), .max = 64, .aux = &dns_rule),
        FIELD("ip", fn_cidrs, 0, .max = 64),
        FIELD("uri", fn_strv, PROF(uri_templates), .max = 8, .aux = &uri_rule),
        FIELD("add_uri_templates", cfg_fn_bool, PROF(san_from_templates)),
        FIELD("add_dns_templates", cfg_fn_bool, PROF(san_dns_from_templates)),
        FIELD_END,
};

static const cfg_field renewal_fields[] = {
        FIELD("window", fn_window, 0),
        FIELD("rotate_key", cfg_fn_bool, PROF(rotate_key)),
        FIELD_END,
};

/* est.enroll_by_certificate.name: a CN with {cn}, the holder's identity. */
static int fn_enroll_name(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        policy_profile *prof = base;
        const char *s, *why;
        int r;

        if ((r = cfg_scalar(x, n, path, false, &s)) < 0)
                return r;
        if (strlen(s) > 64 || !cfg_printable(s, true))
                return cfg_fail(x, n, path, "must be printable and at most 64 bytes");
        if ((why = placeholders_problem(s, false)))
                return cfg_fail(x, n, path, "'%s' %s", s, why);
        if (!strstr(s, "{cn}"))
                return cfg_fail(x, n, path, "'%s' has no {cn}: every client certificate would ask for the same name",
                                s);
        free(prof->est_enroll_name);
        if (!(prof->est_enroll_name = strdup(s)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        return 0;
}

/* That the profiles exist is checked once all are loaded
 * (check_enroll_refs()). */
static const cfg_field enroll_by_cert_fields[] = {
        FIELD("from_profiles", fn_strv, PROF(est_enroll_from), .min = 1, .max = 32, .aux = &profile_name_rule,
              .required = true),
        FIELD("name", fn_enroll_name, 0, .required = true),
        FIELD_END,
};

static const cfg_field est_fields[] = {
        FIELD("pop_linking", cfg_fn_bool, PROF(est_pop_linking)),
        FIELD("enroll_by_certificate", cfg_fn_section, 0, .aux = enroll_by_cert_fields),
        FIELD_END,
};

/* role: provisioner.  That the profiles exist and issue nodes is checked
 * once all are loaded (policy_check_scopes()). */
static const cfg_field scope_fields[] = {
        FIELD("profiles", fn_strv, PROF(scope_profiles), .min = 1, .max = 32, .aux = &profile_name_rule,
              .required = true),
        FIELD("name_patterns", fn_strv, PROF(scope_name_patterns), .min = 1, .max = 32, .aux = &name_pattern_rule,
              .required = true),
        FIELD_END,
};

static const cfg_field profile_fields[] = {
        FIELD("validity", cfg_fn_duration, PROF(validity), .min = 60, .max = 3650 * (int64_t) DAY),
        FIELD("key_types", cfg_fn_flags, PROF(key_algs), .min = 1, .aux = key_type_names),
        FIELD("rsa_min_bits", cfg_fn_int, PROF(rsa_min_bits), .min = 2048, .max = 16384),
        FIELD("key_usage", cfg_fn_flags, PROF(key_usage), .aux = key_usage_names),
        FIELD("extended_key_usage", cfg_fn_flags, PROF(eku), .aux = eku_names),
        FIELD("subject", cfg_fn_section, 0, .aux = subject_fields),
        FIELD("san", cfg_fn_section, 0, .aux = san_fields),
        FIELD("approval", fn_approval, 0),
        FIELD("renewal", cfg_fn_section, 0, .aux = renewal_fields),
        FIELD("allow_reenroll", cfg_fn_bool, PROF(allow_reenroll)),
        FIELD("ungranted", fn_ungranted, 0),
        FIELD("role", fn_role, 0),
        FIELD("scope", cfg_fn_section, 0, .aux = scope_fields),
        FIELD("attestation", fn_attestation, 0),
        FIELD("reenroll_by_attestation", fn_reenroll, 0),
        FIELD("est", cfg_fn_section, 0, .aux = est_fields),
        FIELD_END,
};

static void profile_defaults(policy_profile *p) {
        p->validity = 30 * DAY;
        p->key_algs = KEYALG_EC_P256 | KEYALG_EC_P384;
        p->rsa_min_bits = 2048;
        p->key_usage = KU_DIGITAL_SIGNATURE;
        p->eku = EKU_CLIENT_AUTH;
        p->approval = APPROVAL_AUTO;
        p->renew_window = 1.0 / 3.0;
        p->ungranted = UNGRANTED_REFUSE;
        p->role = ROLE_NODE;
}

static bool profile_name_valid(const char *s) {
        if (!s[0] || strlen(s) > 64)
                return false;
        for (; *s; s++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", *s))
                        return false;
        return true;
}

static bool has_dns_template(const policy_profile *prof) {
        for (size_t i = 0; prof->dns_patterns && prof->dns_patterns[i]; i++)
                if (policy_dns_is_template(prof->dns_patterns[i]))
                        return true;
        return false;
}

/* add_*_templates needs something to add. */
static int check_san_templates(cfg_ctx *x, yaml_node_t *n, const char *path, const policy_profile *prof) {
        char sub[300];

        if (prof->san_from_templates && !(prof->uri_templates && prof->uri_templates[0])) {
                snprintf(sub, sizeof(sub), "%s.san.add_uri_templates", path);
                return cfg_fail(x, n, sub, "is true but the profile has no san.uri templates");
        }
        if (prof->san_dns_from_templates && !has_dns_template(prof)) {
                snprintf(sub, sizeof(sub), "%s.san.add_dns_templates", path);
                return cfg_fail(x, n, sub, "is true but no san.dns pattern is a template (one without '*', '?' "
                                "or '\\', such as \"{cn}\" or \"{cn}.example.org\")");
        }
        return 0;
}

static int load_profile(cfg_ctx *x, yaml_node_t *n, const char *path, const char *name) {
        _cleanup_(policy_profile_freep) policy_profile *prof = calloc(1, sizeof(*prof));
        int r;

        if (!prof || !(prof->name = strdup(name)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        profile_defaults(prof);
        if ((r = cfg_mapping(x, n, path, profile_fields, prof)) < 0)
                return r;
        if ((r = check_san_templates(x, n, path, prof)) < 0)
                return r;
        return policy_add_profile(x->policy, TAKE_PTR(prof));
}

/* The value of key in mapping n, or NULL. */
static yaml_node_t *mapping_get(cfg_ctx *x, yaml_node_t *n, const char *key) {
        for (yaml_node_pair_t *p = n && n->type == YAML_MAPPING_NODE ? n->data.mapping.pairs.start : NULL;
             p && p < n->data.mapping.pairs.top; p++) {
                yaml_node_t *k = cfg_node(x, p->key);

                if (k && k->type == YAML_SCALAR_NODE && strcmp((const char *) k->data.scalar.value, key) == 0)
                        return cfg_node(x, p->value);
        }
        return NULL;
}

/* est.enroll_by_certificate of the profile at n (loaded as prof): each
 * profile it accepts exists and does not itself enroll by certificate, and
 * the profile issues without waiting for an approval (requests wait under
 * a token).  No chains: a certificate got with a certificate never gets
 * another, or one holder could mint x-op, x-op-op, ... without end. */
static int check_enroll_refs(cfg_ctx *x, yaml_node_t *n, const char *path, const policy_profile *prof) {
        yaml_node_t *e = mapping_get(x, mapping_get(x, n, "est"), "enroll_by_certificate");
        yaml_node_t *from = mapping_get(x, e, "from_profiles");
        char sub[320];

        if (!prof->est_enroll_from)
                return 0;
        snprintf(sub, sizeof(sub), "%s.est.enroll_by_certificate", path);
        if (prof->approval == APPROVAL_MANUAL)
                return cfg_fail(x, e, sub, "cannot be used with approval: manual (a request waiting for approval "
                                "is a token's)");
        if (!prof->est_enroll_from[0]) {
                snprintf(sub, sizeof(sub), "%s.est.enroll_by_certificate.from_profiles", path);
                return cfg_fail(x, from, sub, "needs at least 1 profile");
        }
        for (size_t i = 0; prof->est_enroll_from[i]; i++) {
                yaml_node_t *item = from && from->type == YAML_SEQUENCE_NODE
                                            ? cfg_node(x, from->data.sequence.items.start[i]) : e;
                const policy_profile *src = policy_profile_find(x->policy, prof->est_enroll_from[i]);

                snprintf(sub, sizeof(sub), "%s.est.enroll_by_certificate.from_profiles[%zu]", path, i);
                if (!src)
                        return cfg_fail(x, item, sub, "'%s' is not a profile of this configuration",
                                        prof->est_enroll_from[i]);
                if (src->est_enroll_from)
                        return cfg_fail(x, item, sub, "'%s' enrolls by certificate itself: a certificate got "
                                        "with a certificate cannot get another", prof->est_enroll_from[i]);
        }
        return 0;
}

int cfg_fn_profiles(cfg_ctx *x, yaml_node_t *n, const char *path, const cfg_field *f, void *base) {
        int r;

        if (!n || n->type != YAML_MAPPING_NODE)
                return cfg_fail(x, n, path, "expected a mapping of profile names to profiles");
        if (n->data.mapping.pairs.top == n->data.mapping.pairs.start)
                return cfg_fail(x, n, path, "needs at least one profile");
        if (n->data.mapping.pairs.top - n->data.mapping.pairs.start > MAX_PROFILES)
                return cfg_fail(x, n, path, "has more than %d profiles", MAX_PROFILES);
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
                yaml_node_t *k = cfg_node(x, p->key);
                const char *name;
                char sub[256];

                if ((r = cfg_scalar(x, k, path, false, &name)) < 0)
                        return r;
                cfg_path(sub, sizeof(sub), path, name);
                if (!profile_name_valid(name))
                        return cfg_fail(x, k, sub, "a profile name has 1 to 64 letters, digits, '.', '_' or '-'");
                if (policy_profile_find(x->policy, name))
                        return cfg_fail(x, k, sub, "is defined more than once");
                if ((r = load_profile(x, cfg_node(x, p->value), sub, name)) < 0)
                        return r;
        }
        /* Profiles name each other: checked once all are loaded. */
        for (yaml_node_pair_t *p = n->data.mapping.pairs.start; p < n->data.mapping.pairs.top; p++) {
                const char *name = (const char *) cfg_node(x, p->key)->data.scalar.value;
                char sub[256];

                cfg_path(sub, sizeof(sub), path, name);
                if ((r = check_enroll_refs(x, cfg_node(x, p->value), sub, policy_profile_find(x->policy, name))) < 0)
                        return r;
        }
        return 0;
}
