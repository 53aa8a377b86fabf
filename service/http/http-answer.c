/* Our JSON answer (http_error(), http-respond.c) to what libmicrohttpd
 * refuses on its own, or to what we refuse when MHD's memory for the
 * request may be spent, and the lingering close after it.
 *
 * MHD 0.9 answers some malformed requests itself, with an HTML body,
 * before any callback of ours sees the request (a header block larger
 * than its memory pool, a request line too long, a malformed header line,
 * an unknown HTTP version), and logs each refusal first, on the I/O
 * thread serving the connection.  When that line can be tied to one TLS
 * connection (http_conn_logged(), http-current.c), http_answer_refusal()
 * writes our JSON answer on its TLS session and closes its sending side,
 * so that the HTML MHD queues next is never sent.  When it cannot (the
 * line could be about another connection of the thread, or the
 * connection is plain HTTP, which MHD reads itself), MHD's own answer
 * goes: answering a connection for another's refusal would drop a client
 * that did nothing wrong.
 *
 * Nothing here blocks the I/O thread: the answer is one TLS record that a
 * socket which has sent nothing yet takes at once (if it does not, the
 * client gets the close alone), and the lingering close (reading and
 * dropping what the client still sends, so that closing with unread data
 * does not reset the connection and lose the answer) runs on a thread of
 * its own, on a duplicate of the socket. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#include "error.h"
#include "http-internal.h"
#include "http.h"

#define LINGER_MS 2000
#define LINGER_MAX_BYTES (8u << 20)
#define LINGER_MAX_FDS 256 /* more at once: closed without lingering */
/* What MHD 0.9.x logs (then answers with its own HTML) when it refuses a
 * request; the status code and its HTML follow as arguments. */
#define MHD_ERROR_FORMAT "Error processing request (HTTP response code is %u ('%s')). Closing connection.\n"

typedef struct lingering {
        int fd; /* -1: free */
        int64_t until_ms;
        size_t bytes;
} lingering;

struct http_linger {
        pthread_mutex_t lock;
        pthread_t thread;
        bool started;
        int epfd, stop_fd;
        lingering slots[LINGER_MAX_FDS];
};

/* --- the lingering close ------------------------------------------------------ */

static void slot_close(http_linger *l, lingering *s) {
        (void) epoll_ctl(l->epfd, EPOLL_CTL_DEL, s->fd, NULL);
        close(s->fd);
        s->fd = -1;
}

static void drain_slot(http_linger *l, lingering *s) {
        char scratch[16384];

        for (;;) {
                ssize_t n = recv(s->fd, scratch, sizeof(scratch), MSG_DONTWAIT);

                if (n > 0 && (s->bytes += (size_t) n) < LINGER_MAX_BYTES)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EINTR))
                        return;
                slot_close(l, s); /* end of stream, an error, or enough */
                return;
        }
}

static void *linger_main(void *arg) {
        http_linger *l = arg;
        struct epoll_event ev[32];

        for (;;) {
                int n = epoll_wait(l->epfd, ev, 32, 100);
                int64_t now = http_now_ms();

                pthread_mutex_lock(&l->lock);
                for (int i = 0; i < n; i++) {
                        if (ev[i].data.ptr == NULL) {
                                pthread_mutex_unlock(&l->lock);
                                return NULL; /* stop */
                        }
                        if (((lingering *) ev[i].data.ptr)->fd >= 0)
                                drain_slot(l, ev[i].data.ptr);
                }
                for (size_t i = 0; i < LINGER_MAX_FDS; i++)
                        if (l->slots[i].fd >= 0 && now >= l->slots[i].until_ms)
                                slot_close(l, &l->slots[i]);
                pthread_mutex_unlock(&l->lock);
        }
}

int http_linger_new(http_linger **ret) {
        http_linger *l = calloc(1, sizeof(*l));
        struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };

        if (!l)
                return hwid_fail(HWID_E_NOMEM, NULL);
        pthread_mutex_init(&l->lock, NULL);
        for (size_t i = 0; i < LINGER_MAX_FDS; i++)
                l->slots[i].fd = -1;
        l->epfd = epoll_create1(EPOLL_CLOEXEC);
        l->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
        if (l->epfd < 0 || l->stop_fd < 0 || epoll_ctl(l->epfd, EPOLL_CTL_ADD, l->stop_fd, &ev) < 0 ||
            (errno = pthread_create(&l->thread, NULL, linger_main, l)) != 0) {
                int e = errno;
                http_linger_free(l);
                return hwid_fail(HWID_E_INTERNAL, "cannot start the lingering closer: %s", strerror(e));
        }
        l->started = true;
        *ret = l;
        return 0;
}

void http_linger_free(http_linger *l) {
        if (!l)
                return;
        if (l->started) {
                (void) eventfd_write(l->stop_fd, 1);
                pthread_join(l->thread, NULL);
        }
        for (size_t i = 0; i < LINGER_MAX_FDS; i++)
                if (l->slots[i].fd >= 0)
                        close(l->slots[i].fd);
        if (l->epfd >= 0)
                close(l->epfd);
        if (l->stop_fd >= 0)
                close(l->stop_fd);
        pthread_mutex_destroy(&l->lock);
        free(l);
}

/* Keeps a duplicate of fd open, reading and dropping, for a while. */
static void linger(http_linger *l, int fd) {
        struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
        lingering *s = NULL;

        pthread_mutex_lock(&l->lock);
        for (size_t i = 0; i < LINGER_MAX_FDS && !s; i++)
                if (l->slots[i].fd < 0)
                        s = &l->slots[i];
        if (s && (s->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0)) >= 0) {
                s->until_ms = http_now_ms() + LINGER_MS;
                s->bytes = 0;
                ev.data.ptr = s;
                if (epoll_ctl(l->epfd, EPOLL_CTL_ADD, s->fd, &ev) < 0) {
                        close(s->fd);
                        s->fd = -1;
                }
        }
        pthread_mutex_unlock(&l->lock);
}

/* --- the answer ---------------------------------------------------------------- */

/* Why MHD refused a request of c's (c: NULL if not known), as our error.
 * A header block too large is the count of its fields or its size: the
 * memory MHD has for a request holds max_header bytes and HTTP_MAX_FIELDS
 * fields (http.c), so when it runs out with no more fields than those, the
 * bytes are more than max_header. */
static void error_for_status(const http_conn *c, unsigned status, size_t max_header, http_response *resp) {
        struct MHD_Connection *conn = http_conn_mhd(c);
        char msg[160];

        switch (status) {
        case 431:
                if (conn && http_check_fields(conn) > HTTP_MAX_FIELDS)
                        snprintf(msg, sizeof(msg), "request has more than %u header fields", HTTP_MAX_FIELDS);
                else if (conn && http_check_header_within(conn, max_header))
                        snprintf(msg, sizeof(msg), "request cookies too large to parse");
                else
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

/* All of msg at once, without waiting: false if the socket would not take
 * it now (one TLS record, or the plain bytes). */
static bool send_now(http_conn *c, const char *msg, size_t len) {
        gnutls_session_t s = http_conn_tls(c);

        if (s)
                return gnutls_record_send(s, msg, len) == (ssize_t) len;
        return send(http_conn_fd(c), msg, len, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t) len;
}

void http_answer_close(http_linger *l, http_conn *c, const http_response *resp) {
        gnutls_session_t s = http_conn_tls(c);
        int fd = http_conn_fd(c);
        char msg[1400], date[64];
        time_t now = time(NULL);
        struct tm tm;
        int n;

        strftime(date, sizeof(date), "%a, %d %b %Y %H:%M:%S GMT", gmtime_r(&now, &tm));
        n = snprintf(msg, sizeof(msg),
                     "HTTP/1.1 %d %s\r\nDate: %s\r\nConnection: close\r\nContent-Type: application/json\r\n"
                     "Cache-Control: no-store\r\nX-Content-Type-Options: nosniff\r\nContent-Length: %zu\r\n\r\n%.*s",
                     resp->status, MHD_get_reason_phrase_for((unsigned) resp->status), date, resp->body.len,
                     (int) resp->body.len, (const char *) resp->body.data);
        if (n > 0 && (size_t) n < sizeof(msg) && send_now(c, msg, (size_t) n) && s)
                (void) gnutls_bye(s, GNUTLS_SHUT_WR);
        (void) shutdown(fd, SHUT_WR);
        linger(l, fd);
}

int http_answer_refusal(http_linger *l, http_conn *c, size_t max_header, const char *fmt, va_list ap,
                        const char **ret_slug) {
        http_response resp = { 0 };
        va_list aq;
        unsigned status;

        if (strcmp(fmt, MHD_ERROR_FORMAT) != 0)
                return 0;
        va_copy(aq, ap);
        status = va_arg(aq, unsigned);
        va_end(aq);
        buf_init(&resp.body, 1024);
        error_for_status(c, status, max_header, &resp);
        /* Once a response of ours is on its way, MHD's refusal only closes;
         * an evicted connection is closing already. */
        if (c && http_conn_tls(c) && http_conn_get_phase(c) == HTTP_PHASE_RECEIVING && !http_conn_evicted(c))
                http_answer_close(l, c, &resp);
        *ret_slug = resp.error;
        buf_reset(&resp.body);
        return resp.status;
}
