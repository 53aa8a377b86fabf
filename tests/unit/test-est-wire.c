/* EST's wire format (common/est-wire.c): base64 bodies with line breaks,
 * DER and PEM refused where base64 belongs, certs-only PKCS#7 both ways,
 * HTTP Basic credentials. */
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "check.h"
#include "error.h"
#include "est-wire.h"
#include "secret.h"

/* A self-signed certificate, PEM (caller frees). */
static char *make_cert(const char *cn) {
        EVP_PKEY *k = EVP_EC_gen("P-256");
        X509 *x = X509_new();
        BIO *b = BIO_new(BIO_s_mem());
        X509_NAME *n = X509_get_subject_name(x);
        char *data, *pem;
        long len;

        X509_NAME_add_entry_by_txt(n, "CN", MBSTRING_ASC, (const unsigned char *) cn, -1, -1, 0);
        X509_set_issuer_name(x, n);
        ASN1_INTEGER_set(X509_get_serialNumber(x), 1);
        X509_gmtime_adj(X509_getm_notBefore(x), 0);
        X509_gmtime_adj(X509_getm_notAfter(x), 3600);
        X509_set_pubkey(x, k);
        X509_sign(x, k, EVP_sha256());
        PEM_write_bio_X509(b, x);
        len = BIO_get_mem_data(b, &data);
        pem = strndup(data, (size_t) len);
        BIO_free(b);
        X509_free(x);
        EVP_PKEY_free(k);
        return pem;
}

static void decodes_with_line_breaks(void) {
        static const char body[] = "TUlJ\r\nQkFn\r\n PT0K\t\n";
        uint8_t *der = NULL;
        size_t len = 0;

        CHECK(est_b64_decode((const uint8_t *) body, strlen(body), &der, &len) == 0);
        CHECK(len == 9 && der && memcmp(der, "MIIBAg==\n", 9) == 0);
        free(der);
}

static void refuses_what_is_not_base64(void) {
        static const char pem[] = "-----BEGIN CERTIFICATE REQUEST-----\nMIIB\n-----END CERTIFICATE REQUEST-----\n";
        static const uint8_t der[] = { 0x30, 0x82, 0x01, 0x0a, 0x02, 0x01 };
        uint8_t *out = NULL;
        size_t len;

        CHECK(est_b64_decode((const uint8_t *) pem, strlen(pem), &out, &len) == -HWID_E_INVALID);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_INVALID), "PEM");
        CHECK(est_b64_decode(der, sizeof(der), &out, &len) == -HWID_E_INVALID);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_INVALID), "binary");
        CHECK(est_b64_decode((const uint8_t *) "MIIB*AAA", 8, &out, &len) == -HWID_E_INVALID);
        CHECK(est_b64_decode((const uint8_t *) "MII", 3, &out, &len) == -HWID_E_INVALID);      /* truncated */
        CHECK(est_b64_decode((const uint8_t *) "\r\n \r\n", 5, &out, &len) == -HWID_E_INVALID); /* empty */
        CHECK(est_b64_decode((const uint8_t *) "TR==", 4, &out, &len) == -HWID_E_INVALID);     /* unused bits */
        CHECK(out == NULL);
}

static void certs_only_round_trip(void) {
        char *a = make_cert("one"), *b = make_cert("two"), *both = NULL, *back = NULL;
        uint8_t *der = NULL;
        size_t len = 0;
        buf text;

        CHECK(asprintf(&both, "%s%s", a, b) > 0);
        CHECK(est_certs_only_from_pem(both, &der, &len) == 0);
        CHECK(est_certs_only_to_pem(der, len, &back) == 0);
        CHECK_STREQ(back, both);
        /* Lines of 64, and they decode back to the same DER. */
        buf_init(&text, 1 << 20);
        CHECK(est_b64_encode(der, len, &text) == 0);
        CHECK(text.len > 65 && text.data[64] == '\n');
        free(der);
        der = NULL;
        CHECK(est_b64_decode(text.data, text.len, &der, &len) == 0);
        free(back);
        back = NULL;
        CHECK(est_certs_only_to_pem(der, len, &back) == 0 && strcmp(back, both) == 0);
        /* Not PKCS#7, or trailing bytes: refused. */
        CHECK(est_certs_only_to_pem((const uint8_t *) "\x30\x03\x02\x01\x01", 5, &back) == -HWID_E_INVALID);
        CHECK(est_certs_only_from_pem("no certificate here", &der, &len) < 0);
        buf_reset(&text);
        free(der);
        free(back);
        free(both);
        free(a);
        free(b);
}

static void basic_credentials(void) {
        char user[EST_USER_MAX + 1], *password = NULL, *auth = NULL;

        CHECK(est_basic_make("abc123", "s3cretsecretsecretsecret", &auth) == 0);
        CHECK_STREQ(auth, "Basic YWJjMTIzOnMzY3JldHNlY3JldHNlY3JldHNlY3JldA==");
        CHECK(est_basic_parse(auth, user, &password) == 0);
        CHECK_STREQ(user, "abc123");
        CHECK_STREQ(password, "s3cretsecretsecretsecret");
        secret_free(password);
        secret_free(auth);
        /* A password may hold ':'; the user may not be empty; no password is refused. */
        CHECK(est_basic_parse("basic dTpwOnE=", user, &password) == 0); /* "u:p:q" */
        CHECK_STREQ(password, "p:q");
        secret_free(password);
        CHECK(est_basic_parse("Basic OnA=", user, &password) == -HWID_E_INVALID);    /* ":p" */
        CHECK(est_basic_parse("Basic dTo=", user, &password) == -HWID_E_INVALID);    /* "u:" */
        CHECK(est_basic_parse("Basic dXA=", user, &password) == -HWID_E_INVALID);    /* "up" */
        CHECK(est_basic_parse("Basic dQBwOnE=", user, &password) == -HWID_E_INVALID); /* NUL inside */
        CHECK(est_basic_parse("Basic !!!!", user, &password) == -HWID_E_INVALID);
        CHECK(est_basic_parse("Bearer abc.def", user, &password) == -HWID_E_INVALID);
        CHECK(est_basic_parse(NULL, user, &password) == -HWID_E_INVALID);
        CHECK(est_basic_make("a:b", "x", &auth) == -HWID_E_INVALID);
}

int main(void) {
        decodes_with_line_breaks();
        refuses_what_is_not_base64();
        certs_only_round_trip();
        basic_credentials();
        return check_done("test-est-wire");
}
