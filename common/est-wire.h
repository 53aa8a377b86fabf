/* EST (RFC 7030) wire format, for both sides: hwidd's /.well-known/est/
 * endpoints and `hwid join --est` / `hwid renew --est`.
 *
 * EST bodies are base64 (RFC 4648 §4, RFC 7030 §4: the "base64" of
 * Content-Transfer-Encoding) of DER, with line breaks anywhere.  Decoding
 * skips CR, LF, space and tab and is otherwise strict: a DER or PEM body
 * where base64 belongs is refused, never guessed at. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* Lines of base64 we send: 64 characters and LF, as libest does. */
#define EST_B64_LINE 64

/* Decodes an EST body into DER (caller frees *ret).  -HWID_E_INVALID with
 * the reason when it is not base64 (a DER or PEM body is named as such). */
int est_b64_decode(const uint8_t *body, size_t len, uint8_t **ret, size_t *ret_len);

/* Appends the base64 of der to out, in lines of EST_B64_LINE. */
int est_b64_encode(const uint8_t *der, size_t len, buf *out);

/* A certs-only CMS/PKCS#7 SignedData (RFC 7030 §4.1.3, RFC 5652: no
 * signers, no content) of every certificate in pem, in order, as DER
 * (caller frees). */
int est_certs_only_from_pem(const char *pem, uint8_t **ret, size_t *ret_len);

/* The certificates of a certs-only PKCS#7 (DER) as PEM, in the order
 * sent; -HWID_E_INVALID if it is not one or holds none. */
int est_certs_only_to_pem(const uint8_t *der, size_t len, char **ret);

#define EST_USER_MAX 64
#define EST_PASSWORD_MAX 256

/* HTTP Basic (RFC 7617) credentials of an Authorization header value: the
 * user, and the password (*ret_password: release with secret_free()).
 * Everything decoded is wiped.  -HWID_E_INVALID when it is not Basic, not
 * "user:password", or a part is empty or too long. */
int est_basic_parse(const char *authorization, char ret_user[EST_USER_MAX + 1], char **ret_password);

/* "Basic " and the base64 of "user:password", for a client (*ret: release
 * with secret_free()). */
int est_basic_make(const char *user, const char *password, char **ret);
