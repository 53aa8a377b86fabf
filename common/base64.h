/* Base64 (RFC 4648 §4) and base64url (§5) for JOSE: OpenSSL encodes and
 * decodes; these add the URL alphabet and strictness.
 *
 * base64url as JWS uses it (RFC 7515 §2): the URL-safe alphabet without
 * '=' padding.  Plain base64 (x5c, RFC 7515 §4.1.6): the standard alphabet
 * with its padding.  Decoding refuses anything else — whitespace, the
 * other alphabet, padding where there must be none, a non-canonical
 * encoding (unused bits set) — so that a token has one encoding only. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Encodes len bytes; *ret is NUL-terminated, caller frees. */
int base64_encode(const uint8_t *data, size_t len, bool url, char **ret);

/* Decodes text (len characters, no NUL needed); *ret (caller frees) holds
 * *ret_len bytes plus a NUL.  -HWID_E_INVALID with the reason. */
int base64_decode(const char *text, size_t len, bool url, uint8_t **ret, size_t *ret_len);
