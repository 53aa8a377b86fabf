/* hwidd's HTTPS transport: libmicrohttpd over GnuTLS, with the server's TLS
 * key in the HSM/TPM (http-tls.c).  Connections are multiplexed by epoll
 * on a few I/O threads (MHD's internal thread pool); a complete request is
 * suspended there and handed to a worker thread (http-work.c), which runs
 * the handler and resumes it with the answer: an idle or slow connection
 * costs memory, never a thread.  This file bounds and delivers requests:
 * header and body caps, message framing, per-address rate limiting, JSON
 * errors, graceful stop; http-guard.c keeps the connection budgets.  It
 * never logs; start-up failures come back as -hwid_err. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "error.h"
#include "http-internal.h"
#include "http.h"
#include "ratelimit.h"

/* Cap of resp->body.  Responses are made by hwidd, not sent to it; the
 * largest is the CRL, about 50 bytes per revoked certificate: 100,000
 * revocations make some 5 MB (bench/run.sh serves one). */
#define HTTP_RESPONSE_MAX (64u << 20)
#define HTTP_POOL_SLACK (4u << 10)      /* MHD pool beyond max_header and the fields: the response's head */
#define HTTP_DISCARD_MIN (1u << 20)     /* see on_body() */

struct http_server {
        struct MHD_Daemon *daemon;
        http_tls *tls;
        ratelimit *rl;
        http_guard *guard;
        http_work *work;
        http_linger *linger;
        http_handler handler;
        void *userdata;
        void (*on_refusal)(void *userdata, int status, const char *error);
        void (*on_tls_failure)(void *userdata, const char *peer, const char *why);
        atomic_ullong tls_failures;
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
        http_job job;   /* first: the worker's queue entry */
        http_server *srv;
        struct MHD_Connection *conn;
        http_request req;   /* while a worker handles it */
        http_response resp; /* the worker's answer */
        bool started;   /* the access handler has seen the headers */
        bool handled;   /* a worker answered: resp is ready to queue */
        bool responded; /* a response is queued */
        bool too_large; /* body over max_body: being discarded */
        bool bad_target; /* the raw request target holds a NUL or a control character */
        size_t discarded;
        char *query;
        buf body;
        char peer_addr[INET6_ADDRSTRLEN];
        uint8_t peer_key[HTTP_ADDR_KEY_MAX]; /* what the rate limit counts: http_addr_key() */
        size_t peer_key_len;
} req_state;

/* --- responses ---------------------------------------------------------------- */

/* The guard's record of the connection (the MHD socket context). */
static http_conn *conn_guard(struct MHD_Connection *conn) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);

        return ci ? ci->socket_context : NULL;
}

/* Queues resp (and takes its body).  close: end the connection after it. */
static enum MHD_Result queue_response(http_server *srv, struct MHD_Connection *conn, req_state *st,
                                      http_response *resp, bool close) {
        struct MHD_Response *r;
        enum MHD_Result ret;

        if (resp->status < 200 || resp->status > 599)
                http_error(resp, 500, "internal", "the request handler gave no valid response");
        if (!(r = http_mhd_response(resp, close || atomic_load(&srv->stopping))))
                return MHD_NO;
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

static socklen_t sockaddr_len(const struct sockaddr *sa) {
        if (!sa)
                return 0;
        return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
             : sa->sa_family == AF_INET ? sizeof(struct sockaddr_in) : 0;
}

static void peer_address(struct MHD_Connection *conn, req_state *st) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        const struct sockaddr *sa = ci ? ci->client_addr : NULL;

        snprintf(st->peer_addr, sizeof(st->peer_addr), "unknown");
        if (!http_addr_key(sa, sockaddr_len(sa), st->peer_key, &st->peer_key_len))
                st->peer_key_len = 0;
        if (sa && sa->sa_family == AF_INET)
                inet_ntop(AF_INET, &((const struct sockaddr_in *) sa)->sin_addr, st->peer_addr, sizeof(st->peer_addr));
        else if (sa && sa->sa_family == AF_INET6)
                inet_ntop(AF_INET6, &((const struct sockaddr_in6 *) sa)->sin6_addr, st->peer_addr,
                          sizeof(st->peer_addr));
}

/* A refusal answered and closed at once, without MHD, whose memory for the
 * request may be spent (a header block over max_header, or with too many
 * fields: MHD reads on while it has room). */
static enum MHD_Result refuse_now(http_server *srv, struct MHD_Connection *conn, req_state *st, int status,
                                  const char *slug, const char *message) {
        http_conn *c = conn_guard(conn);
        http_response resp = { 0 };

        if (!c)
                return reply_error(srv, conn, st, status, slug, message, 0, true);
        buf_init(&resp.body, HTTP_RESPONSE_MAX);
        http_error(&resp, status, slug, message);
        if (srv->on_refusal)
                srv->on_refusal(srv->userdata, status, slug);
        http_answer_close(srv->linger, c, &resp);
        buf_reset(&resp.body);
        st->responded = true;
        return MHD_NO; /* MHD closes the connection */
}

/* The header block's size and fields, against max_header and
 * HTTP_MAX_FIELDS: each refusal says which limit it met. */
static enum MHD_Result check_header_block(http_server *srv, struct MHD_Connection *conn, req_state *st,
                                          const char *url) {
        size_t size = http_check_header_size(conn, url, st->query);
        unsigned fields = http_check_fields(conn);
        char msg[160];

        if (size > srv->max_header) {
                snprintf(msg, sizeof(msg), "request headers exceed %zu bytes", srv->max_header);
                return refuse_now(srv, conn, st, 431, "headers_too_large", msg);
        }
        if (fields > HTTP_MAX_FIELDS) {
                snprintf(msg, sizeof(msg), "request has %u header fields, more than %u", fields, HTTP_MAX_FIELDS);
                return refuse_now(srv, conn, st, 431, "headers_too_large", msg);
        }
        return MHD_YES;
}

/* A Content-Length over max_body.  A client already sending its body
 * would see the connection reset before our answer: a body of reasonable
 * size is read and dropped, then answered 413.  One waiting for "100
 * Continue" is answered at once. */
static enum MHD_Result check_length(http_server *srv, struct MHD_Connection *conn, req_state *st, const char *cl) {
        char *end = NULL, msg[128];
        unsigned long long n;

        errno = 0;
        n = strtoull(cl, &end, 10);
        /* A malformed length is MHD's to refuse (400); an overflowing one is too large. */
        if (errno != ERANGE && (end == cl || n <= srv->max_body))
                return MHD_YES;
        if (errno != ERANGE && n <= srv->discard_max && !http_check_expects_continue(conn)) {
                st->too_large = true;
                return MHD_YES;
        }
        snprintf(msg, sizeof(msg), "request body exceeds %zu bytes", srv->max_body);
        return reply_error(srv, conn, st, 413, hwid_err_slug(-HWID_E_TOO_LARGE), msg, 0, true);
}

/* First call: the headers are in, the body is not.  Everything that can be
 * refused without reading the body is refused here. */
static enum MHD_Result on_headers(http_server *srv, struct MHD_Connection *conn, req_state *st,
                                  const char *url, const char *version) {
        const char *cl, *problem;
        enum MHD_Result ret;
        char msg[128];
        int64_t wait;
        int status;

        st->started = true;
        peer_address(conn, st);
        if ((ret = check_header_block(srv, conn, st, url)) != MHD_YES || st->responded)
                return ret;
        if ((problem = http_check_request(conn, version, st->bad_target)))
                return reply_error(srv, conn, st, 400, "bad_request", problem, 0, true);
        if ((status = http_check_framing(conn, version, &problem)) > 0)
                return reply_error(srv, conn, st, status, status == 501 ? "not_implemented" : "bad_request",
                                   problem, 0, true);
        if (srv->rl && (wait = ratelimit_take(srv->rl, st->peer_key, st->peer_key_len)) > 0) {
                snprintf(msg, sizeof(msg), "too many requests from %s%s; retry after %lld s", st->peer_addr,
                         st->peer_key_len == 8 ? " (counted by its /64)" : "", (long long) wait);
                return reply_error(srv, conn, st, 429, hwid_err_slug(-HWID_E_RATE_LIMITED), msg, wait, false);
        }
        cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl)
                return check_length(srv, conn, st, cl);
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

/* On a worker thread: the handler, then the connection goes back to its
 * I/O thread, which queues the answer (on_complete again). */
static void run_handler(http_job *j) {
        req_state *st = (req_state *) j;
        http_server *srv = st->srv;

        buf_init(&st->resp.body, HTTP_RESPONSE_MAX);
        hwid_error_clear();
        fill_peer(srv, st->conn, &st->req);
        srv->handler(srv->userdata, &st->req, &st->resp);
        st->handled = true;
        MHD_resume_connection(st->conn);
}

/* Last call: the whole body is in.  The request goes to a worker (its
 * strings stay in the connection's memory while it is suspended); when it
 * comes back, its answer is queued. */
static enum MHD_Result on_complete(http_server *srv, struct MHD_Connection *conn, req_state *st,
                                   const char *url, const char *method) {
        enum MHD_Result ret;
        char msg[128];

        if (st->too_large) {
                snprintf(msg, sizeof(msg), "request body exceeds %zu bytes", srv->max_body);
                return reply_error(srv, conn, st, 413, hwid_err_slug(-HWID_E_TOO_LARGE), msg, 0, true);
        }
        if (st->handled) {
                ret = queue_response(srv, conn, st, &st->resp, false);
                buf_reset(&st->resp.body);
                return ret;
        }
        st->req = (http_request) {
                .method = method,
                .path = url,
                .query = st->query,
                .content_type = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE),
                .authorization = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION),
                .body = st->body.data ? st->body.data : (const uint8_t *) "",
                .body_len = st->body.len,
                .peer_addr = st->peer_addr,
        };
        st->srv = srv;
        st->conn = conn;
        st->job.run = run_handler;
        http_conn_phase(conn_guard(conn), HTTP_PHASE_HANDLING);
        MHD_suspend_connection(conn);
        http_work_submit(srv->work, &st->job);
        return MHD_YES;
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *conn, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls) {
        http_server *srv = cls;
        req_state *st = *con_cls;
        size_t n = *upload_data_size;

        if (!st)
                return MHD_NO; /* out of memory when the request began */
        http_conn_set_current(conn_guard(conn));
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
        http_conn_set_current(conn_guard(conn));
        http_conn_phase(conn_guard(conn), HTTP_PHASE_RECEIVING);
        st->bad_target = uri && http_check_target_bad(uri);
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
        http_conn_set_current(conn_guard(conn));
        buf_reset(&st->body);
        buf_reset(&st->resp.body); /* an answer never queued (the connection went first) */
        free(st->query);
        free(st);
        atomic_fetch_sub(&srv->inflight, 1);
        http_conn_idle(conn_guard(conn)); /* the next request's deadline */
}

/* Each connection's socket context is its record in the guard (budgets,
 * deadlines), which also lets the TLS callbacks find the server. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
        http_server *srv = cls;
        const union MHD_ConnectionInfo *fd, *tls, *addr;
        gnutls_session_t s;
        http_conn *c;

        if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
                http_guard_conn_free(*socket_context);
                *socket_context = NULL;
                return;
        }
        if (toe != MHD_CONNECTION_NOTIFY_STARTED)
                return;
        fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        tls = srv->tls ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION) : NULL;
        addr = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
        s = tls ? (gnutls_session_t) tls->tls_session : NULL;
        /* Out of memory: no context, and the handshake fails. */
        c = fd ? http_guard_conn_new(srv->guard, srv, conn, fd->connect_fd, s, addr ? addr->client_addr : NULL,
                                     sockaddr_len(addr ? addr->client_addr : NULL))
               : NULL;
        *socket_context = c;
        if (s && c)
                http_tls_session_start(srv->tls, s, c);
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

#define MHD_HANDSHAKE_FAILED "Error: received handshake message out of context.\n"

/* A TLS handshake failed (MHD says so, on the connection's thread, right
 * after it): the alert that says why, and the caller told. */
static void tls_failed(http_server *srv, http_conn *c) {
        gnutls_session_t s = http_conn_tls(c);
        req_state peer = { 0 };
        bool hello, version_ok;
        const char *why;

        /* Evicted (our doing), or gone before it said anything (a port
         * scan, a TCP health check): nothing to tell anyone. */
        http_conn_tls_where(c, &hello, &version_ok);
        if (http_conn_evicted(c) || !hello)
                return;
        why = http_tls_refuse(s, c);
        atomic_fetch_add(&srv->tls_failures, 1);
        if (!srv->on_tls_failure)
                return;
        peer_address(gnutls_session_get_ptr(s), &peer); /* MHD's connection */
        srv->on_tls_failure(srv->userdata, peer.peer_addr, why);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
        http_server *srv = cls;
        bool handshake = strcmp(fmt, MHD_HANDSHAKE_FAILED) == 0;
        http_conn *c = srv->tls ? http_conn_logged(handshake) : NULL;
        const char *slug = NULL;
        char *nl;
        int status;

        if (c && http_conn_owner(c) != srv)
                c = NULL;
        if (handshake && c) {
                tls_failed(srv, c);
                return;
        }
        if ((status = http_answer_refusal(srv->linger, c, srv->max_header, fmt, ap, &slug)) > 0) {
                if (srv->on_refusal)
                        srv->on_refusal(srv->userdata, status, slug);
                return;
        }
        pthread_mutex_lock(&srv->log_lock);
        vsnprintf(srv->mhd_log, sizeof(srv->mhd_log), fmt, ap);
        if ((nl = strchr(srv->mhd_log, '\n')))
                *nl = '\0';
        pthread_mutex_unlock(&srv->log_lock);
}

/* --- start and stop ------------------------------------------------------------ */

static int start_daemon(http_server *srv, const http_options *o, const http_budget *b) {
        /* epoll on a few I/O threads; handlers on the workers (suspend,
         * resume).  The guard enforces max_connections and the shares;
         * MHD's own limit is only the ceiling with the slack. */
        unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG |
                         (srv->tls ? MHD_USE_TLS : 0);

        srv->daemon = MHD_start_daemon(
                flags, 0, on_accept, srv, on_access, srv,
                MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, srv,
                MHD_OPTION_LISTEN_SOCKET, (MHD_socket) srv->listen_fd,
                MHD_OPTION_THREAD_POOL_SIZE, http_options_io_threads(o),
                MHD_OPTION_CONNECTION_LIMIT, b->max_connections + b->slack,
                MHD_OPTION_CONNECTION_TIMEOUT, o->timeout,
                /* Room for a header block of max_header bytes and
                 * HTTP_MAX_FIELDS fields, and for the answer's head: a
                 * request within both limits is never refused by MHD
                 * (unless it carries cookies: MHD parses a copy). */
                MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                (size_t) (o->max_header + HTTP_MAX_FIELDS * HTTP_FIELD_COST + HTTP_POOL_SLACK),
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

static int make_parts(http_server *srv, const http_options *o) {
        http_budget b;
        int r = 0;

        if (o->client_ca_pem && !(srv->client_ca_pem = strdup(o->client_ca_pem)))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        if (r >= 0 && o->tls_key)
                r = http_tls_new(o->tls_key, o->tls_cert_pem, o->client_ca_pem, &srv->tls);
        if (r >= 0 && o->rate_per_ip > 0)
                r = ratelimit_new(o->rate_per_ip, o->rate_burst, 0, &srv->rl);
        http_options_budget(o, srv->tls, &b);
        if (r >= 0) /* connections: a bucket of their own (http-guard.c) */
                r = http_guard_new(&b, &srv->guard);
        if (r >= 0)
                r = http_work_new(o->workers ? o->workers : 32, &srv->work);
        if (r >= 0)
                r = http_linger_new(&srv->linger);
        if (r >= 0)
                r = http_listen_open(o->listen, &srv->listen_fd);
        if (r >= 0)
                r = start_daemon(srv, o, &b);
        return r;
}

int http_server_start(const http_options *o, http_handler handler, void *userdata, http_server **ret) {
        http_server *srv;
        int r;

        if ((r = http_options_check(o)) < 0)
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
        srv->on_tls_failure = o->on_tls_failure;
        srv->max_body = o->max_body;
        srv->max_header = o->max_header;
        srv->discard_max = o->max_body > HTTP_DISCARD_MIN ? o->max_body : HTTP_DISCARD_MIN;
        srv->timeout = o->timeout;
        if ((r = make_parts(srv, o)) < 0) {
                if (srv->listen_fd >= 0)
                        close(srv->listen_fd);
                srv->listen_fd = -1;
                http_server_stop(srv);
                return r;
        }
        *ret = srv;
        return 0;
}

int http_server_set_certs(http_server *s, const char *cert_pem, const char *client_ca_pem) {
        if (!s->tls)
                return hwid_fail(HWID_E_CONFIG, "this listener serves no TLS");
        /* A listener without mutual TLS stays so (libmicrohttpd asks for no
         * client certificate there). */
        return http_tls_set_certs(s->tls, cert_pem,
                                  s->client_ca_pem ? (client_ca_pem ? client_ca_pem : s->client_ca_pem) : NULL);
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

void http_server_stats(http_server *s, http_stats *ret) {
        memset(ret, 0, sizeof(*ret));
        if (!s || !s->guard)
                return;
        http_guard_stats(s->guard, ret);
        ret->signing = http_tls_signing(s->tls);
        http_work_load(s->work, &ret->queued, &ret->working);
        ret->tls_failures = atomic_load(&s->tls_failures);
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
        }
        /* Every request handed to a worker is answered and resumed before
         * the daemon goes (MHD must not be stopped with one suspended). */
        http_work_free(s->work);
        if (s->daemon) {
                MHD_stop_daemon(s->daemon);
                if (fd != MHD_INVALID_SOCKET)
                        close(fd);
        }
        http_linger_free(s->linger);
        http_guard_free(s->guard); /* every connection is gone */
        ratelimit_free(s->rl);
        http_tls_free(s->tls);
        free(s->client_ca_pem);
        pthread_mutex_destroy(&s->log_lock);
        free(s);
}
