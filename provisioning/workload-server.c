/* Workload sockets (see workload.h): the socket files, who connects, and
 * libmicrohttpd serving HTTP on them.
 *
 * libmicrohttpd listens on the AF_UNIX socket made here
 * (MHD_OPTION_LISTEN_SOCKET), with a thread per connection: a request
 * that must wait for a signature (the TPM, tens of milliseconds on real
 * ones) holds up no other caller.  Each uid has a share of a socket's
 * connections (max_connections_per_uid): a connection beyond it is shut
 * down as it arrives, so that one program holding connections open
 * cannot lock the others out. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "workload-internal.h"

#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif

#define REFUSAL_LINES 5         /* refusals logged per uid per minute */
#define REFUSAL_WINDOW 60
#define REFUSAL_SLOTS 16        /* uids remembered for that */
#define PEER_GROUPS_MAX 65536   /* NGROUPS_MAX */

typedef struct uid_count {
        uid_t uid;
        unsigned n;
} uid_count;

typedef struct refusal_slot {
        uid_t uid;
        int64_t since;
        unsigned logged, unlogged;
} refusal_slot;

struct wl_socket {
        const workload_opts *o;
        const workload_socket_conf *conf;
        wl_tokens *tokens;
        MHD_AccessHandlerCallback answer; /* its requests' handler (workload-api.c) */
        wl_begin_fn begin;                /* and what sees their raw target first */
        int fd;                       /* until libmicrohttpd owns it */
        dev_t dev;                    /* the socket file made, to remove only that one */
        ino_t ino;
        bool created;
        struct MHD_Daemon *daemon;
        pthread_mutex_t lock;         /* conns, refusals */
        uid_count *conns;             /* max_connections slots */
        refusal_slot refusals[REFUSAL_SLOTS];
};

struct workload_server {
        workload_opts o;
        MHD_AccessHandlerCallback answer;
        wl_begin_fn begin;
        wl_socket socks[WORKLOAD_MAX_SOCKETS];
        size_t n;
};

const workload_socket_conf *wl_socket_conf(const wl_socket *ws) {
        return ws->conf;
}

wl_tokens *wl_socket_tokens(const wl_socket *ws) {
        return ws->tokens;
}

const workload_opts *wl_socket_opts(const wl_socket *ws) {
        return ws->o;
}

/* ---------- callers ---------- */

static void peer_free(wl_peer *p) {
        if (p)
                free(p->groups);
        free(p);
}

/* The supplementary groups (Linux 4.13+; an older kernel: none, and the
 * primary gid alone counts). */
static void peer_groups(int fd, wl_peer *p) {
        socklen_t len = 64 * sizeof(gid_t);

        for (int i = 0; i < 2; i++) {
                free(p->groups);
                if (!(p->groups = malloc(len)))
                        break;
                if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, p->groups, &len) == 0) {
                        p->n_groups = len / sizeof(gid_t);
                        return;
                }
                if (errno != ERANGE || len > PEER_GROUPS_MAX * sizeof(gid_t))
                        break;
        }
        free(p->groups);
        p->groups = NULL;
        p->n_groups = 0;
}

static wl_peer *peer_read(int fd) {
        struct ucred uc;
        socklen_t len = sizeof(uc);
        wl_peer *p;

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0 || !(p = calloc(1, sizeof(*p))))
                return NULL;
        *p = (wl_peer) { .uid = uc.uid, .gid = uc.gid, .pid = uc.pid };
        peer_groups(fd, p);
        return p;
}

/* Under ws->lock: counts a connection of uid; false beyond its share. */
static bool conn_take(wl_socket *ws, uid_t uid) {
        uid_count *free_slot = NULL;

        for (unsigned i = 0; i < ws->conf->max_connections; i++) {
                if (ws->conns[i].n > 0 && ws->conns[i].uid == uid) {
                        if (ws->conns[i].n >= ws->conf->max_connections_per_uid)
                                return false;
                        ws->conns[i].n++;
                        return true;
                }
                if (ws->conns[i].n == 0 && !free_slot)
                        free_slot = &ws->conns[i];
        }
        if (!free_slot) /* libmicrohttpd keeps to max_connections */
                return false;
        *free_slot = (uid_count) { .uid = uid, .n = 1 };
        return true;
}

static void conn_give(wl_socket *ws, uid_t uid) {
        for (unsigned i = 0; i < ws->conf->max_connections; i++)
                if (ws->conns[i].n > 0 && ws->conns[i].uid == uid) {
                        ws->conns[i].n--;
                        return;
                }
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        wl_socket *ws = cls;
        wl_peer *p = *socket_context;
        bool ok;

        if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
                if (p && !p->over_share) {
                        pthread_mutex_lock(&ws->lock);
                        conn_give(ws, p->uid);
                        pthread_mutex_unlock(&ws->lock);
                }
                peer_free(p);
                *socket_context = NULL;
                return;
        }
        /* No credentials (out of memory): no context, and every request
         * on it is refused. */
        if (!ci || !(p = peer_read(ci->connect_fd)))
                return;
        pthread_mutex_lock(&ws->lock);
        ok = conn_take(ws, p->uid);
        pthread_mutex_unlock(&ws->lock);
        if (!ok) {
                p->over_share = true;
                (void) shutdown(ci->connect_fd, SHUT_RDWR);
                wl_socket_log_refusal(ws, p, "it has max_connections_per_uid connections open already");
        }
        *socket_context = p;
}

/* Under ws->lock: the slot of uid, or the one unused longest. */
static refusal_slot *refusal_slot_of(wl_socket *ws, uid_t uid) {
        refusal_slot *oldest = &ws->refusals[0];

        for (size_t i = 0; i < REFUSAL_SLOTS; i++) {
                if (ws->refusals[i].since && ws->refusals[i].uid == uid)
                        return &ws->refusals[i];
                if (ws->refusals[i].since < oldest->since)
                        oldest = &ws->refusals[i];
        }
        *oldest = (refusal_slot) { .uid = uid };
        return oldest;
}

void wl_socket_log_refusal(wl_socket *ws, const wl_peer *p, const char *why) {
        int64_t now = (int64_t) time(NULL);
        unsigned unlogged = 0;
        refusal_slot *s;
        bool say;

        pthread_mutex_lock(&ws->lock);
        s = refusal_slot_of(ws, p->uid);
        if (!s->since || now - s->since >= REFUSAL_WINDOW || now < s->since) {
                unlogged = s->unlogged;
                *s = (refusal_slot) { .uid = p->uid, .since = now };
        }
        say = s->logged < REFUSAL_LINES;
        if (say)
                s->logged++;
        else
                s->unlogged++;
        pthread_mutex_unlock(&ws->lock);
        if (say)
                wl_say(ws->o, LOG_LVL_WARNING, "%s: refused uid %u gid %u (pid %d): %s%s", ws->conf->path,
                       (unsigned) p->uid, (unsigned) p->gid, (int) p->pid, why,
                       unlogged ? " (and more refusals of this uid before, not logged)" : "");
}

/* ---------- the socket file ---------- */

static int sock_addr(const char *path, struct sockaddr_un *ret) {
        *ret = (struct sockaddr_un) { .sun_family = AF_UNIX };
        if (strlen(path) >= sizeof(ret->sun_path))
                return hwid_fail(HWID_E_CONFIG, "%s: too long for a socket path", path);
        memcpy(ret->sun_path, path, strlen(path) + 1);
        return 0;
}

/* A socket file left by an agent that is gone (nobody accepts on it) is
 * removed; anything else at path is an error. */
static int clear_stale(const char *path, const struct sockaddr_un *sa) {
        struct stat st;
        int fd, r, e;

        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : hwid_fail(HWID_E_IO, "%s: %s", path, strerror(errno));
        if (!S_ISSOCK(st.st_mode))
                return hwid_fail(HWID_E_EXISTS, "%s exists and is not a socket: not replaced", path);
        if ((fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
                return hwid_fail(HWID_E_IO, "socket: %s", strerror(errno));
        r = connect(fd, (const struct sockaddr *) sa, sizeof(*sa));
        e = errno;
        close(fd);
        if (r == 0)
                return hwid_fail(HWID_E_EXISTS, "%s: another program is serving on it (another hwid agent?)", path);
        if (e != ECONNREFUSED)
                return hwid_fail(HWID_E_IO, "%s: %s", path, strerror(e));
        return unlink(path) == 0 || errno == ENOENT ? 0 : hwid_fail(HWID_E_IO, "cannot remove the stale %s: %s", path,
                                                                      strerror(errno));
}

/* Bound with no access for anyone (umask) until its mode and owner are
 * set, and listening only then: nobody connects before. */
static int sock_bind(wl_socket *ws, const struct sockaddr_un *sa) {
        const workload_socket_conf *c = ws->conf;
        struct stat st;
        mode_t old;
        int r;

        old = umask(0777);
        r = bind(ws->fd, (const struct sockaddr *) sa, sizeof(*sa));
        umask(old);
        if (r < 0)
                return hwid_fail(HWID_E_IO, "cannot create the socket %s: %s", c->path, strerror(errno));
        ws->created = true;
        if (lstat(c->path, &st) < 0 || !S_ISSOCK(st.st_mode))
                return hwid_fail(HWID_E_IO, "%s: the socket just made is gone", c->path);
        ws->dev = st.st_dev;
        ws->ino = st.st_ino;
        /* chown only when needed: it takes CAP_CHOWN (and a seccomp
         * filter may forbid it), which an agent keeping its own ids lacks. */
        if (fchmodat(AT_FDCWD, c->path, c->mode, AT_SYMLINK_NOFOLLOW) < 0 ||
            ((st.st_uid != c->owner || st.st_gid != c->group) &&
             fchownat(AT_FDCWD, c->path, c->owner, c->group, AT_SYMLINK_NOFOLLOW) < 0))
                return hwid_fail(HWID_E_IO, "cannot set the mode %04o and owner %u:%u of %s: %s", (unsigned) c->mode,
                                 (unsigned) c->owner, (unsigned) c->group, c->path, strerror(errno));
        if (listen(ws->fd, 64) < 0)
                return hwid_fail(HWID_E_IO, "cannot listen on %s: %s", c->path, strerror(errno));
        return 0;
}

static int sock_open(wl_socket *ws) {
        struct sockaddr_un sa;
        int r;

        if ((r = sock_addr(ws->conf->path, &sa)) < 0 || (r = clear_stale(ws->conf->path, &sa)) < 0)
                return r;
        if ((ws->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0)) < 0)
                return hwid_fail(HWID_E_IO, "socket: %s", strerror(errno));
        return sock_bind(ws, &sa);
}

/* Removes the socket file if it still is the one made here. */
static void sock_remove(wl_socket *ws) {
        struct stat st;

        if (ws->created && lstat(ws->conf->path, &st) == 0 && st.st_dev == ws->dev && st.st_ino == ws->ino)
                (void) unlink(ws->conf->path);
        ws->created = false;
}

/* ---------- serving ---------- */

static void on_mhd_log(void *cls, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));
static void on_mhd_log(void *cls, const char *fmt, va_list ap) {
        wl_socket *ws = cls;
        char line[512], *nl;

        vsnprintf(line, sizeof(line), fmt, ap);
        if ((nl = strchr(line, '\n')))
                *nl = '\0';
        wl_say(ws->o, LOG_LVL_DEBUG, "%s: libmicrohttpd: %s", ws->conf->path, line);
}

static int sock_serve(wl_socket *ws) {
        ws->daemon = MHD_start_daemon(
                MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL | MHD_USE_ITC |
                        MHD_USE_ERROR_LOG,
                0, NULL, NULL, ws->answer, ws,
                MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, ws,
                MHD_OPTION_LISTEN_SOCKET, (MHD_socket) ws->fd,
                MHD_OPTION_CONNECTION_LIMIT, ws->conf->max_connections,
                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned) WORKLOAD_TIMEOUT,
                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t) (32 * 1024),
                MHD_OPTION_NOTIFY_CONNECTION, on_connection, ws,
                MHD_OPTION_URI_LOG_CALLBACK, ws->begin, ws,
                MHD_OPTION_END);
        if (!ws->daemon)
                return hwid_fail(HWID_E_IO, "cannot serve on %s: libmicrohttpd refused to start", ws->conf->path);
        ws->fd = -1; /* libmicrohttpd's now: it closes it */
        return 0;
}

static void sock_stop(wl_socket *ws) {
        if (ws->daemon)
                MHD_stop_daemon(ws->daemon);
        ws->daemon = NULL;
        if (ws->fd >= 0)
                close(ws->fd);
        ws->fd = -1;
        sock_remove(ws);
        wl_tokens_free(ws->tokens);
        ws->tokens = NULL;
        free(ws->conns);
        ws->conns = NULL;
        pthread_mutex_destroy(&ws->lock);
}

void workload_server_stop(workload_server *s) {
        if (!s)
                return;
        for (size_t i = 0; i < s->n; i++)
                sock_stop(&s->socks[i]);
        free(s);
}

static int sock_init(workload_server *s, const workload_socket_conf *c, wl_socket *ws) {
        *ws = (wl_socket) { .o = &s->o, .conf = c, .answer = s->answer, .begin = s->begin, .fd = -1 };
        pthread_mutex_init(&ws->lock, NULL);
        s->n++; /* from here on, stopped with the others */
        if (!(ws->conns = calloc(c->max_connections, sizeof(*ws->conns))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        return wl_tokens_new(&s->o, c, &ws->tokens);
}

int wl_server_start(const workload_opts *o, MHD_AccessHandlerCallback answer, wl_begin_fn begin,
                    workload_server **ret) {
        _cleanup_(workload_server_stopp) workload_server *s = calloc(1, sizeof(*s));
        int r;

        if (!s)
                return hwid_fail(HWID_E_NOMEM, NULL);
        s->o = *o;
        s->answer = answer;
        s->begin = begin;
        for (size_t i = 0; i < o->conf->n_sockets; i++)
                if ((r = sock_init(s, &o->conf->sockets[i], &s->socks[i])) < 0 || (r = sock_open(&s->socks[i])) < 0)
                        return r;
        for (size_t i = 0; i < s->n; i++) {
                const workload_socket_conf *c = s->socks[i].conf;
                size_t n = 0;
                if ((r = sock_serve(&s->socks[i])) < 0)
                        return r;
                while (c->audiences[n])
                        n++;
                wl_say(o, LOG_LVL_INFO, "serving workloads on %s (mode %04o, owner %u:%u; %zu audience%s)", c->path,
                       (unsigned) c->mode, (unsigned) c->owner, (unsigned) c->group, n, n == 1 ? "" : "s");
        }
        *ret = TAKE_PTR(s);
        return 0;
}
