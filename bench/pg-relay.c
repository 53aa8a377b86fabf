/* pg-relay — a TCP relay that adds a round-trip time, for PostgreSQL
 * "on another host" where there is none (this kernel has no netem):
 *
 *   pg-relay --listen PORT --to HOST:PORT [--rtt-us N] [--stats FILE] [--realtime]
 *
 * Listens on 127.0.0.1:PORT and relays every connection to HOST:PORT.
 * Each direction of a connection has a reader thread, which stamps every
 * chunk it reads with the time, and a writer thread, which sends it on at
 * stamp + N/2 µs: a request and its answer each take N/2 longer, so a
 * round trip N longer, and chunks keep their order and their spacing.
 *
 * It also counts round trips: a chunk from the client that follows data
 * from the server on the same connection is one (a client that sends
 * several statements at once, a pipeline, makes one; one that waits for
 * each answer makes one per statement).  With --stats FILE it writes
 * "connections=C round_trips=T bytes_up=U bytes_down=D" to FILE (replaced
 * atomically) every 50 ms, for a test or a benchmark to read.
 *
 * --realtime runs the relay's threads at SCHED_FIFO priority (when the
 * process may): a network does not wait for a CPU, and on a machine whose
 * cores are all busy a writer woken at its chunk's time could otherwise
 * wait milliseconds for one, adding far more than N.  The relay's own
 * work is a copy and a send per chunk.
 *
 * Runs until killed.  bench/stores.sh puts PostgreSQL behind it, and
 * tests/integration/pg-round-trips.sh counts the round trips of an
 * issuance with it. */
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define CHUNK_MAX 65536

typedef struct chunk {
        struct chunk *next;
        uint64_t due_ns;  /* when it may be sent on */
        size_t len;       /* 0: the end of the stream */
        char data[];
} chunk;

typedef struct relay_conn relay_conn;

/* One direction: src is read, dst written. */
typedef struct pipe_dir {
        relay_conn *conn;
        int src, dst;
        bool up;          /* client to server */
        pthread_mutex_t lock;
        pthread_cond_t more;
        chunk *head, **tail;
} pipe_dir;

struct relay_conn {
        pipe_dir dir[2];
        _Atomic int last;  /* 0: nothing yet, 1: client spoke last, 2: server */
        _Atomic int threads;
};

static uint64_t one_way_ns;
static bool realtime;
static const char *stats_path;
static _Atomic uint64_t n_conns, n_trips, n_up, n_down;

static uint64_t now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static void conn_release(relay_conn *c) {
        if (atomic_fetch_sub(&c->threads, 1) != 1)
                return;
        close(c->dir[0].src);
        close(c->dir[1].src);
        for (int i = 0; i < 2; i++) {
                while (c->dir[i].head) {
                        chunk *k = c->dir[i].head;
                        c->dir[i].head = k->next;
                        free(k);
                }
                pthread_mutex_destroy(&c->dir[i].lock);
                pthread_cond_destroy(&c->dir[i].more);
        }
        free(c);
}

static void enqueue(pipe_dir *d, chunk *k) {
        pthread_mutex_lock(&d->lock);
        *d->tail = k;
        d->tail = &k->next;
        pthread_cond_signal(&d->more);
        pthread_mutex_unlock(&d->lock);
}

/* A client chunk after the server's: the client waited for an answer. */
static void count(pipe_dir *d, size_t len) {
        if (d->up) {
                atomic_fetch_add(&n_up, len);
                if (atomic_exchange(&d->conn->last, 1) != 1)
                        atomic_fetch_add(&n_trips, 1);
        } else {
                atomic_fetch_add(&n_down, len);
                atomic_store(&d->conn->last, 2);
        }
}

static void *reader(void *arg) {
        pipe_dir *d = arg;
        char buf[CHUNK_MAX];
        ssize_t n;

        do {
                n = read(d->src, buf, sizeof(buf));
                if (n < 0 && errno == EINTR)
                        continue;
                chunk *k = malloc(sizeof(*k) + (n > 0 ? (size_t) n : 0));
                if (!k)
                        abort();
                *k = (chunk) { .due_ns = now_ns() + one_way_ns, .len = n > 0 ? (size_t) n : 0 };
                if (n > 0) {
                        memcpy(k->data, buf, (size_t) n);
                        count(d, (size_t) n);
                }
                enqueue(d, k);
        } while (n > 0);
        conn_release(d->conn);
        return NULL;
}

static chunk *dequeue(pipe_dir *d) {
        chunk *k;

        pthread_mutex_lock(&d->lock);
        while (!d->head)
                pthread_cond_wait(&d->more, &d->lock);
        k = d->head;
        if (!(d->head = k->next))
                d->tail = &d->head;
        pthread_mutex_unlock(&d->lock);
        return k;
}

static bool send_all(int fd, const char *p, size_t len) {
        while (len > 0) {
                ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        return false;
                p += n;
                len -= (size_t) n;
        }
        return true;
}

static void *writer(void *arg) {
        pipe_dir *d = arg;
        bool ok = true;

        for (;;) {
                chunk *k = dequeue(d);
                size_t len = k->len;
                struct timespec due = { .tv_sec = (time_t) (k->due_ns / 1000000000u),
                                        .tv_nsec = (long) (k->due_ns % 1000000000u) };

                while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL) == EINTR)
                        ;
                if (ok && len > 0)
                        ok = send_all(d->dst, k->data, len);
                free(k);
                if (len == 0 || !ok)
                        break;
        }
        /* The other side sees the end; a writer that failed ends the reading too. */
        shutdown(d->dst, SHUT_WR);
        if (!ok)
                shutdown(d->src, SHUT_RD);
        conn_release(d->conn);
        return NULL;
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

static void nodelay(int fd) {
        int one = 1;

        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void start(void *(*fn)(void *), void *arg) {
        pthread_attr_t attr;
        pthread_t t;

        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (realtime) {
                pthread_attr_setinheritsched(&attr, PTHREAD_EXPLICIT_SCHED);
                pthread_attr_setschedpolicy(&attr, SCHED_FIFO);
                pthread_attr_setschedparam(&attr, &(struct sched_param) { .sched_priority = 10 });
        }
        pthread_attr_setstacksize(&attr, CHUNK_MAX + 256 * 1024);
        if (pthread_create(&t, &attr, fn, arg) != 0) {
                /* Not allowed to run in real time: at the normal priority. */
                pthread_attr_setinheritsched(&attr, PTHREAD_INHERIT_SCHED);
                if (pthread_create(&t, &attr, fn, arg) != 0)
                        abort();
        }
        pthread_attr_destroy(&attr);
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
        nodelay(client);
        nodelay(server);
        atomic_fetch_add(&n_conns, 1);
        c->threads = 4;
        c->dir[0] = (pipe_dir) { .conn = c, .src = client, .dst = server, .up = true };
        c->dir[1] = (pipe_dir) { .conn = c, .src = server, .dst = client };
        for (int i = 0; i < 2; i++) {
                c->dir[i].tail = &c->dir[i].head;
                pthread_mutex_init(&c->dir[i].lock, NULL);
                pthread_cond_init(&c->dir[i].more, NULL);
        }
        for (int i = 0; i < 2; i++) {
                start(writer, &c->dir[i]);
                start(reader, &c->dir[i]);
        }
}

static void *stats_loop(void *arg) {
        char tmp[4096];

        (void) arg;
        snprintf(tmp, sizeof(tmp), "%s.tmp", stats_path);
        for (;;) {
                FILE *f = fopen(tmp, "w");
                if (f) {
                        fprintf(f, "connections=%llu round_trips=%llu bytes_up=%llu bytes_down=%llu\n",
                                (unsigned long long) n_conns, (unsigned long long) n_trips,
                                (unsigned long long) n_up, (unsigned long long) n_down);
                        if (fclose(f) == 0)
                                rename(tmp, stats_path);
                }
                nanosleep(&(struct timespec) { .tv_nsec = 50000000 }, NULL);
        }
        return NULL;
}

static int listen_on(const char *port) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
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

static void usage(FILE *f) {
        fprintf(f, "usage: pg-relay --listen PORT --to HOST:PORT [--rtt-us N] [--stats FILE] [--realtime]\n"
                   "Relays 127.0.0.1:PORT to HOST:PORT, adding N microseconds to every round trip\n"
                   "(N/2 each way), and counts the client's round trips (--stats); --realtime: its\n"
                   "threads at SCHED_FIFO priority, so that busy cores do not add to N.\n");
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "listen", required_argument, NULL, 'l' }, { "to", required_argument, NULL, 't' },
                { "rtt-us", required_argument, NULL, 'r' }, { "stats", required_argument, NULL, 's' },
                { "realtime", no_argument, NULL, 'R' },     { "help", no_argument, NULL, 'h' },
                { 0 },
        };
        const char *port = NULL, *to = NULL;
        char host[256];
        const char *colon;
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
        if (stats_path)
                start(stats_loop, NULL);
        for (;;) {
                int client = accept(fd, NULL, NULL);
                if (client >= 0)
                        relay(client, host, colon + 1);
                else if (errno != EINTR && errno != ECONNABORTED)
                        return 1;
        }
}
