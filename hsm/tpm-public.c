/* TPM public areas as data, no TPM: wire form (tss2-mu), names, and the
 * TCG EK Credential Profile's EK templates.  Shared by the device side
 * (tpm-attest.c) and the CA (service/attest-*.c). */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <tss2/tss2_mu.h>

#include "tpm-attest.h"
#include "error.h"
#include "ossl-util.h"
#include "tpm-internal.h"

/* PolicySecret(TPM_RH_ENDORSEMENT): the authPolicy of the low-range EK
 * templates (EK Credential Profile, "PolicyA" SHA-256). */
static const uint8_t policy_a_sha256[32] = {
        0x83, 0x71, 0x97, 0x67, 0x44, 0x84, 0xb3, 0xf8, 0x1a, 0x90, 0xcc, 0x8d, 0x46, 0xa5, 0xd7, 0x24,
        0xfd, 0x52, 0xd7, 0x6e, 0x06, 0x52, 0x0b, 0x64, 0xf2, 0xa1, 0xda, 0x1b, 0x33, 0x14, 0x69, 0xaa,
};

/* PolicyOR(PolicyA, PolicyC) in SHA-384: the authPolicy of the high-range
 * templates ("PolicyB" SHA-384), which also set userWithAuth. */
static const uint8_t policy_b_sha384[48] = {
        0xb2, 0x6e, 0x7d, 0x28, 0xd1, 0x1a, 0x50, 0xbc, 0x53, 0xd8, 0x82, 0xbc, 0xf5, 0xfd, 0x3a, 0x1a,
        0x07, 0x41, 0x48, 0xbb, 0x35, 0xd3, 0xb4, 0xe4, 0xcb, 0x1c, 0x0a, 0xd9, 0xbd, 0xe4, 0x19, 0xca,
        0xcb, 0x47, 0xba, 0x09, 0x69, 0x96, 0x46, 0x15, 0x0f, 0x9f, 0xc0, 0x00, 0xf3, 0xf8, 0x0e, 0x12,
};

#define EK_ATTRS_LOW (TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN | \
                      TPMA_OBJECT_ADMINWITHPOLICY | TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT)

static const struct {
        const char *name;
        uint32_t nv_index;
        uint32_t handle;
} ek_info[] = {
        [TPM_EK_AUTO] = { "auto", 0, 0 },
        [TPM_EK_ECC_P256] = { "ecc-p256", 0x01c0000a, 0x81010002 },
        [TPM_EK_RSA_2048] = { "rsa-2048", 0x01c00002, 0x81010001 },
        [TPM_EK_ECC_P384] = { "ecc-p384", 0x01c00016, 0x81010016 },
};

const char *tpm_ek_alg_to_string(tpm_ek_alg a) {
        return (unsigned) a < ELEMENTSOF(ek_info) ? ek_info[a].name : "?";
}

int tpm_ek_alg_from_string(const char *s, tpm_ek_alg *ret) {
        for (size_t i = 0; i < ELEMENTSOF(ek_info); i++)
                if (strcmp(s, ek_info[i].name) == 0) {
                        *ret = (tpm_ek_alg) i;
                        return 0;
                }
        return hwid_fail(HWID_E_INVALID, "unknown EK type '%s' (auto, ecc-p256, rsa-2048 or ecc-p384)", s);
}

uint32_t tpm_ek_cert_index(tpm_ek_alg a) {
        return (unsigned) a < ELEMENTSOF(ek_info) ? ek_info[a].nv_index : 0;
}

uint32_t tpm_ek_handle(tpm_ek_alg a) {
        return (unsigned) a < ELEMENTSOF(ek_info) ? ek_info[a].handle : 0;
}

static TPMT_PUBLIC ek_ecc(TPMI_ECC_CURVE curve, uint16_t aes_bits) {
        return (TPMT_PUBLIC) {
                .type = TPM2_ALG_ECC,
                .parameters.eccDetail = {
                        .symmetric = { .algorithm = TPM2_ALG_AES, .keyBits.aes = aes_bits, .mode.aes = TPM2_ALG_CFB },
                        .scheme.scheme = TPM2_ALG_NULL,
                        .curveID = curve,
                        .kdf.scheme = TPM2_ALG_NULL,
                },
        };
}

int tpm_ek_template(tpm_ek_alg a, TPMT_PUBLIC *ret) {
        TPMT_PUBLIC p;

        switch (a) {
        case TPM_EK_RSA_2048: /* L-1 */
                p = (TPMT_PUBLIC) {
                        .type = TPM2_ALG_RSA,
                        .parameters.rsaDetail = {
                                .symmetric = { .algorithm = TPM2_ALG_AES, .keyBits.aes = 128, .mode.aes = TPM2_ALG_CFB },
                                .scheme.scheme = TPM2_ALG_NULL,
                                .keyBits = 2048,
                        },
                        .unique.rsa.size = 256,
                };
                break;
        case TPM_EK_ECC_P256: /* L-2 */
                p = ek_ecc(TPM2_ECC_NIST_P256, 128);
                p.unique.ecc.x.size = p.unique.ecc.y.size = 32;
                break;
        case TPM_EK_ECC_P384: /* H-3: unique empty */
                p = ek_ecc(TPM2_ECC_NIST_P384, 256);
                break;
        default:
                return hwid_fail(HWID_E_INVALID, "no EK template for EK type %d", (int) a);
        }
        p.objectAttributes = EK_ATTRS_LOW;
        p.nameAlg = TPM2_ALG_SHA256;
        p.authPolicy.size = sizeof(policy_a_sha256);
        memcpy(p.authPolicy.buffer, policy_a_sha256, sizeof(policy_a_sha256));
        if (a == TPM_EK_ECC_P384) {
                p.objectAttributes |= TPMA_OBJECT_USERWITHAUTH;
                p.nameAlg = TPM2_ALG_SHA384;
                p.authPolicy.size = sizeof(policy_b_sha384);
                memcpy(p.authPolicy.buffer, policy_b_sha384, sizeof(policy_b_sha384));
        }
        *ret = p;
        return 0;
}

/* A big number into a fixed-size, left-zero-padded TPM2B buffer. */
static int bn_to_field(EVP_PKEY *key, const char *param, size_t size, uint8_t *buf, UINT16 *ret_size) {
        _cleanup_(BN_freep) BIGNUM *bn = NULL;

        if (!EVP_PKEY_get_bn_param(key, param, &bn) || BN_bn2binpad(bn, buf, (int) size) < 0)
                return -1;
        *ret_size = (UINT16) size;
        return 0;
}

static int ek_fill_rsa(EVP_PKEY *key, TPMT_PUBLIC *p) {
        _cleanup_(BN_freep) BIGNUM *e = NULL;

        if (EVP_PKEY_get_base_id(key) != EVP_PKEY_RSA || EVP_PKEY_get_bits(key) != 2048 ||
            !EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_E, &e) || !BN_is_word(e, 65537))
                return hwid_fail(HWID_E_ATTESTATION, "the EK certificate's key is not an RSA 2048 key "
                                                     "with exponent 65537, as the RSA EK template makes");
        if (bn_to_field(key, OSSL_PKEY_PARAM_RSA_N, 256, p->unique.rsa.buffer, &p->unique.rsa.size) < 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot read the EK certificate's RSA key");
        return 0;
}

static int ek_fill_ecc(EVP_PKEY *key, const char *group, size_t size, TPMT_PUBLIC *p) {
        char name[32];

        if (EVP_PKEY_get_base_id(key) != EVP_PKEY_EC ||
            !EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, name, sizeof(name), NULL) ||
            strcmp(name, group) != 0)
                return hwid_fail(HWID_E_ATTESTATION, "the EK certificate's key is not an EC %s key", group);
        if (bn_to_field(key, OSSL_PKEY_PARAM_EC_PUB_X, size, p->unique.ecc.x.buffer, &p->unique.ecc.x.size) < 0 ||
            bn_to_field(key, OSSL_PKEY_PARAM_EC_PUB_Y, size, p->unique.ecc.y.buffer, &p->unique.ecc.y.size) < 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot read the EK certificate's EC key");
        return 0;
}

int tpm_ek_public_from_key(tpm_ek_alg a, EVP_PKEY *cert_key, TPMT_PUBLIC *ret) {
        TPMT_PUBLIC p;
        int r;

        r = tpm_ek_template(a, &p);
        if (r < 0)
                return r;
        if (a == TPM_EK_RSA_2048)
                r = ek_fill_rsa(cert_key, &p);
        else if (a == TPM_EK_ECC_P256)
                r = ek_fill_ecc(cert_key, "prime256v1", 32, &p);
        else
                r = ek_fill_ecc(cert_key, "secp384r1", 48, &p);
        if (r < 0)
                return r;
        *ret = p;
        return 0;
}

const char *tpm_hash_name(TPMI_ALG_HASH alg) {
        switch (alg) {
        case TPM2_ALG_SHA256:
                return "SHA256";
        case TPM2_ALG_SHA384:
                return "SHA384";
        case TPM2_ALG_SHA512:
                return "SHA512";
        default:
                return NULL;
        }
}

int tpm_public_unmarshal(const uint8_t *data, size_t len, const char *what, TPMT_PUBLIC *ret) {
        TPMT_PUBLIC p = { 0 };
        size_t off = 0;

        if (len == 0 || len > TPM_PUBLIC_MAX)
                return hwid_fail(HWID_E_INVALID, "%s: a TPM public area of %zu bytes (at most %d)",
                                 what, len, TPM_PUBLIC_MAX);
        if (Tss2_MU_TPMT_PUBLIC_Unmarshal(data, len, &off, &p) != TSS2_RC_SUCCESS || off != len)
                return hwid_fail(HWID_E_INVALID, "%s is not a TPM public area (TPMT_PUBLIC)", what);
        if (p.type != TPM2_ALG_RSA && p.type != TPM2_ALG_ECC)
                return hwid_fail(HWID_E_INVALID, "%s is a TPM object of type 0x%04x, not an RSA or EC key",
                                 what, p.type);
        if (!tpm_hash_name(p.nameAlg))
                return hwid_fail(HWID_E_INVALID, "%s has name algorithm 0x%04x (hwid takes SHA-256, "
                                 "SHA-384 or SHA-512)", what, p.nameAlg);
        *ret = p;
        return 0;
}

int tpm_public_marshal(const TPMT_PUBLIC *pub, uint8_t out[TPM_PUBLIC_MAX], size_t *ret_len) {
        size_t off = 0;

        if (Tss2_MU_TPMT_PUBLIC_Marshal(pub, out, TPM_PUBLIC_MAX, &off) != TSS2_RC_SUCCESS)
                return hwid_fail(HWID_E_INVALID, "cannot encode a TPM public area");
        *ret_len = off;
        return 0;
}

int tpm_public_name(const TPMT_PUBLIC *pub, TPM2B_NAME *ret) {
        const char *md = tpm_hash_name(pub->nameAlg);
        uint8_t buf[TPM_PUBLIC_MAX];
        unsigned int n = 0;
        TPM2B_NAME name;
        size_t len;
        int r;

        if (!md)
                return hwid_fail(HWID_E_INVALID, "a TPM public area with name algorithm 0x%04x", pub->nameAlg);
        r = tpm_public_marshal(pub, buf, &len);
        if (r < 0)
                return r;
        name.name[0] = (uint8_t) (pub->nameAlg >> 8);
        name.name[1] = (uint8_t) pub->nameAlg;
        if (!EVP_Digest(buf, len, name.name + 2, &n, EVP_get_digestbyname(md), NULL))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot hash a TPM public area");
        name.size = (UINT16) (2 + n);
        *ret = name;
        return 0;
}

int tpm_public_to_pkey(const TPMT_PUBLIC *pub, const char *what, EVP_PKEY **ret) {
        return tpm_pub_to_pkey(pub, what, ret);
}
