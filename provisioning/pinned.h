/* What a device trusts: the CA it pinned, what verifiably chains to it,
 * and the CAs a rollover's link certificates prove from it (trust.h).
 *
 * The first connection to the server is not authenticated: the device
 * fetches /ca and believes it only because one of its certificates
 * matches the pin (sha256 of its SubjectPublicKeyInfo) -- the first,
 * normally; an older one during a CA rollover, when the first is the new
 * CA.  Whatever else that answer (or a certificate answer) carries is
 * kept only if it chains above the pinned certificate, each signature
 * checked, up to a self-signed root, or is a CA that a link certificate
 * of the answer proves from a key the device trusts: anything else (an
 * extra root appended by a server or a man in the middle, a "new CA"
 * without a valid link) would otherwise be trusted by every program that
 * reads DIR/ca.pem or DIR/cert.pem. */
#pragma once

#include <stdint.h>

#include "client.h"
#include "hsm.h"

/* The trust anchors (PEM) of a bundle the device stored (DIR/ca.pem,
 * pending.json): the pinned CA first, then each CA adopted since
 * (trust_anchors()); the TLS trust anchors. */
int pinned_anchor(const char *bundle_pem, char **ret_anchor_pem);

/* A /ca answer: one of its certificates must match pin (else
 * -HWID_E_PIN_MISMATCH).  ret_bundle: that certificate, those of the
 * answer that chain above it, and the CAs links of the answer prove from
 * it (trust_adopt()), in order; ret_anchor: its anchors; ret_dropped: how
 * many certificates of the answer are neither (nor links). */
int pinned_bundle(const char *served_pem, const char *pin, char **ret_bundle, char **ret_anchor,
                  unsigned *ret_dropped);

/* A rollover seen by a device that trusts bundle (DIR/ca.pem): the CAs of
 * served (a /ca answer) that links of it prove from bundle's anchors at
 * now (trust_adopt()).  *ret_bundle: bundle with them, NULL when none was
 * adopted; *ret_unproven: CA certificates of keys the device does not
 * trust that no link proves, not adopted. */
int pinned_adopt(const char *bundle_pem, const char *served_pem, int64_t now, char **ret_bundle,
                 unsigned *ret_adopted, unsigned *ret_unproven);

/* Fetches /ca without trusting the server yet (from o's servers, with
 * failover: client.h) and filters it as above.  ret_server, if not NULL:
 * the server that answered (a string of o's). */
int pinned_fetch_ca(const client_opts *o, const char *pin, char **ret_bundle, char **ret_anchor,
                    unsigned *ret_dropped, const char **ret_server);

/* The same from EST's GET /.well-known/est/cacerts (hwid join --est). */
int pinned_fetch_ca_est(const client_opts *o, const char *pin, char **ret_bundle, char **ret_anchor,
                        unsigned *ret_dropped, const char **ret_server);

/* A certificate answer (POST /csr, /v1/renew, a poll): its first
 * certificate must be signed by one of the anchors (anchor_pem), for key,
 * with CN cn — a certificate in its place is refused.  ret_pem: it, and those of
 * the answer that chain above it; ret_dropped: how many were left out. */
int pinned_issued(const char *answer_pem, const char *anchor_pem, hwid_key *key, const char *cn, char **ret_pem,
                  unsigned *ret_dropped);
