/* Bootstrap tokens: "<id>.<secret>", id 6 chars and secret 24 chars of
 * [a-z0-9] (~124 bits).  Only SHA-256(secret) is ever stored; the secret
 * is compared in constant time and wiped after use. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#define TOKEN_ID_LEN 6
#define TOKEN_SECRET_LEN 24
#define TOKEN_SECRET_MIN 16
#define TOKEN_SECRET_MAX 64

/* A fresh token; *ret_secret must be released with secret_free(). */
int token_generate(char ret_id[TOKEN_ID_LEN + 1], char **ret_secret);
/* A fresh token as its holder gets it, "<id>.<secret>" in *ret_token
 * (release it with secret_free()), with its id and the hash that is
 * stored of its secret. */
int token_new(char ret_id[TOKEN_ID_LEN + 1], uint8_t ret_hash[32], char **ret_token);

/* Splits and validates "<id>.<secret>" (or a "Bearer <token>" header
 * value when bearer is true).  -HWID_E_TOKEN_INVALID if malformed. */
int token_parse(const char *s, bool bearer, char ret_id[TOKEN_ID_LEN + 1], char **ret_secret);

/* SHA-256 of the secret, as stored; 0 or -HWID_E_CRYPTO. */
int token_hash(const char *secret, uint8_t ret[32]);
/* Constant-time comparison of a presented secret with a stored hash. */
bool token_secret_matches(const char *secret, const uint8_t hash[32]);
