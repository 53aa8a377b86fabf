/* The device's HTTPS client (libcurl with OpenSSL).  TLS trust is the CA
 * the device pinned; for mutual TLS the client key is a hwid_key, so the
 * TLS handshake signature is made inside the TPM/HSM. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

#include "buf.h"
#include "hsm.h"

#define CLIENT_MAX_RESPONSE (1024 * 1024)

/* Most servers a device knows (--server repeated, device.json "servers"). */
#define CLIENT_MAX_SERVERS 8

/* Told when a request leaves an unavailable server for the next one. */
typedef void (*client_note_fn)(void *userdata, const char *message);

typedef struct client_opts {
        const char *server;       /* "https://host:port" */
        /* Failover (replicas of one CA, docs/DEVICE.md): NULL, or the
         * servers to try, NULL-terminated, starting with the first.  A
         * request moves on to the next one when a server is unreachable
         * (connection, TLS, timeout) or answers 502, 503 or 504; never on
         * any other answer (a 4xx refusal is definitive).  server is then
         * ignored. */
        const char *const *servers;
        /* The requests change things (remote administration): one that
         * reached a server may have been carried out there, and sent again
         * to another replica it could be done twice (a second token).  So
         * a request moves on only when it certainly was not carried out:
         * nothing of it was sent (no connection, a failed TLS handshake,
         * including a server the pinned CA does not verify) or the answer
         * was 502, 503 or 504; a timeout or a lost connection after it was
         * sent is reported, naming the server.  When every server fails,
         * the error names each.  Without it (the device's enrollment,
         * renewal and polls, which are idempotent) any network failure
         * moves on. */
        bool at_most_once;
        client_note_fn note;      /* told of each failover, may be NULL */
        void *note_data;
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
/* The server the session's last request went to (the one that answered,
 * after any failover): a string of the options'. */
const char *client_session_server(const client_session *s);
/* Sends the session's next requests to server first (one of its list). */
void client_session_prefer(client_session *s, const char *server);

/* GET path without trusting the server yet (o->ca_pem and o->key are
 * ignored), with failover: the caller must check what it got against the
 * pin before believing it or sending anything else.  ret_server: the
 * server that answered (a string of o's). */
int client_get_unverified(const client_opts *o, const char *path, client_response *ret,
                          const char **ret_server);
/* GET /ca that way: the served PEM. */
int client_fetch_ca_unverified(const client_opts *o, char **ret_pem, const char **ret_server);

/* The error a non-2xx response means, with the server's JSON message. */
int client_error_from_response(const client_response *r);
/* The answer's body as one JSON object (json_read(): strict, no member
 * twice); -HWID_E_INVALID "the server's answer is not ..." otherwise. */
int client_response_json(const client_response *r, json_object **ret);

/* The server's clock when it answered (Unix seconds): the "server_time"
 * of a JSON error answer, else its Date header; 0 if it gave neither. */
int64_t client_response_server_time(const client_response *r);
