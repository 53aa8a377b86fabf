/* EST (RFC 7030) on the device side, for hwid join --est and hwid renew
 * --est: the requests of the native API in EST's wire format, over the
 * same client (the pinned CA as trust anchor, the device key in the TPM
 * for mutual TLS). */
#pragma once

#include "client.h"

#define EST_PATH "/.well-known/est"

/* GET /.well-known/est/cacerts without trusting the server yet: its
 * certificates as PEM, for the caller to check against the pin. */
int est_fetch_ca_unverified(const client_opts *o, char **ret_pem, const char **ret_server);

/* GET /.well-known/est/cacerts on a session whose TLS is verified: its
 * certificates as PEM (a renewal following a CA rollover). */
int est_get_cacerts(client_session *cs, char **ret_pem);

/* POST /.well-known/est/OP (simpleenroll, simplereenroll) with csr_pem
 * sent as base64 DER.  On 200, *ret_cert is the PEM of the certs-only
 * answer; any other answer is left in *ret for the caller.  auth: a full
 * Authorization value or NULL. */
int est_post_csr(client_session *cs, const char *op, const char *auth, const char *csr_pem, client_response *ret,
                 char **ret_cert);

/* The HTTP Basic credentials of a bootstrap token "<id>.<secret>"
 * (*ret: secret_free()). */
int est_token_auth(const char *token, char **ret);
