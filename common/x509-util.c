#include <ctype.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "buf.h"
#include "error.h"
#include "ossl-util.h"
#include "x509-util.h"

static int has_control(const char *s) {
        for (; *s; s++)
                if ((unsigned char) *s < 0x20 || *s == 0x7f)
                        return 1;
        return 0;
}

/* Splits one "TYPE=value" component off *p (unescaping "\/"), advancing *p. */
static int dn_next(const char **p, char *out, size_t outsz) {
        size_t n = 0;

        for (; **p && **p != '/'; (*p)++) {
                char ch = **p;
                if (ch == '\\' && (*p)[1]) {
                        (*p)++;
                        ch = **p;
                }
                if (n + 1 >= outsz)
                        return hwid_fail(HWID_E_INVALID, "subject component too long");
                out[n++] = ch;
        }
        out[n] = '\0';
        return 0;
}

static int dn_add(X509_NAME *name, char *comp) {
        char *eq = strchr(comp, '=');

        if (!eq || eq == comp)
                return hwid_fail(HWID_E_INVALID, "subject component '%s' is not TYPE=value", comp);
        *eq = '\0';
        if (!eq[1])
                return hwid_fail(HWID_E_INVALID, "subject attribute %s has an empty value", comp);
        if (!X509_NAME_add_entry_by_txt(name, comp, MBSTRING_UTF8, (unsigned char *) eq + 1, -1, -1, 0)) {
                ERR_clear_error();
                return hwid_fail(HWID_E_INVALID, "subject attribute '%s=%s' is not valid "
                                                 "(unknown type or value too long)", comp, eq + 1);
        }
        return 0;
}

int dn_parse(const char *s, X509_NAME **ret) {
        _cleanup_(X509_NAME_freep) X509_NAME *name = NULL;
        char comp[DN_MAX + 1];
        const char *p = s;
        int r;

        if (!s || strnlen(s, DN_MAX + 1) > DN_MAX)
                return hwid_fail(HWID_E_INVALID, "subject is empty or longer than %d bytes", DN_MAX);
        if (s[0] != '/')
                return hwid_fail(HWID_E_INVALID, "subject must look like /CN=name/O=org");
        if (has_control(s))
                return hwid_fail(HWID_E_INVALID, "subject contains a control character");
        name = X509_NAME_new();
        if (!name)
                return hwid_fail(HWID_E_NOMEM, NULL);
        while (*p == '/') {
                p++;
                if ((r = dn_next(&p, comp, sizeof(comp))) < 0 || (r = dn_add(name, comp)) < 0)
                        return r;
        }
        if (X509_NAME_entry_count(name) == 0)
                return hwid_fail(HWID_E_INVALID, "subject has no attributes");
        *ret = TAKE_PTR(name);
        return 0;
}

static int san_one(const char *item, GENERAL_NAME **ret) {
        static const struct { const char *prefix; int type; } kinds[] = {
                { "dns:", GEN_DNS }, { "uri:", GEN_URI }, { "email:", GEN_EMAIL }, { "ip:", GEN_IPADD },
        };

        for (size_t i = 0; i < ELEMENTSOF(kinds); i++) {
                size_t pl = strlen(kinds[i].prefix);
                GENERAL_NAME *gn;

                if (strncasecmp(item, kinds[i].prefix, pl) != 0)
                        continue;
                if (!item[pl])
                        return hwid_fail(HWID_E_INVALID, "subjectAltName '%s' has no value", item);
                gn = a2i_GENERAL_NAME(NULL, NULL, NULL, kinds[i].type, item + pl, 0);
                if (!gn) {
                        ERR_clear_error();
                        return hwid_fail(HWID_E_INVALID, "subjectAltName '%s' is not valid", item);
                }
                *ret = gn;
                return 0;
        }
        return hwid_fail(HWID_E_INVALID, "subjectAltName '%s' must start with dns:, ip:, uri: or email:", item);
}

int san_parse(const char *s, GENERAL_NAMES **ret) {
        _cleanup_(GENERAL_NAMES_freep) GENERAL_NAMES *gens = NULL;
        _cleanup_free_ char *copy = NULL;
        char *save = NULL;
        int r;

        if (!s || !*s || strlen(s) > SAN_LIST_MAX)
                return hwid_fail(HWID_E_INVALID, "subjectAltName list is empty or longer than %d bytes",
                                 SAN_LIST_MAX);
        if (has_control(s))
                return hwid_fail(HWID_E_INVALID, "subjectAltName list contains a control character");
        copy = strdup(s);
        gens = GENERAL_NAMES_new();
        if (!copy || !gens)
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
                GENERAL_NAME *gn = NULL;
                if ((r = san_one(item, &gn)) < 0)
                        return r;
                if (!sk_GENERAL_NAME_push(gens, gn)) {
                        GENERAL_NAME_free(gn);
                        return hwid_fail(HWID_E_NOMEM, NULL);
                }
        }
        if (sk_GENERAL_NAME_num(gens) == 0)
                return hwid_fail(HWID_E_INVALID, "subjectAltName list is empty");
        *ret = TAKE_PTR(gens);
        return 0;
}

static int sha256_hex(const unsigned char *der, int len, char ret[65]) {
        static const char digits[] = "0123456789abcdef";
        unsigned char md[32];

        if (len <= 0 || !EVP_Digest(der, (size_t) len, md, NULL, EVP_sha256(), NULL))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode the public key");
        /* Not snprintf() per byte: every issuance takes this fingerprint. */
        for (int i = 0; i < 32; i++) {
                ret[2 * i] = digits[md[i] >> 4];
                ret[2 * i + 1] = digits[md[i] & 0xf];
        }
        ret[64] = '\0';
        return 0;
}

int spki_sha256_hex(EVP_PKEY *pkey, char ret[65]) {
        _cleanup_(OPENSSL_freep) unsigned char *der = NULL;
        int len = i2d_PUBKEY(pkey, &der);

        return sha256_hex(der, len, ret);
}

int spki_der_sha256_hex(const X509_PUBKEY *spki, char ret[65]) {
        _cleanup_(OPENSSL_freep) unsigned char *der = NULL;
        int len = i2d_X509_PUBKEY(spki, &der);

        return sha256_hex(der, len, ret);
}

int spki_sha256_pin(EVP_PKEY *pkey, char ret[72]) {
        char hex[65];
        int r = spki_sha256_hex(pkey, hex);

        if (r < 0)
                return r;
        snprintf(ret, 72, "sha256:%s", hex);
        return 0;
}

int pubkey_to_pem(EVP_PKEY *pkey, char **ret) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new(BIO_s_mem());
        char *data;
        long n;

        if (!b || !PEM_write_bio_PUBKEY(b, pkey))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode the public key");
        n = BIO_get_mem_data(b, &data);
        *ret = strndup(data, (size_t) n);
        return *ret ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}

int name_to_string(const X509_NAME *name, char **ret) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new(BIO_s_mem());
        char *data;
        long n;

        if (!b || X509_NAME_print_ex(b, name, 0, XN_FLAG_RFC2253 & ~ASN1_STRFLGS_ESC_MSB) < 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot print a name");
        n = BIO_get_mem_data(b, &data);
        *ret = strndup(data, (size_t) n);
        return *ret ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}

/* PEM from DER directly: PEM_write_bio_X509() encodes the certificate
 * once more and goes through a BIO, a few percent of an issuance that
 * already has the DER at hand. */
int der_to_pem(const uint8_t *der, size_t len, const char *label, char **ret) {
        size_t lines = (len + 47) / 48, cap = strlen(label) * 2 + 40 + lines * 65 + 1;
        _cleanup_free_ char *pem = malloc(cap);
        size_t n;

        if (!pem)
                return hwid_fail(HWID_E_NOMEM, NULL);
        n = (size_t) snprintf(pem, cap, "-----BEGIN %s-----\n", label);
        for (size_t off = 0; off < len; off += 48) {
                /* 48 bytes make one line of 64 characters, as PEM wants. */
                int chunk = (int) (len - off < 48 ? len - off : 48);

                n += (size_t) EVP_EncodeBlock((unsigned char *) pem + n, der + off, chunk);
                pem[n++] = '\n';
        }
        snprintf(pem + n, cap - n, "-----END %s-----\n", label);
        *ret = TAKE_PTR(pem);
        return 0;
}

int cert_to_pem(X509 *x, char **ret) {
        _cleanup_(OPENSSL_freep) unsigned char *der = NULL;
        int len = i2d_X509(x, &der);

        if (len <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode a certificate");
        return der_to_pem(der, (size_t) len, "CERTIFICATE", ret);
}

int cert_der_to_pem(const uint8_t *der, size_t len, char **ret) {
        const unsigned char *p = der;
        _cleanup_(X509_freep) X509 *x = d2i_X509(NULL, &p, (long) len);

        if (!x) {
                ERR_clear_error();
                return hwid_fail(HWID_E_INVALID, "stored certificate cannot be parsed");
        }
        return der_to_pem(der, len, "CERTIFICATE", ret); /* the bytes as stored */
}

void strv_free_n(char **v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                free(v[i]);
        free(v);
}

int general_names_dns(const GENERAL_NAMES *gens, char ***ret, size_t *ret_n) {
        char **names = NULL;
        size_t n = 0;
        int count = gens ? sk_GENERAL_NAME_num(gens) : 0, r = 0;

        if (count > 0 && !(names = calloc((size_t) count, sizeof(*names))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (int i = 0; r >= 0 && i < count; i++) {
                const GENERAL_NAME *gn = sk_GENERAL_NAME_value(gens, i);
                const ASN1_IA5STRING *s = gn->type == GEN_DNS ? gn->d.dNSName : NULL;
                if (!s)
                        continue;
                names[n] = strndup((const char *) ASN1_STRING_get0_data(s), (size_t) ASN1_STRING_length(s));
                if (!names[n++])
                        r = hwid_fail(HWID_E_NOMEM, NULL);
        }
        if (r < 0) {
                strv_free_n(names, n);
                return r;
        }
        *ret = names;
        *ret_n = n;
        return 0;
}

int x509_dns_names(const X509 *x, char ***ret, size_t *ret_n) {
        _cleanup_(GENERAL_NAMES_freep) GENERAL_NAMES *gens = X509_get_ext_d2i(x, NID_subject_alt_name, NULL, NULL);

        ERR_clear_error(); /* no subjectAltName at all is not a failure */
        return general_names_dns(gens, ret, ret_n);
}

int der_dns_names(const void *der, size_t len, char ***ret, size_t *ret_n) {
        const unsigned char *p = der;
        _cleanup_(X509_freep) X509 *x = d2i_X509(NULL, &p, (long) len);

        if (!x)
                return hwid_fail_ossl(HWID_E_CRYPTO, "a stored certificate cannot be read");
        return x509_dns_names(x, ret, ret_n);
}

int x509_not_after(const X509 *x, int64_t *ret) {
        struct tm tm;

        if (!ASN1_TIME_to_tm(X509_get0_notAfter(x), &tm))
                return hwid_fail(HWID_E_CRYPTO, "certificate time cannot be read");
        *ret = (int64_t) timegm(&tm);
        return 0;
}

void normalize_serial(const char *in, char *out, size_t n) {
        size_t j = 0;

        if (n == 0)
                return;
        if (strncasecmp(in, "0x", 2) == 0)
                in += 2;
        for (; *in && j + 1 < n; in++)
                if (*in != ':')
                        out[j++] = (char) toupper((unsigned char) *in);
        out[j] = '\0';
}

int serial_to_hex(const ASN1_INTEGER *serial, char **ret) {
        _cleanup_(BN_freep) BIGNUM *bn = ASN1_INTEGER_to_BN(serial, NULL);
        char *hex = bn ? BN_bn2hex(bn) : NULL;

        if (!hex)
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot format a serial number");
        *ret = strdup(hex);
        OPENSSL_free(hex);
        return *ret ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}

/* Self-signed certificates of the chain are the roots it may reach. */
static int chains_to_root(X509 *cert, STACK_OF(X509) *chain) {
        _cleanup_(X509_STORE_freep) X509_STORE *st = X509_STORE_new();
        _cleanup_(X509_STORE_CTX_freep) X509_STORE_CTX *ctx = X509_STORE_CTX_new();
        int ok;

        if (!st || !ctx)
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (int i = 0; i < sk_X509_num(chain); i++)
                if (X509_self_signed(sk_X509_value(chain, i), 0) == 1)
                        X509_STORE_add_cert(st, sk_X509_value(chain, i));
        if (!X509_STORE_CTX_init(ctx, st, cert, chain))
                return hwid_fail(HWID_E_NOMEM, NULL);
        ok = X509_verify_cert(ctx) == 1;
        ERR_clear_error();
        if (!ok)
                return hwid_fail(HWID_E_INVALID, "the certificate does not chain to a root of the chain: %s",
                                 X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
        return 0;
}

int x509_check_intermediate(X509 *cert, EVP_PKEY *pub, const char *key_name, STACK_OF(X509) *chain) {
        if (EVP_PKEY_eq(X509_get0_pubkey(cert), pub) != 1)
                return hwid_fail(HWID_E_INVALID, "the certificate is not for the key %s", key_name);
        if (X509_check_ca(cert) <= 0 || !(X509_get_key_usage(cert) & KU_KEY_CERT_SIGN))
                return hwid_fail(HWID_E_INVALID, "the certificate is not a CA certificate (CA:TRUE, keyCertSign)");
        return chains_to_root(cert, chain);
}
