/* What each key backend (PKCS#11, TPM 2.0) implements.  hsm/key.c picks the
 * backend from the URI scheme; hsm/provider*.c turns any backend object
 * into an EVP_PKEY.  Backends never hash: they receive a digest and return
 * a signature in the encoding X.509 and TLS use (DER ECDSA-Sig-Value for
 * EC, the raw octet string for RSA). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "hsm.h"
#include "uri.h"

typedef enum hsm_sig_scheme {
        HSM_SIG_ECDSA,
        HSM_SIG_RSA_PKCS1, /* PKCS#1 v1.5 with DigestInfo */
        HSM_SIG_RSA_PSS,   /* salt length = digest length, MGF1 with the same digest */
} hsm_sig_scheme;

typedef struct hsm_backend {
        const char *name;
        /* Generates a key at uri; see hwid_key_create() for the contract.
         * ret_pub receives the public part (default provider). */
        int (*create)(const key_uri *uri, hwid_key_type type, bool force,
                      const hsm_options *opts, void **ret_obj, EVP_PKEY **ret_pub);
        int (*open)(const key_uri *uri, const hsm_options *opts,
                    void **ret_obj, EVP_PKEY **ret_pub);
        /* md_nid: NID_sha256/NID_sha384/NID_sha512; digest is md's output.
         * *siglen holds the size of sig on entry, the length on return.
         * Must be safe to call from several threads at once. */
        int (*sign)(void *obj, hsm_sig_scheme scheme, int md_nid,
                    const uint8_t *digest, size_t digest_len,
                    uint8_t *sig, size_t *siglen);
        int (*custody)(void *obj, hwid_custody *ret);
        /* Removes the key from the device; obj must still be freed. */
        int (*remove)(void *obj);
        /* Flushes what hsm_options.hold kept loaded; NULL if never any.
         * Fails (-HWID_E_TPM_UNREACHABLE) when the device went away before
         * a flush: what it names may still be loaded there. */
        int (*release)(void *obj);
        void (*free)(void *obj);
} hsm_backend;

extern const hsm_backend hsm_backend_pkcs11;
extern const hsm_backend hsm_backend_tpm2;

/* What each backend implements for MAC keys (hwid_mac_key, mac.c). */
typedef struct hsm_mac_backend {
        const char *name;
        int (*create)(const key_uri *uri, bool force, const hsm_options *opts, void **ret_obj);
        int (*open)(const key_uri *uri, const hsm_options *opts, void **ret_obj);
        /* Must be safe to call from several threads at once. */
        int (*hmac_sha256)(void *obj, const uint8_t *data, size_t len, uint8_t out[HWID_MAC_LEN]);
        int (*custody)(void *obj, hwid_custody *ret);
        int (*remove)(void *obj);
        void (*free)(void *obj);
} hsm_mac_backend;

extern const hsm_mac_backend hsm_mac_pkcs11;
extern const hsm_mac_backend hsm_mac_tpm2;

/* A key URI as messages show it: a pin-value= (accepted for tests)
 * masked, so that no PIN reaches an error line or a log (key.c). */
char *hsm_display_uri(const char *uri);

/* A backend object shared by the hwid_key and the provider's key data. */
typedef struct hsm_obj {
        const hsm_backend *backend;
        void *obj;
        EVP_PKEY *pub; /* public part, default provider */
        hwid_key_type type;
        int refs;
        /* Every signature through the provider (hwid_key_sign_stats()). */
        histogram sign_duration;
        _Atomic uint64_t sign_errors;
} hsm_obj;

/* References to o (provider.c): the last one frees the backend object. */
hsm_obj *hsm_obj_ref(hsm_obj *o);
void hsm_obj_unref(hsm_obj *o);

/* k's backend object if be serves k, else NULL: for modules that need one
 * backend's own operations (the TPM's attestation, tpm-attest.c). */
void *hsm_key_backend_obj(hwid_key *k, const hsm_backend *be);

/* Builds the provider-backed EVP_PKEY for o (provider.c). */
int hsm_provider_pkey(hsm_obj *o, EVP_PKEY **ret);

/* Public-key helpers shared by the backends (pubkey.c). */
int hsm_pub_from_ec_point(int curve_nid, const uint8_t *point, size_t len, EVP_PKEY **ret);
int hsm_pub_from_rsa(const uint8_t *n, size_t n_len, const uint8_t *e, size_t e_len, EVP_PKEY **ret);
/* Converts a raw r||s ECDSA signature to DER. */
int hsm_ecdsa_raw_to_der(const uint8_t *r, size_t r_len, const uint8_t *s, size_t s_len,
                         uint8_t *sig, size_t *siglen);
/* Curve NID and RSA bits for a key type. */
int hsm_key_type_curve_nid(hwid_key_type t);
int hsm_key_type_rsa_bits(hwid_key_type t);
