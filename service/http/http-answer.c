/* Our JSON answer (http_error(), http-respond.c) to what libmicrohttpd
 * refuses on its own, and the lingering close after it.
 *
 * MHD 0.9 answers some malformed requests itself, with an HTML body,
 * before any callback of ours sees the request (a header block larger
 * than its memory pool, a request line too long, a malformed header line,
 * an unknown HTTP version), and logs each refusal first, on the I/O
 * thread serving the connection, right after reading from it.  Every read
 * of a TLS connection goes through our transport function, which marks
 * the connection as the thread's current one (http-tls.c), so the log
 * line names its connection: there, http_answer_refusal() writes our JSON
 * answer on the TLS session and closes its sending side, so that the HTML
 * MHD queues next is never sent.  Plain-HTTP connections are read by MHD
 * itself, the refusal cannot be tied to one, and MHD's own answer goes.
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

/* One TLS record, sent without waiting: false if the socket would not
 * take it now. */
static bool send_now(gnutls_session_t s, const char *data, size_t len) {
        ssize_t n = gnutls_record_send(s, data, len);

        return n == (ssize_t) len;
}

/* Sends the whole answer (head and JSON body) on the TLS session, then a
 * close_notify and a TCP shutdown of the sending side: whatever MHD sends
 * after it fails, and MHD closes the connection. */
static void answer_and_close(http_linger *l, http_conn *c, const http_response *resp) {
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
        if (n > 0 && (size_t) n < sizeof(msg) && send_now(s, msg, (size_t) n))
                (void) gnutls_bye(s, GNUTLS_SHUT_WR);
        (void) shutdown(fd, SHUT_WR);
        linger(l, fd);
}

int http_answer_refusal(http_linger *l, size_t max_header, const char *fmt, va_list ap, const char **ret_slug) {
        http_conn *c = http_conn_current();
        http_response resp = { 0 };
        va_list aq;
        unsigned status;

        if (!c || !http_conn_tls(c) || strcmp(fmt, MHD_ERROR_FORMAT) != 0)
                return 0;
        /* Once a response of ours is on its way, MHD's refusal only closes. */
        if (http_conn_get_phase(c) != HTTP_PHASE_RECEIVING)
                return 0;
        va_copy(aq, ap);
        status = va_arg(aq, unsigned);
        va_end(aq);
        buf_init(&resp.body, 1024);
        error_for_status(status, max_header, &resp);
        answer_and_close(l, c, &resp);
        *ret_slug = resp.error;
        buf_reset(&resp.body);
        return resp.status;
}
