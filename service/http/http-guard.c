/* Guards of hwidd's HTTPS transport against slow and abusive clients, and
 * the JSON answer to what libmicrohttpd refuses on its own.
 *
 * - Connections per address are rate limited when accepted, before the
 *   TLS handshake: every handshake costs a signature by the HSM/TPM.  The
 *   rate is the requests' rate, the burst twice theirs: a client over its
 *   request rate first hears 429 and Retry-After on the connections it
 *   still gets; a flood of handshakes is refused at the accept.
 * - Every connection has a deadline per phase: receiving a request
 *   (from the accept, or from the end of the previous response: TLS
 *   handshake, headers and body) and sending a response must each end
 *   within `timeout` seconds, however steadily the bytes trickle in or
 *   out.  MHD's own timeout is an idle one and has no API for this: a
 *   reaper thread shuts down the socket of a connection past its
 *   deadline, and MHD then closes it as it would a lost peer.  While the
 *   handler runs there is no deadline (it is ours, and bounded).
 * - MHD answers some malformed requests itself, with an HTML body, before
 *   any callback of ours sees the request (a header block larger than its
 *   memory pool, a request line too long, a malformed header line).  It
 *   logs each such refusal first, on the connection's own thread (a thread
 *   per connection): there, http_guard_mhd_log() writes our JSON answer on
 *   the TLS session (or the plain socket) and closes its sending side, so
 *   that the HTML MHD queues next is never sent; then it drops what the
 *   client still sends for a moment (lingering close). */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include <netinet/in.h>

#include <microhttpd.h>

#include "error.h"
#include "http-internal.h"
#include "http.h"
#include "ratelimit.h"

#define REAPER_TICK_MS 100
#define ANSWER_SEND_MS 1000 /* how long a JSON answer may take to leave */
/* After answering, what the client still sends is read and dropped for a
 * while (a lingering close, as web servers do): closing a socket with
 * unread data resets the connection, and the client would lose the answer
 * while it is still sending its oversized request. */
#define LINGER_MS 2000
#define LINGER_MAX_BYTES (8u << 20)
/* What MHD 0.9.x logs (then answers with its own HTML) when it refuses a
 * request; the status code and its HTML follow as arguments. */
#define MHD_ERROR_FORMAT "Error processing request (HTTP response code is %u ('%s')). Closing connection.\n"

struct http_conn {
        http_guard *guard;
        void *owner;
        struct MHD_Connection *mhd;
        int fd;
        http_phase phase;
        int64_t deadline_ms; /* monotonic; 0: none */
        bool reaped;
        http_conn *prev, *next;
};

struct http_guard {
        pthread_mutex_t lock; /* the list, deadlines, phases */
        pthread_cond_t wake;
        pthread_t reaper;
        bool reaper_started;
        bool stopping;
        int64_t timeout_ms;
        ratelimit *accept_rl; /* NULL: connections are not rate limited */
        http_conn *conns;
};

/* The connection this thread serves (MHD runs a thread per connection). */
static _Thread_local http_conn *current;

static int64_t now_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --- the reaper ---------------------------------------------------------- */

/* Called with the lock held.  The socket is still open: MHD tells us a
 * connection is gone (http_guard_conn_free) before it closes it. */
static void reap_expired(http_guard *g, int64_t now) {
        for (http_conn *c = g->conns; c; c = c->next)
                if (c->deadline_ms && now >= c->deadline_ms && !c->reaped) {
                        c->reaped = true;
                        (void) shutdown(c->fd, SHUT_RDWR);
                }
}

static void *reaper_main(void *arg) {
        http_guard *g = arg;
        struct timespec until;

        pthread_mutex_lock(&g->lock);
        while (!g->stopping) {
                reap_expired(g, now_ms());
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_nsec += REAPER_TICK_MS * 1000000L;
                if (until.tv_nsec >= 1000000000L) {
                        until.tv_sec++;
                        until.tv_nsec -= 1000000000L;
                }
                pthread_cond_timedwait(&g->wake, &g->lock, &until);
        }
        pthread_mutex_unlock(&g->lock);
        return NULL;
}

/* The burst of requests (ratelimit_new()'s default when 0). */
static unsigned request_burst(double rate, unsigned burst) {
        unsigned b = (unsigned) rate;

        if (burst)
                return burst;
        if ((double) b < rate)
                b++;
        return b ? b : 1;
}

int http_guard_new(unsigned timeout, double rate, unsigned burst, http_guard **ret) {
        http_guard *g = calloc(1, sizeof(*g));
        int r = 0;

        if (!g)
                return hwid_fail(HWID_E_NOMEM, NULL);
        pthread_mutex_init(&g->lock, NULL);
        pthread_cond_init(&g->wake, NULL);
        g->timeout_ms = (int64_t) timeout * 1000;
        if (rate > 0)
                r = ratelimit_new(rate, 2 * request_burst(rate, burst), 0, &g->accept_rl);
        if (r >= 0 && (errno = pthread_create(&g->reaper, NULL, reaper_main, g)) != 0)
                r = hwid_fail(HWID_E_INTERNAL, "cannot start the connection reaper: %s", strerror(errno));
        if (r < 0) {
                http_guard_free(g);
                return r;
        }
        g->reaper_started = true;
        *ret = g;
        return 0;
}

/* Every connection must have been freed (MHD stopped) first. */
void http_guard_free(http_guard *g) {
        if (!g)
                return;
        if (g->reaper_started) {
                pthread_mutex_lock(&g->lock);
                g->stopping = true;
                pthread_cond_signal(&g->wake);
                pthread_mutex_unlock(&g->lock);
                pthread_join(g->reaper, NULL);
        }
        ratelimit_free(g->accept_rl);
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->lock);
        free(g);
}

/* --- connections ------------------------------------------------------------ */

bool http_guard_accept(http_guard *g, const struct sockaddr *sa, socklen_t len) {
        if (!g || !g->accept_rl || !sa)
                return true;
        if (sa->sa_family == AF_INET && len >= (socklen_t) sizeof(struct sockaddr_in))
                return ratelimit_take(g->accept_rl, &((const struct sockaddr_in *) sa)->sin_addr, 4) == 0;
        if (sa->sa_family == AF_INET6 && len >= (socklen_t) sizeof(struct sockaddr_in6))
                return ratelimit_take(g->accept_rl, &((const struct sockaddr_in6 *) sa)->sin6_addr, 16) == 0;
        return true;
}

http_conn *http_guard_conn_new(http_guard *g, void *owner, struct MHD_Connection *mhd, int fd) {
        http_conn *c = calloc(1, sizeof(*c));

        if (!c)
                return NULL;
        *c = (http_conn) { .guard = g, .owner = owner, .mhd = mhd, .fd = fd, .phase = HTTP_PHASE_RECEIVING };
        pthread_mutex_lock(&g->lock);
        c->deadline_ms = now_ms() + g->timeout_ms;
        c->next = g->conns;
        if (g->conns)
                g->conns->prev = c;
        g->conns = c;
        pthread_mutex_unlock(&g->lock);
        return c;
}

void http_guard_conn_free(http_conn *c) {
        http_guard *g;

        if (!c)
                return;
        g = c->guard;
        pthread_mutex_lock(&g->lock);
        if (c->prev)
                c->prev->next = c->next;
        else
                g->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        pthread_mutex_unlock(&g->lock);
        if (current == c)
                current = NULL;
        free(c);
}

void *http_conn_owner(const http_conn *c) {
        return c ? c->owner : NULL;
}

void http_conn_set_current(http_conn *c) {
        current = c;
}

void http_conn_phase(http_conn *c, http_phase phase) {
        if (!c)
                return;
        pthread_mutex_lock(&c->guard->lock);
        c->phase = phase;
        c->deadline_ms = phase == HTTP_PHASE_HANDLING ? 0 : now_ms() + c->guard->timeout_ms;
        pthread_mutex_unlock(&c->guard->lock);
}

static http_phase conn_phase(http_conn *c) {
        http_phase p;

        pthread_mutex_lock(&c->guard->lock);
        p = c->phase;
        pthread_mutex_unlock(&c->guard->lock);
        return p;
}

/* --- our answer to MHD's refusals ---------------------------------------------- */

/* On the TLS session s, or on the socket itself without TLS (NULL s). */
static int send_all(gnutls_session_t s, int fd, const char *data, size_t len) {
        int64_t until = now_ms() + ANSWER_SEND_MS;

        while (len > 0) {
                ssize_t n = s ? gnutls_record_send(s, data, len) : send(fd, data, len, MSG_NOSIGNAL);
                bool again = s ? (n == GNUTLS_E_AGAIN || n == GNUTLS_E_INTERRUPTED)
                               : (n < 0 && (errno == EAGAIN || errno == EINTR));

                if (again) {
                        struct pollfd p = { .fd = fd, .events = POLLOUT };
                        int64_t left = until - now_ms();

                        if (left <= 0 || poll(&p, 1, (int) left) < 0)
                                return -1;
                        continue;
                }
                if (n <= 0)
                        return -1;
                data += n;
                len -= (size_t) n;
        }
        return 0;
}

static void error_for_status(unsigned status, size_t max_header, http_response *resp) {
        char msg[128];

        switch (status) {
        case 431:
                snprintf(msg, sizeof(msg), "request headers exceed %zu bytes", max_header);
                http_error(resp, 431, "headers_too_large", msg);
                break;
        case 414:
                snprintf(msg, sizeof(msg), "request line exceeds %zu bytes", max_header);
                http_error(resp, 414, "uri_too_long", msg);
                break;
        case 413:
                http_error(resp, 413, hwid_err_slug(-HWID_E_TOO_LARGE), "request body is too large");
                break;
        case 505:
                http_error(resp, 505, "http_version_not_supported", "only HTTP/1.0 and HTTP/1.1 are served");
                break;
        case 400:
                http_error(resp, 400, "bad_request", "malformed HTTP request");
                break;
        default:
                http_error(resp, status >= 400 && status <= 599 ? (int) status : 500, "internal",
                           "the request could not be processed");
        }
}

static void linger(int fd) {
        int64_t until = now_ms() + LINGER_MS;
        size_t total = 0;
        char scratch[16384];

        while (total < LINGER_MAX_BYTES) {
                struct pollfd p = { .fd = fd, .events = POLLIN };
                int64_t left = until - now_ms();
                ssize_t n;

                if (left <= 0 || poll(&p, 1, (int) left) <= 0)
                        return;
                n = recv(fd, scratch, sizeof(scratch), 0);
                if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
                        return;
                if (n > 0)
                        total += (size_t) n;
        }
}

/* Sends the whole answer (head and JSON body) on the TLS session (or the
 * plain socket), then a close_notify and a TCP shutdown of the sending
 * side: whatever MHD sends after it fails, and MHD closes the connection. */
static void answer_and_close(http_conn *c, unsigned status, size_t max_header) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c->mhd, MHD_CONNECTION_INFO_GNUTLS_SESSION);
        gnutls_session_t s = ci ? (gnutls_session_t) ci->tls_session : NULL;
        http_response resp = { 0 };
        char head[384], date[64];
        time_t now = time(NULL);
        struct tm tm;
        int n;

        buf_init(&resp.body, 8192);
        error_for_status(status, max_header, &resp);
        strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&now, &tm));
        n = snprintf(head, sizeof(head),
                     "HTTP/1.1 %d %s\r\nDate: %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
                     "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nContent-Length: %zu\r\n\r\n",
                     resp.status, MHD_get_reason_phrase_for((unsigned) resp.status), date, resp.body.len);
        if (n > 0 && (size_t) n < sizeof(head) && send_all(s, c->fd, head, (size_t) n) == 0 &&
            send_all(s, c->fd, (const char *) resp.body.data, resp.body.len) == 0)
                if (s)
                        (void) gnutls_bye(s, GNUTLS_SHUT_WR);
        (void) shutdown(c->fd, SHUT_WR);
        buf_reset(&resp.body);
        linger(c->fd);
}

bool http_guard_mhd_log(http_guard *g, size_t max_header, const char *fmt, va_list ap) {
        http_conn *c = current;
        va_list aq;
        unsigned status;

        if (!c || c->guard != g || strcmp(fmt, MHD_ERROR_FORMAT) != 0)
                return false;
        /* Once a response of ours is on its way, MHD's refusal only closes. */
        if (conn_phase(c) != HTTP_PHASE_RECEIVING)
                return false;
        va_copy(aq, ap);
        status = va_arg(aq, unsigned);
        va_end(aq);
        answer_and_close(c, status, max_header);
        return true;
}
