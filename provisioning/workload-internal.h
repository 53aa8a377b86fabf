/* Inside the workload sockets (workload.h): workload-tokens.c (the tokens
 * each socket hands out, made and cached), workload-server.c (sockets,
 * callers, HTTP) and workload-config.c (the file). */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "workload.h"

#define wl_say(o, level, ...)                                                 \
        do {                                                                  \
                if ((o)->log)                                                 \
                        (o)->log((o)->userdata, (level), __VA_ARGS__);        \
        } while (0)

/* The tokens of one socket: one per configured audience. */
typedef struct wl_tokens wl_tokens;

int wl_tokens_new(const workload_opts *o, const workload_socket_conf *conf, wl_tokens **ret);
void wl_tokens_free(wl_tokens *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(wl_tokens *, wl_tokens_free)

typedef struct wl_token {
        char *token;
        int64_t iat, exp;
} wl_token;

/* The token for audience now: the one made before while it is fresh
 * (less than reuse of its lifetime gone, and DIR's certificate the one it
 * was made with), else a new one.  -HWID_E_FORBIDDEN for an audience the
 * socket does not serve; a signing failure as it came (the caller answers
 * 503). */
int wl_tokens_get(wl_tokens *t, const char *audience, wl_token *ret);
void wl_token_clear(wl_token *t);

/* ---------- workload-server.c: sockets and callers ---------- */

/* Who is at the other end of a connection, as the kernel saw it at
 * connect() (the connection's socket context). */
typedef struct wl_peer {
        uid_t uid;
        gid_t gid;
        pid_t pid;
        gid_t *groups;       /* supplementary groups (SO_PEERGROUPS) */
        size_t n_groups;
        bool over_share;     /* beyond its uid's share of connections: shut down */
} wl_peer;

typedef struct wl_socket wl_socket;

/* Called with each request's raw target before anything else (cls: the
 * wl_socket); what it returns is the request's *req_cls when answer is
 * first called. */
typedef void *(*wl_begin_fn)(void *cls, const char *uri, struct MHD_Connection *conn);

/* workload_server_start() with answer as the handler of every socket's
 * requests (cls: the wl_socket), and begin called as each begins;
 * workload-api.c starts it with its own. */
int wl_server_start(const workload_opts *o, MHD_AccessHandlerCallback answer, wl_begin_fn begin,
                    workload_server **ret);

const workload_socket_conf *wl_socket_conf(const wl_socket *ws);
wl_tokens *wl_socket_tokens(const wl_socket *ws);
const workload_opts *wl_socket_opts(const wl_socket *ws);

/* A refusal of peer, logged (at most a few lines a minute per uid; the
 * rest are counted and the count logged with the next line). */
void wl_socket_log_refusal(wl_socket *ws, const wl_peer *p, const char *why);

/* ---------- workload-config.c ---------- */

/* May peer use the socket?  Its uid in allow_uids, or its gid or one of
 * its groups in allow_gids. */
bool wl_peer_allowed(const workload_socket_conf *c, const wl_peer *p);

