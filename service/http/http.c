/* hwidd's HTTPS transport: libmicrohttpd over GnuTLS, with the server's TLS
 * key in the HSM/TPM (http-tls.c).  This file bounds and delivers requests:
 * header and body caps, per-address rate limiting, JSON errors, graceful
 * stop.  It never logs; start-up failures come back as -hwid_err. */
#include <arpa/inet.h>
#include <errno.h>
#include <malloc.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>

#include <microhttpd.h>

#include "error.h"
#include "http-internal.h"
#include "http.h"
#include "ratelimit.h"

/* Cap of resp->body.  Responses are made by hwidd, not sent to it; the
 * largest is the CRL, about 50 bytes per revoked certificate: 100,000
 * revocations make some 5 MB (bench/run.sh serves one). */
#define HTTP_RESPONSE_MAX (64u << 20)
#define HTTP_POOL_SLACK (16u << 10)     /* MHD pool beyond max_header */
#define HTTP_DISCARD_MIN (1u << 20)     /* see on_body() */

struct http_server {
        struct MHD_Daemon *daemon;
        http_tls *tls;
        ratelimit *rl;
        http_guard *guard;
        http_handler handler;
        void *userdata;
        void (*on_refusal)(void *userdata, int status, const char *error);
        size_t max_body;
        size_t max_header;
        size_t discard_max;
        unsigned timeout;
        int listen_fd;
        atomic_int inflight; /* requests begun and not yet completed */
        atomic_bool stopping;
        char *client_ca_pem;
        pthread_mutex_t log_lock;
        char mhd_log[256]; /* MHD's last message, for start-up errors */
};

typedef struct req_state {
        bool started;   /* the access handler has seen the headers */
        bool responded; /* a response is queued */
        bool too_large; /* body over max_body: being discarded */
        bool bad_target; /* the raw request target holds a NUL or a control character */
        size_t discarded;
        char *query;
        buf body;
        char peer_addr[INET6_ADDRSTRLEN];
        uint8_t peer_raw[16];
        size_t peer_raw_len;
} req_state;

/* --- responses ---------------------------------------------------------------- */

/* The guard's record of the connection (the MHD socket context). */
static http_conn *conn_guard(struct MHD_Connection *conn) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return ci ? ci->socket_context : NULL;
}

static bool header_value_ok(const char *v) {
        for (; *v; v++)
                if ((unsigned char) *v < 0x20 || *v == 0x7f)
                        return false;
        return true;
}

static bool add_headers(http_server *srv, struct MHD_Response *r, const http_response *resp,
                        size_t len, bool close) {
        const char *ct = resp->content_type ? resp->content_type : len ? "application/octet-stream" : NULL;
        char ra[32];
        bool ok = true;

        if (ct)
                ok &= MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ct) == MHD_YES;
        if (!resp->cacheable)
                ok &= MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") == MHD_YES;
        ok &= MHD_add_response_header(r, "X-Content-Type-Options", "nosniff") == MHD_YES;
        if (resp->retry_after > 0) {
                snprintf(ra, sizeof(ra), "%lld", (long long) resp->retry_after);
                ok &= MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, ra) == MHD_YES;
        }
        if (resp->www_authenticate)
                ok &= MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, resp->www_authenticate) == MHD_YES;
        if (resp->transfer_encoding)
                ok &= MHD_add_response_header(r, "Content-Transfer-Encoding", resp->transfer_encoding) == MHD_YES;
        /* A Location the handler got wrong is dropped, never sent split. */
        if (resp->location[0] && memchr(resp->location, '\0', sizeof(resp->location)) &&
            header_value_ok(resp->location))
                ok &= MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, resp->location) == MHD_YES;
        if (close || atomic_load(&srv->stopping))
                ok &= MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close") == MHD_YES;
        return ok;
}

/* Frees a body that held a secret (a token minted through the admin API):
 * the whole allocation is wiped first. */
static void wipe_and_free(void *p) {
        if (p)
                explicit_bzero(p, malloc_usable_size(p));
        free(p);
}

/* Queues resp (and takes its body).  close: end the connection after it. */
static enum MHD_Result queue_response(http_server *srv, struct MHD_Connection *conn, req_state *st,
                                      http_response *resp, bool close) {
        struct MHD_Response *r;
        enum MHD_Result ret;
        uint8_t *data;
        size_t len = 0;

        if (resp->status < 200 || resp->status > 599)
                http_error(resp, 500, "internal", "the request handler gave no valid response");
        data = buf_steal(&resp->body, &len);
        if (!data)
                return MHD_NO;
        r = resp->sensitive ? MHD_create_response_from_buffer_with_free_callback(len, data, wipe_and_free)
                            : MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
        if (!r) {
                free(data);
                return MHD_NO;
        }
        if (!add_headers(srv, r, resp, len, close)) {
                MHD_destroy_response(r);
                return MHD_NO;
        }
        ret = MHD_queue_response(conn, (unsigned) resp->status, r);
        MHD_destroy_response(r);
        if (ret == MHD_YES) {
                st->responded = true;
                http_conn_phase(conn_guard(conn), HTTP_PHASE_SENDING);
        }
        return ret;
}

static enum MHD_Result reply_error(http_server *srv, struct MHD_Connection *conn, req_state *st,
                                   int status, const char *slug, const char *message,
                                   int64_t retry_after, bool close) {
        http_response resp = { .retry_after = retry_after };
        enum MHD_Result ret;

        buf_init(&resp.body, HTTP_RESPONSE_MAX);
        http_error(&resp, status, slug, message);
        if (srv->on_refusal)
                srv->on_refusal(srv->userdata, status, slug);
        ret = queue_response(srv, conn, st, &resp, close);
        buf_reset(&resp.body);
        return ret;
}

/* --- request stages ----------------------------------------------------------- */

static void peer_address(struct MHD_Connection *conn, req_state *st) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ci ? ci->client_addr : NULL;

        snprintf(st->peer_addr, sizeof(st->peer_addr), "unknown");
        if (sa && sa->sa_family == AF_INET) {
                const struct sockaddr_in *in = (const struct sockaddr_in *) sa;
                memcpy(st->peer_raw, &in->sin_addr, 4);
                st->peer_raw_len = 4;
                inet_ntop(AF_INET, &in->sin_addr, st->peer_addr, sizeof(st->peer_addr));
        } else if (sa && sa->sa_family == AF_INET6) {
                const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *) sa;
                memcpy(st->peer_raw, &in6->sin6_addr, 16);
                st->peer_raw_len = 16;
                inet_ntop(AF_INET6, &in6->sin6_addr, st->peer_addr, sizeof(st->peer_addr));
        }
}

static enum MHD_Result sum_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        size_t *sum = cls;

        *sum += (key ? strlen(key) : 0) + (value ? strlen(value) : 0) + 4; /* ": " and CRLF */
        return MHD_YES;
}

static enum MHD_Result count_host(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        if (key && strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
                (*(unsigned *) cls)++;
        return MHD_YES;
}

/* What MHD 0.9 lets through and HTTP does not: an HTTP/1.1 request has
 * exactly one Host header, an HTTP/1.0 one at most (RFC 9112 3.2); and a
 * target never holds a NUL, encoded or not (MHD decodes the path in place,
 * so "/ca%00x" would be routed as "/ca").  NULL if none of that. */
static const char *request_problem(struct MHD_Connection *conn, const req_state *st, const char *version) {
        unsigned hosts = 0;

        MHD_get_connection_values(conn, MHD_HEADER_KIND, count_host, &hosts);
        if (hosts > 1)
                return "the request has more than one Host header";
        if (hosts == 0 && version && strcmp(version, MHD_HTTP_VERSION_1_1) == 0)
                return "an HTTP/1.1 request needs a Host header";
        if (st->bad_target)
                return "the request target holds a NUL or a control character";
        return NULL;
}

/* The raw target (still percent-encoded): "%00" or a control character. */
static bool target_bad(const char *uri) {
        for (const char *p = uri; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f || (p[0] == '%' && p[1] == '0' && p[2] == '0'))
                        return true;
        return false;
}

static bool expects_continue(struct MHD_Connection *conn) {
        const char *e = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);

        return e && strcasecmp(e, "100-continue") == 0;
}

/* First call: the headers are in, the body is not.  Everything that can be
 * refused without reading the body is refused here. */
static enum MHD_Result on_headers(http_server *srv, struct MHD_Connection *conn, req_state *st,
                                  const char *url, const char *version) {
        const char *cl, *problem;
        size_t hsize = strlen(url) + (st->query ? strlen(st->query) : 0);
        char msg[128];
        int64_t wait;

        st->started = true;
        peer_address(conn, st);
        MHD_get_connection_values(conn, MHD_HEADER_KIND, sum_header, &hsize);
        if (hsize > srv->max_header) {
                snprintf(msg, sizeof(msg), "request headers exceed %zu bytes", srv->max_header);
                return reply_error(srv, conn, st, 431, "headers_too_large", msg, 0, true);
        }
        if ((problem = request_problem(conn, st, version)))
                return reply_error(srv, conn, st, 400, "bad_request", problem, 0, true);
        if (srv->rl && (wait = ratelimit_take(srv->rl, st->peer_raw, st->peer_raw_len)) > 0) {
                snprintf(msg, sizeof(msg), "too many requests from %s; retry after %lld s",
                         st->peer_addr, (long long) wait);
                return reply_error(srv, conn, st, 429, hwid_err_slug(-HWID_E_RATE_LIMITED), msg, wait, false);
        }
        cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl) {
                char *end = NULL;
                unsigned long long n;

                errno = 0;
                n = strtoull(cl, &end, 10);
                /* A malformed length is MHD's to refuse (400); an overflowing one is too large. */
                if (errno == ERANGE || (end != cl && n > srv->max_body)) {
                        /* A client already sending its body would see the
                         * connection reset before our answer: read and drop
                         * a body of reasonable size, then answer 413.  One
                         * waiting for "100 Continue" is answered at once. */
                        if (errno != ERANGE && n <= srv->discard_max && !expects_continue(conn)) {
                                st->too_large = true;
                                return MHD_YES;
                        }
                        snprintf(msg, sizeof(msg), "request body exceeds %zu bytes", srv->max_body);
                        return reply_error(srv, conn, st, 413, hwid_err_slug(-HWID_E_TOO_LARGE), msg, 0, true);
                }
        }
        return MHD_YES;
}

/* A body that outgrows max_body (chunked, so not caught by Content-Length)
 * is read and dropped up to discard_max more bytes so that the client gets
 * its 413 (MHD 0.9.75 cannot queue a response in the middle of a body);
 * beyond that the connection is closed without one. */
static enum MHD_Result on_body(http_server *srv, req_state *st, const char *data, size_t n) {
        if (!st->too_large) {
                int r = buf_append(&st->body, data, n);
                if (r == 0)
                        return MHD_YES;
                if (r != -HWID_E_TOO_LARGE)
                        return MHD_NO; /* out of memory: drop the connection */
        }
        if (!st->too_large) {
                st->too_large = true;
                buf_reset(&st->body);
                hwid_error_clear();
        }
        if (n > srv->discard_max - st->discarded)
                return MHD_NO;
        st->discarded += n;
        return MHD_YES;
}

static void fill_peer(http_server *srv, struct MHD_Connection *conn, http_request *req) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        http_peer peer;

        http_tls_peer(srv->tls, ci ? (gnutls_session_t) ci->tls_session : NULL, &peer);
        req->tls_session = ci ? ci->tls_session : NULL;
        req->peer_cert = peer.cert;
        req->peer_cert_len = peer.cert_len;
        req->peer_verified = peer.verified;
        req->peer_expired = peer.expired;
        req->peer_not_yet_valid = peer.not_yet_valid;
        req->peer_valid_from = peer.valid_from;
}

void http_request_tls_binding(const http_request *req, uint8_t ret[HTTP_TLS_BINDING_MAX], size_t *ret_len,
                              const char **ret_type) {
        http_tls_binding((gnutls_session_t) req->tls_session, ret, ret_len, ret_type);
}

/* Last call: the whole body is in; run the handler. */
static enum MHD_Result on_complete(http_server *srv, struct MHD_Connection *conn, req_state *st,
                                   const char *url, const char *method) {
        http_request req = {
                .method = method,
                .path = url,
                .query = st->query,
                .content_type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE),
                .authorization = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
                .body = st->body.data ? st->body.data : (const uint8_t *) "",
                .body_len = st->body.len,
                .peer_addr = st->peer_addr,
        };
        http_response resp = { 0 };
        enum MHD_Result ret;
        char msg[128];

        if (st->too_large) {
                snprintf(msg, sizeof(msg), "request body exceeds %zu bytes", srv->max_body);
                return reply_error(srv, conn, st, 413, hwid_err_slug(-HWID_E_TOO_LARGE), msg, 0, true);
        }
        fill_peer(srv, conn, &req);
        http_conn_phase(conn_guard(conn), HTTP_PHASE_HANDLING);
        buf_init(&resp.body, HTTP_RESPONSE_MAX);
        hwid_error_clear();
        srv->handler(srv->userdata, &req, &resp);
        ret = queue_response(srv, conn, st, &resp, false);
        buf_reset(&resp.body);
        return ret;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls) {
        http_server *srv = cls;
        req_state *st = *con_cls;
        size_t n = *upload_data_size;

        if (!st)
                return MHD_NO; /* out of memory when the request began */
        if (!st->started)
                return on_headers(srv, conn, st, url, version);
        *upload_data_size = 0;
        if (st->responded)
                return MHD_YES;
        if (n > 0)
                return on_body(srv, st, upload_data, n);
        return on_complete(srv, conn, st, url, method);
}

/* --- MHD callbacks ---------------------------------------------------------- */

/* Called with the raw request target before anything else: keeps the
 * query string as sent and counts the request as in flight. */
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn) {
        http_server *srv = cls;
        const char *q = uri ? strchr(uri, '?') : NULL;
        req_state *st = calloc(1, sizeof(*st));

        if (!st)
                return NULL;
        buf_init(&st->body, srv->max_body);
        http_conn_set_current(conn_guard(conn)); /* also without TLS (no certificate callback) */
        st->bad_target = uri && target_bad(uri);
        if (q) {
                st->query = strdup(q + 1); /* bounded by the connection memory limit */
                if (!st->query) {
                        free(st);
                        return NULL;
                }
        }
        atomic_fetch_add(&srv->inflight, 1);
        return st;
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe) {
        http_server *srv = cls;
        req_state *st = *con_cls;

        if (!st)
                return;
        *con_cls = NULL;
        buf_reset(&st->body);
        free(st->query);
        free(st);
        atomic_fetch_sub(&srv->inflight, 1);
        http_conn_phase(conn_guard(conn), HTTP_PHASE_RECEIVING); /* the next request's deadline */
}

/* Each connection's socket context is its record in the guard (deadlines),
 * which also lets the TLS certificate callback find the server. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
        http_server *srv = cls;
        const union MHD_ConnectionInfo *ci;

        if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
                ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
                /* Out of memory: no context, and the handshake fails. */
                *socket_context = ci ? http_guard_conn_new(srv->guard, srv, conn, ci->connect_fd) : NULL;
                ci = srv->tls ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION) : NULL;
                if (ci)
                        http_tls_session_start(srv->tls, (gnutls_session_t) ci->tls_session);
        } else if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
                http_guard_conn_free(*socket_context);
                *socket_context = NULL;
        }
}

static enum MHD_Result on_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen) {
        http_server *srv = cls;

        return http_guard_accept(srv->guard, addr, addrlen) ? MHD_YES : MHD_NO;
}

/* gnutls_certificate_retrieve_function2 has no closure: the server is
 * found through the session's MHD connection and its socket context. */
static int on_certificate(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn, int nreqs,
                          const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                          gnutls_pcert_st **pcert, unsigned int *pcert_length, gnutls_privkey_t *privkey) {
        struct MHD_Connection *conn = gnutls_session_get_ptr(session);
        http_conn *hc = conn ? conn_guard(conn) : NULL;
        http_server *srv = http_conn_owner(hc);

        if (!srv)
                return -1;
        http_conn_set_current(hc); /* this thread serves that connection */
        return http_tls_retrieve(srv->tls, pcert, pcert_length, privkey);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
        http_server *srv = cls;
        char *nl;

        if (srv->guard && http_guard_mhd_log(srv->guard, srv->max_header, fmt, ap))
                return;
        pthread_mutex_lock(&srv->log_lock);
        vsnprintf(srv->mhd_log, sizeof(srv->mhd_log), fmt, ap);
        if ((nl = strchr(srv->mhd_log, '\n')))
                *nl = '\0';
        pthread_mutex_unlock(&srv->log_lock);
}

/* --- start and stop ------------------------------------------------------------ */

static int check_options(const http_options *o) {
        if (!o || (o->tls_key && !o->tls_cert_pem))
                return hwid_fail(HWID_E_CONFIG, "the HTTPS server needs a TLS key and certificate");
        if (!o->tls_key && (o->tls_cert_pem || o->client_ca_pem))
                return hwid_fail(HWID_E_CONFIG, "a plain HTTP server has no certificates");
        if (o->max_body == 0 || o->max_header < 256 || o->timeout == 0 || o->max_connections == 0)
                return hwid_fail(HWID_E_CONFIG, "HTTP limits must be set (max_body > 0, max_header >= 256, "
                                                "timeout > 0, max_connections > 0)");
        if (o->max_header > (64u << 20) || o->max_body > SIZE_MAX / 2)
                return hwid_fail(HWID_E_CONFIG, "HTTP limits are too large");
        if (o->tls_key &&
            (!MHD_is_feature_supported(MHD_FEATURE_TLS) || !MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK)))
                return hwid_fail(HWID_E_CONFIG, "libmicrohttpd was built without TLS certificate callbacks");
        return 0;
}

static unsigned per_ip_limit(const http_options *o) {
        unsigned n = o->max_connections_per_ip ? o->max_connections_per_ip : o->max_connections / 4;

        if (!o->max_connections_per_ip && n < 16)
                n = 16;
        return n > o->max_connections ? o->max_connections : n;
}

static int start_daemon(http_server *srv, const http_options *o) {
        /* A thread per connection: handlers block (an HSM signature, a
         * group commit), and with a fixed pool the connections that MHD
         * happened to give one thread waited for each other; throughput
         * swung by half between runs and p99 doubled (bench/NOTES.md).
         * max_connections bounds the threads. */
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
                         MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG | (srv->tls ? MHD_USE_TLS : 0);

        srv->daemon = MHD_start_daemon(
                flags, 0, on_accept, srv, on_access, srv,
                MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, srv,
                MHD_OPTION_LISTEN_SOCKET, (MHD_socket) srv->listen_fd,
                MHD_OPTION_CONNECTION_LIMIT, o->max_connections,
                MHD_OPTION_PER_IP_CONNECTION_LIMIT, per_ip_limit(o),
                MHD_OPTION_CONNECTION_TIMEOUT, o->timeout,
                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t) (o->max_header + HTTP_POOL_SLACK),
                MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv,
                MHD_OPTION_NOTIFY_COMPLETED, on_completed, srv,
                MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv,
                /* TLS options last: without TLS the list ends here. */
                srv->tls ? MHD_OPTION_HTTPS_CERT_CALLBACK : MHD_OPTION_END, on_certificate,
                MHD_OPTION_HTTPS_PRIORITIES, HTTP_TLS_PRIORITIES,
                srv->client_ca_pem ? MHD_OPTION_HTTPS_MEM_TRUST : MHD_OPTION_END, srv->client_ca_pem,
                MHD_OPTION_END);
        if (!srv->daemon) {
                const char *why = srv->mhd_log[0] ? srv->mhd_log : "libmicrohttpd refused the configuration";
                return hwid_fail(HWID_E_CONFIG, "cannot start the HTTP%s server on %s: %s", srv->tls ? "S" : "",
                                 o->listen, why);
        }
        return 0;
}

int http_server_start(const http_options *o, http_handler handler, void *userdata, http_server **ret) {
        http_server *srv;
        int r;

        if ((r = check_options(o)) < 0)
                return r;
        if (!handler)
                return hwid_fail(HWID_E_INTERNAL, "no HTTP request handler");
        srv = calloc(1, sizeof(*srv));
        if (!srv)
                return hwid_fail(HWID_E_NOMEM, NULL);
        pthread_mutex_init(&srv->log_lock, NULL);
        srv->listen_fd = -1;
        srv->handler = handler;
        srv->userdata = userdata;
        srv->on_refusal = o->on_refusal;
        srv->max_body = o->max_body;
        srv->max_header = o->max_header;
        srv->discard_max = o->max_body > HTTP_DISCARD_MIN ? o->max_body : HTTP_DISCARD_MIN;
        srv->timeout = o->timeout;
        if (o->client_ca_pem && !(srv->client_ca_pem = strdup(o->client_ca_pem)))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        if (r >= 0 && o->tls_key)
                r = http_tls_new(o->tls_key, o->tls_cert_pem, o->client_ca_pem, &srv->tls);
        if (r >= 0 && o->rate_per_ip > 0)
                r = ratelimit_new(o->rate_per_ip, o->rate_burst, 0, &srv->rl);
        if (r >= 0) /* connections: a bucket of their own (http-guard.c) */
                r = http_guard_new(o->timeout, o->rate_per_ip, o->rate_burst, &srv->guard);
        if (r >= 0)
                r = http_listen_open(o->listen, &srv->listen_fd);
        if (r >= 0)
                r = start_daemon(srv, o);
        if (r < 0) {
                if (srv->listen_fd >= 0)
                        close(srv->listen_fd);
                srv->listen_fd = -1;
                http_server_stop(srv);
                return r;
        }
        *ret = srv;
        return 0;
}

int http_server_port(const http_server *s) {
        const union MHD_DaemonInfo *di;

        if (!s || !s->daemon)
                return -1;
        di = MHD_get_daemon_info(s->daemon, MHD_DAEMON_INFO_BIND_PORT);
        if (di && di->port)
                return di->port;
        return http_listen_port(s->listen_fd);
}

/* Waits until no request is in flight, for at most timeout seconds. */
static void drain(http_server *s) {
        struct timespec start, now, tick = { 0, 10 * 1000 * 1000 };

        clock_gettime(CLOCK_MONOTONIC, &start);
        while (atomic_load(&s->inflight) > 0) {
                clock_gettime(CLOCK_MONOTONIC, &now);
                if (now.tv_sec - start.tv_sec >= (time_t) s->timeout)
                        break;
                nanosleep(&tick, NULL);
        }
}

void http_server_stop(http_server *s) {
        MHD_socket fd = MHD_INVALID_SOCKET;

        if (!s)
                return;
        atomic_store(&s->stopping, true);
        if (s->daemon) {
                fd = MHD_quiesce_daemon(s->daemon);
                /* Refuse new connections now (Linux: pending ones are reset)
                 * instead of leaving them queued until the daemon is gone. */
                if (fd != MHD_INVALID_SOCKET)
                        (void) shutdown(fd, SHUT_RDWR);
                drain(s);
                MHD_stop_daemon(s->daemon);
                if (fd != MHD_INVALID_SOCKET)
                        close(fd);
        }
        http_guard_free(s->guard); /* every connection is gone */
        ratelimit_free(s->rl);
        http_tls_free(s->tls);
        free(s->client_ca_pem);
        pthread_mutex_destroy(&s->log_lock);
        free(s);
}
