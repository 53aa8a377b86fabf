/* The CA service: what hwidd does for each API call, above the transport
 * and below nothing.  Flow per request, one way only: authenticate
 * (token or client certificate) -> policy decision -> issuer (signs
 * through hsm/) -> store (commit) -> response. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "config.h"
#include "http.h"

typedef struct ca_service ca_service;

/* Opens the CA key, the store and the issuer described by cfg (borrowed
 * for the service's lifetime; the policy inside may be swapped by
 * ca_service_set_config()). */
int ca_service_new(hwidd_config *cfg, ca_service **ret);
void ca_service_free(ca_service *ca);
DEFINE_TRIVIAL_CLEANUP_FUNC(ca_service *, ca_service_free)

/* SIGHUP: adopts the policy (profiles, audit-only, admin group) of a
 * freshly loaded config; returns the old config for the caller to free
 * once no request can still use it (after this returns, none does). */
hwidd_config *ca_service_set_config(ca_service *ca, hwidd_config *cfg);

/* Housekeeping, called about once a second from one thread, never from a
 * request: summaries of refused unauthenticated requests, audit retention. */
void ca_service_tick(ca_service *ca, int64_t now);
/* At start, before any request, and at shutdown, once no request is
 * served: the last refusals' summary, then a signed checkpoint of the
 * audit chain's head (if it moved since the last). */
void ca_service_checkpoint(ca_service *ca, int64_t now);

/* hwidd's TLS key (borrowed for the service's lifetime) and certificate
 * (PEM, first certificate is hwidd's): /readyz has the key sign, metrics
 * show when the certificate expires. */
int ca_service_set_tls(ca_service *ca, hwid_key *tls_key, const char *tls_pem);

/* The HTTPS listener whose connections /metrics shows (NULL: none);
 * unset only once it has stopped. */
void ca_service_set_transport(ca_service *ca, http_server *srv);

/* The PEM the TLS layer trusts for client certificates: the CA
 * certificate alone, never the root or other members of its chain (hwid
 * signs every client certificate with this CA directly). */
const char *ca_service_client_ca_pem(const ca_service *ca);
