/* EK allowlist entries (ek-entry.h): hashes from an EK certificate or
 * given, names and profile checked against the configuration. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/pem.h>
#include <openssl/sha.h>

#include "attest-verify.h"
#include "ek-entry.h"
#include "error.h"
#include "ossl-util.h"

static void hex(const uint8_t *p, size_t n, char *out) {
        for (size_t i = 0; i < n; i++)
                snprintf(out + 2 * i, 3, "%02x", p[i]);
}

/* PEM or DER, one certificate, into DER. */
static int cert_der(const uint8_t *data, size_t len, const char *what, uint8_t **ret, size_t *ret_len) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new_mem_buf(data, (int) len);
        _cleanup_(X509_freep) X509 *x = NULL;
        const unsigned char *p = data;
        unsigned char *der = NULL;
        int n;

        x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
        if (!x)
                x = d2i_X509(NULL, &p, (long) len);
        if (!x)
                return hwid_fail_ossl(HWID_E_INVALID, "%s holds no certificate (PEM or DER)", what);
        n = i2d_X509(x, &der);
        if (n <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode %s", what);
        *ret = der;
        *ret_len = (size_t) n;
        return 0;
}

int ek_entry_from_cert(const hwidd_config *cfg, const uint8_t *data, size_t len, const char *what, store_ek *e) {
        _cleanup_(X509_freep) X509 *x = NULL;
        uint8_t *der = NULL, cert_sha[32], pub_sha[32];
        size_t der_len;
        int r;

        if ((r = cert_der(data, len, what, &der, &der_len)) < 0)
                return r;
        if (cfg->ek_roots && (r = attest_ek_cert_verify(cfg->ek_roots, der, der_len, &x)) < 0)
                r = hwid_fail(HWID_E_INVALID, "%s cannot attest with this CA: %s", what, hwid_strerror(r));
        if (r >= 0)
                r = attest_ek_pub_sha256(der, der_len, pub_sha);
        SHA256(der, der_len, cert_sha);
        OPENSSL_free(der);
        if (r < 0)
                return r;
        hex(cert_sha, sizeof(cert_sha), e->ek_cert_sha256);
        hex(pub_sha, sizeof(pub_sha), e->ek_pub_sha256);
        return 0;
}

int ek_entry_pub_hash(const char *s, const char *what, store_ek *e) {
        if (strncmp(s, "sha256:", 7) == 0)
                s += 7;
        if (strlen(s) != 64 || strspn(s, "0123456789abcdefABCDEF") != 64)
                return hwid_fail(HWID_E_INVALID, "%s: an EK public key hash is 64 hex digits (sha256:<hex> of its "
                                 "SubjectPublicKeyInfo)", what);
        for (size_t i = 0; i < 64; i++)
                e->ek_pub_sha256[i] = (char) (s[i] >= 'A' && s[i] <= 'F' ? s[i] - 'A' + 'a' : s[i]);
        e->ek_pub_sha256[64] = '\0';
        return 0;
}

static bool name_ok(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > EK_NAME_MAX)
                return false;
        for (const unsigned char *p = (const unsigned char *) s; *p; p++)
                if (*p < 0x20 || *p == 0x7f)
                        return false;
        return true;
}

int ek_entry_names(const hwidd_config *cfg, const char *name, const char *profile, const char *what, store_ek *e) {
        if (!name || !name_ok(name))
                return hwid_fail(HWID_E_INVALID, "%s: the name (CN) must be 1-%d printable bytes", what, EK_NAME_MAX);
        if (!profile || !policy_profile_find(cfg->policy, profile))
                return hwid_fail(HWID_E_INVALID, "%s: no profile '%s' in %s", what, profile ? profile : "", cfg->path);
        e->identity = strdup(name);
        e->profile = strdup(profile);
        return e->identity && e->profile ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}
