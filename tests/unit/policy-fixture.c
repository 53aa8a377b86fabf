/* The policy tests' profiles and row runner: see policy-fixture.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "policy-fixture.h"
#include "policy.h"

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

policy_profile *new_profile(const char *name) {
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
policy_profile *profile_edge(void) {
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

/* device: what hwid ca init writes as its default profile -- the subject
 * is the CN alone, and the DNS templates are added unasked. */
static policy_profile *profile_device(void) {
        policy_profile *p = new_profile("device");

        p->dns_patterns = strv("{cn}", "*.dev.example.org", "{cn}.dev.example.org", NULL);
        p->san_dns_from_templates = true;
        p->uri_templates = strv("spiffe://example.org/device/{cn}", NULL);
        p->san_from_templates = true;
        return p;
}

policy *make_policy(bool audit_only) {
        policy *p = NULL;

        CHECK(policy_new(&p) == 0);
        CHECK(policy_add_profile(p, profile_edge()) == 0);
        CHECK(policy_add_profile(p, profile_server()) == 0);
        CHECK(policy_add_profile(p, profile_lab()) == 0);
        CHECK(policy_add_profile(p, profile_admin()) == 0);
        CHECK(policy_add_profile(p, profile_device()) == 0);
        CHECK(policy_set_admin_group(p, "hwid-admins") == 0);
        policy_set_audit_only(p, audit_only);
        return p;
}

/* ---------- checks on what would be issued ---------- */

const policy_attr *issue_attr(const policy_issue *iss, const char *type, size_t nth) {
        for (size_t i = 0; i < iss->n_subject; i++)
                if (strcmp(iss->subject[i].type, type) == 0 && nth-- == 0)
                        return &iss->subject[i];
        return NULL;
}

bool issue_has_san(const policy_issue *iss, policy_san_type type, const char *value) {
        for (size_t i = 0; i < iss->n_sans; i++)
                if (iss->sans[i].type == type && type != SAN_IP && iss->sans[i].len == strlen(value) &&
                    memcmp(iss->sans[i].value, value, iss->sans[i].len) == 0)
                        return true;
        return false;
}

void edge_issue(const row *r, const policy_issue *iss) {
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

/* ---------- running a row ---------- */

void run(const row *r, policy *strict, policy *audit) {
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
        EXPECT(r, d.retry_at == r->retry_at);
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
