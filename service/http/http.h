/* HTTP(S) transport of hwidd on libmicrohttpd (GnuTLS underneath):
 * connections multiplexed by epoll on a few I/O threads, handlers run on
 * worker threads, budgets that keep misbehaving clients from starving the
 * rest (http-guard.c).  The
 * server's TLS private key is a hwid_key: every TLS handshake signature is
 * made in the HSM/TPM through hsm/.  Knows nothing of CAs, tokens or
 * policy: it bounds and delivers requests, and reports who the TLS peer is. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "histogram.h"
#include "hsm.h"

#define HTTP_TLS_BINDING_MAX 64

typedef struct http_request {
        const char *method;
        const char *path;          /* without the query string, percent-decoded */
        const char *query;         /* as sent (still percent-encoded); NULL if none */
        const char *content_type;  /* NULL if absent */
        const char *authorization; /* the Authorization header, NULL if absent */
        const uint8_t *body;
        size_t body_len;
        const char *peer_addr;     /* textual client address */
        /* Mutual TLS: the client's leaf certificate (DER) if it sent one,
         * and whether it verified against the configured client CA (the
         * leaf signed by a trust anchor itself; certificates the client
         * sends along are not used).  peer_expired / peer_not_yet_valid:
         * it would have verified but is outside its validity; the chain is
         * valid from peer_valid_from (Unix seconds), for the caller to
         * weigh against its clock skew allowance. */
        const uint8_t *peer_cert;
        size_t peer_cert_len;
        bool peer_verified;
        bool peer_expired;
        bool peer_not_yet_valid;
        int64_t peer_valid_from;
        /* The connection's TLS session (gnutls_session_t), NULL without
         * TLS: for http_request_tls_binding(), made only when asked for. */
        void *tls_session;
} http_request;

/* The connection's TLS channel binding, for EST's proof-of-possession
 * linking (RFC 7030 §3.5): "tls-exporter" (RFC 9266, TLS 1.3) or
 * "tls-unique" (TLS 1.2); *ret_type NULL and *ret_len 0 when there is
 * none.  Computed on demand: deriving it costs ~2.5% of an issuance,
 * and only EST's linking uses it. */
void http_request_tls_binding(const http_request *req, uint8_t ret[HTTP_TLS_BINDING_MAX], size_t *ret_len,
                              const char **ret_type);

typedef struct http_response {
        int status;
        const char *content_type; /* static string */
        buf body;                 /* filled by the handler (cap set by the server) */
        int64_t retry_after;      /* > 0: sends Retry-After */
        char location[256];       /* non-empty: sends Location */
        bool cacheable;           /* false (default): sends Cache-Control: no-store */
        bool sensitive;           /* the body holds a secret: wiped once sent */
        const char *www_authenticate;  /* static; non-NULL: sends WWW-Authenticate */
        const char *transfer_encoding; /* static; non-NULL: sends Content-Transfer-Encoding (EST) */
        const char *error;        /* the error slug of an error response (static), for metrics */
} http_response;

/* Called on a worker thread once the whole body has arrived (and only if
 * it is within max_body), never on an I/O thread: it may block.  Must
 * fill resp. */
typedef void (*http_handler)(void *userdata, const http_request *req, http_response *resp);

/* Formats a JSON error body {"error": slug, "message": msg} with status. */
void http_error(http_response *resp, int status, const char *slug, const char *message);
/* Same, from a -hwid_err and its detail. */
void http_error_from(http_response *resp, int r);
/* A handler's answer (http-respond.c): a PEM body, or a JSON one (a
 * newline is added), with status. */
void http_respond_pem(http_response *resp, int status, const char *pem);
void http_respond_json(http_response *resp, int status, const char *json);
/* A plain-text error answer (EST's and CMP's, whose clients read no JSON):
 * status, the slug for metrics, text and a newline; the body reset first. */
void http_respond_text(http_response *resp, int status, const char *slug, const char *text);
/* The error response of r (-hwid_err), the body reset first; "not yet
 * valid" adds the server's clock ("server_time": Unix seconds), so that a
 * device can tell its clock from ours. */
void http_respond_error(http_response *resp, int r);
/* The JSON object an answer carries (read back to be amended), or NULL;
 * read as every JSON hwidd reads is (json_read(): no duplicate members). */
struct json_object *http_response_json(const http_response *resp);
/* Adds to an error response the moment (Unix seconds) from which asking
 * again can succeed: as "<key>": at in its JSON body, and Retry-After. */
void http_error_retry_at(http_response *resp, const char *key, int64_t at, int64_t now);

typedef struct http_options {
        const char *listen;          /* "ADDR:PORT" */
        /* Server TLS key (borrowed).  NULL: plain HTTP, without
         * certificates (for what relying parties must fetch without TLS,
         * like a CRL distribution point). */
        hwid_key *tls_key;
        const char *tls_cert_pem;    /* server certificate chain, PEM */
        const char *client_ca_pem;   /* trust anchor(s) for client certificates; NULL: no mTLS */
        size_t max_body;
        size_t max_header;
        unsigned timeout;            /* seconds per phase of a request (receiving, sending) */
        unsigned max_connections;    /* open at once (see http-guard.c for who gives way) */
        unsigned max_connections_per_ip; /* 0: max_connections / 16, at least 16 (capped at max_connections) */
        unsigned handshake_cap;      /* connections in their TLS handshake; 0: max_connections / 16, at least 16 */
        unsigned handshake_timeout;  /* seconds; 0: 10 (capped at timeout) */
        unsigned workers;            /* threads running handlers; 0: 32 */
        unsigned io_threads;         /* threads multiplexing connections; 0: one per CPU, 2 to 16 */
        double rate_per_ip;          /* 0: unlimited */
        unsigned rate_burst;
        /* Told of every refusal the transport answers itself, before any
         * handler runs (400, 413, 429, 431, 501, ...), with its error slug;
         * may be NULL. */
        void (*on_refusal)(void *userdata, int status, const char *error);
        /* Told of every TLS handshake that failed, with the client's
         * address and why (after the alert that says so went out); may be
         * NULL. */
        void (*on_tls_failure)(void *userdata, const char *peer, const char *why);
} http_options;

typedef struct http_server http_server;

/* The server certificate chain and the client certificates' trust
 * anchors (NULL: those it started with; a listener without mutual TLS
 * has none) of the TLS handshakes from now on,
 * the key unchanged: a CA rollover gives hwidd's chain a link and its
 * clients a new CA.  Connections made before keep what they had.  From
 * one thread at a time (hwidd's main thread). */
int http_server_set_certs(http_server *srv, const char *cert_pem, const char *client_ca_pem);

/* Why the transport closed a connection it had accepted. */
typedef enum http_evict {
        HTTP_EVICT_HANDSHAKE_TIMEOUT, /* its TLS handshake outlasted handshake_timeout */
        HTTP_EVICT_HANDSHAKE_CAP,     /* the oldest handshake, when handshake_cap was reached */
        HTTP_EVICT_FAIR_SHARE,        /* at max_connections: of the address holding the most */
        HTTP_EVICT_IDLE_AT_LIMIT,     /* at max_connections: the oldest idle one */
        HTTP_EVICT_DEADLINE,          /* a request (or the wait for one) outlasted timeout */
        HTTP_EVICT_STALLED,           /* at max_connections: a request silent for seconds */
        _HTTP_EVICT_MAX,
} http_evict;

/* Why it refused a connection when accepting it. */
typedef enum http_refuse {
        HTTP_REFUSE_RATE,        /* the address is over rate_per_ip */
        HTTP_REFUSE_PER_ADDRESS, /* the address holds max_connections_per_ip */
        HTTP_REFUSE_LIMIT,       /* max_connections, and no connection could give way */
        _HTTP_REFUSE_MAX,
} http_refuse;

typedef struct http_stats {
        unsigned handshaking, idle, active; /* open connections by state */
        unsigned closing;                   /* evicted, their I/O thread closing them */
        unsigned signing;                   /* handshakes waiting for the TLS key's signature */
        unsigned queued, working;           /* requests waiting for a worker, being handled */
        uint64_t evicted[_HTTP_EVICT_MAX];
        uint64_t refused[_HTTP_REFUSE_MAX];
        uint64_t tls_failures;
        histogram_snapshot handshake;       /* TLS handshake durations (histogram_bounds_sign) */
} http_stats;

const char *http_evict_name(http_evict e);
const char *http_refuse_name(http_refuse r);

int http_server_start(const http_options *o, http_handler handler, void *userdata, http_server **ret);
/* The port actually bound (useful with port 0). */
int http_server_port(const http_server *s);
void http_server_stats(http_server *s, http_stats *ret);
/* Stops accepting, lets in-flight requests finish (waiting at most
 * `timeout` seconds), then frees.  NULL is fine. */
void http_server_stop(http_server *s);
