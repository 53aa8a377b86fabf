/* pg-relay — a TCP relay that adds a round-trip time, for PostgreSQL
 * "on another host" where there is none (this kernel has no netem):
 *
 *   pg-relay --listen PORT --to HOST:PORT [--rtt-us N] [--stats FILE] [--realtime]
 *
 * Listens on 127.0.0.1:PORT and relays every connection to HOST:PORT.
 * Every chunk it reads is sent on N/2 µs later: a request and its answer
 * each take N/2 longer, so a round trip N longer, and chunks keep their
 * order and their spacing.
 *
 * One thread does it all, from one epoll loop: a relay that a benchmark
 * runs on the cores it measures should cost as little of them as it can
 * (with a thread per direction and a wake-up per chunk it cost 400-600 µs
 * of CPU per issuance in bench/stores.sh, as much as half of hwidd's).
 * Every chunk waits the same N/2, so one queue of all of them, in the
 * order they were read, is also in the order they are due: the loop
 * sleeps until its head is due (epoll_pwait2's timeout, in ns) or a
 * socket has something.  A chunk that its destination cannot take yet
 * (its socket buffer full) waits in its direction's backlog, in order,
 * until the socket is writable.
 *
 * It also counts round trips: a chunk from the client that follows data
 * from the server on the same connection is one (a client that sends
 * several statements at once, a pipeline, makes one; one that waits for
 * each answer makes one per statement).  With --stats FILE it writes
 * "connections=C round_trips=T bytes_up=U bytes_down=D" to FILE (replaced
 * atomically) every 50 ms, for a test or a benchmark to read.
 *
 * --realtime runs the relay at SCHED_FIFO priority (when the process
 * may): a network does not wait for a CPU, and on a machine whose cores
 * are all busy a relay woken at a chunk's time could otherwise wait
 * milliseconds for one, adding far more than N.
 *
 * Runs until killed.  bench/stores.sh puts PostgreSQL behind it, and
 * tests/integration/pg-round-trips.sh counts the round trips of an
 * issuance with it. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_MAX 65536
#define STATS_EVERY_NS 50000000u

typedef struct relay_dir relay_dir;

typedef struct chunk {
        struct chunk *next;
        relay_dir *dir;
        uint64_t due_ns;  /* when it may be sent on */
        size_t len, sent; /* len 0: the end of the stream */
        char data[];
} chunk;

typedef struct relay_conn relay_conn;

/* One direction of a connection: src is read, dst written. */
struct relay_dir {
        relay_conn *conn;
        int src, dst;
        bool up;           /* client to server */
        bool reading;      /* src not at its end yet */
        bool done;         /* its end sent on, or dst failed */
        chunk *backlog, **backlog_tail; /* due, waiting for dst to take them */
};

/* The epoll data of a socket: which connection, which end. */
typedef struct relay_end {
        relay_conn *conn;
        int side;          /* 0: the client's socket, 1: the server's */
        uint32_t events;   /* what epoll watches for (0: not in the set) */
} relay_end;

struct relay_conn {
        relay_dir dir[2];  /* 0: up (client's socket to server's), 1: down */
        relay_end end[2];
        int last;          /* 0: nothing yet, 1: client spoke last, 2: server */
        size_t queued;     /* its chunks in the queue of those not due yet */
        relay_conn *next_ended; /* on the list of the ended, once on it */
        bool ended;
};

static uint64_t one_way_ns;
static const char *stats_path;
static uint64_t n_conns, n_trips, n_up, n_down;
static int ep;
static chunk *queue, **queue_tail = &queue; /* read, not due yet: in due order */
static relay_conn *ended; /* done both ways: freed once no event of theirs is pending */

static uint64_t now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* What epoll waits for on a connection's socket SIDE: to read it while
 * its direction reads, to write it while the other's backlog waits.  A
 * socket with neither leaves the set: epoll would report its hang-up
 * all the same, again and again. */
static void watch(relay_conn *c, int side) {
        relay_end *e = &c->end[side];
        struct epoll_event ev = { .events = (c->dir[side].reading ? EPOLLIN : 0) |
                                            (c->dir[1 - side].backlog ? EPOLLOUT : 0),
                                  .data.ptr = e };

        if (ev.events == e->events)
                return;
        epoll_ctl(ep, ev.events == 0 ? EPOLL_CTL_DEL : e->events == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD,
                  c->dir[side].src, &ev);
        e->events = ev.events;
}

/* After a connection's directions changed: what epoll watches for on its
 * sockets; and, done both ways with no chunk left in the queue, it goes
 * on the list of the ended (the events that epoll returned with its own
 * may still name it). */
static void conn_update(relay_conn *c) {
        watch(c, 0);
        watch(c, 1);
        if (c->ended || !c->dir[0].done || !c->dir[1].done || c->queued > 0)
                return;
        c->ended = true;
        c->next_ended = ended;
        ended = c;
}

static void ended_free(void) {
        while (ended) {
                relay_conn *c = ended;
                ended = c->next_ended;
                close(c->dir[0].src);
                close(c->dir[1].src);
                free(c);
        }
}

/* The direction has nothing more to send: its end, or dst failed. */
static void dir_finish(relay_dir *d, bool failed) {
        while (d->backlog) {
                chunk *k = d->backlog;
                d->backlog = k->next;
                free(k);
        }
        d->backlog_tail = &d->backlog;
        d->done = true;
        shutdown(d->dst, SHUT_WR);
        if (failed && d->reading) {
                /* What src still sends has nowhere to go. */
                d->reading = false;
                shutdown(d->src, SHUT_RD);
        }
}

/* Sends what dst takes of the backlog; false when dst failed. */
static bool backlog_flush(relay_dir *d) {
        while (d->backlog) {
                chunk *k = d->backlog;
                if (k->len == 0) {
                        dir_finish(d, false);
                        return true;
                }
                ssize_t n = send(d->dst, k->data + k->sent, k->len - k->sent, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
                        return true;
                if (n <= 0)
                        return false;
                if ((k->sent += (size_t) n) < k->len)
                        continue;
                if (!(d->backlog = k->next))
                        d->backlog_tail = &d->backlog;
                free(k);
        }
        return true;
}

/* A due chunk to its direction's backlog, and on as far as dst takes it. */
static void deliver(chunk *k) {
        relay_dir *d = k->dir;
        relay_conn *c = d->conn;

        c->queued--;
        if (d->done) {
                free(k);
        } else {
                k->next = NULL;
                *d->backlog_tail = k;
                d->backlog_tail = &k->next;
                if (!backlog_flush(d))
                        dir_finish(d, true);
        }
        conn_update(c);
}

static void deliver_due(uint64_t now) {
        while (queue && queue->due_ns <= now) {
                chunk *k = queue;
                if (!(queue = k->next))
                        queue_tail = &queue;
                deliver(k);
        }
}

/* A client chunk after the server's: the client waited for an answer. */
static void count(relay_dir *d, size_t len) {
        if (d->up) {
                n_up += len;
                if (d->conn->last != 1)
                        n_trips++;
                d->conn->last = 1;
        } else {
                n_down += len;
                d->conn->last = 2;
        }
}

/* Reads what src has into a chunk due N/2 from now; its end (or an
 * error) is a chunk of length 0, which shuts down dst's writing. */
static void dir_read(relay_dir *d) {
        static char buf[CHUNK_MAX];
        ssize_t n = read(d->src, buf, sizeof(buf));
        chunk *k;

        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
                return;
        if (n < 0)
                n = 0;
        if (!(k = malloc(sizeof(*k) + (size_t) n)))
                abort();
        *k = (chunk) { .dir = d, .due_ns = now_ns() + one_way_ns, .len = (size_t) n };
        if (n > 0) {
                memcpy(k->data, buf, (size_t) n);
                count(d, (size_t) n);
        } else {
                d->reading = false;
        }
        *queue_tail = k;
        queue_tail = &k->next;
        d->conn->queued++;
}

static void on_socket(relay_end *e, uint32_t events) {
        relay_conn *c = e->conn;
        relay_dir *from = &c->dir[e->side], *to = &c->dir[1 - e->side];

        if ((events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && to->backlog && !backlog_flush(to))
                dir_finish(to, true);
        if ((events & (EPOLLIN | EPOLLERR | EPOLLHUP)) && from->reading)
                dir_read(from);
        conn_update(c);
}

static int dial(const char *host, const char *port) {
        struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM }, *ai, *a;
        int fd = -1;

        if (getaddrinfo(host, port, &hints, &ai) != 0)
                return -1;
        for (a = ai; a && fd < 0; a = a->ai_next) {
                fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
                if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) < 0) {
                        close(fd);
                        fd = -1;
                }
        }
        freeaddrinfo(ai);
        return fd;
}

static void prepare(int fd) {
        int one = 1;

        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
}

static void relay(int client, const char *host, const char *port) {
        int server = dial(host, port);
        relay_conn *c;

        if (server < 0 || !(c = calloc(1, sizeof(*c)))) {
                close(client);
                if (server >= 0)
                        close(server);
                return;
        }
        prepare(client);
        prepare(server);
        n_conns++;
        c->dir[0] = (relay_dir) { .conn = c, .src = client, .dst = server, .up = true, .reading = true };
        c->dir[1] = (relay_dir) { .conn = c, .src = server, .dst = client, .reading = true };
        for (int i = 0; i < 2; i++) {
                c->dir[i].backlog_tail = &c->dir[i].backlog;
                c->end[i] = (relay_end) { .conn = c, .side = i };
        }
        conn_update(c);
}

static void stats_write(void) {
        char tmp[4096];
        FILE *f;

        snprintf(tmp, sizeof(tmp), "%s.tmp", stats_path);
        if (!(f = fopen(tmp, "w")))
                return;
        fprintf(f, "connections=%llu round_trips=%llu bytes_up=%llu bytes_down=%llu\n", (unsigned long long) n_conns,
                (unsigned long long) n_trips, (unsigned long long) n_up, (unsigned long long) n_down);
        if (fclose(f) == 0)
                rename(tmp, stats_path);
}

static int listen_on(const char *port) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        char *end;
        long p = strtol(port, &end, 10);

        if (fd < 0 || *end || p <= 0 || p > 65535)
                return -1;
        sa.sin_port = htons((uint16_t) p);
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0 || listen(fd, 256) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

/* How long the loop may sleep: until the queue's head is due, and the
 * next stats write; -1: until a socket has something. */
static int64_t sleep_ns(uint64_t now, uint64_t stats_due) {
        int64_t t = -1;

        if (queue)
                t = queue->due_ns > now ? (int64_t) (queue->due_ns - now) : 0;
        if (stats_path) {
                int64_t s = stats_due > now ? (int64_t) (stats_due - now) : 0;
                t = t < 0 || s < t ? s : t;
        }
        return t;
}

static int wait_events(struct epoll_event *evs, int max, int64_t ns) {
        struct timespec ts = { .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
        int n = epoll_pwait2(ep, evs, max, ns < 0 ? NULL : &ts, NULL);

        if (n < 0 && errno == ENOSYS) /* a kernel before 5.11: to the millisecond */
                n = epoll_wait(ep, evs, max, ns < 0 ? -1 : (int) ((ns + 999999) / 1000000));
        return n;
}

static int run(int listener, const char *host, const char *port) {
        struct epoll_event evs[64], ev = { .events = EPOLLIN, .data.ptr = NULL };
        uint64_t stats_due = 0;

        if ((ep = epoll_create1(EPOLL_CLOEXEC)) < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, listener, &ev) < 0)
                return 1;
        for (;;) {
                uint64_t now = now_ns();
                if (stats_path && now >= stats_due) {
                        stats_write();
                        stats_due = now + STATS_EVERY_NS;
                }
                int n = wait_events(evs, 64, sleep_ns(now, stats_due));
                if (n < 0 && errno != EINTR)
                        return 1;
                for (int i = 0; i < n; i++) {
                        if (evs[i].data.ptr) {
                                on_socket(evs[i].data.ptr, evs[i].events);
                                continue;
                        }
                        int client = accept(listener, NULL, NULL);
                        if (client >= 0)
                                relay(client, host, port);
                        else if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN)
                                return 1;
                }
                deliver_due(now_ns());
                ended_free();
        }
}

static void usage(FILE *f) {
        fprintf(f, "usage: pg-relay --listen PORT --to HOST:PORT [--rtt-us N] [--stats FILE] [--realtime]\n"
                   "Relays 127.0.0.1:PORT to HOST:PORT, adding N microseconds to every round trip\n"
                   "(N/2 each way), and counts the client's round trips (--stats); --realtime: at\n"
                   "SCHED_FIFO priority, so that busy cores do not add to N.\n");
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "listen", required_argument, NULL, 'l' }, { "to", required_argument, NULL, 't' },
                { "rtt-us", required_argument, NULL, 'r' }, { "stats", required_argument, NULL, 's' },
                { "realtime", no_argument, NULL, 'R' },     { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        const char *port = NULL, *to = NULL, *colon;
        bool realtime = false;
        char host[256];
        int c, fd;

        while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1)
                switch (c) {
                case 'l': port = optarg; break;
                case 't': to = optarg; break;
                case 'r': one_way_ns = strtoull(optarg, NULL, 10) * 1000u / 2; break;
                case 's': stats_path = optarg; break;
                case 'R': realtime = true; break;
                case 'h': usage(stdout); return 0;
                default: usage(stderr); return 2;
                }
        if (!port || !to || !(colon = strrchr(to, ':')) || (size_t) (colon - to) >= sizeof(host)) {
                usage(stderr);
                return 2;
        }
        snprintf(host, sizeof(host), "%.*s", (int) (colon - to), to);
        if ((fd = listen_on(port)) < 0) {
                fprintf(stderr, "pg-relay: cannot listen on 127.0.0.1:%s: %s\n", port, strerror(errno));
                return 1;
        }
        signal(SIGPIPE, SIG_IGN);
        /* Woken at a chunk's time, not up to 50 µs after (the default
         * timer slack; a SCHED_FIFO thread has none anyway). */
        prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
        if (realtime)
                (void) sched_setscheduler(0, SCHED_FIFO, &(struct sched_param) { .sched_priority = 10 });
        return run(fd, host, colon + 1);
}
