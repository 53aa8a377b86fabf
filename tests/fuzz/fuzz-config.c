/* libFuzzer target: hwidd's configuration loader must never crash, leak
 * or accept a file it cannot describe; and whatever policy it accepts must
 * keep policy's promises (never a CA, always a reason) on a few requests. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "error.h"
#include "policy-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const policy_attr subject[] = {
        { "CN", "edge-7", 6 },
        { "O", "hwid-admins", 11 },
};
static const policy_san sans[] = {
        { .type = SAN_DNS, .value = "edge-7.edge.example.org", .len = 23 },
        { .type = SAN_DNS, .value = "*.apps.example.org", .len = 18 },
        { .type = SAN_IP, .ip = { 10, 20, 0, 1 }, .ip_len = 4 },
        { .type = SAN_URI, .value = "spiffe://example.org/node/edge-7", .len = 32 },
};

static void check_decision(const policy_decision *d, const policy_issue *iss, bool issuance) {
        if (!d->reason[0] || !d->decided_by[0] || d->verdict == VERDICT_NO_OPINION)
                abort();
        if (d->verdict == VERDICT_DENY && d->error >= 0)
                abort();
        if (!issuance || d->verdict != VERDICT_ALLOW)
                return;
        if (!iss->profile || iss->n_subject == 0 || (iss->key_usage & (KU_KEY_CERT_SIGN | KU_CRL_SIGN)))
                abort();
}

/* A provisioner with each profile's scope never gets a token for a
 * profile outside it or one that does not issue nodes. */
static void exercise_scopes(const policy *p) {
        static const char *const patterns[] = { "edge-*", "edge-7", "*", NULL };

        for (size_t i = 0; i < p->n_profiles; i++) {
                const policy_profile *prof = p->profiles[i];
                policy_requester who = { .role = ROLE_PROVISIONER, .identity = "station",
                                         .scope_profiles = (const char *const *) prof->scope_profiles,
                                         .scope_name_patterns = (const char *const *) prof->scope_name_patterns };
                policy_decision d;

                for (size_t t = 0; t < p->n_profiles; t++)
                        for (size_t k = 0; k < ELEMENTSOF(patterns); k++) {
                                policy_check_token_create(p, &who, p->profiles[t]->name, patterns[k], &d);
                                check_decision(&d, NULL, false);
                                if (d.verdict == VERDICT_ALLOW &&
                                    (!patterns[k] || policy_profile_role(p, p->profiles[t]) != ROLE_NODE ||
                                     !prof->scope_profiles))
                                        abort();
                        }
        }
}

static void exercise(const hwidd_config *c) {
        const policy *p = c->policy;
        policy_csr csr = {
                .subject = subject, .n_subject = 2, .sans = sans, .n_sans = 4,
                .key_alg = "EC", .curve = "P-256", .key_bits = 256, .asks_ca = true,
                .spki_sha256 = "bb",
        };
        policy_issue iss;
        policy_decision d;

        for (size_t i = 0; i < p->n_profiles; i++) {
                const char *name = p->profiles[i]->name;
                policy_requester tok = { .role = ROLE_TOKEN, .token_id = "abc123", .token_profile = name,
                                         .token_name_pattern = "edge-*" };
                policy_requester node = { .role = ROLE_NODE, .identity = "edge-7", .cert_profile = name,
                                          .cert_not_before = 0, .cert_not_after = 1000,
                                          .cert_spki_sha256 = "aa" };

                for (size_t n = 1; n <= 2; n++) {
                        csr.n_subject = n;
                        policy_check_enroll(p, &tok, &csr, &iss, &d);
                        check_decision(&d, &iss, true);
                        policy_check_renew(p, &node, &csr, 900, &iss, &d);
                        check_decision(&d, &iss, true);
                }
                policy_authorize(p, &node, ACTION_RENEW, "edge-8", &d);
                check_decision(&d, NULL, false);
        }
        exercise_scopes(p);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        hwidd_config *c = NULL;
        int r = config_load_string((const char *) data, size, "/etc/hwid/hwidd.yaml", &c);

        if (r < 0) {
                /* Every refusal names the file. */
                if (c || r != -HWID_E_CONFIG || strncmp(hwid_strerror(r), "/etc/hwid/hwidd.yaml:", 21) != 0)
                        abort();
                return 0;
        }
        if (!c || !c->listen || !c->database || !c->ca_key || !c->ca_cert || !c->tls_key || !c->tls_cert ||
            !c->policy || c->policy->n_profiles == 0)
                abort();
        exercise(c);
        config_free(c);
        return 0;
}
