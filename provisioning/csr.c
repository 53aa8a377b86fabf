#include <string.h>

#include <openssl/pem.h>

#include "csr.h"
#include "error.h"
#include "ossl-util.h"

static int san_extension(const GENERAL_NAMES *sans, STACK_OF(X509_EXTENSION) **ret) {
        _cleanup_(sk_X509_EXTENSION_pop_freep) STACK_OF(X509_EXTENSION) *exts = sk_X509_EXTENSION_new_null();
        X509_EXTENSION *ext;

        if (!exts)
                return hwid_fail(HWID_E_NOMEM, NULL);
        ext = X509V3_EXT_i2d(NID_subject_alt_name, 0, (void *) sans);
        if (!ext || !sk_X509_EXTENSION_push(exts, ext)) {
                X509_EXTENSION_free(ext);
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode subjectAltName");
        }
        *ret = TAKE_PTR(exts);
        return 0;
}

static int sign_req(hwid_key *k, X509_REQ *req) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *mctx = EVP_MD_CTX_new();
        int r;

        if (!mctx)
                return hwid_fail(HWID_E_NOMEM, NULL);
        r = hwid_key_sign_init(k, mctx, NULL);
        if (r < 0)
                return r;
        hwid_error_clear();
        if (X509_REQ_sign_ctx(req, mctx) <= 0)
                return hwid_fail_signing("the request");
        return 0;
}

int csr_build(hwid_key *k, const X509_NAME *subject, const GENERAL_NAMES *sans, X509_REQ **ret) {
        _cleanup_(sk_X509_EXTENSION_pop_freep) STACK_OF(X509_EXTENSION) *exts = NULL;
        int r;

        if (sans && (r = san_extension(sans, &exts)) < 0)
                return r;
        return csr_build_ext(k, subject, exts, ret);
}

int csr_build_ext(hwid_key *k, const X509_NAME *subject, STACK_OF(X509_EXTENSION) *exts, X509_REQ **ret) {
        _cleanup_(X509_REQ_freep) X509_REQ *req = X509_REQ_new();
        int r;

        if (!req)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!X509_REQ_set_version(req, X509_REQ_VERSION_1) ||
            !X509_REQ_set_subject_name(req, subject) ||
            !X509_REQ_set_pubkey(req, hwid_key_public(k)))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot fill in the request");
        if (exts && sk_X509_EXTENSION_num(exts) > 0 && !X509_REQ_add_extensions(req, exts))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot add extensions to the request");
        r = sign_req(k, req);
        if (r < 0)
                return r;
        /* A device that answered with a bad signature is caught here, not
         * at the CA. */
        if (X509_REQ_verify(req, hwid_key_public(k)) != 1)
                return hwid_fail_ossl(HWID_E_CRYPTO, "the device's signature on the request does not verify");
        *ret = TAKE_PTR(req);
        return 0;
}

int csr_to_pem(X509_REQ *req, char **ret) {
        _cleanup_(BIO_free_allp) BIO *b = BIO_new(BIO_s_mem());
        char *data;
        long n;

        if (!b || !PEM_write_bio_X509_REQ(b, req))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode the request");
        n = BIO_get_mem_data(b, &data);
        *ret = strndup(data, (size_t) n);
        return *ret ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}
