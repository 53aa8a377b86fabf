/* Public-key plumbing shared by the backends: both hand the device's public
 * key over as raw numbers, which become a default-provider EVP_PKEY here. */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/ecdsa.h>
#include <openssl/obj_mac.h>

#include "backend.h"
#include "error.h"
#include "ossl-util.h"

static const struct {
        const char *name;
        int curve_nid; /* NID_undef for RSA */
        int rsa_bits;
} key_types[_HWID_KEY_TYPE_MAX] = {
        [HWID_KEY_EC_P256] = { "ec-p256", NID_X9_62_prime256v1, 0 },
        [HWID_KEY_EC_P384] = { "ec-p384", NID_secp384r1, 0 },
        [HWID_KEY_RSA_2048] = { "rsa-2048", NID_undef, 2048 },
        [HWID_KEY_RSA_3072] = { "rsa-3072", NID_undef, 3072 },
};

const char *hwid_key_type_to_string(hwid_key_type t) {
        if (t < 0 || t >= _HWID_KEY_TYPE_MAX)
                return "unknown";
        return key_types[t].name;
}

int hwid_key_type_from_string(const char *s, hwid_key_type *ret) {
        for (int t = 0; t < _HWID_KEY_TYPE_MAX; t++)
                if (strcmp(s, key_types[t].name) == 0) {
                        *ret = (hwid_key_type) t;
                        return 0;
                }
        return hwid_fail(HWID_E_KEY_TYPE, "unsupported key type '%s' "
                                          "(use ec-p256, ec-p384, rsa-2048 or rsa-3072)", s);
}

int hsm_key_type_curve_nid(hwid_key_type t) {
        return (t >= 0 && t < _HWID_KEY_TYPE_MAX) ? key_types[t].curve_nid : NID_undef;
}

int hsm_key_type_rsa_bits(hwid_key_type t) {
        return (t >= 0 && t < _HWID_KEY_TYPE_MAX) ? key_types[t].rsa_bits : 0;
}

int hwid_key_type_of_pkey(const EVP_PKEY *pkey, hwid_key_type *ret) {
        char group[64];
        int bits = EVP_PKEY_get_bits(pkey);

        if (EVP_PKEY_is_a(pkey, "RSA")) {
                for (int t = 0; t < _HWID_KEY_TYPE_MAX; t++)
                        if (key_types[t].rsa_bits == bits) {
                                *ret = (hwid_key_type) t;
                                return 0;
                        }
                return hwid_fail(HWID_E_KEY_TYPE, "RSA key of %d bits is not supported "
                                                  "(2048 or 3072)", bits);
        }
        if (EVP_PKEY_is_a(pkey, "EC") &&
            EVP_PKEY_get_utf8_string_param(pkey, OSSL_PKEY_PARAM_GROUP_NAME, group, sizeof(group), NULL)) {
                int nid = OBJ_sn2nid(group);
                if (nid == NID_undef)
                        nid = EC_curve_nist2nid(group);
                for (int t = 0; t < _HWID_KEY_TYPE_MAX; t++)
                        if (key_types[t].curve_nid != NID_undef && key_types[t].curve_nid == nid) {
                                *ret = (hwid_key_type) t;
                                return 0;
                        }
                return hwid_fail(HWID_E_KEY_TYPE, "EC curve %s is not supported (P-256 or P-384)", group);
        }
        return hwid_fail(HWID_E_KEY_TYPE, "key algorithm %s is not supported", EVP_PKEY_get0_type_name(pkey));
}

static int pkey_fromdata(const char *type, OSSL_PARAM_BLD *bld, EVP_PKEY **ret) {
        _cleanup_(OSSL_PARAM_freep) OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
        _cleanup_(EVP_PKEY_CTX_freep) EVP_PKEY_CTX *ctx = NULL;
        EVP_PKEY *pkey = NULL;

        if (!params)
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot build key parameters");
        ctx = EVP_PKEY_CTX_new_from_name(NULL, type, "provider=default");
        if (!ctx || EVP_PKEY_fromdata_init(ctx) <= 0 ||
            EVP_PKEY_fromdata(ctx, &pkey, EVP_PKEY_PUBLIC_KEY, params) <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "device returned an unusable %s public key", type);
        *ret = pkey;
        return 0;
}

int hsm_pub_from_ec_point(int curve_nid, const uint8_t *point, size_t len, EVP_PKEY **ret) {
        _cleanup_(OSSL_PARAM_BLD_freep) OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();

        if (!bld ||
            !OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, OBJ_nid2sn(curve_nid), 0) ||
            !OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, len))
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot build EC public key");
        return pkey_fromdata("EC", bld, ret);
}

int hsm_pub_from_rsa(const uint8_t *n, size_t n_len, const uint8_t *e, size_t e_len, EVP_PKEY **ret) {
        _cleanup_(OSSL_PARAM_BLD_freep) OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
        _cleanup_(BN_freep) BIGNUM *bn_n = BN_bin2bn(n, (int) n_len, NULL);
        _cleanup_(BN_freep) BIGNUM *bn_e = BN_bin2bn(e, (int) e_len, NULL);

        if (!bld || !bn_n || !bn_e ||
            !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_N, bn_n) ||
            !OSSL_PARAM_BLD_push_BN(bld, OSSL_PKEY_PARAM_RSA_E, bn_e))
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot build RSA public key");
        return pkey_fromdata("RSA", bld, ret);
}

int hsm_ecdsa_raw_to_der(const uint8_t *r, size_t r_len, const uint8_t *s, size_t s_len,
                         uint8_t *sig, size_t *siglen) {
        _cleanup_(ECDSA_SIG_freep) ECDSA_SIG *es = ECDSA_SIG_new();
        BIGNUM *br = BN_bin2bn(r, (int) r_len, NULL), *bs = BN_bin2bn(s, (int) s_len, NULL);
        unsigned char *out = sig;
        int n;

        if (!es || !br || !bs || !ECDSA_SIG_set0(es, br, bs)) {
                BN_free(br);
                BN_free(bs);
                return hwid_fail_ossl(HWID_E_NOMEM, "cannot encode ECDSA signature");
        }
        n = i2d_ECDSA_SIG(es, NULL);
        if (n <= 0 || (size_t) n > *siglen)
                return hwid_fail(HWID_E_CRYPTO, "ECDSA signature does not fit its buffer");
        n = i2d_ECDSA_SIG(es, &out);
        if (n <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode ECDSA signature");
        *siglen = (size_t) n;
        return 0;
}
