/* TPM manufacturers' CA certificates and the EK certificate chain.
 *
 * A deployment lists its TPM vendors' EK CAs (PEM as configuration files
 * usually are, or DER as vendors often publish them), roots and
 * intermediates alike; a chain must end at a self-signed root among them. */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/sha.h>

#include "attest-verify.h"
#include "error.h"
#include "fsutil.h"
#include "ossl-util.h"

/* A CA bundle bigger than this is not one. */
#define ROOTS_FILE_MAX (4 * 1024 * 1024)
/* tcg-kp-EKCertificate (TCG EK Credential Profile). */
#define OID_TCG_KP_EK_CERTIFICATE "2.23.133.8.1"

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir)
DEFINE_TRIVIAL_CLEANUP_FUNC(ASN1_OBJECT *, ASN1_OBJECT_free)

struct attest_roots {
        X509_STORE *store;
        size_t count;
};

/* Every certificate in a PEM file (other PEM blocks, such as keys, are
 * skipped unread: nothing may ask for a password), or the one of a DER
 * file; none is not an error here. */
static int load_certs(attest_roots *roots, const char *path, size_t *ret_added) {
        _cleanup_free_ char *data = NULL;
        _cleanup_(BIO_free_allp) BIO *bio = NULL;
        _cleanup_(X509_freep) X509 *der = NULL;
        const unsigned char *p;
        size_t len, added = 0;
        X509 *x;
        int r;

        r = read_file_capped(path, ROOTS_FILE_MAX, &data, &len);
        if (r < 0)
                return r;
        bio = BIO_new_mem_buf(data, (int) len);
        while (bio && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
                r = X509_STORE_add_cert(roots->store, x);
                X509_free(x);
                if (!r)
                        return hwid_fail_ossl(HWID_E_CONFIG, "cannot add a certificate of %s", path);
                added++;
        }
        ERR_clear_error(); /* the end of the PEM data, or DER */
        p = (const unsigned char *) data;
        if (added == 0 && (der = d2i_X509(NULL, &p, (long) len)) && p == (const unsigned char *) data + len) {
                if (!X509_STORE_add_cert(roots->store, der))
                        return hwid_fail_ossl(HWID_E_CONFIG, "cannot add the certificate of %s", path);
                added = 1;
        }
        ERR_clear_error();
        roots->count += added;
        *ret_added = added;
        return 0;
}

/* Every regular file of a directory that holds a certificate (others, such
 * as a README, are passed over). */
static int load_dir(attest_roots *roots, const char *path) {
        _cleanup_(closedirp) DIR *d = opendir(path);
        size_t total = 0;
        struct dirent *e;

        if (!d)
                return hwid_fail(HWID_E_CONFIG, "cannot open %s: %s", path, strerror(errno));
        while ((e = readdir(d))) {
                _cleanup_free_ char *file = NULL;
                size_t added = 0;
                struct stat st;
                int r;

                if (e->d_name[0] == '.')
                        continue;
                if (asprintf(&file, "%s/%s", path, e->d_name) < 0) {
                        file = NULL;
                        return hwid_fail(HWID_E_NOMEM, NULL);
                }
                if (stat(file, &st) < 0 || !S_ISREG(st.st_mode))
                        continue;
                r = load_certs(roots, file, &added);
                if (r < 0)
                        return r;
                total += added;
        }
        if (total == 0)
                return hwid_fail(HWID_E_CONFIG, "no certificate in the EK roots directory %s", path);
        return 0;
}

static int load_path(attest_roots *roots, const char *path) {
        struct stat st;
        size_t added = 0;
        int r;

        if (stat(path, &st) < 0)
                return hwid_fail(HWID_E_CONFIG, "EK roots %s: %s", path, strerror(errno));
        if (S_ISDIR(st.st_mode))
                return load_dir(roots, path);
        r = load_certs(roots, path, &added);
        if (r < 0)
                return r;
        if (added == 0)
                return hwid_fail(HWID_E_CONFIG, "%s holds no certificate (PEM or DER)", path);
        return 0;
}

void attest_roots_free(attest_roots *r) {
        if (!r)
                return;
        X509_STORE_free(r->store);
        free(r);
}

int attest_roots_load(const char *const *paths, size_t n, attest_roots **ret) {
        _cleanup_(attest_roots_freep) attest_roots *roots = calloc(1, sizeof(*roots));
        int r;

        if (!roots || !(roots->store = X509_STORE_new()))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (n == 0)
                return hwid_fail(HWID_E_CONFIG, "no EK roots configured");
        for (size_t i = 0; i < n; i++) {
                r = load_path(roots, paths[i]);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(roots);
        return 0;
}

size_t attest_roots_count(const attest_roots *r) {
        return r->count;
}

/* The EK's critical extensions OpenSSL does not process are all ones the
 * TCG EK profile uses and that carry no constraint we would miss:
 * subjectDirectoryAttributes (TPM specification, security assertions). */
static bool only_tcg_critical(X509 *x) {
        for (int i = 0; i < X509_get_ext_count(x); i++) {
                X509_EXTENSION *ext = X509_get_ext(x, i);

                if (!X509_EXTENSION_get_critical(ext) || X509_supported_extension(ext))
                        continue;
                if (OBJ_obj2nid(X509_EXTENSION_get_object(ext)) != NID_subject_directory_attributes)
                        return false;
        }
        return true;
}

static int ek_verify_cb(int ok, X509_STORE_CTX *ctx) {
        if (!ok && X509_STORE_CTX_get_error(ctx) == X509_V_ERR_UNHANDLED_CRITICAL_EXTENSION &&
            X509_STORE_CTX_get_error_depth(ctx) == 0 && only_tcg_critical(X509_STORE_CTX_get_current_cert(ctx)))
                return 1;
        return ok;
}

/* An EK certificate is an end entity; with an EKU, one for EKs. */
static int check_ek_usage(X509 *x) {
        _cleanup_(ASN1_OBJECT_freep) ASN1_OBJECT *ek_kp = OBJ_txt2obj(OID_TCG_KP_EK_CERTIFICATE, 1);
        EXTENDED_KEY_USAGE *eku;
        bool found = false;
        int crit = 0;

        if ((X509_get_extension_flags(x) & EXFLAG_CA) || X509_check_ca(x) != 0)
                return hwid_fail(HWID_E_ATTESTATION, "the EK certificate is a CA certificate");
        eku = X509_get_ext_d2i(x, NID_ext_key_usage, &crit, NULL);
        if (!eku)
                return crit == -1 ? 0 : hwid_fail(HWID_E_ATTESTATION, "the EK certificate's extendedKeyUsage is malformed");
        for (int i = 0; ek_kp && i < sk_ASN1_OBJECT_num(eku); i++)
                found |= OBJ_cmp(sk_ASN1_OBJECT_value(eku, i), ek_kp) == 0;
        EXTENDED_KEY_USAGE_free(eku);
        if (!found)
                return hwid_fail(HWID_E_ATTESTATION, "the EK certificate's extendedKeyUsage lacks "
                                 "tcg-kp-EKCertificate (" OID_TCG_KP_EK_CERTIFICATE ")");
        return 0;
}

int attest_ek_cert_verify(const attest_roots *roots, const uint8_t *der, size_t len, X509 **ret) {
        _cleanup_(X509_STORE_CTX_freep) X509_STORE_CTX *ctx = X509_STORE_CTX_new();
        const unsigned char *p = der;
        _cleanup_(X509_freep) X509 *x = NULL;
        int r;

        if (len == 0 || len > TPM_EK_CERT_MAX)
                return hwid_fail(HWID_E_INVALID, "an EK certificate of %zu bytes (at most %d)", len, TPM_EK_CERT_MAX);
        x = d2i_X509(NULL, &p, (long) len);
        if (!x || p != der + len) {
                ERR_clear_error();
                return hwid_fail(HWID_E_INVALID, "the EK certificate is not one DER certificate");
        }
        if (!ctx || !X509_STORE_CTX_init(ctx, roots->store, x, NULL))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot check the EK certificate");
        X509_STORE_CTX_set_verify_cb(ctx, ek_verify_cb);
        if (X509_verify_cert(ctx) != 1) {
                ERR_clear_error();
                return hwid_fail(HWID_E_ATTESTATION, "the EK certificate does not chain to a configured TPM "
                                 "manufacturer root: %s",
                                 X509_verify_cert_error_string(X509_STORE_CTX_get_error(ctx)));
        }
        r = check_ek_usage(x);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(x);
        return 0;
}
