#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/pkcs7.h>

#include "base64.h"
#include "error.h"
#include "est-wire.h"
#include "ossl-util.h"
#include "secret.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(PKCS7 *, PKCS7_free)

#define EST_BODY_MAX ((size_t) 1024 * 1024)

static bool is_space(uint8_t c) {
        return c == '\r' || c == '\n' || c == ' ' || c == '\t';
}

/* Why body is not base64, naming what it looks like instead. */
static int not_base64(const uint8_t *body, size_t len) {
        static const char pem[] = "-----BEGIN";

        if (len >= strlen(pem) && memcmp(body, pem, strlen(pem)) == 0)
                return hwid_fail(HWID_E_INVALID, "the body is PEM: EST sends the base64 of the DER alone, without "
                                 "-----BEGIN/END lines (RFC 7030 §4.2.1)");
        for (size_t i = 0; i < len; i++)
                if (body[i] >= 0x7f || (body[i] < 0x20 && !is_space(body[i])))
                        return hwid_fail(HWID_E_INVALID, "the body is binary (DER?): EST sends it base64-encoded "
                                         "(RFC 7030 §4, Content-Transfer-Encoding: base64)");
        return 0;
}

int est_b64_decode(const uint8_t *body, size_t len, uint8_t **ret, size_t *ret_len) {
        _cleanup_free_ char *text = NULL;
        size_t n = 0;
        int r;

        if (len > EST_BODY_MAX)
                return hwid_fail(HWID_E_TOO_LARGE, "the body is larger than %zu bytes", EST_BODY_MAX);
        if ((r = not_base64(body, len)) < 0)
                return r;
        if (!(text = malloc(len + 1)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (size_t i = 0; i < len; i++)
                if (!is_space(body[i]))
                        text[n++] = (char) body[i];
        if (n == 0)
                return hwid_fail(HWID_E_INVALID, "the body is empty");
        if ((r = base64_decode(text, n, false, ret, ret_len)) < 0)
                return hwid_fail(HWID_E_INVALID, "the body is not base64 (RFC 7030 §4): %s", hwid_strerror(r));
        return 0;
}

int est_b64_encode(const uint8_t *der, size_t len, buf *out) {
        _cleanup_free_ char *text = NULL;
        size_t n;
        int r;

        if ((r = base64_encode(der, len, false, &text)) < 0)
                return r;
        n = strlen(text);
        for (size_t i = 0; i < n; i += EST_B64_LINE)
                if ((r = buf_append(out, text + i, n - i < EST_B64_LINE ? n - i : EST_B64_LINE)) < 0 ||
                    (r = buf_append(out, "\n", 1)) < 0)
                        return r;
        return 0;
}

/* An empty SignedData: version 1, no digest algorithms, id-data content
 * without eContent, no signers; certificates added by the caller. */
static int certs_only_new(PKCS7 **ret) {
        _cleanup_(PKCS7_freep) PKCS7 *p7 = PKCS7_new();
        PKCS7_SIGNED *s = PKCS7_SIGNED_new();

        if (!p7 || !s) {
                PKCS7_SIGNED_free(s);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        p7->type = OBJ_nid2obj(NID_pkcs7_signed);
        p7->d.sign = s;
        s->contents->type = OBJ_nid2obj(NID_pkcs7_data);
        if (!ASN1_INTEGER_set(s->version, 1) || !(s->cert = sk_X509_new_null()))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot build a PKCS#7 certs-only structure");
        *ret = TAKE_PTR(p7);
        return 0;
}

int est_certs_only_from_pem(const char *pem, uint8_t **ret, size_t *ret_len) {
        _cleanup_(PKCS7_freep) PKCS7 *p7 = NULL;
        _cleanup_(BIO_free_allp) BIO *in = BIO_new_mem_buf(pem, -1);
        unsigned char *der = NULL;
        X509 *x;
        int r, n;

        if (!in)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = certs_only_new(&p7)) < 0)
                return r;
        while ((x = PEM_read_bio_X509(in, NULL, NULL, NULL)))
                if (!sk_X509_push(p7->d.sign->cert, x)) {
                        X509_free(x);
                        return hwid_fail(HWID_E_NOMEM, NULL);
                }
        ERR_clear_error();
        if (sk_X509_num(p7->d.sign->cert) == 0)
                return hwid_fail(HWID_E_INTERNAL, "no certificate to send");
        if ((n = i2d_PKCS7(p7, &der)) <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode the PKCS#7 certs-only structure");
        *ret = der;
        *ret_len = (size_t) n;
        return 0;
}

int est_certs_only_to_pem(const uint8_t *der, size_t len, char **ret) {
        const unsigned char *p = der;
        _cleanup_(PKCS7_freep) PKCS7 *p7 = d2i_PKCS7(NULL, &p, (long) len);
        _cleanup_(BIO_free_allp) BIO *out = BIO_new(BIO_s_mem());
        STACK_OF(X509) *certs;
        char *data, *s;
        long n;

        if (!out)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!p7 || p != der + len || !PKCS7_type_is_signed(p7) || !p7->d.sign)
                return hwid_fail_ossl(HWID_E_INVALID, "the answer is not a PKCS#7 SignedData");
        certs = p7->d.sign->cert;
        if (sk_X509_num(certs) <= 0)
                return hwid_fail(HWID_E_INVALID, "the PKCS#7 answer holds no certificate");
        for (int i = 0; i < sk_X509_num(certs); i++)
                if (!PEM_write_bio_X509(out, sk_X509_value(certs, i)))
                        return hwid_fail_ossl(HWID_E_CRYPTO, "cannot write a certificate as PEM");
        n = BIO_get_mem_data(out, &data);
        if (n <= 0 || !(s = strndup(data, (size_t) n)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        *ret = s;
        return 0;
}

/* Decodes the base64 of credentials into a wiped-on-free buffer. */
static int basic_decode(const char *b64, char **ret) {
        size_t n = strlen(b64), pad = 0, size = n / 4 * 3 + 1;
        _cleanup_secret_ char *out = NULL;
        int w;

        if (n == 0 || n % 4 != 0 || n > 4 * (EST_USER_MAX + EST_PASSWORD_MAX))
                return hwid_fail(HWID_E_INVALID, "the Basic credentials are not base64");
        for (size_t i = 0; i < n; i++)
                if (!strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=", b64[i]) ||
                    (b64[i] == '=' && i < n - 2))
                        return hwid_fail(HWID_E_INVALID, "the Basic credentials are not base64");
        while (pad < 2 && b64[n - 1 - pad] == '=')
                pad++;
        if (!(out = calloc(1, size)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        w = EVP_DecodeBlock((unsigned char *) out, (const unsigned char *) b64, (int) n);
        if (w < 0 || (size_t) w < pad || memchr(out, '\0', (size_t) w - pad)) {
                secret_wipe(out, size); /* secret_free() would stop at the NUL */
                return hwid_fail(HWID_E_INVALID, "the Basic credentials are not base64 of text");
        }
        out[w - (int) pad] = '\0';
        *ret = TAKE_PTR(out);
        return 0;
}

int est_basic_parse(const char *authorization, char ret_user[EST_USER_MAX + 1], char **ret_password) {
        _cleanup_secret_ char *plain = NULL;
        char *colon, *password;
        size_t ulen;
        int r;

        if (!authorization || strncasecmp(authorization, "Basic ", 6) != 0)
                return hwid_fail(HWID_E_INVALID, "no HTTP Basic credentials");
        authorization += 6;
        authorization += strspn(authorization, " ");
        if ((r = basic_decode(authorization, &plain)) < 0)
                return r;
        if (!(colon = strchr(plain, ':')))
                return hwid_fail(HWID_E_INVALID, "the Basic credentials are not user:password");
        ulen = (size_t) (colon - plain);
        if (ulen == 0 || ulen > EST_USER_MAX || !colon[1])
                return hwid_fail(HWID_E_INVALID, "the Basic credentials have an empty or overlong part");
        if (!(password = strdup(colon + 1)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        memcpy(ret_user, plain, ulen);
        ret_user[ulen] = '\0';
        *ret_password = password;
        return 0;
}

int est_basic_make(const char *user, const char *password, char **ret) {
        size_t ul = strlen(user), pl = strlen(password), n = ul + 1 + pl;
        _cleanup_secret_ char *plain = NULL, *out = NULL;

        if (ul == 0 || ul > EST_USER_MAX || strchr(user, ':') || pl > EST_PASSWORD_MAX)
                return hwid_fail(HWID_E_INVALID, "credentials unfit for HTTP Basic");
        if (!(plain = malloc(n + 1)) || !(out = calloc(1, 6 + 4 * ((n + 2) / 3) + 1)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        memcpy(plain, user, ul);
        plain[ul] = ':';
        memcpy(plain + ul + 1, password, pl + 1);
        memcpy(out, "Basic ", 6);
        EVP_EncodeBlock((unsigned char *) out + 6, (const unsigned char *) plain, (int) n);
        *ret = TAKE_PTR(out);
        return 0;
}
