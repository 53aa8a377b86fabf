/* TPM2_MakeCredential in software (TPM 2.0 part 1 §24, "Credential
 * Protection"; the KDFs of part 1 §11.4.10), so that the CA needs no TPM:
 *
 *   seed         random, |H| bytes (H: the EK's nameAlg), protected for
 *                the EK as a TPM2B_ENCRYPTED_SECRET: RSA-OAEP with label
 *                "IDENTITY", or (ECC) an ephemeral point whose ECDH
 *                shared x-coordinate Z gives seed = KDFe(H, Z, "IDENTITY",
 *                ephemeral.x, EK.x)
 *   symKey       KDFa(H, seed, "STORAGE", name, "", EK's AES key bits)
 *   encIdentity  AES-CFB(symKey, IV 0, TPM2B_DIGEST credential)
 *   HMACkey      KDFa(H, seed, "INTEGRITY", "", "", |H| bytes)
 *   outerHMAC    HMAC-H(HMACkey, encIdentity || name)
 *   blob         TPM2B_ID_OBJECT: TPM2B_DIGEST outerHMAC || encIdentity
 *
 * KDFa is SP 800-108 in counter mode with HMAC-H, exactly OpenSSL's KBKDF
 * (32-bit counter, label, 0x00, context, 32-bit length in bits); KDFe is
 * SP 800-56C's one-step hash KDF, OpenSSL's SSKDF (32-bit counter, Z,
 * fixed info = label with its NUL, U's x, V's x). */
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/kdf.h>
#include <openssl/rand.h>
#include <openssl/rsa.h>
#include <tss2/tss2_mu.h>

#include "attest-verify.h"
#include "error.h"
#include "ossl-util.h"
#include "secret.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_KDF *, EVP_KDF_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_KDF_CTX *, EVP_KDF_CTX_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_CIPHER *, EVP_CIPHER_free)
DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_CIPHER_CTX *, EVP_CIPHER_CTX_free)

/* Everything one MakeCredential derives, wiped when done. */
typedef struct cred_keys {
        const char *md;
        size_t hlen;
        uint8_t seed[64];
        uint8_t sym[32];
        size_t sym_len;
        uint8_t hmac[64];
} cred_keys;

static void cred_keys_wipe(cred_keys *k) {
        secret_wipe(k, sizeof(*k));
}

static int kdf_derive(const char *kdf_name, OSSL_PARAM *params, uint8_t *out, size_t out_len) {
        _cleanup_(EVP_KDF_freep) EVP_KDF *kdf = EVP_KDF_fetch(NULL, kdf_name, NULL);
        _cleanup_(EVP_KDF_CTX_freep) EVP_KDF_CTX *ctx = kdf ? EVP_KDF_CTX_new(kdf) : NULL;

        if (!ctx || EVP_KDF_derive(ctx, out, out_len, params) <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "%s failed", kdf_name);
        return 0;
}

/* KDFa(md, key, label, context, "", out_len * 8). */
static int kdfa(const char *md, const uint8_t *key, size_t key_len, const char *label,
                const uint8_t *context, size_t context_len, uint8_t *out, size_t out_len) {
        static const uint8_t none;
        OSSL_PARAM params[] = {
                OSSL_PARAM_utf8_string(OSSL_KDF_PARAM_MODE, (char *) "counter", 0),
                OSSL_PARAM_utf8_string(OSSL_KDF_PARAM_MAC, (char *) "HMAC", 0),
                OSSL_PARAM_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *) md, 0),
                OSSL_PARAM_octet_string(OSSL_KDF_PARAM_KEY, (void *) key, key_len),
                OSSL_PARAM_octet_string(OSSL_KDF_PARAM_SALT, (void *) label, strlen(label)),
                OSSL_PARAM_octet_string(OSSL_KDF_PARAM_INFO, (void *) (context ? context : &none), context_len),
                OSSL_PARAM_END,
        };

        return kdf_derive("KBKDF", params, out, out_len);
}

/* KDFe(md, Z, "IDENTITY", u_x, v_x, out_len * 8). */
static int kdfe(const char *md, const uint8_t *z, size_t z_len, const uint8_t *u_x, size_t u_len,
                const uint8_t *v_x, size_t v_len, uint8_t *out, size_t out_len) {
        static const char use[] = "IDENTITY"; /* with its NUL */
        uint8_t info[sizeof(use) + 2 * 66];
        OSSL_PARAM params[] = {
                OSSL_PARAM_utf8_string(OSSL_KDF_PARAM_DIGEST, (char *) md, 0),
                OSSL_PARAM_octet_string(OSSL_KDF_PARAM_KEY, (void *) z, z_len),
                OSSL_PARAM_octet_string(OSSL_KDF_PARAM_INFO, info, sizeof(use) + u_len + v_len),
                OSSL_PARAM_END,
        };

        if (u_len > 66 || v_len > 66)
                return hwid_fail(HWID_E_INVALID, "EC coordinates too long");
        memcpy(info, use, sizeof(use));
        memcpy(info + sizeof(use), u_x, u_len);
        memcpy(info + sizeof(use) + u_len, v_x, v_len);
        return kdf_derive("SSKDF", params, out, out_len);
}

/* RSA EK: seed encrypted with OAEP(H), label "IDENTITY" and its NUL. */
static int seed_rsa(EVP_PKEY *ek, cred_keys *k, TPM2B_ENCRYPTED_SECRET *ret) {
        _cleanup_(EVP_PKEY_CTX_freep) EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, ek, NULL);
        unsigned char *label = OPENSSL_memdup("IDENTITY", sizeof("IDENTITY"));
        size_t len = sizeof(ret->secret);

        if (!label)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (!ctx || EVP_PKEY_encrypt_init(ctx) <= 0 ||
            EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING) <= 0 ||
            EVP_PKEY_CTX_set_rsa_oaep_md_name(ctx, k->md, NULL) <= 0 ||
            EVP_PKEY_CTX_set_rsa_mgf1_md_name(ctx, k->md, NULL) <= 0 ||
            EVP_PKEY_CTX_set0_rsa_oaep_label(ctx, label, sizeof("IDENTITY")) <= 0) {
                OPENSSL_free(label);
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot set up RSA-OAEP for the EK");
        }
        if (RAND_priv_bytes(k->seed, (int) k->hlen) != 1 ||
            EVP_PKEY_encrypt(ctx, ret->secret, &len, k->seed, k->hlen) <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encrypt the seed to the EK");
        ret->size = (UINT16) len;
        return 0;
}

/* An EC key's coordinate, left-padded to the field size. */
static int ec_coord(EVP_PKEY *key, const char *param, size_t size, TPM2B_ECC_PARAMETER *ret) {
        _cleanup_(BN_freep) BIGNUM *bn = NULL;

        if (!EVP_PKEY_get_bn_param(key, param, &bn) || BN_bn2binpad(bn, ret->buffer, (int) size) < 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot read an EC point");
        ret->size = (UINT16) size;
        return 0;
}

static int ecdh(EVP_PKEY *mine, EVP_PKEY *peer, uint8_t *z, size_t *z_len) {
        _cleanup_(EVP_PKEY_CTX_freep) EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, mine, NULL);

        if (!ctx || EVP_PKEY_derive_init(ctx) <= 0 || EVP_PKEY_derive_set_peer(ctx, peer) <= 0 ||
            EVP_PKEY_derive(ctx, z, z_len) <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "ECDH with the EK failed");
        return 0;
}

/* ECC EK: an ephemeral key on the EK's curve; its public point is the
 * encrypted secret, the ECDH x-coordinate the input of KDFe. */
static int seed_ecc(EVP_PKEY *ek, const TPMT_PUBLIC *pub, cred_keys *k, TPM2B_ENCRYPTED_SECRET *ret) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *eph = NULL;
        bool p384 = pub->parameters.eccDetail.curveID == TPM2_ECC_NIST_P384;
        size_t size = p384 ? 48 : 32, z_len = 66, off = 0;
        TPM2B_ECC_PARAMETER ek_x;
        TPMS_ECC_POINT point;
        uint8_t z[66];
        int r;

        eph = EVP_PKEY_Q_keygen(NULL, NULL, "EC", p384 ? "secp384r1" : "prime256v1");
        if (!eph)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot make an ephemeral EC key");
        /* The TPM's own x-coordinate is always at the field size. */
        r = ec_coord(ek, OSSL_PKEY_PARAM_EC_PUB_X, size, &ek_x);
        if (r >= 0)
                r = ec_coord(eph, OSSL_PKEY_PARAM_EC_PUB_X, size, &point.x);
        if (r >= 0)
                r = ec_coord(eph, OSSL_PKEY_PARAM_EC_PUB_Y, size, &point.y);
        if (r >= 0)
                r = ecdh(eph, ek, z, &z_len);
        if (r >= 0)
                r = kdfe(k->md, z, z_len, point.x.buffer, point.x.size, ek_x.buffer, ek_x.size, k->seed, k->hlen);
        secret_wipe(z, sizeof(z));
        if (r < 0)
                return r;
        if (Tss2_MU_TPMS_ECC_POINT_Marshal(&point, ret->secret, sizeof(ret->secret), &off) != TSS2_RC_SUCCESS)
                return hwid_fail(HWID_E_INTERNAL, "cannot encode an EC point");
        ret->size = (UINT16) off;
        return 0;
}

static int aes_cfb(const cred_keys *k, const uint8_t *in, size_t len, uint8_t *out) {
        static const uint8_t zero_iv[16];
        const char *name = k->sym_len == 16 ? "AES-128-CFB" : k->sym_len == 24 ? "AES-192-CFB" : "AES-256-CFB";
        _cleanup_(EVP_CIPHER_freep) EVP_CIPHER *cipher = EVP_CIPHER_fetch(NULL, name, NULL);
        _cleanup_(EVP_CIPHER_CTX_freep) EVP_CIPHER_CTX *ctx = EVP_CIPHER_CTX_new();
        int n = 0, m = 0;

        if (!cipher || !ctx || !EVP_EncryptInit_ex2(ctx, cipher, k->sym, zero_iv, NULL) ||
            !EVP_EncryptUpdate(ctx, out, &n, in, (int) len) || !EVP_EncryptFinal_ex(ctx, out + n, &m) ||
            (size_t) (n + m) != len)
                return hwid_fail_ossl(HWID_E_CRYPTO, "%s failed", name);
        return 0;
}

/* The symmetric key size the EK protects with; MakeCredential uses the
 * EK's own symmetric definition. */
static int ek_sym_bytes(const TPMT_PUBLIC *ek, size_t *ret) {
        const TPMT_SYM_DEF_OBJECT *s = ek->type == TPM2_ALG_RSA ? &ek->parameters.rsaDetail.symmetric
                                                                 : &ek->parameters.eccDetail.symmetric;

        if (s->algorithm != TPM2_ALG_AES || s->mode.aes != TPM2_ALG_CFB ||
            (s->keyBits.aes != 128 && s->keyBits.aes != 192 && s->keyBits.aes != 256))
                return hwid_fail(HWID_E_ATTESTATION, "the EK does not protect with AES in CFB mode "
                                 "(algorithm 0x%04x, mode 0x%04x)", s->algorithm, s->mode.aes);
        *ret = s->keyBits.aes / 8;
        return 0;
}

/* encIdentity and the outer HMAC, assembled into a TPM2B_ID_OBJECT. */
static int wrap_credential(cred_keys *k, const TPM2B_NAME *name, const uint8_t *cred, size_t cred_len,
                           TPM2B_ID_OBJECT *ret) {
        uint8_t plain[sizeof(TPM2B_DIGEST)], mac_in[sizeof(TPM2B_DIGEST) + sizeof(TPM2B_NAME)];
        TPM2B_DIGEST digest = { .size = (UINT16) cred_len }, outer = { 0 };
        size_t plain_len = 0, mac_len = 0, off = 0;
        int r;

        memcpy(digest.buffer, cred, cred_len);
        if (Tss2_MU_TPM2B_DIGEST_Marshal(&digest, plain, sizeof(plain), &plain_len) != TSS2_RC_SUCCESS)
                return hwid_fail(HWID_E_INTERNAL, "cannot encode the credential");
        secret_wipe(&digest, sizeof(digest));
        r = aes_cfb(k, plain, plain_len, mac_in);
        secret_wipe(plain, sizeof(plain));
        if (r < 0)
                return r;
        memcpy(mac_in + plain_len, name->name, name->size);
        if (!EVP_Q_mac(NULL, "HMAC", NULL, k->md, NULL, k->hmac, k->hlen, mac_in, plain_len + name->size,
                       outer.buffer, sizeof(outer.buffer), &mac_len))
                return hwid_fail_ossl(HWID_E_CRYPTO, "HMAC of the credential failed");
        outer.size = (UINT16) mac_len;
        if (Tss2_MU_TPM2B_DIGEST_Marshal(&outer, ret->credential, sizeof(ret->credential), &off) != TSS2_RC_SUCCESS ||
            off + plain_len > sizeof(ret->credential))
                return hwid_fail(HWID_E_INTERNAL, "the credential does not fit a TPM2B_ID_OBJECT");
        memcpy(ret->credential + off, mac_in, plain_len);
        ret->size = (UINT16) (off + plain_len);
        return 0;
}

static int make_keys(const TPMT_PUBLIC *ek, const TPM2B_NAME *name, EVP_PKEY *ek_key, cred_keys *k,
                     TPM2B_ENCRYPTED_SECRET *ret_seed) {
        int r;

        r = ek_sym_bytes(ek, &k->sym_len);
        if (r < 0)
                return r;
        r = ek->type == TPM2_ALG_RSA ? seed_rsa(ek_key, k, ret_seed) : seed_ecc(ek_key, ek, k, ret_seed);
        if (r >= 0)
                r = kdfa(k->md, k->seed, k->hlen, "STORAGE", name->name, name->size, k->sym, k->sym_len);
        if (r >= 0)
                r = kdfa(k->md, k->seed, k->hlen, "INTEGRITY", NULL, 0, k->hmac, k->hlen);
        return r;
}

int attest_make_credential(const TPMT_PUBLIC *ek, const TPM2B_NAME *name,
                           const uint8_t *credential, size_t credential_len,
                           uint8_t ret_blob[ATTEST_CREDENTIAL_MAX], size_t *ret_blob_len,
                           uint8_t ret_seed[ATTEST_SEED_MAX], size_t *ret_seed_len) {
        _cleanup_(cred_keys_wipe) cred_keys k = { .md = tpm_hash_name(ek->nameAlg) };
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *ek_key = NULL;
        TPM2B_ENCRYPTED_SECRET seed = { 0 };
        TPM2B_ID_OBJECT blob = { 0 };
        uint8_t blob_wire[ATTEST_CREDENTIAL_MAX], seed_wire[ATTEST_SEED_MAX];
        size_t blob_len = 0, seed_len = 0;
        int r;

        if (!k.md)
                return hwid_fail(HWID_E_INVALID, "the EK's name algorithm 0x%04x is not SHA-2", ek->nameAlg);
        k.hlen = (size_t) EVP_MD_get_size(EVP_get_digestbyname(k.md));
        if (credential_len == 0 || credential_len > k.hlen)
                return hwid_fail(HWID_E_INVALID, "a credential of %zu bytes (1 to %zu for this EK)",
                                 credential_len, k.hlen);
        r = tpm_public_to_pkey(ek, "the EK", &ek_key);
        if (r >= 0)
                r = make_keys(ek, name, ek_key, &k, &seed);
        if (r >= 0)
                r = wrap_credential(&k, name, credential, credential_len, &blob);
        if (r < 0)
                return r;
        if (Tss2_MU_TPM2B_ID_OBJECT_Marshal(&blob, blob_wire, sizeof(blob_wire), &blob_len) != TSS2_RC_SUCCESS ||
            Tss2_MU_TPM2B_ENCRYPTED_SECRET_Marshal(&seed, seed_wire, sizeof(seed_wire), &seed_len) != TSS2_RC_SUCCESS)
                return hwid_fail(HWID_E_INTERNAL, "cannot encode the credential");
        memcpy(ret_blob, blob_wire, blob_len);
        memcpy(ret_seed, seed_wire, seed_len);
        *ret_blob_len = blob_len;
        *ret_seed_len = seed_len;
        return 0;
}
