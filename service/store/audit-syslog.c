/* Audit records to syslog: the datagram glibc's syslog(3) writes to
 * /dev/log (RFC 3164: "<PRI>Mmm dd hh:mm:ss ident[pid]: message"), sent
 * to the configured socket.  syslog(3) itself cannot name another socket
 * than /dev/log; this writes the same bytes to whichever is configured,
 * so that a test (or a collector's own socket) can listen.
 *
 * The message is one line of key=value pairs.  Values are quoted; '"',
 * '\' and every byte outside printable ASCII are escaped (\" \\ \xHH), so
 * that no field can start a new line, fake another pair or carry
 * terminal or bidi controls into a collector.  The record's id and hashes
 * come first and the free text last: a cut line keeps the chain. */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "audit-syslog.h"
#include "error.h"

#define LINE_MAX_BYTES 8192
#define FACILITY_AUTHPRIV (10 << 3)
#define SEVERITY_NOTICE 5
#define SEVERITY_INFO 6

typedef struct sink {
        int fd;
        struct sockaddr_un addr;
        socklen_t addr_len;
        char ident[32];
        void (*on_dropped)(void *userdata);
        void *userdata;
} sink;

typedef struct out {
        char *p;
        size_t left;
} out;

/* Whole pieces only: once one does not fit, the line ends before it. */
static void put(out *o, const char *s, size_t n) {
        if (n > o->left) {
                o->left = 0;
                return;
        }
        memcpy(o->p, s, n);
        o->p += n;
        o->left -= n;
}

static void put_value(out *o, const char *v) {
        char esc[5];

        put(o, "\"", 1);
        for (const unsigned char *c = (const unsigned char *) v; *c && o->left > 1; c++) {
                if (*c == '"' || *c == '\\') {
                        esc[0] = '\\';
                        esc[1] = (char) *c;
                        put(o, esc, 2);
                } else if (*c < 0x20 || *c >= 0x7f) {
                        snprintf(esc, sizeof(esc), "\\x%02x", *c);
                        put(o, esc, 4);
                } else
                        put(o, (const char *) c, 1);
        }
        put(o, "\"", 1);
}

static void put_pair(out *o, const char *key, const char *v) {
        if (!v)
                return;
        put(o, " ", 1);
        put(o, key, strlen(key));
        put(o, "=", 1);
        put_value(o, v);
}

static void hex(const uint8_t *h, char out_hex[65]) {
        for (int i = 0; i < 32; i++)
                snprintf(out_hex + 2 * i, 3, "%02x", h ? h[i] : 0);
}

size_t audit_syslog_format(const store_audit *a, char *line, size_t size) {
        out o = { .p = line, .left = size ? size - 1 : 0 };
        char head[200], prev[65], hash[65], when[32];
        time_t at = (time_t) a->at;
        struct tm tm;

        hex(a->prev_hash, prev);
        hex(a->hash, hash);
        if (!gmtime_r(&at, &tm) || !strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm))
                snprintf(when, sizeof(when), "@%lld", (long long) a->at);
        snprintf(head, sizeof(head), "hwid-audit id=%lld at=%s hash=%s prev=%s", (long long) a->id, when, hash, prev);
        put(&o, head, strlen(head));
        put_pair(&o, "actor", a->actor);
        put_pair(&o, "action", a->action);
        put_pair(&o, "outcome", a->outcome);
        put_pair(&o, "target", a->target);
        put_pair(&o, "token_id", a->token_id);
        put_pair(&o, "reason", a->reason);
        if (size)
                *o.p = '\0';
        return (size_t) (o.p - line);
}

/* One datagram: the syslog header, then what fill writes (a record, or
 * a checkpoint's line). */
static void sink_send(const sink *k, int sev, size_t (*fill)(const void *what, char *buf, size_t size),
                      const void *what) {
        char line[LINE_MAX_BYTES], stamp[32];
        time_t now = time(NULL);
        struct tm tm;
        int n;

        strftime(stamp, sizeof(stamp), "%b %e %H:%M:%S", localtime_r(&now, &tm));
        n = snprintf(line, sizeof(line), "<%d>%s %s[%ld]: ", FACILITY_AUTHPRIV | sev, stamp, k->ident,
                     (long) getpid());
        if (n < 0 || (size_t) n >= sizeof(line))
                return;
        n += (int) fill(what, line + n, sizeof(line) - (size_t) n);
        /* Never waits: a collector that is gone or slow costs a copy, not
         * an issuance (the database has the record either way). */
        if (sendto(k->fd, line, (size_t) n, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *) &k->addr,
                   k->addr_len) < 0 && k->on_dropped)
                k->on_dropped(k->userdata);
}

static size_t fill_record(const void *what, char *buf, size_t size) {
        return audit_syslog_format(what, buf, size);
}

static size_t fill_text(const void *what, char *buf, size_t size) {
        int n = snprintf(buf, size, "%s", (const char *) what);

        return n < 0 ? 0 : (size_t) n < size ? (size_t) n : size - 1;
}

static int send_record(const store_audit *a, void *userdata) {
        sink_send(userdata, a->outcome && strcmp(a->outcome, "allow") == 0 ? SEVERITY_INFO : SEVERITY_NOTICE,
                  fill_record, a);
        return 0;
}

static void sink_free(void *userdata) {
        sink *k = userdata;

        if (!k)
                return;
        if (k->fd >= 0)
                close(k->fd);
        free(k);
}

static int sink_new(const char *socket_path, const char *ident, void (*on_dropped)(void *userdata), void *userdata,
                    sink **ret) {
        sink *k;

        if (strlen(socket_path) >= sizeof(k->addr.sun_path))
                return hwid_fail(HWID_E_CONFIG, "audit.syslog_socket %s is too long for a socket path", socket_path);
        k = calloc(1, sizeof(*k));
        if (!k)
                return hwid_fail(HWID_E_NOMEM, NULL);
        k->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (k->fd < 0) {
                sink_free(k);
                return hwid_fail(HWID_E_IO, "cannot make a syslog socket: %s", strerror(errno));
        }
        k->addr.sun_family = AF_UNIX;
        snprintf(k->addr.sun_path, sizeof(k->addr.sun_path), "%s", socket_path);
        k->addr_len = (socklen_t) (offsetof(struct sockaddr_un, sun_path) + strlen(k->addr.sun_path) + 1);
        snprintf(k->ident, sizeof(k->ident), "%s", ident);
        k->on_dropped = on_dropped;
        k->userdata = userdata;
        *ret = k;
        return 0;
}

int audit_syslog_attach(store *s, const char *socket_path, const char *ident, void (*on_dropped)(void *userdata),
                        void *userdata) {
        sink *k = NULL;
        int r;

        if (!socket_path)
                return 0;
        if ((r = sink_new(socket_path, ident, on_dropped, userdata, &k)) < 0)
                return r;
        store_set_audit_sink(s, send_record, k, sink_free);
        return 0;
}

void audit_syslog_send_line(const char *socket_path, const char *ident, void (*on_dropped)(void *userdata),
                            void *userdata, const char *line) {
        sink *k = NULL;

        if (!socket_path || sink_new(socket_path, ident, on_dropped, userdata, &k) < 0)
                return;
        sink_send(k, SEVERITY_NOTICE, fill_text, line);
        sink_free(k);
}
