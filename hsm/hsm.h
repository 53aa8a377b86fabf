/* hsm/: keys that never leave their device.
 *
 * A hwid_key is a private key held by a PKCS#11 token (through p11-kit) or
 * a TPM 2.0 (through tpm2-tss), named by a key URI:
 *
 *   pkcs11:token=ca;object=ca-key?pin-source=file:/etc/hwid/pin
 *   tpm2:file=/var/lib/hwid/device.tss2.pem
 *   tpm2:handle=0x81000001
 *
 * Whatever holds the key, it is exposed to OpenSSL as an EVP_PKEY served
 * by hwid's own built-in provider, so all X.509 code signs through one
 * path: EVP_DigestSignInit_ex(ctx, NULL, md, NULL, HSM_PROPQ, pkey, NULL).
 * The provider hashes in software and sends the device one signing
 * command per signature.
 *
 * Library code: returns 0 or -hwid_err with a detail (common/error.h),
 * never prints. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "cleanup.h"
#include "histogram.h"

/* Property query that selects hwid's provider for signing and falls back
 * to the default provider for everything else (digests, verification). */
#define HSM_PROPQ "?provider=hwid"

typedef enum hwid_key_type {
        HWID_KEY_EC_P256,
        HWID_KEY_EC_P384,
        HWID_KEY_RSA_2048,
        HWID_KEY_RSA_3072,
        _HWID_KEY_TYPE_MAX,
        _HWID_KEY_TYPE_INVALID = -1,
} hwid_key_type;

#define HWID_KEY_TYPE_DEFAULT HWID_KEY_EC_P256

/* "ec-p256", "ec-p384", "rsa-2048", "rsa-3072" */
const char *hwid_key_type_to_string(hwid_key_type t);
int hwid_key_type_from_string(const char *s, hwid_key_type *ret);
/* Type of a public key, or -HWID_E_KEY_TYPE if it is none of the above. */
int hwid_key_type_of_pkey(const EVP_PKEY *pkey, hwid_key_type *ret);

typedef struct hsm_options {
        /* TCTI configuration for TPM keys; NULL means $HWID_TCTI, else the
         * tpm2-tss default. */
        const char *tcti;
        /* hwid_key_create() of a TPM key calls this with the new key's
         * public part once the TPM has made it and before it becomes
         * permanent (persisted at its handle, or written to its file): what
         * the caller records there lets it recognise the key later, and a
         * failure leaves nothing behind.  PKCS#11 tokens make keys in place:
         * not called.  May be NULL. */
        int (*before_keeping)(void *userdata, EVP_PKEY *pub);
        void *userdata;
        /* For a short burst of operations (a join: the CSR's signature, then
         * the attestation's Certify): a TPM key file's key, once loaded,
         * stays loaded until hwid_key_release() or hwid_key_free(), instead
         * of being loaded for each operation and flushed after it.  The
         * caller releases it promptly: swtpm has no resource manager. */
        bool hold;
} hsm_options;

/* What the device itself reports about how it holds the key. */
typedef struct hwid_custody {
        const char *backend; /* "pkcs11" or "tpm2" */
        /* PKCS#11 private key attributes, read back from the token. */
        bool sensitive;
        bool always_sensitive;
        bool extractable;
        bool never_extractable;
        bool local;          /* generated on the token */
        bool value_readable; /* did the token hand out CKA_VALUE? (must not) */
        /* TPM: the key's public area as loaded by the TPM. */
        uint32_t tpm_attributes;
        bool fixed_tpm;
        bool fixed_parent;
        bool sensitive_data_origin;
        bool user_with_auth;
        bool sign;
        bool decrypt;
        bool restricted;
        bool no_da;          /* exempt from dictionary-attack lockout */
        /* Where the key lives, e.g. "SoftHSM slot 0x2a, token 'ca'". */
        char location[256];
        /* PKCS#11: the module file the token was found in. */
        char module_path[256];
} hwid_custody;

typedef struct hwid_key hwid_key;

/* Loads the providers once per process; safe to call repeatedly. */
int hsm_init(void);

/* Generates a new key inside the device at uri.  Refuses (-HWID_E_KEY_EXISTS)
 * if a key is already there unless force is set.  On any failure nothing
 * is left behind on the device or on disk. */
int hwid_key_create(const char *uri, hwid_key_type type, bool force,
                    const hsm_options *opts, hwid_key **ret);

/* Opens an existing key (-HWID_E_KEY_NOT_FOUND if there is none). */
int hwid_key_open(const char *uri, const hsm_options *opts, hwid_key **ret);

/* Removes the key from the device (and its TPM key file). */
int hwid_key_delete(hwid_key *k);

/* The device-backed private key, for signing (borrowed reference). */
EVP_PKEY *hwid_key_pkey(hwid_key *k);
/* The public part as a plain default-provider key (borrowed reference). */
EVP_PKEY *hwid_key_public(hwid_key *k);
hwid_key_type hwid_key_get_type(const hwid_key *k);
/* The key's URI for messages, with any pin-value= masked. */
const char *hwid_key_uri(const hwid_key *k);
/* The digest hwid signs with for this key type (SHA256, or SHA384 for P-384). */
const char *hwid_key_default_digest(const hwid_key *k);

/* A TPM persistent handle that no object occupies, by the TPM's own list
 * (TPM2_GetCapability): the first free one of the owner's range from
 * `from` up (the endorsement keys' range skipped), else from its start.
 * Another program may still take it first: create without force. */
int hwid_tpm_free_handle(const hsm_options *opts, uint32_t from, uint32_t *ret);

/* Whether the TPM answers: one harmless command (TPM2_GetCapability of a
 * property), which leaves nothing in it even if it runs long after.  A
 * TPM without a resource manager (swtpm, /dev/tpm0) serving another
 * program never answers: this blocks until it does, and the caller
 * decides how long to wait.  -HWID_E_TPM_UNREACHABLE if it cannot be
 * reached at all. */
int hwid_tpm_ping(const hsm_options *opts);

/* Reads the custody attributes back from the device. */
int hwid_key_custody(hwid_key *k, hwid_custody *ret);

/* Initialises mctx for signing with k: the one signing path for every
 * backend.  md may be NULL for the key's default digest. */
int hwid_key_sign_init(hwid_key *k, EVP_MD_CTX *mctx, const char *md);

/* After an OpenSSL signing call through a device key failed: the device's
 * own error if it reported one (call hwid_error_clear() before signing),
 * else OpenSSL's. */
int hwid_fail_signing(const char *what);

/* Flushes what hold kept loaded (nothing otherwise); the key stays usable.
 * -HWID_E_TPM_UNREACHABLE when the TPM went away before this flush or an
 * earlier one of its connection: the detail names the objects it may
 * still hold (never "nothing is left" when that is not known). */
int hwid_key_release(hwid_key *k);

/* What the device's signatures with k cost, measured in the one signing
 * path (hwid's provider) for every backend: how long each took (failed
 * ones included) and how many failed.  For metrics; hsm/ never logs. */
typedef struct hwid_sign_stats {
        histogram_snapshot duration; /* bounds: histogram_bounds_sign */
        uint64_t errors;
} hwid_sign_stats;
void hwid_key_sign_stats(const hwid_key *k, hwid_sign_stats *ret);

/* Recoveries of lost PKCS#11 tokens in this process (p11-session.c):
 * the module reinitialised, its tokens found again and logged in. */
typedef struct hsm_recovery_stats {
        unsigned long recovered;
        unsigned long failed;
} hsm_recovery_stats;
void hsm_recovery_stats_get(hsm_recovery_stats *ret);

void hwid_key_free(hwid_key *k);
DEFINE_TRIVIAL_CLEANUP_FUNC(hwid_key *, hwid_key_free)

/* ---- MAC keys ----
 *
 * A hwid_mac_key is a secret key for HMAC-SHA256 in the same devices as
 * the signing keys, named by the same URIs: a PKCS#11 generic secret
 * (CKK_GENERIC_SECRET, 32 bytes, generated on the token, CKA_SENSITIVE,
 * not extractable, usable to sign only), or a TPM keyedHash object with an
 * HMAC-SHA256 scheme (fixedTPM|fixedParent|sensitiveDataOrigin, under the
 * parent the signing keys use, in a TSS2 key file or at a persistent
 * handle).  Its value never leaves the device: hwid asks the device for
 * each HMAC (C_SignInit + C_Sign with CKM_SHA256_HMAC; TPM2_HMAC).  It is
 * a type of its own: hwid_key_type and the signing path know nothing of
 * it. */
typedef struct hwid_mac_key hwid_mac_key;

#define HWID_MAC_LEN 32        /* HMAC-SHA256 */
#define HWID_MAC_DATA_MAX 1024 /* the most one HMAC takes (a TPM's TPM2B_MAX_BUFFER) */

/* Generates a MAC key inside the device at uri; -HWID_E_KEY_EXISTS if a
 * key is there unless force (which replaces it, the new one made first).
 * A failure leaves nothing behind. */
int hwid_mac_key_create(const char *uri, bool force, const hsm_options *opts, hwid_mac_key **ret);
/* Opens an existing MAC key: -HWID_E_KEY_NOT_FOUND if there is none,
 * -HWID_E_KEY_TYPE if the object there is not an HMAC-SHA256 key. */
int hwid_mac_key_open(const char *uri, const hsm_options *opts, hwid_mac_key **ret);
/* HMAC-SHA256 of len bytes (at most HWID_MAC_DATA_MAX) with k, computed
 * in the device: one C_Sign, or one TPM2_HMAC (a key file's key loaded
 * for it from its saved context and flushed after).  Safe to call from
 * several threads at once. */
int hwid_mac_key_hmac_sha256(hwid_mac_key *k, const void *data, size_t len, uint8_t ret[HWID_MAC_LEN]);
/* Reads the custody attributes back from the device (hwid_custody). */
int hwid_mac_key_custody(hwid_mac_key *k, hwid_custody *ret);
/* Removes the key from the device (and its TPM key file). */
int hwid_mac_key_delete(hwid_mac_key *k);
/* The key's URI for messages, with any pin-value= masked. */
const char *hwid_mac_key_uri(const hwid_mac_key *k);
void hwid_mac_key_free(hwid_mac_key *k);
DEFINE_TRIVIAL_CLEANUP_FUNC(hwid_mac_key *, hwid_mac_key_free)
