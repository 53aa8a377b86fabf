/* The key of a CSR, compared as a key: OpenSSL makes requests for one
 * P-256 key with its point uncompressed and compressed, and one with
 * explicit curve parameters; csr_info must give both of the first the
 * same canonical SubjectPublicKeyInfo (named curve, uncompressed point)
 * and fingerprint, and refuse the third.  RSA keys are fingerprinted as
 * OpenSSL encodes them afresh.  issue_names() signs no IP address as a
 * DNS name. */
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include "check.h"
#include "csr-check.h"
#include "error.h"
#include "ossl-util.h"
#include "x509-util.h"

/* A DER CSR for /CN=name signed by k, its key encoded as k says. */
static int make_csr(EVP_PKEY *k, const char *name, unsigned char **ret, int *ret_len) {
        _cleanup_(X509_REQ_freep) X509_REQ *req = X509_REQ_new();
        X509_NAME *n = req ? X509_REQ_get_subject_name(req) : NULL;

        if (!n || !X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_UTF8, (const unsigned char *) name, -1, -1, 0) ||
            !X509_REQ_set_pubkey(req, k) || !X509_REQ_sign(req, k, EVP_sha256()))
                return -1;
        *ret_len = i2d_X509_REQ(req, ret);
        return *ret_len > 0 ? 0 : -1;
}

static int parse(EVP_PKEY *k, csr_info **ret) {
        _cleanup_(OPENSSL_freep) unsigned char *der = NULL;
        int len = 0;

        if (make_csr(k, "key-test", &der, &len) < 0)
                return -HWID_E_INTERNAL;
        return csr_info_parse(der, (size_t) len, ret);
}

/* The DER of the SubjectPublicKeyInfo the certificate would carry. */
static int spki_der(const csr_info *c, unsigned char **ret) {
        return i2d_X509_PUBKEY(csr_info_spki(c), ret);
}

static void ec_encodings(void) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *k = EVP_EC_gen("P-256");
        _cleanup_(csr_info_freep) csr_info *plain = NULL, *compressed = NULL, *explicit = NULL;
        _cleanup_(OPENSSL_freep) unsigned char *a = NULL, *b = NULL;
        const unsigned char *pk = NULL;
        int alen, blen, pk_len = 0, r;
        char want[65];

        CHECK(k && spki_sha256_hex(k, want) == 0);
        CHECK(parse(k, &plain) == 0);
        CHECK(EVP_PKEY_set_utf8_string_param(k, OSSL_PKEY_PARAM_EC_POINT_CONVERSION_FORMAT, "compressed") == 1);
        CHECK(parse(k, &compressed) == 0);
        if (!plain || !compressed)
                return;
        /* The same key: one fingerprint, one encoding, which is RFC 5480's. */
        CHECK_STREQ(csr_info_facts(plain)->spki_sha256, want);
        CHECK_STREQ(csr_info_facts(compressed)->spki_sha256, want);
        alen = spki_der(plain, &a);
        blen = spki_der(compressed, &b);
        CHECK(alen == 91 && alen == blen && memcmp(a, b, (size_t) alen) == 0);
        CHECK(X509_PUBKEY_get0_param(NULL, &pk, &pk_len, NULL, csr_info_spki(compressed)) == 1);
        CHECK(pk_len == 65 && pk[0] == 0x04);
        /* Explicit parameters: refused, and the message says why. */
        CHECK(EVP_PKEY_set_utf8_string_param(k, OSSL_PKEY_PARAM_EC_ENCODING, OSSL_PKEY_EC_ENCODING_EXPLICIT) == 1);
        r = parse(k, &explicit);
        CHECK(r == -HWID_E_CSR_INVALID && explicit == NULL);
        CHECK_CONTAINS(hwid_strerror(r), "explicit curve parameters");
}

static void rsa_encoding(void) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *k = EVP_RSA_gen(2048);
        _cleanup_(csr_info_freep) csr_info *c = NULL;
        char want[65];

        CHECK(k && spki_sha256_hex(k, want) == 0);
        CHECK(parse(k, &c) == 0);
        if (c)
                CHECK_STREQ(csr_info_facts(c)->spki_sha256, want);
}

/* issue_names() signs no IP address as a DNS name, whatever handed it
 * one (IPv4, a name ending in a number, IPv6), and builds real names and
 * an IP SAN as asked. */
static void issue_dns_names(void) {
        static const char *const bad[] = { "127.0.0.1", "127.1", "::1" };
        _cleanup_free_ policy_issue *iss = calloc(1, sizeof(*iss));
        X509_NAME *subject = NULL;
        GENERAL_NAMES *sans = NULL;

        CHECK(iss != NULL);
        iss->subject[0] = (policy_attr) { "CN", "h", 1 };
        iss->n_subject = iss->n_sans = 1;
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                iss->sans[0] = (policy_san) { .type = SAN_DNS, .value = bad[i], .len = strlen(bad[i]) };
                CHECK(issue_names(iss, &subject, &sans) == -HWID_E_CSR_INVALID);
                CHECK_CONTAINS(hwid_strerror(-HWID_E_CSR_INVALID), "is an IPv");
                CHECK(!subject && !sans);
        }
        iss->sans[0] = (policy_san) { .type = SAN_DNS, .value = "h.example.org", .len = 13 };
        iss->sans[1] = (policy_san) { .type = SAN_IP, .ip = { 127, 0, 0, 1 }, .ip_len = 4 };
        iss->n_sans = 2;
        CHECK(issue_names(iss, &subject, &sans) == 0);
        CHECK(sans && sk_GENERAL_NAME_num(sans) == 2 &&
              sk_GENERAL_NAME_value(sans, 0)->type == GEN_DNS && sk_GENERAL_NAME_value(sans, 1)->type == GEN_IPADD);
        X509_NAME_free(subject);
        GENERAL_NAMES_free(sans);
}

int main(void) {
        ec_encodings();
        rsa_encoding();
        issue_dns_names();
        return check_done("test-csr-check");
}
