/* libFuzzer target: the path every anonymous POST /csr takes, without the
 * HSM: csr_info_parse() on the body, policy_check_enroll() and
 * policy_check_renew() under a few profiles (and in audit-only mode), then
 * issue_names(), which builds the subject and SANs the issuer signs.
 *
 * Input: one mode byte, then the request body (PEM or DER).
 *   mode % 8 in 0..3  the body as sent (parsing, signature check);
 *            4, 5     re-signed first with a fixed P-256 key,
 *            6        ... P-384 key, 7 ... RSA-2048 key,
 * so that mutations of the subject and extensions get past the signature
 * check (which a fuzzer cannot forge) into policy and name building.
 *
 * Promises checked: parsing fails only with CSR_INVALID/CSR_SIGNATURE (or
 * NOMEM) and a message; the facts stay within their caps; every decision
 * has a verdict and a reason; an ALLOW never grants a CA, always names a
 * profile and a subject with exactly one CN, equal to the request's;
 * issue_names() succeeds or refuses with CSR_INVALID, and what it builds
 * encodes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include "config.h"
#include "csr-check.h"
#include "error.h"
#include "policy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Profiles that let much through (so that name building is reached) and
 * one as strict as the example's. */
static const char config_yaml[] =
        "database: hwid.db\n"
        "ca: {key: \"pkcs11:token=ca;object=ca\", certificate: ca.pem}\n"
        "tls: {key: \"tpm2:handle=0x81000002\", certificate: tls.pem}\n"
        "policy: {admin_group: hwid-admins%s}\n"
        "profiles:\n"
        "  open:\n"
        "    key_types: [ec-p256, ec-p384, rsa]\n"
        "    key_usage: [digitalSignature, keyEncipherment, keyAgreement]\n"
        "    extended_key_usage: [clientAuth, serverAuth]\n"
        "    subject: {allowed_rdns: [CN, O, OU, C, ST, L, DC, serialNumber, emailAddress, title, street, "
        "1.2.3.4]}\n"
        "    san: {dns: [\"*\", \"{cn}\", '\\*.apps.example.org'], ip: [0.0.0.0/0, \"::/0\"],\n"
        "          uri: [\"spiffe://example.org/node/{cn}\", \"urn:x:{cn}\"], add_uri_templates: true}\n"
        "    ungranted: drop\n"
        "    approval: manual\n"
        "  edge:\n"
        "    key_types: [ec-p256]\n"
        "    subject: {allowed_rdns: [CN, O, OU], cn_pattern: \"edge-*\", fixed_o: [edge-nodes], "
        "fixed_ou: [f1]}\n"
        "    san: {dns: [\"{cn}.edge.example.org\", \"{cn}.local\"], ip: [10.20.0.0/16, \"fd00:20::/48\"],\n"
        "          uri: [\"spiffe://example.org/node/{cn}\"], add_uri_templates: true}\n"
        "    renewal: {rotate_key: true}\n"
        "  admin:\n"
        "    subject: {fixed_o: [hwid-admins]}\n";

static hwidd_config *configs[2]; /* enforcing, audit-only */
static EVP_PKEY *keys[3];        /* P-256, P-384, RSA-2048 */

static EVP_PKEY *make_key(int which) {
        if (which == 2)
                return EVP_RSA_gen(2048);
        return EVP_EC_gen(which == 0 ? "P-256" : "P-384");
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
        char text[sizeof(config_yaml) + 64];

        for (int i = 0; i < 2; i++) {
                int n = snprintf(text, sizeof(text), config_yaml, i ? ", audit_only: true" : "");

                if (config_load_string(text, (size_t) n, "fuzz.yaml", &configs[i]) < 0) {
                        fprintf(stderr, "fuzz-csr: %s\n", hwid_strerror(-HWID_E_CONFIG));
                        abort();
                }
        }
        for (int i = 0; i < 3; i++)
                if (!(keys[i] = make_key(i)))
                        abort();
        return 0;
}

/* The body with its key replaced by keys[which] and signed with it; NULL
 * if it is no request at all. */
static uint8_t *resign(const uint8_t *data, size_t size, int which, size_t *ret_len) {
        const unsigned char *p = data;
        unsigned char *der = NULL;
        X509_REQ *req = d2i_X509_REQ(NULL, &p, (long) size);
        int len;

        if (!req) {
                BIO *b = BIO_new_mem_buf(data, (int) size);
                req = b ? PEM_read_bio_X509_REQ(b, NULL, NULL, NULL) : NULL;
                BIO_free(b);
        }
        if (!req || !X509_REQ_set_pubkey(req, keys[which]) || !X509_REQ_sign(req, keys[which], EVP_sha256()) ||
            (len = i2d_X509_REQ(req, &der)) <= 0) {
                X509_REQ_free(req);
                ERR_clear_error();
                return NULL;
        }
        X509_REQ_free(req);
        *ret_len = (size_t) len;
        return der;
}

static void check_decision(const policy_decision *d, const policy_issue *iss) {
        if (!d->reason[0] || !d->decided_by[0] || d->verdict == VERDICT_NO_OPINION)
                abort();
        if (d->verdict == VERDICT_DENY && d->error >= 0)
                abort();
        if (d->verdict != VERDICT_ALLOW)
                return;
        if (!iss->profile || iss->n_subject == 0 || iss->n_subject > ELEMENTSOF(iss->subject) ||
            iss->n_sans > ELEMENTSOF(iss->sans) || (iss->key_usage & (KU_KEY_CERT_SIGN | KU_CRL_SIGN)))
                abort();
}

/* The subject holds exactly one CN, the request's. */
static void check_cn(const policy_issue *iss, const policy_attr *cn) {
        size_t n = 0;

        for (size_t i = 0; i < iss->n_subject; i++) {
                if (strcmp(iss->subject[i].type, "CN") != 0)
                        continue;
                n++;
                if (!cn || iss->subject[i].len != cn->len || memcmp(iss->subject[i].value, cn->value, cn->len) != 0)
                        abort();
        }
        if (n != 1)
                abort();
}

static void check_names(const policy_issue *iss, const policy_csr *facts) {
        X509_NAME *name = NULL;
        GENERAL_NAMES *sans = NULL;
        unsigned char *der = NULL;
        int r;

        check_cn(iss, policy_csr_cn(facts));
        r = issue_names(iss, &name, &sans);
        if (r < 0) {
                if (r != -HWID_E_CSR_INVALID && r != -HWID_E_NOMEM)
                        abort();
                ERR_clear_error();
                return;
        }
        if (X509_NAME_entry_count(name) != (int) iss->n_subject || sk_GENERAL_NAME_num(sans) != (int) iss->n_sans)
                abort();
        if (i2d_X509_NAME(name, &der) <= 0)
                abort();
        OPENSSL_free(der);
        der = NULL;
        if (iss->n_sans && i2d_GENERAL_NAMES(sans, &der) <= 0)
                abort();
        OPENSSL_free(der);
        X509_NAME_free(name);
        GENERAL_NAMES_free(sans);
}

static void check_policies(const policy_csr *facts) {
        static const char *profiles[] = { "open", "edge", "admin", "gone" };
        const policy_attr *cn = policy_csr_cn(facts);
        char ident[80];

        snprintf(ident, sizeof(ident), "%.*s", cn ? (int) (cn->len < 64 ? cn->len : 64) : 0, cn ? cn->value : "");
        for (size_t c = 0; c < ELEMENTSOF(configs); c++)
                for (size_t i = 0; i < ELEMENTSOF(profiles); i++) {
                        policy_requester tok = { .role = ROLE_TOKEN, .token_id = "abc123",
                                                 .token_profile = profiles[i],
                                                 .token_name_pattern = i == 1 ? "edge-?*" : NULL };
                        policy_requester node = { .role = ROLE_NODE, .identity = ident,
                                                  .cert_profile = profiles[i], .cert_not_before = 0,
                                                  .cert_not_after = 1000, .cert_spki_sha256 = "aa" };
                        policy_issue iss;
                        policy_decision d;

                        policy_check_enroll(configs[c]->policy, &tok, facts, &iss, &d);
                        check_decision(&d, &iss);
                        if (d.verdict == VERDICT_ALLOW)
                                check_names(&iss, facts);
                        policy_check_renew(configs[c]->policy, &node, facts, 900, &iss, &d);
                        check_decision(&d, &iss);
                        if (d.verdict == VERDICT_ALLOW)
                                check_names(&iss, facts);
                }
}

static void check_facts(const policy_csr *f) {
        if (f->n_subject > CSR_MAX_ATTRS || f->n_sans > CSR_MAX_SANS || !f->key_alg || !f->spki_sha256 ||
            strlen(f->spki_sha256) != 64)
                abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        csr_info *csr = NULL;
        uint8_t *signed_der = NULL;
        unsigned mode;
        int r;

        if (size < 1)
                return 0;
        mode = data[0] % 8;
        data++, size--;
        if (mode >= 4) {
                signed_der = resign(data, size, mode < 6 ? 0 : mode == 6 ? 1 : 2, &size);
                if (!signed_der)
                        return 0;
                data = signed_der;
        }
        r = csr_info_parse(data, size, &csr);
        if (r < 0) {
                if (csr || (r != -HWID_E_CSR_INVALID && r != -HWID_E_CSR_SIGNATURE && r != -HWID_E_NOMEM) ||
                    !hwid_strerror(r)[0])
                        abort();
        } else {
                size_t der_len = 0;

                if (!csr || !csr_info_pubkey(csr) || !csr_info_spki(csr) || !csr_info_der(csr, &der_len) || !der_len)
                        abort();
                check_facts(csr_info_facts(csr));
                check_policies(csr_info_facts(csr));
                csr_info_free(csr);
        }
        OPENSSL_free(signed_der);
        hwid_error_clear();
        return 0;
}
