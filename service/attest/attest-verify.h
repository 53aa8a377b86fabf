/* The CA's side of TPM attestation (the device's is hsm/tpm-attest.h): pure
 * cryptography with OpenSSL and tss2-mu, no TPM on the CA host.
 *
 *   device                                   CA
 *   EK cert, EK public, AK public   ---->    EK cert chains to a manufacturer
 *                                            root; EK public is its key; AK
 *                                            is a restricted signing key;
 *                                            MakeCredential(EK, name(AK), S)
 *                                   <----    id, credential, seed, nonce N
 *   ActivateCredential -> S
 *   Certify(device key, AK, N)
 *   id, S, certify info, signature,
 *   device key public (+ the CSR)   ---->    S matches (AK in that TPM); the
 *                                            AK signed a Certify over N of the
 *                                            device key, fixedTPM etc.; the
 *                                            CSR's key is that key
 *
 * What a success proves comes out as an attest_fact for policy/ and the
 * store; a failure is -HWID_E_ATTESTATION (403) saying which proof failed,
 * or -HWID_E_INVALID (400) for evidence that is not even well-formed.
 * Nothing here logs. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/x509.h>
#include <tss2/tss2_tpm2_types.h>

#include "tpm-attest.h" /* hsm/: TPM public areas, names, EK templates */
#include "cert-bundle.h"
#include "cleanup.h"

/* ---- Manufacturer roots and the EK certificate (attest-ek.c) ---- */

typedef cert_bundle attest_roots;

/* Loads the TPM manufacturers' CA certificates (roots, and the
 * intermediates their EK certificates need) from PEM or DER files, or from
 * every file in the directories given.  A named file must hold a
 * certificate; a directory at least one.  Trust ends at a self-signed root
 * among them. */
int attest_roots_load(const char *const *paths, size_t n, attest_roots **ret);
size_t attest_roots_count(const attest_roots *r);
void attest_roots_free(attest_roots *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(attest_roots *, attest_roots_free)

/* Checks that der is one DER certificate that chains to a root, is no CA,
 * and, if it has an extendedKeyUsage, is for tcg-kp-EKCertificate.  EK
 * certificates often mark subjectDirectoryAttributes (the TPM's
 * specification and security assertions) critical, which OpenSSL does not
 * process: that one extension is accepted at the EK, and nowhere else; any
 * other unhandled critical extension fails, as OpenSSL would have it. */
int attest_ek_cert_verify(const attest_roots *roots, const uint8_t *der, size_t len, X509 **ret);

/* ---- Software MakeCredential, TPM 2.0 part 1 §24 (attest-credential.c) ---- */

#define ATTEST_CREDENTIAL_MAX sizeof(TPM2B_ID_OBJECT)
#define ATTEST_SEED_MAX sizeof(TPM2B_ENCRYPTED_SECRET)

/* What TPM2_MakeCredential(ek, credential, name) returns, computed here:
 * a seed encrypted to the EK (RSA-OAEP with label "IDENTITY", or ECDH with
 * an ephemeral key and KDFe), from which KDFa derives the AES-CFB key
 * ("STORAGE", bound to name) that encrypts the credential and the HMAC key
 * ("INTEGRITY") of the outer HMAC over it and name.  The credential may be
 * as long as the EK's name digest.  Outputs in wire form. */
int attest_make_credential(const TPMT_PUBLIC *ek, const TPM2B_NAME *name,
                           const uint8_t *credential, size_t credential_len,
                           uint8_t ret_blob[ATTEST_CREDENTIAL_MAX], size_t *ret_blob_len,
                           uint8_t ret_seed[ATTEST_SEED_MAX], size_t *ret_seed_len);

/* ---- Checks of keys and of the Certify (attest-certify.c) ---- */

/* The EK public area holds ek_cert's key and is a restricted decryption
 * key with AES-CFB protection: one MakeCredential can be made for. */
int attest_check_ek_public(const TPMT_PUBLIC *ek, X509 *ek_cert);
/* Restricted, sign, fixedTPM, fixedParent, not decrypt. */
int attest_check_ak(const TPMT_PUBLIC *ak);
/* fixedTPM, fixedParent, sensitiveDataOrigin, sign, not decrypt: a key
 * made inside the TPM that can never leave it. */
int attest_check_device_key(const TPMT_PUBLIC *key);
/* info (TPMS_ATTEST as signed) is a TPM-made Certify, over nonce, of the
 * object whose public area is key, and sig (TPMT_SIGNATURE) verifies with
 * the AK. */
int attest_verify_certify(const TPMT_PUBLIC *ak, const uint8_t *info, size_t info_len,
                          const uint8_t *sig, size_t sig_len, const TPMT_PUBLIC *key,
                          const uint8_t *nonce, size_t nonce_len);
/* key's public key is csr_key (compared as keys, not encodings). */
int attest_key_matches(const TPMT_PUBLIC *key, EVP_PKEY *csr_key);

/* ---- Freshness: single-use, expiring challenges (attest-fresh.c) ---- */

#define ATTEST_ID_LEN 16
#define ATTEST_SECRET_LEN 32 /* fits the digest of SHA-256 and SHA-384 EKs */
#define ATTEST_NONCE_LEN 32

/* A challenge the CA has sent and not yet seen answered.  The secret
 * itself is not kept, only its hash: whoever reads the table (a database
 * backup, a replica's disk) learns nothing that answers a challenge. */
typedef struct attest_pending {
        uint8_t id[ATTEST_ID_LEN];
        uint64_t expires;                 /* seconds since the epoch */
        uint8_t secret_sha256[32];        /* of what ActivateCredential must give back */
        uint8_t nonce[ATTEST_NONCE_LEN];   /* what the Certify must be over */
        TPMT_PUBLIC ak;                    /* the AK the credential is bound to */
        uint8_t ek_cert[TPM_EK_CERT_MAX];  /* the verified EK certificate (DER) */
        size_t ek_cert_len;
} attest_pending;

/* Where pending challenges wait: in the store (hwidd: they survive a
 * restart, and several hwidd on one database share them), or in memory
 * (tests).  An implementation provides: */
typedef struct attest_fresh_ops {
        /* Records p (now: for purging expired ones); -HWID_E_RATE_LIMITED
         * when too many wait. */
        int (*put)(void *impl, const attest_pending *p, uint64_t now);
        /* Removes the challenge id, whatever comes of it, and returns it:
         * each is answered once.  -HWID_E_ATTESTATION if unknown, already
         * taken, or expired at now. */
        int (*take)(void *impl, const uint8_t id[ATTEST_ID_LEN], uint64_t now, attest_pending *ret);
        void (*free)(void *impl);
} attest_fresh_ops;

typedef struct attest_fresh attest_fresh;

/* Wraps an implementation; takes impl (freed with ops->free, also on failure). */
int attest_fresh_new(const attest_fresh_ops *ops, void *impl, attest_fresh **ret);
/* The in-memory table, holding at most max challenges. */
int attest_fresh_new_memory(size_t max, attest_fresh **ret);
/* The store's table (store_challenge_put/take) for one requester's
 * challenges: at most max unexpired challenges of all requesters, and of
 * this requester at most max_per_requester (0: no bound), its oldest
 * replaced beyond that (store_challenge_put()); each put sets *replaced
 * (may be NULL) to how many it replaced.  s and the strings are borrowed and
 * must outlive the table. */
typedef struct attest_bounds {
        size_t max;
        size_t max_per_requester;
        const char *requester; /* "token:ID", "cert:SERIAL", "ek:SHA256" */
        size_t *replaced;
} attest_bounds;
struct store;
int attest_fresh_new_store(struct store *s, const attest_bounds *b, attest_fresh **ret);
int attest_fresh_put(attest_fresh *f, const attest_pending *p, uint64_t now);
int attest_fresh_take(attest_fresh *f, const uint8_t id[ATTEST_ID_LEN], uint64_t now, attest_pending *ret);
void attest_fresh_free(attest_fresh *f);
DEFINE_TRIVIAL_CLEANUP_FUNC(attest_fresh *, attest_fresh_free)

/* ---- The exchange (attest-verify.c) ---- */

typedef struct attest_verifier attest_verifier;

/* Borrows roots and fresh, which must outlive the verifier (cheap to make:
 * hwidd makes one per request, with the roots of the configuration the
 * request runs under); ttl: seconds a challenge may be answered in. */
int attest_verifier_new(const attest_roots *roots, attest_fresh *fresh, unsigned ttl,
                        attest_verifier **ret);
void attest_verifier_free(attest_verifier *v);
DEFINE_TRIVIAL_CLEANUP_FUNC(attest_verifier *, attest_verifier_free)

/* The device's first message, in wire form. */
typedef struct attest_request {
        const uint8_t *ek_cert;   /* DER */
        size_t ek_cert_len;
        const uint8_t *ek_public; /* TPMT_PUBLIC */
        size_t ek_public_len;
        const uint8_t *ak_public; /* TPMT_PUBLIC */
        size_t ak_public_len;
} attest_request;

typedef struct attest_challenge {
        char id[2 * ATTEST_ID_LEN + 1]; /* lower-case hex */
        uint8_t credential[ATTEST_CREDENTIAL_MAX]; /* TPM2B_ID_OBJECT */
        size_t credential_len;
        uint8_t seed[ATTEST_SEED_MAX]; /* TPM2B_ENCRYPTED_SECRET */
        size_t seed_len;
        uint8_t nonce[ATTEST_NONCE_LEN];
        uint64_t expires;
} attest_challenge;

/* Checks the request (EK chain, EK public, AK) and makes and records a
 * challenge that expires ttl seconds after now. */
int attest_challenge_new(attest_verifier *v, const attest_request *req, uint64_t now,
                         attest_challenge *ret);

/* The device's answer, in wire form. */
typedef struct attest_evidence {
        const char *id;
        const uint8_t *activated;    /* the secret ActivateCredential gave */
        size_t activated_len;
        const uint8_t *certify_info; /* TPMS_ATTEST */
        size_t certify_info_len;
        const uint8_t *signature;    /* TPMT_SIGNATURE */
        size_t signature_len;
        const uint8_t *key_public;   /* TPMT_PUBLIC of the device key */
        size_t key_public_len;
} attest_evidence;

/* What a verified answer proves, for policy/ and the store. */
typedef struct attest_fact {
        uint8_t ek_cert_sha256[32];
        uint8_t ek_pub_sha256[32];   /* of the EK certificate's SubjectPublicKeyInfo: the TPM */
        uint8_t ek_cert[TPM_EK_CERT_MAX];
        size_t ek_cert_len;
        TPM2B_NAME ak_name;
} attest_fact;

/* Checks an answer against its challenge, which it uses up (malformed
 * evidence is refused first and leaves it): the secret, the Certify, the
 * device key's attributes, and that csr_key is the certified key. */
int attest_evidence_verify(attest_verifier *v, const attest_evidence *ev, EVP_PKEY *csr_key,
                           uint64_t now, attest_fact *ret);

/* SHA-256 of the SubjectPublicKeyInfo of a DER certificate (the EK's
 * identity, as the EK allowlist and the issued certificates name it). */
int attest_ek_pub_sha256(const uint8_t *der, size_t len, uint8_t ret[32]);
