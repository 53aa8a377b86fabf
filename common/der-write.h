/* A small DER writer over buf, for the issuer's leaf certificates: the
 * TBSCertificate is assembled from pieces (some encoded once per CA,
 * the rest per certificate) instead of through OpenSSL's X509 object,
 * whose set-encode-sign round trips cost more than the rest of an
 * issuance's build together (performance issue 16).
 *
 * Only framing is written here: tag and definite length headers, a
 * header put around what was already appended, the positive INTEGER of
 * a serial number, the BIT STRING of a signature.  Every real structure
 * (names, times, keys, extensions) is encoded by OpenSSL and appended
 * with der_append_item(). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <openssl/asn1.h>

#include "buf.h"

#define DER_INTEGER 0x02
#define DER_BIT_STRING 0x03
#define DER_OCTET_STRING 0x04
#define DER_SEQUENCE 0x30
/* Context-specific, constructed: [n] EXPLICIT. */
#define DER_EXPLICIT(n) (0xa0 | (n))

/* Appends a tag and a definite length (short form below 128, else 0x81..0x84). */
int der_append_header(buf *b, uint8_t tag, size_t len);
/* Appends tag, length and the n bytes of p. */
int der_append_tlv(buf *b, uint8_t tag, const void *p, size_t n);
/* Makes the bytes appended since start (b->len when it was taken) the
 * contents of one tag: the header goes in front of them. */
int der_wrap(buf *b, size_t start, uint8_t tag);
/* A non-negative INTEGER from its big-endian magnitude: leading zero
 * bytes dropped, one 0x00 added when the top bit is set; zero is 02 01 00. */
int der_append_uint(buf *b, const uint8_t *mag, size_t n);
/* A BIT STRING with no unused bits (a signature). */
int der_append_bit_string(buf *b, const void *p, size_t n);
/* OpenSSL's own DER encoding of obj, an it (ASN1_ITEM_rptr(X509_NAME),
 * ...), written straight into b. */
int der_append_item(buf *b, const void *obj, const ASN1_ITEM *it);
