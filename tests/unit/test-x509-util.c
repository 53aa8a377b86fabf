/* DN and SAN parsing for the command line, and the SPKI pin. */
#include <openssl/evp.h>

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

int main(void) {
        parses_dn();
        refuses_bad_dn();
        parses_sans();
        refuses_bad_sans();
        pin_matches_openssl();
        return check_done("test-x509-util");
}
