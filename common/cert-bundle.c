/* A bundle of trusted certificates read from PEM or DER files and
 * directories (cert-bundle.h): today the TPM manufacturers' EK CAs of
 * attestation.ek_roots, read with the configuration so that roots that
 * cannot be read are refused at start and on SIGHUP. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/err.h>
#include <openssl/pem.h>

#include "cert-bundle.h"
#include "error.h"
#include "fsutil.h"
#include "ossl-util.h"

/* A CA bundle bigger than this is not one. */
#define BUNDLE_FILE_MAX (4 * 1024 * 1024)

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir)

struct cert_bundle {
        X509_STORE *store;
        size_t count;
};

/* Every certificate in a PEM file (other PEM blocks, such as keys, are
 * skipped unread: nothing may ask for a password), or the one of a DER
 * file; none is not an error here. */
static int load_certs(cert_bundle *b, const char *path, size_t *ret_added) {
        _cleanup_free_ char *data = NULL;
        _cleanup_(BIO_free_allp) BIO *bio = NULL;
        _cleanup_(X509_freep) X509 *der = NULL;
        const unsigned char *p;
        size_t len, added = 0;
        X509 *x;
        int r;

        r = read_file_capped(path, BUNDLE_FILE_MAX, &data, &len);
        if (r < 0)
                return r;
        bio = BIO_new_mem_buf(data, (int) len);
        while (bio && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL))) {
                r = X509_STORE_add_cert(b->store, x);
                X509_free(x);
                if (!r)
                        return hwid_fail_ossl(HWID_E_CONFIG, "cannot add a certificate of %s", path);
                added++;
        }
        ERR_clear_error(); /* the end of the PEM data, or DER */
        p = (const unsigned char *) data;
        if (added == 0 && (der = d2i_X509(NULL, &p, (long) len)) && p == (const unsigned char *) data + len) {
                if (!X509_STORE_add_cert(b->store, der))
                        return hwid_fail_ossl(HWID_E_CONFIG, "cannot add the certificate of %s", path);
                added = 1;
        }
        ERR_clear_error();
        b->count += added;
        *ret_added = added;
        return 0;
}

/* Every regular file of a directory that holds a certificate (others, such
 * as a README, are passed over). */
static int load_dir(cert_bundle *b, const char *what, const char *path) {
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
                r = load_certs(b, file, &added);
                if (r < 0)
                        return r;
                total += added;
        }
        if (total == 0)
                return hwid_fail(HWID_E_CONFIG, "no certificate in the %s directory %s", what, path);
        return 0;
}

static int load_path(cert_bundle *b, const char *what, const char *path) {
        struct stat st;
        size_t added = 0;
        int r;

        if (stat(path, &st) < 0)
                return hwid_fail(HWID_E_CONFIG, "%s %s: %s", what, path, strerror(errno));
        if (S_ISDIR(st.st_mode))
                return load_dir(b, what, path);
        r = load_certs(b, path, &added);
        if (r < 0)
                return r;
        if (added == 0)
                return hwid_fail(HWID_E_CONFIG, "%s holds no certificate (PEM or DER)", path);
        return 0;
}

void cert_bundle_free(cert_bundle *b) {
        if (!b)
                return;
        X509_STORE_free(b->store);
        free(b);
}

int cert_bundle_load(const char *what, const char *const *paths, size_t n, cert_bundle **ret) {
        _cleanup_(cert_bundle_freep) cert_bundle *b = calloc(1, sizeof(*b));
        int r;

        if (!b || !(b->store = X509_STORE_new()))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (n == 0)
                return hwid_fail(HWID_E_CONFIG, "no %s configured", what);
        for (size_t i = 0; i < n; i++) {
                r = load_path(b, what, paths[i]);
                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(b);
        return 0;
}


size_t cert_bundle_count(const cert_bundle *b) {
        return b->count;
}

X509_STORE *cert_bundle_store(const cert_bundle *b) {
        return b->store;
}
