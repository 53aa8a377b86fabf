/* DN and SAN parsing for the command line, the SPKI pin, and PEM. */
#include <openssl/evp.h>
#include <openssl/pem.h>

#include "check.h"
#include "error.h"
#include "ossl-util.h"
#include "x509-util.h"

static void parses_dn(void) {
        _cleanup_(X509_NAME_freep) X509_NAME *n = NULL;
        _cleanup_free_ char *s = NULL;

        CHECK(dn_parse("/CN=edge-0001/O=acme/OU=line\\/2", &n) == 0);
        CHECK(X509_NAME_entry_count(n) == 3);
        CHECK(name_to_string(n, &s) == 0);
        CHECK_STREQ(s, "OU=line/2,O=acme,CN=edge-0001");
}

static void refuses_bad_dn(void) {
        static const struct { const char *dn, *msg; } bad[] = {
                { "CN=x", "must look like" },
                { "/CN", "is not TYPE=value" },
                { "/CN=", "empty value" },
                { "/XX=1", "not valid" },
                { "/", "is not TYPE=value" },
                { "/CN=a\x01", "control character" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                X509_NAME *n = NULL;
                int r = dn_parse(bad[i].dn, &n);
                CHECK(r == -HWID_E_INVALID);
                CHECK(n == NULL);
                CHECK_CONTAINS(hwid_strerror(r), bad[i].msg);
        }
}

static void parses_sans(void) {
        _cleanup_(GENERAL_NAMES_freep) GENERAL_NAMES *g = NULL;

        CHECK(san_parse("dns:edge.example,ip:10.0.0.7,uri:spiffe://example.org/node/e1,email:a@b.c", &g) == 0);
        CHECK(sk_GENERAL_NAME_num(g) == 4);
        CHECK(sk_GENERAL_NAME_value(g, 0)->type == GEN_DNS);
        CHECK(sk_GENERAL_NAME_value(g, 1)->type == GEN_IPADD);
        CHECK(sk_GENERAL_NAME_value(g, 1)->d.iPAddress->length == 4);
        CHECK(sk_GENERAL_NAME_value(g, 2)->type == GEN_URI);
        CHECK(sk_GENERAL_NAME_value(g, 3)->type == GEN_EMAIL);
}

static void refuses_bad_sans(void) {
        static const struct { const char *s, *msg; } bad[] = {
                { "host.example", "must start with" },
                { "ip:300.1.1.1", "not valid" },
                { "dns:", "has no value" },
                { "", "empty" },
        };
        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                GENERAL_NAMES *g = NULL;
                int r = san_parse(bad[i].s, &g);
                CHECK(r == -HWID_E_INVALID);
                CHECK(g == NULL);
                CHECK_CONTAINS(hwid_strerror(r), bad[i].msg);
        }
}

static void pin_matches_openssl(void) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *k = EVP_EC_gen("P-256");
        _cleanup_(OPENSSL_freep) unsigned char *der = NULL;
        unsigned char md[32];
        char pin[72], want[72] = "sha256:";
        int len = i2d_PUBKEY(k, &der);

        CHECK(len > 0);
        EVP_Digest(der, (size_t) len, md, NULL, EVP_sha256(), NULL);
        for (int i = 0; i < 32; i++)
                snprintf(want + 7 + 2 * i, 3, "%02x", md[i]);
        CHECK(spki_sha256_pin(k, pin) == 0);
        CHECK_STREQ(pin, want);
}

/* OpenSSL's PEM writer is the reference, for lengths around a whole line
 * (48 bytes) and for a real certificate. */
static void pem_matches_openssl(void) {
        static const size_t lens[] = { 1, 47, 48, 49, 95, 96, 97, 300 };
        _cleanup_(X509_freep) X509 *x = X509_new();
        _cleanup_(OPENSSL_freep) unsigned char *der = NULL;
        unsigned char data[300];
        int len;

        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (unsigned char) (i * 7 + 3);
        for (size_t i = 0; i < ELEMENTSOF(lens); i++) {
                _cleanup_(BIO_free_allp) BIO *b = BIO_new(BIO_s_mem());
                _cleanup_free_ char *pem = NULL;
                char *want = NULL;
                long n;

                CHECK(PEM_write_bio(b, "TEST DATA", "", data, (long) lens[i]) > 0);
                n = BIO_get_mem_data(b, &want);
                CHECK(der_to_pem(data, lens[i], "TEST DATA", &pem) == 0);
                CHECK(pem && strlen(pem) == (size_t) n && memcmp(pem, want, (size_t) n) == 0);
        }
        /* A certificate comes back from its PEM unchanged. */
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *k = EVP_EC_gen("P-256");

        CHECK(x && k && X509_set_version(x, X509_VERSION_3) && ASN1_INTEGER_set(X509_get_serialNumber(x), 4242) &&
              X509_gmtime_adj(X509_getm_notBefore(x), 0) && X509_gmtime_adj(X509_getm_notAfter(x), 3600) &&
              X509_set_pubkey(x, k) && X509_sign(x, k, EVP_sha256()) > 0);
        len = i2d_X509(x, &der);
        CHECK(len > 0);
        if (len > 0) {
                _cleanup_free_ char *pem = NULL;
                _cleanup_(BIO_free_allp) BIO *b = NULL;
                _cleanup_(X509_freep) X509 *back = NULL;

                CHECK(cert_der_to_pem(der, (size_t) len, &pem) == 0);
                b = BIO_new_mem_buf(pem, -1);
                back = PEM_read_bio_X509(b, NULL, NULL, NULL);
                CHECK(back && X509_cmp(back, x) == 0);
        }
        CHECK(cert_der_to_pem((const uint8_t *) "junk", 4, &(char *) { NULL }) == -HWID_E_INVALID);
}

/* How hwid cert show|revoke and the admin API read a serial typed by hand. */
static void normalizes_serials(void) {
        char out[16];

        normalize_serial("0a:1b:ff", out, sizeof(out));
        CHECK_STREQ(out, "0A1BFF");
        normalize_serial("0X0a1B", out, sizeof(out));
        CHECK_STREQ(out, "0A1B");
        normalize_serial("DEADBEEF", out, sizeof(out));
        CHECK_STREQ(out, "DEADBEEF");
        normalize_serial("0123456789abcdef0123", out, 8); /* cut, terminated */
        CHECK_STREQ(out, "0123456");
        normalize_serial("", out, sizeof(out));
        CHECK_STREQ(out, "");
}

int main(void) {
        normalizes_serials();
        parses_dn();
        refuses_bad_dn();
        parses_sans();
        refuses_bad_sans();
        pin_matches_openssl();
        pem_matches_openssl();
        return check_done("test-x509-util");
}
