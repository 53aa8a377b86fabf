/* The CA's checks of TPM public areas and of a TPM2_Certify: pure data and
 * OpenSSL, no TPM.  A public area's attributes are facts about the object
 * only because its name is: the TPM activated a credential bound to the
 * AK's name, and certified the device key by its name. */
#include <string.h>

#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/rsa.h>
#include <tss2/tss2_mu.h>

#include "attest-verify.h"
#include "error.h"
#include "ossl-util.h"

static const struct {
        TPMA_OBJECT bit;
        const char *name;
} attr_names[] = {
        { TPMA_OBJECT_FIXEDTPM, "fixedTPM" },
        { TPMA_OBJECT_FIXEDPARENT, "fixedParent" },
        { TPMA_OBJECT_SENSITIVEDATAORIGIN, "sensitiveDataOrigin" },
        { TPMA_OBJECT_RESTRICTED, "restricted" },
        { TPMA_OBJECT_SIGN_ENCRYPT, "sign" },
        { TPMA_OBJECT_DECRYPT, "decrypt" },
};

/* Fails, saying "<what>: it lacks X" or "it has X", unless have holds
 * every attribute of want and none of deny. */
static int attr_check(TPMA_OBJECT have, TPMA_OBJECT want, TPMA_OBJECT deny, const char *what) {
        for (size_t i = 0; i < ELEMENTSOF(attr_names); i++) {
                TPMA_OBJECT bit = attr_names[i].bit;

                if (((want & bit) && !(have & bit)) || ((deny & bit) && (have & bit)))
                        return hwid_fail(HWID_E_ATTESTATION, "%s: it %s %s (attributes 0x%08x)", what,
                                         have & bit ? "has" : "lacks", attr_names[i].name, have);
        }
        return 0;
}

int attest_check_ek_public(const TPMT_PUBLIC *ek, X509 *ek_cert) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = NULL;
        int r;

        r = attr_check(ek->objectAttributes, TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT,
                       TPMA_OBJECT_SIGN_ENCRYPT, "the EK is not a restricted decryption key");
        if (r >= 0)
                r = tpm_public_to_pkey(ek, "the EK", &key);
        if (r < 0)
                return r;
        if (EVP_PKEY_eq(key, X509_get0_pubkey(ek_cert)) != 1)
                return hwid_fail(HWID_E_ATTESTATION, "the EK public area does not hold the EK certificate's key");
        return 0;
}

int attest_check_ak(const TPMT_PUBLIC *ak) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = NULL;
        int r;

        /* An unrestricted key signs any digest, so its "attestations"
         * could say anything. */
        r = attr_check(ak->objectAttributes,
                       TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_FIXEDTPM |
                               TPMA_OBJECT_FIXEDPARENT,
                       TPMA_OBJECT_DECRYPT, "the AK is not a restricted signing key fixed to its TPM");
        return r < 0 ? r : tpm_public_to_pkey(ak, "the AK", &key);
}

int attest_check_device_key(const TPMT_PUBLIC *key) {
        return attr_check(key->objectAttributes,
                          TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN |
                                  TPMA_OBJECT_SIGN_ENCRYPT,
                          TPMA_OBJECT_DECRYPT, "the device key is not a signing key made in and fixed to its TPM");
}

static int ecdsa_der(const TPMS_SIGNATURE_ECDSA *s, uint8_t **ret, size_t *ret_len) {
        _cleanup_(ECDSA_SIG_freep) ECDSA_SIG *sig = ECDSA_SIG_new();
        BIGNUM *r = BN_bin2bn(s->signatureR.buffer, s->signatureR.size, NULL);
        BIGNUM *sv = BN_bin2bn(s->signatureS.buffer, s->signatureS.size, NULL);
        unsigned char *der = NULL;
        int len;

        if (!sig || !r || !sv || !ECDSA_SIG_set0(sig, r, sv)) {
                BN_free(r);
                BN_free(sv);
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot decode the ECDSA signature");
        }
        len = i2d_ECDSA_SIG(sig, &der);
        if (len <= 0)
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot encode the ECDSA signature");
        *ret = der;
        *ret_len = (size_t) len;
        return 0;
}

/* The signature's hash, and its bytes as OpenSSL verifies them. */
static int sig_parts(const TPMT_PUBLIC *ak, const TPMT_SIGNATURE *s, TPMI_ALG_HASH *ret_hash,
                     uint8_t **ret_sig, size_t *ret_len) {
        const TPM2B_PUBLIC_KEY_RSA *rsa;

        if (s->sigAlg == TPM2_ALG_ECDSA && ak->type == TPM2_ALG_ECC) {
                *ret_hash = s->signature.ecdsa.hash;
                return ecdsa_der(&s->signature.ecdsa, ret_sig, ret_len);
        }
        if ((s->sigAlg == TPM2_ALG_RSASSA || s->sigAlg == TPM2_ALG_RSAPSS) && ak->type == TPM2_ALG_RSA) {
                rsa = s->sigAlg == TPM2_ALG_RSASSA ? &s->signature.rsassa.sig : &s->signature.rsapss.sig;
                *ret_hash = s->signature.rsassa.hash; /* same place in both */
                *ret_sig = OPENSSL_memdup(rsa->buffer, rsa->size ? rsa->size : 1);
                *ret_len = rsa->size;
                return *ret_sig ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
        }
        return hwid_fail(HWID_E_ATTESTATION, "the certify signature (scheme 0x%04x) is not one the AK makes",
                         s->sigAlg);
}

static int verify_sig(const TPMT_PUBLIC *ak, const uint8_t *msg, size_t len, const TPMT_SIGNATURE *s) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *ctx = EVP_MD_CTX_new();
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = NULL;
        _cleanup_(OPENSSL_freep) uint8_t *sig = NULL;
        EVP_PKEY_CTX *pctx = NULL;
        TPMI_ALG_HASH hash = TPM2_ALG_NULL;
        const char *md;
        size_t sig_len = 0;
        int r;

        r = tpm_public_to_pkey(ak, "the AK", &key);
        if (r >= 0)
                r = sig_parts(ak, s, &hash, &sig, &sig_len);
        if (r < 0)
                return r;
        md = tpm_hash_name(hash);
        if (!md)
                return hwid_fail(HWID_E_ATTESTATION, "the certify signature uses hash 0x%04x, not SHA-2", hash);
        if (!ctx || EVP_DigestVerifyInit_ex(ctx, &pctx, md, NULL, NULL, key, NULL) <= 0 ||
            (s->sigAlg == TPM2_ALG_RSAPSS &&
             (EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PSS_PADDING) <= 0 ||
              EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, RSA_PSS_SALTLEN_AUTO) <= 0)))
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot verify the certify signature");
        if (EVP_DigestVerify(ctx, sig, sig_len, msg, len) != 1) {
                ERR_clear_error();
                return hwid_fail(HWID_E_ATTESTATION, "the certify signature does not verify with the AK");
        }
        return 0;
}

static bool name_eq(const TPM2B_NAME *a, const TPM2B_NAME *b) {
        return a->size == b->size && memcmp(a->name, b->name, a->size) == 0;
}

/* What the AK signed must be a TPM-made Certify over nonce of key. */
static int check_attest(const TPMS_ATTEST *at, const TPMT_PUBLIC *key, const uint8_t *nonce, size_t nonce_len) {
        TPM2B_NAME name;
        int r;

        /* The AK, being restricted, signs nothing that starts with this
         * value unless the TPM made it. */
        if (at->magic != TPM2_GENERATED_VALUE)
                return hwid_fail(HWID_E_ATTESTATION, "the certify info was not made by a TPM");
        if (at->type != TPM2_ST_ATTEST_CERTIFY)
                return hwid_fail(HWID_E_ATTESTATION, "the attestation is of type 0x%04x, not a Certify", at->type);
        if (at->extraData.size != nonce_len || memcmp(at->extraData.buffer, nonce, nonce_len) != 0)
                return hwid_fail(HWID_E_ATTESTATION, "the Certify is over another nonce than this challenge's");
        r = tpm_public_name(key, &name);
        if (r < 0)
                return r;
        if (!name_eq(&name, &at->attested.certify.name))
                return hwid_fail(HWID_E_ATTESTATION, "the Certify names another key than the device key given");
        return 0;
}

int attest_verify_certify(const TPMT_PUBLIC *ak, const uint8_t *info, size_t info_len,
                          const uint8_t *sig, size_t sig_len, const TPMT_PUBLIC *key,
                          const uint8_t *nonce, size_t nonce_len) {
        TPMS_ATTEST at = { 0 };
        TPMT_SIGNATURE s = { 0 };
        size_t off = 0;
        int r;

        if (info_len == 0 || info_len > sizeof(TPMS_ATTEST) ||
            Tss2_MU_TPMS_ATTEST_Unmarshal(info, info_len, &off, &at) != TSS2_RC_SUCCESS || off != info_len)
                return hwid_fail(HWID_E_INVALID, "the certify info is not a TPMS_ATTEST");
        off = 0;
        if (sig_len == 0 || sig_len > sizeof(TPMT_SIGNATURE) ||
            Tss2_MU_TPMT_SIGNATURE_Unmarshal(sig, sig_len, &off, &s) != TSS2_RC_SUCCESS || off != sig_len)
                return hwid_fail(HWID_E_INVALID, "the certify signature is not a TPMT_SIGNATURE");
        /* The signature first: until it verifies, the content is anyone's. */
        r = verify_sig(ak, info, info_len, &s);
        if (r < 0)
                return r;
        return check_attest(&at, key, nonce, nonce_len);
}

int attest_key_matches(const TPMT_PUBLIC *key, EVP_PKEY *csr_key) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *pkey = NULL;
        int r;

        r = tpm_public_to_pkey(key, "the device key", &pkey);
        if (r < 0)
                return r;
        if (!csr_key || EVP_PKEY_eq(pkey, csr_key) != 1)
                return hwid_fail(HWID_E_ATTESTATION, "the CSR's key is not the certified TPM key");
        return 0;
}
