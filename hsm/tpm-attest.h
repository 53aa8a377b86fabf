/* TPM 2.0 attestation: what proves that a key lives in a genuine TPM.
 *
 * Three proofs, after the TCG "TPM 2.0 Keys for Device Identity and
 * Attestation" and the credential activation Keylime and SPIRE use:
 *   1. the TPM's endorsement key (EK) certificate, read from the TPM's NV,
 *      chains to a manufacturer root (checked by the CA, service/attest/attest-verify.h);
 *   2. an attestation key (AK) lives in the TPM that holds that EK: the CA
 *      encrypts a secret to the EK bound to the AK's name (MakeCredential,
 *      done in software by the CA) and only that TPM, with that AK loaded,
 *      can recover it (TPM2_ActivateCredential);
 *   3. the device key lives in that TPM: the AK signs a TPM2_Certify of it
 *      over a nonce of the CA's.
 *
 * This header has two halves.  The first is pure data (no TPM): TPM public
 * areas in their wire form, names, the TCG EK templates; the CA side uses
 * it too.  The second is the device side of the exchange, on the TPM.
 *
 * Wire forms, as tpm2-tools writes them: a public area is a marshalled
 * TPMT_PUBLIC (no size prefix); a credential is a marshalled TPM2B_ID_OBJECT
 * and its seed a marshalled TPM2B_ENCRYPTED_SECRET; a certification is the
 * TPMS_ATTEST bytes the TPM signed (the content of a TPM2B_ATTEST) and its
 * signature a marshalled TPMT_SIGNATURE.
 *
 * Library code: returns 0 or -hwid_err with a detail, never prints. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <tss2/tss2_tpm2_types.h>

#include "cleanup.h"
#include "hsm.h"

/* ---- Pure data: no TPM access (hsm/tpm-public.c) ---- */

/* An EK certificate in NV is a few hundred bytes to ~2 KB; cap it. */
#define TPM_EK_CERT_MAX 4096
/* The largest marshalled TPMT_PUBLIC (an RSA 4096 key with a policy). */
#define TPM_PUBLIC_MAX 1024
/* The largest nonce a Certify qualifies (a TPM2B_DATA holds a TPMT_HA). */
#define TPM_NONCE_MAX 64

/* The EKs of the TCG EK Credential Profile that hwid knows: certificate
 * NV index, persistent handle (TCG provisioning guidance) and template. */
typedef enum tpm_ek_alg {
        TPM_EK_AUTO = 0,   /* the first whose certificate is in NV, in this order: */
        TPM_EK_ECC_P256,   /* 0x01c0000a, 0x81010002, template L-2 */
        TPM_EK_RSA_2048,   /* 0x01c00002, 0x81010001, template L-1 */
        TPM_EK_ECC_P384,   /* 0x01c00016, 0x81010016, template H-3 */
        _TPM_EK_ALG_MAX,
} tpm_ek_alg;

/* "auto", "ecc-p256", "rsa-2048", "ecc-p384" */
const char *tpm_ek_alg_to_string(tpm_ek_alg a);
int tpm_ek_alg_from_string(const char *s, tpm_ek_alg *ret);
uint32_t tpm_ek_cert_index(tpm_ek_alg a);
uint32_t tpm_ek_handle(tpm_ek_alg a);

/* The TCG default template of an EK (unique zero-filled, as created). */
int tpm_ek_template(tpm_ek_alg a, TPMT_PUBLIC *ret);
/* The public area that the template gives for the EK key in cert_key: the
 * EK the TPM holds, if its certificate is honest.  Fails with
 * -HWID_E_ATTESTATION if cert_key is not a key of that kind. */
int tpm_ek_public_from_key(tpm_ek_alg a, EVP_PKEY *cert_key, TPMT_PUBLIC *ret);

/* Exactly one TPMT_PUBLIC in data (trailing bytes refused), with a key of a
 * type hwid supports; `what` names it in errors (-HWID_E_INVALID). */
int tpm_public_unmarshal(const uint8_t *data, size_t len, const char *what, TPMT_PUBLIC *ret);
int tpm_public_marshal(const TPMT_PUBLIC *pub, uint8_t out[TPM_PUBLIC_MAX], size_t *ret_len);
/* The TPM name of a public area: nameAlg || H_nameAlg(marshalled area). */
int tpm_public_name(const TPMT_PUBLIC *pub, TPM2B_NAME *ret);
/* The public key as a default-provider EVP_PKEY (EC P-256/P-384, RSA
 * 2048/3072; else -HWID_E_KEY_TYPE). */
int tpm_public_to_pkey(const TPMT_PUBLIC *pub, const char *what, EVP_PKEY **ret);
/* The OpenSSL digest of a TPM hash algorithm (SHA-256/384/512), or NULL. */
const char *tpm_hash_name(TPMI_ALG_HASH alg);

/* ---- The device side (hsm/tpm-attest.c) ---- */

typedef struct tpm_attest tpm_attest;

/* Step 1, before asking the CA for a challenge: reads the EK certificate
 * (alg, or TPM_EK_AUTO), derives the EK's public area from it and the TCG
 * template, and creates the AK: a restricted ECDSA P-256 signing key, a
 * primary key of the endorsement hierarchy (as the TCG IAK), so that it
 * needs no storage key and is the same AK each time.  The TPM is left with
 * nothing loaded: the AK is kept as a saved context in our memory; or,
 * with opts->hold, it stays loaded until tpm_attest_respond() (which
 * flushes it) or tpm_attest_free(), two commands fewer -- for a caller
 * that answers at once (hwid join: one HTTP round trip in between).
 * TPM commands: NV_ReadPublic, NV_Read (1 per KB), CreatePrimary,
 * ContextSave, FlushContext (+1 NV_ReadPublic per EK certificate that
 * TPM_EK_AUTO finds absent). */
int tpm_attest_begin(const hsm_options *opts, tpm_ek_alg alg, tpm_attest **ret);

tpm_ek_alg tpm_attest_ek_alg(const tpm_attest *a);
/* What the device sends the CA (borrowed, valid while a lives): the EK
 * certificate (DER) and the EK's and the AK's public areas (TPMT_PUBLIC). */
const uint8_t *tpm_attest_ek_cert(const tpm_attest *a, size_t *ret_len);
const uint8_t *tpm_attest_ek_public(const tpm_attest *a, size_t *ret_len);
const uint8_t *tpm_attest_ak_public(const tpm_attest *a, size_t *ret_len);

/* The CA's challenge, in wire form. */
typedef struct tpm_attest_challenge {
        const uint8_t *credential; /* TPM2B_ID_OBJECT */
        size_t credential_len;
        const uint8_t *secret;     /* TPM2B_ENCRYPTED_SECRET */
        size_t secret_len;
        const uint8_t *nonce;      /* qualifies the Certify; 1..TPM_NONCE_MAX bytes */
        size_t nonce_len;
} tpm_attest_challenge;

/* The device's answer, in wire form.  `activated` is the recovered secret:
 * wiped by tpm_attest_answer_free(). */
typedef struct tpm_attest_answer {
        uint8_t *activated;
        size_t activated_len;
        uint8_t *certify_info; /* TPMS_ATTEST as signed */
        size_t certify_info_len;
        uint8_t *signature;    /* TPMT_SIGNATURE */
        size_t signature_len;
        uint8_t *key_public;   /* the device key's TPMT_PUBLIC */
        size_t key_public_len;
} tpm_attest_answer;

/* Step 2, with the CA's challenge: ActivateCredential (the AK, and the EK:
 * the persistent one if it is the certified key, else created from the
 * template), then TPM2_Certify of key (a tpm2: key in the same TPM) by the
 * AK over the nonce.  Everything loaded is flushed before it returns.
 * TPM commands, persistent EK and a key used before in this process:
 * ReadPublic, ContextLoad x2, [StartAuthSession, PolicySecret,]
 * ActivateCredential, Certify, FlushContext x2 (the session goes with the
 * command it authorises; an EK made from its template adds CreatePrimary
 * and FlushContext; a held AK, or a key held with hsm_options.hold, saves
 * its ContextLoad, and a held key its FlushContext). */
int tpm_attest_respond(tpm_attest *a, hwid_key *key, const tpm_attest_challenge *c,
                       tpm_attest_answer **ret);

void tpm_attest_answer_free(tpm_attest_answer *ans);
DEFINE_TRIVIAL_CLEANUP_FUNC(tpm_attest_answer *, tpm_attest_answer_free)
void tpm_attest_free(tpm_attest *a);
DEFINE_TRIVIAL_CLEANUP_FUNC(tpm_attest *, tpm_attest_free)
