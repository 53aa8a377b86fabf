/* Provider entry point and key management.  The key data holds a reference
 * to the device key; public operations are delegated to a plain
 * default-provider copy of the public key.  Export hands out the public
 * part only and refuses anything private: that refusal is what makes
 * OpenSSL fall back to our signature implementation instead of trying the
 * default provider's (which would fail with "missing private key").
 * key.c makes the hwid_key around it (and loads this provider). */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/params.h>
#include <openssl/provider.h>

#include "error.h"
#include "ossl-util.h"
#include "provider.h"

static const OSSL_ALGORITHM keymgmt_algs[] = {
        { "EC:id-ecPublicKey:1.2.840.10045.2.1", "provider=hwid", hwid_ec_keymgmt_functions, "hwid device EC key" },
        { "RSA:rsaEncryption:1.2.840.113549.1.1.1", "provider=hwid", hwid_rsa_keymgmt_functions, "hwid device RSA key" },
        { NULL, NULL, NULL, NULL },
};

static const OSSL_ALGORITHM signature_algs[] = {
        { "ECDSA", "provider=hwid", hwid_ecdsa_signature_functions, "ECDSA in the device" },
        { "RSA:rsaEncryption:1.2.840.113549.1.1.1", "provider=hwid", hwid_rsa_signature_functions, "RSA in the device" },
        { NULL, NULL, NULL, NULL },
};

static const OSSL_ALGORITHM *query_operation(void *provctx, int id, int *no_cache) {
        *no_cache = 0;
        switch (id) {
        case OSSL_OP_KEYMGMT:
                return keymgmt_algs;
        case OSSL_OP_SIGNATURE:
                return signature_algs;
        default:
                return NULL;
        }
}

static const OSSL_DISPATCH provider_functions[] = {
        { OSSL_FUNC_PROVIDER_QUERY_OPERATION, (void (*)(void)) query_operation },
        { 0, NULL },
};

int hwid_provider_init(const OSSL_CORE_HANDLE *handle, const OSSL_DISPATCH *in,
                       const OSSL_DISPATCH **out, void **provctx) {
        *out = provider_functions;
        *provctx = (void *) handle;
        return 1;
}

/* ---- the device key the key data holds, shared with its hwid_key ---- */

hsm_obj *hsm_obj_ref(hsm_obj *o) {
        if (o)
                __atomic_add_fetch(&o->refs, 1, __ATOMIC_RELAXED);
        return o;
}

void hsm_obj_unref(hsm_obj *o) {
        if (!o || __atomic_sub_fetch(&o->refs, 1, __ATOMIC_ACQ_REL) > 0)
                return;
        if (o->obj)
                o->backend->free(o->obj);
        EVP_PKEY_free(o->pub);
        free(o);
}

int hsm_provider_pkey(hsm_obj *o, EVP_PKEY **ret) {
        _cleanup_(EVP_PKEY_CTX_freep) EVP_PKEY_CTX *ctx = NULL;
        bool rsa = hsm_key_type_rsa_bits(o->type) > 0;
        void *ptr = o;
        OSSL_PARAM params[] = {
                OSSL_PARAM_octet_ptr(HWID_PARAM_OBJ, &ptr, sizeof(*o)),
                OSSL_PARAM_END,
        };
        EVP_PKEY *pkey = NULL;

        ctx = EVP_PKEY_CTX_new_from_name(NULL, rsa ? "RSA" : "EC", "provider=hwid");
        if (!ctx || EVP_PKEY_fromdata_init(ctx) <= 0 ||
            EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_KEYPAIR, params) <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot expose the device key to OpenSSL");
        *ret = pkey;
        return 0;
}

/* ---- key data ---- */

static void *key_new(void *provctx) {
        return OPENSSL_zalloc(sizeof(prov_key));
}

static void key_free(void *keydata) {
        prov_key *k = keydata;

        if (!k)
                return;
        hsm_obj_unref(k->obj);
        EVP_PKEY_free(k->pub);
        OPENSSL_free(k);
}

static void *key_dup(const void *keydata, int selection) {
        const prov_key *src = keydata;
        prov_key *k = key_new(NULL);

        if (!k)
                return NULL;
        if (src->obj && (selection & OSSL_KEYMGMT_SELECT_PRIVATE_KEY))
                k->obj = hsm_obj_ref(src->obj);
        if (src->pub && EVP_PKEY_up_ref(src->pub))
                k->pub = src->pub;
        return k;
}

static int key_has(const void *keydata, int selection) {
        const prov_key *k = keydata;

        if (!k)
                return 0;
        if ((selection & OSSL_KEYMGMT_SELECT_PRIVATE_KEY) && !k->obj)
                return 0;
        if ((selection & OSSL_KEYMGMT_SELECT_KEYPAIR) && !k->pub)
                return 0;
        return 1;
}

static int key_match(const void *a, const void *b, int selection) {
        const prov_key *ka = a, *kb = b;

        if (!ka->pub || !kb->pub)
                return 0;
        return EVP_PKEY_eq(ka->pub, kb->pub) == 1;
}

/* Public-only import, used when OpenSSL compares a certificate's key with
 * ours (X509_check_private_key, SSL_CTX_use_PrivateKey). */
static int import_public(prov_key *k, const char *type, const OSSL_PARAM params[]) {
        EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, "provider=default");
        EVP_PKEY *pub = NULL;
        int ok;

        ok = ctx && EVP_PKEY_fromdata_init(ctx) > 0 &&
             EVP_PKEY_fromdata(ctx, &pub, EVP_PKEY_PUBLIC_KEY, (OSSL_PARAM *) params) > 0;
        EVP_PKEY_CTX_free(ctx);
        if (!ok)
                return 0;
        EVP_PKEY_free(k->pub);
        k->pub = pub;
        return 1;
}

static int key_import(void *keydata, const char *type, int selection, const OSSL_PARAM params[]) {
        prov_key *k = keydata;
        const OSSL_PARAM *p = OSSL_PARAM_locate_const(params, HWID_PARAM_OBJ);
        void *ptr = NULL;
        size_t len = 0;

        if (!p)
                return import_public(k, type, params);
        if (!OSSL_PARAM_get_octet_ptr(p, (const void **) &ptr, &len) || len != sizeof(hsm_obj))
                return 0;
        hsm_obj *o = ptr;
        if (!o || !EVP_PKEY_up_ref(o->pub))
                return 0;
        hsm_obj_unref(k->obj);
        EVP_PKEY_free(k->pub);
        k->obj = hsm_obj_ref(o);
        k->pub = o->pub;
        return 1;
}

static int ec_import(void *keydata, int selection, const OSSL_PARAM params[]) {
        return key_import(keydata, "EC", selection, params);
}

static int rsa_import(void *keydata, int selection, const OSSL_PARAM params[]) {
        return key_import(keydata, "RSA", selection, params);
}

static int key_export(void *keydata, int selection, OSSL_CALLBACK *cb, void *cbarg) {
        prov_key *k = keydata;
        OSSL_PARAM *params = NULL;
        int ok;

        /* The private key never leaves the device, not even to another
         * provider in this process. */
        if ((selection & OSSL_KEYMGMT_SELECT_PRIVATE_KEY) || !k->pub)
                return 0;
        if (EVP_PKEY_todata(k->pub, EVP_PKEY_PUBLIC_KEY, &params) <= 0)
                return 0;
        ok = cb(params, cbarg);
        OSSL_PARAM_free(params);
        return ok;
}

static int key_get_params(void *keydata, OSSL_PARAM params[]) {
        prov_key *k = keydata;

        if (!k->pub)
                return 0;
        /* Everything public (bits, max-size, group, encoded point,
         * modulus) comes from the default provider's view of the key. */
        return EVP_PKEY_get_params(k->pub, params);
}

static const OSSL_PARAM *ec_gettable_params(void *provctx) {
        static const OSSL_PARAM p[] = {
                OSSL_PARAM_int(OSSL_PKEY_PARAM_BITS, NULL),
                OSSL_PARAM_int(OSSL_PKEY_PARAM_SECURITY_BITS, NULL),
                OSSL_PARAM_int(OSSL_PKEY_PARAM_MAX_SIZE, NULL),
                OSSL_PARAM_utf8_string(OSSL_PKEY_PARAM_DEFAULT_DIGEST, NULL, 0),
                OSSL_PARAM_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, NULL, 0),
                OSSL_PARAM_octet_string(OSSL_PKEY_PARAM_ENCODED_PUBLIC_KEY, NULL, 0),
                OSSL_PARAM_octet_string(OSSL_PKEY_PARAM_PUB_KEY, NULL, 0),
                OSSL_PARAM_END,
        };
        return p;
}

static const OSSL_PARAM *rsa_gettable_params(void *provctx) {
        static const OSSL_PARAM p[] = {
                OSSL_PARAM_int(OSSL_PKEY_PARAM_BITS, NULL),
                OSSL_PARAM_int(OSSL_PKEY_PARAM_SECURITY_BITS, NULL),
                OSSL_PARAM_int(OSSL_PKEY_PARAM_MAX_SIZE, NULL),
                OSSL_PARAM_utf8_string(OSSL_PKEY_PARAM_DEFAULT_DIGEST, NULL, 0),
                OSSL_PARAM_BN(OSSL_PKEY_PARAM_RSA_N, NULL, 0),
                OSSL_PARAM_BN(OSSL_PKEY_PARAM_RSA_E, NULL, 0),
                OSSL_PARAM_END,
        };
        return p;
}

static const OSSL_PARAM *ec_import_types(int selection) {
        static const OSSL_PARAM p[] = {
                OSSL_PARAM_octet_ptr(HWID_PARAM_OBJ, NULL, 0),
                OSSL_PARAM_utf8_string(OSSL_PKEY_PARAM_GROUP_NAME, NULL, 0),
                OSSL_PARAM_octet_string(OSSL_PKEY_PARAM_PUB_KEY, NULL, 0),
                OSSL_PARAM_END,
        };
        return p;
}

static const OSSL_PARAM *rsa_import_types(int selection) {
        static const OSSL_PARAM p[] = {
                OSSL_PARAM_octet_ptr(HWID_PARAM_OBJ, NULL, 0),
                OSSL_PARAM_BN(OSSL_PKEY_PARAM_RSA_N, NULL, 0),
                OSSL_PARAM_BN(OSSL_PKEY_PARAM_RSA_E, NULL, 0),
                OSSL_PARAM_END,
        };
        return p;
}

static const OSSL_PARAM *ec_export_types(int selection) {
        return (selection & OSSL_KEYMGMT_SELECT_PRIVATE_KEY) ? NULL : ec_import_types(selection) + 1;
}

static const OSSL_PARAM *rsa_export_types(int selection) {
        return (selection & OSSL_KEYMGMT_SELECT_PRIVATE_KEY) ? NULL : rsa_import_types(selection) + 1;
}

static const char *ec_operation_name(int operation_id) {
        return operation_id == OSSL_OP_SIGNATURE ? "ECDSA" : NULL;
}

static const char *rsa_operation_name(int operation_id) {
        return operation_id == OSSL_OP_SIGNATURE ? "RSA" : NULL;
}

#define KEYMGMT_COMMON                                                                   \
        { OSSL_FUNC_KEYMGMT_NEW, (void (*)(void)) key_new },                             \
        { OSSL_FUNC_KEYMGMT_FREE, (void (*)(void)) key_free },                           \
        { OSSL_FUNC_KEYMGMT_DUP, (void (*)(void)) key_dup },                             \
        { OSSL_FUNC_KEYMGMT_HAS, (void (*)(void)) key_has },                             \
        { OSSL_FUNC_KEYMGMT_MATCH, (void (*)(void)) key_match },                         \
        { OSSL_FUNC_KEYMGMT_EXPORT, (void (*)(void)) key_export },                       \
        { OSSL_FUNC_KEYMGMT_GET_PARAMS, (void (*)(void)) key_get_params }

const OSSL_DISPATCH hwid_ec_keymgmt_functions[] = {
        KEYMGMT_COMMON,
        { OSSL_FUNC_KEYMGMT_IMPORT, (void (*)(void)) ec_import },
        { OSSL_FUNC_KEYMGMT_IMPORT_TYPES, (void (*)(void)) ec_import_types },
        { OSSL_FUNC_KEYMGMT_EXPORT_TYPES, (void (*)(void)) ec_export_types },
        { OSSL_FUNC_KEYMGMT_GETTABLE_PARAMS, (void (*)(void)) ec_gettable_params },
        { OSSL_FUNC_KEYMGMT_QUERY_OPERATION_NAME, (void (*)(void)) ec_operation_name },
        { 0, NULL },
};

const OSSL_DISPATCH hwid_rsa_keymgmt_functions[] = {
        KEYMGMT_COMMON,
        { OSSL_FUNC_KEYMGMT_IMPORT, (void (*)(void)) rsa_import },
        { OSSL_FUNC_KEYMGMT_IMPORT_TYPES, (void (*)(void)) rsa_import_types },
        { OSSL_FUNC_KEYMGMT_EXPORT_TYPES, (void (*)(void)) rsa_export_types },
        { OSSL_FUNC_KEYMGMT_GETTABLE_PARAMS, (void (*)(void)) rsa_gettable_params },
        { OSSL_FUNC_KEYMGMT_QUERY_OPERATION_NAME, (void (*)(void)) rsa_operation_name },
        { 0, NULL },
};
