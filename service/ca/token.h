/* Bootstrap tokens: "<id>.<secret>", id 6 chars and secret 24 chars of
 * [a-z0-9] (~124 bits).  The secret is never stored.
 *
 * A token is derived from the CA's token key K (ca.token_key), an
 * HMAC-SHA256 key in the HSM/TPM next to the CA key that never leaves it:
 * secret = base36(HMAC-SHA256(K, "hwid-token-v2" || id || nonce)), 24
 * digits, with a random 32-byte nonce.  The store keeps the nonce, which
 * tells nothing without K: a stolen store or backup spends no token.
 * Checking a presented secret recomputes it in the device (one HMAC) and
 * compares in constant time.  Tokens made before the CA had a token key
 * (legacy: only SHA-256(secret) stored) keep working until they expire.
 * Every copy of a secret is wiped after use. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "hsm.h"
#include "store.h"

#define TOKEN_ID_LEN 6
#define TOKEN_SECRET_LEN 24
#define TOKEN_SECRET_MIN 16
#define TOKEN_SECRET_MAX 64
#define TOKEN_NONCE_LEN STORE_TOKEN_NONCE_LEN

/* What a caller that has no token key says to do about it. */
#define TOKEN_KEY_MISSING                                                                                 \
        "this CA has no token key (ca.token_key in hwidd.yaml), which new bootstrap tokens are derived with: " \
        "create one with `hwid ca token-key --config FILE` and add the line it prints (docs/CONFIG.md)"

/* Whether key keeps its value in its device, as the device reports it
 * (*ret_custody): PKCS#11 sensitive, not extractable, CKA_VALUE refused;
 * TPM fixedTPM|fixedParent|sensitiveDataOrigin.  -HWID_E_CONFIG if not. */
int token_key_check(hwid_mac_key *key, hwid_custody *ret_custody);

/* A fresh token derived with key (one HMAC in its device): row's id,
 * nonce and derived mark, and "<id>.<secret>" in *ret_token (release it
 * with secret_free()).  Only the nonce is for the store. */
int token_new(hwid_mac_key *key, store_token *row, char **ret_token);

/* The secret of the derived token (id, nonce): one HMAC with key, in
 * ret (a secret: wipe it). */
int token_derive(hwid_mac_key *key, const char *id, const uint8_t nonce[TOKEN_NONCE_LEN],
                 char ret[TOKEN_SECRET_LEN + 1]);

/* Whether secret is the token t's, compared in constant time: 0, or
 * -HWID_E_TOKEN_INVALID.  A derived token costs one HMAC with key (NULL:
 * -HWID_E_CONFIG, nothing to check it with), a legacy one a SHA-256; a
 * device that fails gives its own error. */
int token_verify(hwid_mac_key *key, const store_token *t, const char *secret);

/* The secret a CMP client and hwidd share for t's password-based MAC:
 * the token's secret as printed (derived: one HMAC with key), or for a
 * legacy token the lower-case hex SHA-256 of its secret, what it was
 * before.  Release *ret with secret_free(). */
int token_shared_secret(hwid_mac_key *key, const store_token *t, char **ret);

/* Splits and validates "<id>.<secret>" (or a "Bearer <token>" header
 * value when bearer is true).  -HWID_E_TOKEN_INVALID if malformed. */
int token_parse(const char *s, bool bearer, char ret_id[TOKEN_ID_LEN + 1], char **ret_secret);

/* SHA-256 of the secret, as a legacy token has it stored; 0 or
 * -HWID_E_CRYPTO. */
int token_hash(const char *secret, uint8_t ret[32]);
