/* The device's HTTPS client (libcurl with OpenSSL).  TLS trust is the CA
 * the device pinned; for mutual TLS the client key is a hwid_key, so the
 * TLS handshake signature is made inside the TPM/HSM. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "hsm.h"

#define CLIENT_MAX_RESPONSE (1024 * 1024)

typedef struct client_opts {
        const char *server;       /* "https://host:port" */
        const char *ca_pem;       /* trust anchor: the pinned CA certificate (root or intermediate);
                                   * NULL only for client_fetch_ca_unverified() */
        hwid_key *key;            /* mutual TLS key (borrowed), or NULL */
        const char *cert_pem;     /* its certificate, with key */
        long timeout;             /* seconds for a whole request, default 30 */
        size_t max_response;      /* bytes of an answer's body, 0: CLIENT_MAX_RESPONSE */
} client_opts;

typedef struct client_response {
        long status;
        buf body;                 /* capped at max_response (CLIENT_MAX_RESPONSE) */
        int64_t retry_after;      /* seconds, 0 if absent */
        int64_t date;             /* the server's clock (its Date header), 0 if absent */
        char content_type[64];
} client_response;

void client_response_clear(client_response *r);

/* One request.  auth is a full header value ("Bearer ..."), or NULL; it is
 * a secret and never logged.  Network and TLS failures: -HWID_E_NETWORK
 * with curl's reason. */
int client_request(const client_opts *o, const char *method, const char *path, const char *auth,
                   const uint8_t *body, size_t body_len, const char *content_type, client_response *ret);

/* Several requests over one connection (one TLS handshake: with a device
 * key, one signature in the TPM).  The options are copied; the strings and
 * the key they point to must outlive the session. */
typedef struct client_session client_session;
int client_session_new(const client_opts *o, client_session **ret);
int client_session_request(client_session *s, const char *method, const char *path, const char *auth,
                           const uint8_t *body, size_t body_len, const char *content_type, client_response *ret);
void client_session_free(client_session *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(client_session *, client_session_free)

/* GET /ca without trusting the server yet: the caller must check the
 * result against the pin before believing it or sending anything else. */
int client_fetch_ca_unverified(const char *server, long timeout, char **ret_pem);

/* The error a non-2xx response means, with the server's JSON message. */
int client_error_from_response(const client_response *r);

/* The server's clock when it answered (Unix seconds): the "server_time"
 * of a JSON error answer, else its Date header; 0 if it gave neither. */
int64_t client_response_server_time(const client_response *r);
