/* The policy object (profiles, audit-only mode, admin group) and its
 * decisions (what every check writes: decision_set(), check_soft(),
 * check_hard()).  The checks themselves build on it: check.c, profile.c,
 * enroll-cert.c, authorize.c, roles.c.  Pure: no I/O, no logging. */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "policy-internal.h"

/* ---------- the object ---------- */

int policy_new(policy **ret) {
        policy *p = calloc(1, sizeof(*p));

        if (!p)
                return hwid_fail(HWID_E_NOMEM, NULL);
        *ret = p;
        return 0;
}

static void strv_free(char **v) {
        for (size_t i = 0; v && v[i]; i++)
                free(v[i]);
        free(v);
}

void policy_profile_free(policy_profile *prof) {
        if (!prof)
                return;
        free(prof->name);
        strv_free(prof->allowed_rdns);
        free(prof->cn_pattern);
        strv_free(prof->fixed_o);
        strv_free(prof->fixed_ou);
        strv_free(prof->dns_patterns);
        free(prof->ip_ranges);
        strv_free(prof->uri_templates);
        strv_free(prof->scope_profiles);
        strv_free(prof->scope_name_patterns);
        strv_free(prof->est_enroll_from);
        free(prof->est_enroll_name);
        free(prof);
}

void policy_free(policy *p) {
        if (!p)
                return;
        for (size_t i = 0; i < p->n_profiles; i++)
                policy_profile_free(p->profiles[i]);
        free(p->profiles);
        free(p->admin_group);
        free(p);
}

/* Takes ownership of prof whatever happens. */
int policy_add_profile(policy *p, policy_profile *prof) {
        policy_profile **v;

        if (!prof || !prof->name || !prof->name[0]) {
                policy_profile_free(prof);
                return hwid_fail(HWID_E_INVALID, "a profile needs a name");
        }
        if (policy_profile_find(p, prof->name)) {
                int r = hwid_fail(HWID_E_EXISTS, "profile '%s' is defined twice", prof->name);
                policy_profile_free(prof);
                return r;
        }
        v = realloc(p->profiles, (p->n_profiles + 1) * sizeof(*v));
        if (!v) {
                policy_profile_free(prof);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        v[p->n_profiles++] = prof;
        p->profiles = v;
        return 0;
}

const policy_profile *policy_profile_find(const policy *p, const char *name) {
        for (size_t i = 0; p && name && i < p->n_profiles; i++)
                if (strcmp(p->profiles[i]->name, name) == 0)
                        return p->profiles[i];
        return NULL;
}

int64_t policy_longest_validity(const policy *p) {
        int64_t longest = 0;

        for (size_t i = 0; p && i < p->n_profiles; i++)
                if (p->profiles[i]->validity > longest)
                        longest = p->profiles[i]->validity;
        return longest;
}

void policy_set_audit_only(policy *p, bool on) {
        p->audit_only = on;
}

bool policy_audit_only(const policy *p) {
        return p->audit_only;
}

void policy_set_public_metrics(policy *p, bool on) {
        p->public_metrics = on;
}

bool policy_public_metrics(const policy *p) {
        return p->public_metrics;
}

int policy_set_admin_group(policy *p, const char *o_value) {
        char *copy = NULL;

        if (o_value && !(copy = strdup(o_value)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        free(p->admin_group);
        p->admin_group = copy;
        return 0;
}

const char *policy_admin_group(const policy *p) {
        return p->admin_group;
}

policy_role policy_profile_role(const policy *p, const policy_profile *prof) {
        if (prof->role_given)
                return (policy_role) prof->role;
        for (size_t i = 0; p->admin_group && prof->fixed_o && prof->fixed_o[i]; i++)
                if (strcmp(prof->fixed_o[i], p->admin_group) == 0)
                        return ROLE_ADMIN;
        return ROLE_NODE;
}

/* Roles a certificate record may carry; new roles are appended. */
static const struct {
        policy_role role;
        const char *name;
} cert_roles[] = {
        { ROLE_NODE, "node" },
        { ROLE_ADMIN, "admin" },
        { ROLE_APPROVER, "approver" },
        { ROLE_PROVISIONER, "provisioner" },
        { ROLE_AUDITOR, "auditor" },
};

bool policy_role_has_certificate(policy_role role) {
        return policy_cert_role_name(role) != NULL;
}

const char *policy_cert_role_name(policy_role role) {
        for (size_t i = 0; i < ELEMENTSOF(cert_roles); i++)
                if (cert_roles[i].role == role)
                        return cert_roles[i].name;
        return NULL;
}

int policy_cert_role_parse(const char *name, policy_role *ret) {
        for (size_t i = 0; name && i < ELEMENTSOF(cert_roles); i++)
                if (strcmp(cert_roles[i].name, name) == 0) {
                        *ret = cert_roles[i].role;
                        return 0;
                }
        return hwid_fail(HWID_E_INVALID, "'%s' is not a certificate role (node, admin, approver, provisioner, auditor)",
                         name ? name : "");
}

const policy_attr *policy_csr_cn(const policy_csr *csr) {
        for (size_t i = 0; csr && csr->subject && i < csr->n_subject; i++)
                if (rdn_is(csr->subject[i].type, "CN"))
                        return &csr->subject[i];
        return NULL;
}

/* ---------- decisions ---------- */

void decision_vset(policy_decision *d, policy_verdict v, int error, const char *by, const char *fmt,
                   va_list ap) {
        d->verdict = v;
        d->audit_only = false;
        d->error = v == VERDICT_DENY ? (error ? error : -HWID_E_FORBIDDEN) : 0;
        d->retry_at = 0;
        vsnprintf(d->reason, sizeof(d->reason), fmt, ap);
        snprintf(d->decided_by, sizeof(d->decided_by), "%s", by);
}

void decision_set(policy_decision *d, policy_verdict v, int error, const char *by, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        decision_vset(d, v, error, by, fmt, ap);
        va_end(ap);
}

int check_soft(check *c, const char *rule, const char *fmt, ...) {
        va_list ap;

        if (!c->soft_denied) {
                va_start(ap, fmt);
                decision_vset(c->d, VERDICT_DENY, -HWID_E_FORBIDDEN, rule, fmt, ap);
                va_end(ap);
                c->soft_denied = true;
        }
        return c->audit ? 0 : -1;
}

int check_hard(check *c, int error, const char *rule, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        decision_vset(c->d, VERDICT_DENY, error, rule, fmt, ap);
        va_end(ap);
        return -1;
}
