/* OCSP (RFC 6960) requests as hwidd's responder reads them, before
 * anything is looked up or signed: bounded, strictly DER, RFC 5019's
 * lightweight profile (one certificate per request), the certificate's
 * issuer named by a hash hwid knows (SHA-1 or SHA-2), a nonce (RFC 8954)
 * kept to be echoed.  Anything else is a malformed request: the answer is
 * the unsigned malformedRequest, which costs no signature. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/ocsp.h>

#include "cleanup.h"

/* A request with one certID and a 32-byte nonce is about 120 bytes; a
 * signed one carries a certificate or two. */
#define OCSP_REQUEST_MAX 4096
/* GET /ocsp/<base64 of the request>: the path's last part, decoded. */
#define OCSP_GET_MAX (OCSP_REQUEST_MAX / 3 * 4 + 4)
#define OCSP_NONCE_MAX 32   /* RFC 8954 §2.1: 1 to 32 octets */
#define OCSP_SERIAL_MAX 20  /* octets, RFC 5280 §4.1.2.2 */

typedef struct ocsp_query {
        OCSP_REQUEST *req;             /* the request, as parsed */
        const OCSP_CERTID *id;         /* its one certID (points into req) */
        int hash_nid;                  /* NID_sha1, NID_sha256, NID_sha384 or NID_sha512 */
        char serial[2 * OCSP_SERIAL_MAX + 1]; /* upper-case hex, as the store keeps serials */
        size_t nonce_len;              /* 0: no nonce asked */
} ocsp_query;

/* Reads a DER OCSPRequest.  -HWID_E_INVALID with the reason for anything
 * hwidd does not answer: too long, not DER, not one certID, an unknown
 * hash, a nonce outside 1..32 octets, an unknown critical extension. */
int ocsp_query_parse(const uint8_t *der, size_t len, ocsp_query *ret);
void ocsp_query_clear(ocsp_query *q);

/* The DER request of GET /ocsp/<tail> (RFC 6960 appendix A.1: the base64
 * of the DER, URL-encoded; the transport has already percent-decoded the
 * path).  -HWID_E_INVALID when it is too long or not base64. */
int ocsp_get_decode(const char *tail, uint8_t **ret_der, size_t *ret_len);

/* Whether the certID names issuer as the certificate's issuer (its name
 * and key hashed with the certID's hash). */
bool ocsp_query_names_issuer(const ocsp_query *q, const X509 *issuer);

/* An answer without response bytes, unsigned (RFC 6960 §4.2.1):
 * OCSP_RESPONSE_STATUS_MALFORMEDREQUEST, _INTERNALERROR, _TRYLATER or
 * _UNAUTHORIZED.  *ret: DER, caller frees with OPENSSL_free(). */
int ocsp_status_response(int status, uint8_t **ret, size_t *ret_len);
