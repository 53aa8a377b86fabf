/* Signature operations of hwid's provider.  The message is hashed here, in
 * software; the device receives the digest and signs it in one command.
 * A size query (sig == NULL) is answered from the public key without
 * touching the device, so one X.509 signature costs one device signature. */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/rsa.h>
#include <openssl/x509.h>

#include "provider.h"

typedef struct sig_ctx {
        prov_key *key;
        bool is_rsa;
        EVP_MD *md;
        EVP_MD_CTX *mdctx;
        bool md_explicit; /* digest named by the caller, not guessed */
        int pad_mode; /* RSA_PKCS1_PADDING or RSA_PKCS1_PSS_PADDING */
} sig_ctx;

static void *sig_newctx(bool is_rsa) {
        sig_ctx *c = OPENSSL_zalloc(sizeof(*c));

        if (c) {
                c->is_rsa = is_rsa;
                c->pad_mode = RSA_PKCS1_PADDING;
        }
        return c;
}

static void *ecdsa_newctx(void *provctx, const char *propq) {
        return sig_newctx(false);
}

static void *rsa_newctx(void *provctx, const char *propq) {
        return sig_newctx(true);
}

static void sig_freectx(void *ctx) {
        sig_ctx *c = ctx;

        if (!c)
                return;
        EVP_MD_CTX_free(c->mdctx);
        EVP_MD_free(c->md);
        OPENSSL_free(c);
}

static void *sig_dupctx(void *ctx) {
        sig_ctx *src = ctx, *c = OPENSSL_memdup(src, sizeof(*src));

        if (!c)
                return NULL;
        c->md = NULL;
        c->mdctx = NULL;
        if (src->md && !EVP_MD_up_ref(src->md))
                goto fail;
        c->md = src->md;
        if (src->mdctx) {
                c->mdctx = EVP_MD_CTX_new();
                if (!c->mdctx || !EVP_MD_CTX_copy_ex(c->mdctx, src->mdctx))
                        goto fail;
        }
        return c;
fail:
        sig_freectx(c);
        return NULL;
}

static int set_digest(sig_ctx *c, const char *mdname) {
        EVP_MD *md = EVP_MD_fetch(NULL, mdname, "provider=default");
        int nid;

        if (!md)
                return 0;
        nid = EVP_MD_get_type(md);
        if (nid != NID_sha256 && nid != NID_sha384 && nid != NID_sha512) {
                EVP_MD_free(md);
                return 0; /* hwid signs with SHA-2 only */
        }
        EVP_MD_free(c->md);
        c->md = md;
        return 1;
}

static int sig_set_ctx_params(void *ctx, const OSSL_PARAM params[]) {
        sig_ctx *c = ctx;
        const OSSL_PARAM *p;

        if ((p = OSSL_PARAM_locate_const(params, OSSL_SIGNATURE_PARAM_DIGEST))) {
                const char *name = NULL;
                if (!OSSL_PARAM_get_utf8_string_ptr(p, &name) || !set_digest(c, name))
                        return 0;
                c->md_explicit = true;
        }
        if (c->is_rsa && (p = OSSL_PARAM_locate_const(params, OSSL_SIGNATURE_PARAM_PAD_MODE))) {
                int mode = 0;
                const char *s = NULL;
                if (p->data_type == OSSL_PARAM_UTF8_STRING && OSSL_PARAM_get_utf8_string_ptr(p, &s))
                        mode = strcmp(s, OSSL_PKEY_RSA_PAD_MODE_PSS) == 0 ? RSA_PKCS1_PSS_PADDING
                             : strcmp(s, OSSL_PKEY_RSA_PAD_MODE_PKCSV15) == 0 ? RSA_PKCS1_PADDING : 0;
                else if (!OSSL_PARAM_get_int(p, &mode))
                        return 0;
                if (mode != RSA_PKCS1_PADDING && mode != RSA_PKCS1_PSS_PADDING)
                        return 0;
                c->pad_mode = mode;
        }
        /* PSS always uses salt length = digest length and MGF1 with the
         * signing digest (what TLS 1.3 requires); other values are refused
         * rather than silently ignored. */
        if ((p = OSSL_PARAM_locate_const(params, OSSL_SIGNATURE_PARAM_PSS_SALTLEN))) {
                const char *s = NULL;
                int len = 0;
                if (p->data_type == OSSL_PARAM_UTF8_STRING && OSSL_PARAM_get_utf8_string_ptr(p, &s)) {
                        if (strcmp(s, OSSL_PKEY_RSA_PSS_SALT_LEN_DIGEST) != 0 &&
                            strcmp(s, OSSL_PKEY_RSA_PSS_SALT_LEN_AUTO) != 0)
                                return 0;
                } else if (!OSSL_PARAM_get_int(p, &len) ||
                           (len != RSA_PSS_SALTLEN_DIGEST && len != RSA_PSS_SALTLEN_AUTO &&
                            (!c->md || len != EVP_MD_get_size(c->md))))
                        return 0;
        }
        if ((p = OSSL_PARAM_locate_const(params, OSSL_SIGNATURE_PARAM_MGF1_DIGEST))) {
                const char *name = NULL;
                if (!OSSL_PARAM_get_utf8_string_ptr(p, &name) || !c->md || !EVP_MD_is_a(c->md, name))
                        return 0;
        }
        return 1;
}

static const OSSL_PARAM *sig_settable_ctx_params(void *ctx, void *provctx) {
        static const OSSL_PARAM p[] = {
                OSSL_PARAM_utf8_string(OSSL_SIGNATURE_PARAM_DIGEST, NULL, 0),
                OSSL_PARAM_utf8_string(OSSL_SIGNATURE_PARAM_PAD_MODE, NULL, 0),
                OSSL_PARAM_utf8_string(OSSL_SIGNATURE_PARAM_PSS_SALTLEN, NULL, 0),
                OSSL_PARAM_utf8_string(OSSL_SIGNATURE_PARAM_MGF1_DIGEST, NULL, 0),
                OSSL_PARAM_END,
        };
        return p;
}

/* DER AlgorithmIdentifier of the signature, for X.509 signing. */
static int algorithm_id(const sig_ctx *c, OSSL_PARAM *p) {
        X509_ALGOR *alg = NULL;
        unsigned char *der = NULL;
        int sig_nid, len, ok;

        if (!c->md || (c->is_rsa && c->pad_mode != RSA_PKCS1_PADDING))
                return 0; /* RSA-PSS is for TLS only; X.509 uses PKCS#1 v1.5 */
        if (!OBJ_find_sigid_by_algs(&sig_nid, EVP_MD_get_type(c->md),
                                    c->is_rsa ? NID_rsaEncryption : NID_X9_62_id_ecPublicKey))
                return 0;
        alg = X509_ALGOR_new();
        if (!alg)
                return 0;
        X509_ALGOR_set0(alg, OBJ_nid2obj(sig_nid), c->is_rsa ? V_ASN1_NULL : V_ASN1_UNDEF, NULL);
        len = i2d_X509_ALGOR(alg, &der);
        ok = len > 0 && OSSL_PARAM_set_octet_string(p, der, (size_t) len);
        OPENSSL_free(der);
        X509_ALGOR_free(alg);
        return ok;
}

static int sig_get_ctx_params(void *ctx, OSSL_PARAM params[]) {
        sig_ctx *c = ctx;
        OSSL_PARAM *p;

        if ((p = OSSL_PARAM_locate(params, OSSL_SIGNATURE_PARAM_ALGORITHM_ID)) && !algorithm_id(c, p))
                return 0;
        if ((p = OSSL_PARAM_locate(params, OSSL_SIGNATURE_PARAM_DIGEST)) &&
            (!c->md || !OSSL_PARAM_set_utf8_string(p, EVP_MD_get0_name(c->md))))
                return 0;
        return 1;
}

static const OSSL_PARAM *sig_gettable_ctx_params(void *ctx, void *provctx) {
        static const OSSL_PARAM p[] = {
                OSSL_PARAM_octet_string(OSSL_SIGNATURE_PARAM_ALGORITHM_ID, NULL, 0),
                OSSL_PARAM_utf8_string(OSSL_SIGNATURE_PARAM_DIGEST, NULL, 0),
                OSSL_PARAM_END,
        };
        return p;
}

static int sig_init(sig_ctx *c, void *provkey, const char *mdname, const OSSL_PARAM params[]) {
        prov_key *k = provkey;

        if (!k || !k->obj)
                return 0; /* public-only key data cannot sign */
        c->key = k;
        c->md_explicit = false;
        if (!set_digest(c, mdname ? mdname : (k->obj->type == HWID_KEY_EC_P384 ? "SHA384" : "SHA256")))
                return 0;
        return sig_set_ctx_params(c, params);
}

static int sig_sign_init(void *ctx, void *provkey, const OSSL_PARAM params[]) {
        return sig_init(ctx, provkey, NULL, params);
}

static int max_size(const sig_ctx *c, size_t *ret) {
        int n = EVP_PKEY_get_size(c->key->pub);

        if (n <= 0)
                return 0;
        *ret = (size_t) n;
        return 1;
}

static int device_sign(sig_ctx *c, const unsigned char *dgst, size_t dlen,
                       unsigned char *sig, size_t *siglen, size_t sigsize) {
        hsm_obj *o = c->key->obj;
        hsm_sig_scheme scheme = !c->is_rsa ? HSM_SIG_ECDSA
                              : c->pad_mode == RSA_PKCS1_PSS_PADDING ? HSM_SIG_RSA_PSS : HSM_SIG_RSA_PKCS1;
        size_t len = sigsize;
        uint64_t t0;
        int r;

        if ((size_t) EVP_MD_get_size(c->md) != dlen)
                return 0;
        t0 = histogram_now_ns();
        r = o->backend->sign(o->obj, scheme, EVP_MD_get_type(c->md), dgst, dlen, sig, &len);
        histogram_observe(&o->sign_duration, &histogram_bounds_sign, histogram_now_ns() - t0);
        if (r < 0) {
                atomic_fetch_add_explicit(&o->sign_errors, 1, memory_order_relaxed);
                return 0;
        }
        *siglen = len;
        return 1;
}

static int sig_sign(void *ctx, unsigned char *sig, size_t *siglen, size_t sigsize,
                    const unsigned char *tbs, size_t tbslen) {
        sig_ctx *c = ctx;

        if (!sig)
                return max_size(c, siglen);
        /* A caller signing a bare digest without naming its hash: the
         * length says which SHA-2 it is. */
        if (!c->md_explicit && (size_t) EVP_MD_get_size(c->md) != tbslen &&
            !set_digest(c, tbslen == 48 ? "SHA384" : tbslen == 64 ? "SHA512" : "SHA256"))
                return 0;
        return device_sign(c, tbs, tbslen, sig, siglen, sigsize);
}

static int sig_digest_sign_init(void *ctx, const char *mdname, void *provkey, const OSSL_PARAM params[]) {
        sig_ctx *c = ctx;

        if (!sig_init(c, provkey, mdname && *mdname ? mdname : NULL, params))
                return 0;
        c->md_explicit = true;
        if (!c->mdctx && !(c->mdctx = EVP_MD_CTX_new()))
                return 0;
        return EVP_DigestInit_ex2(c->mdctx, c->md, NULL);
}

static int sig_digest_sign_update(void *ctx, const unsigned char *data, size_t len) {
        sig_ctx *c = ctx;

        return c->mdctx && EVP_DigestUpdate(c->mdctx, data, len);
}

static int sig_digest_sign_final(void *ctx, unsigned char *sig, size_t *siglen, size_t sigsize) {
        sig_ctx *c = ctx;
        unsigned char dgst[EVP_MAX_MD_SIZE];
        unsigned int dlen = 0;

        if (!sig)
                return max_size(c, siglen);
        if (!c->mdctx || !EVP_DigestFinal_ex(c->mdctx, dgst, &dlen))
                return 0;
        return device_sign(c, dgst, dlen, sig, siglen, sigsize);
}

#define SIGNATURE_COMMON                                                                          \
        { OSSL_FUNC_SIGNATURE_FREECTX, (void (*)(void)) sig_freectx },                            \
        { OSSL_FUNC_SIGNATURE_DUPCTX, (void (*)(void)) sig_dupctx },                              \
        { OSSL_FUNC_SIGNATURE_SIGN_INIT, (void (*)(void)) sig_sign_init },                        \
        { OSSL_FUNC_SIGNATURE_SIGN, (void (*)(void)) sig_sign },                                  \
        { OSSL_FUNC_SIGNATURE_DIGEST_SIGN_INIT, (void (*)(void)) sig_digest_sign_init },          \
        { OSSL_FUNC_SIGNATURE_DIGEST_SIGN_UPDATE, (void (*)(void)) sig_digest_sign_update },      \
        { OSSL_FUNC_SIGNATURE_DIGEST_SIGN_FINAL, (void (*)(void)) sig_digest_sign_final },        \
        { OSSL_FUNC_SIGNATURE_GET_CTX_PARAMS, (void (*)(void)) sig_get_ctx_params },              \
        { OSSL_FUNC_SIGNATURE_GETTABLE_CTX_PARAMS, (void (*)(void)) sig_gettable_ctx_params },    \
        { OSSL_FUNC_SIGNATURE_SET_CTX_PARAMS, (void (*)(void)) sig_set_ctx_params },              \
        { OSSL_FUNC_SIGNATURE_SETTABLE_CTX_PARAMS, (void (*)(void)) sig_settable_ctx_params }

const OSSL_DISPATCH hwid_ecdsa_signature_functions[] = {
        { OSSL_FUNC_SIGNATURE_NEWCTX, (void (*)(void)) ecdsa_newctx },
        SIGNATURE_COMMON,
        { 0, NULL },
};

const OSSL_DISPATCH hwid_rsa_signature_functions[] = {
        { OSSL_FUNC_SIGNATURE_NEWCTX, (void (*)(void)) rsa_newctx },
        SIGNATURE_COMMON,
        { 0, NULL },
};
