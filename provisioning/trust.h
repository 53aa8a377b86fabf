/* What a device trusts is a set (DIR/ca.pem): the CA it pinned, the CAs
 * it adopted since, and above each the certificates that chain to a root.
 * The anchors of the set -- its certificates above no other of it -- are
 * the TLS trust anchors and the CAs a certificate of the device's must be
 * signed by.
 *
 * A CA rollover (docs/DEVICE.md) adds a CA to the set only by proof: a
 * link certificate that certifies the new CA's key with the key of a CA
 * already trusted (ca_link_verify(): signature, subject key, CA:TRUE and
 * keyCertSign, validity), never because a server offers it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <openssl/x509.h>

/* Most certificates a set or an answer may hold (each costs signature
 * checks). */
#define TRUST_MAX_CERTS 32

/* Every certificate of a PEM text, in order (other PEM blocks are
 * skipped): at least one, at most TRUST_MAX_CERTS. */
int trust_read_certs(const char *pem, STACK_OF(X509) **ret);
/* The certificates as one PEM text. */
int trust_certs_pem(STACK_OF(X509) *sk, char **ret);

/* parent issued child: names and key identifiers match, parent is a CA
 * that may sign certificates, child's signature verifies with its key. */
bool trust_issued_by(X509 *child, X509 *parent);

/* Moves from pool to out, after start, the certificates above start,
 * issuer after issuer, up to a self-signed root or none in the pool (one
 * that out holds already is left in the pool). */
int trust_chain_up(X509 *start, STACK_OF(X509) *pool, STACK_OF(X509) *out);

/* The anchors of set (borrowed references, in set's order). */
int trust_anchors(STACK_OF(X509) *set, STACK_OF(X509) **ret);

/* Adds to set every CA certificate of pool (a server's /ca answer) that
 * a link certificate of pool proves from an anchor of set, at now, with
 * the certificates of pool above it; again with the CAs added, until none
 * is.  A CA whose key set already trusts is not added again.  What is
 * left of pool: the links, and *ret_unproven CA certificates of keys no
 * anchor has that no link proves (and anything else). *ret_adopted: the
 * CAs added. */
int trust_adopt(STACK_OF(X509) *set, STACK_OF(X509) *pool, int64_t now, unsigned *ret_adopted,
                unsigned *ret_unproven);
