/* What a device trusts: the CA it pinned, and only what verifiably chains
 * to it.
 *
 * The first connection to the server is not authenticated: the device
 * fetches /ca and believes it only because its first certificate matches
 * the pin (sha256 of its SubjectPublicKeyInfo).  Whatever else that answer
 * (or a certificate answer) carries is kept only if it chains above the
 * pinned certificate, each signature checked, up to a self-signed root:
 * anything else (an extra root appended by a server or a man in the
 * middle) would otherwise be trusted by every program that reads
 * DIR/ca.pem or DIR/cert.pem. */
#pragma once

#include "client.h"
#include "hsm.h"

/* Most certificates a bundle may hold (each one costs signature checks). */
#define PINNED_MAX_CERTS 32

/* The pinned CA's certificate alone (PEM): the first certificate of a
 * bundle the device stored (DIR/ca.pem, pending.json), its TLS trust
 * anchor. */
int pinned_anchor(const char *bundle_pem, char **ret_anchor_pem);

/* A /ca answer: its first certificate must match pin (else
 * -HWID_E_PIN_MISMATCH).  ret_bundle: that certificate and those of the
 * answer that chain above it, in order; ret_anchor: the first alone;
 * ret_dropped: how many certificates of the answer were left out. */
int pinned_bundle(const char *served_pem, const char *pin, char **ret_bundle, char **ret_anchor,
                  unsigned *ret_dropped);

/* Fetches /ca without trusting the server yet (from o's servers, with
 * failover: client.h) and filters it as above.  ret_server, if not NULL:
 * the server that answered (a string of o's). */
int pinned_fetch_ca(const client_opts *o, const char *pin, char **ret_bundle, char **ret_anchor,
                    unsigned *ret_dropped, const char **ret_server);

/* The same from EST's GET /.well-known/est/cacerts (hwid join --est). */
int pinned_fetch_ca_est(const client_opts *o, const char *pin, char **ret_bundle, char **ret_anchor,
                        unsigned *ret_dropped, const char **ret_server);

/* A certificate answer (POST /csr, /v1/renew, a poll): its first
 * certificate must be signed by the pinned CA (anchor_pem), for key, with
 * CN cn — a certificate in its place is refused.  ret_pem: it, and those of
 * the answer that chain above it; ret_dropped: how many were left out. */
int pinned_issued(const char *answer_pem, const char *anchor_pem, hwid_key *key, const char *cn, char **ret_pem,
                  unsigned *ret_dropped);
