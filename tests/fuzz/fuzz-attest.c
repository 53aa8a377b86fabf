/* libFuzzer target: what a device sends the CA in an attestation, all of
 * it attacker-controlled: TPM public areas (EK, AK, device key) and a
 * Certify's TPMS_ATTEST and TPMT_SIGNATURE.  The first byte picks which. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include <openssl/evp.h>

#include "attest-verify.h"
#include "error.h"

static TPMT_PUBLIC ak, key;
static const uint8_t nonce[ATTEST_NONCE_LEN] = { 0x42 };

static void keys_init(void) {
        EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "prime256v1");

        /* Any well-formed P-256 public area will do: the signatures the
         * fuzzer makes up will not verify, the parsing before is the point. */
        if (!k || tpm_ek_public_from_key(TPM_EK_ECC_P256, k, &ak) < 0)
                __builtin_trap();
        key = ak;
        ak.objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_RESTRICTED |
                              TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_SENSITIVEDATAORIGIN;
        EVP_PKEY_free(k);
}

static void public_area(const uint8_t *data, size_t size) {
        TPMT_PUBLIC p;
        TPM2B_NAME name;
        EVP_PKEY *pkey = NULL;

        if (tpm_public_unmarshal(data, size, "input", &p) < 0)
                return;
        (void) tpm_public_name(&p, &name);
        (void) attest_check_ak(&p);
        (void) attest_check_device_key(&p);
        if (tpm_public_to_pkey(&p, "input", &pkey) == 0)
                EVP_PKEY_free(pkey);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static bool init;
        size_t split;

        if (!init) {
                keys_init();
                init = true;
        }
        if (size < 2)
                return 0;
        if (data[0] & 1) {
                public_area(data + 1, size - 1);
                return 0;
        }
        /* The Certify info, then the signature. */
        split = data[1] < size - 2 ? data[1] : size - 2;
        (void) attest_verify_certify(&ak, data + 2, split, data + 2 + split, size - 2 - split, &key,
                                     nonce, sizeof(nonce));
        return 0;
}
