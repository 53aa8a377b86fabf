/* hwid agent's workload sockets: local programs get the device's identity
 * without touching the TPM.
 *
 * Each socket is a Unix stream socket the agent creates (its mode, owner
 * and group set before it listens) and serves HTTP/1.1 on with
 * libmicrohttpd, answering JSON:
 *
 *   GET /v1/certificate          the current certificate and its chain (PEM)
 *   GET /v1/token?audience=AUD   a JWT for AUD, signed by the device key
 *
 * A caller is who the kernel says it is (SO_PEERCRED: uid, gid, and
 * SO_PEERGROUPS: its supplementary groups, as of its connect()); a uid or
 * a group outside the socket's allow-lists gets 403, and a log line.
 *
 * A token is made once per audience and handed out again until `reuse` of
 * its lifetime has passed, or at once when DIR's certificate changed (a
 * renewal): a busy workload costs one TPM signature per audience per
 * (reuse x ttl), not one per request.  Signing goes through
 * jws_device_sign(), as hwid jws sign does; the key is opened for each
 * signature and closed after it, so the agent holds no TPM connection
 * between signatures.  Signatures and renewals take turns at the TPM
 * (tpm_turn): a renewal keeps keys loaded between its commands, and on a
 * TPM without a resource manager (3 object slots) a signature in between
 * could find no room.  While a renewal runs, a request whose token is
 * still good gets that one rather than wait.
 *
 * The configuration is a JSON file (hwid agent --config FILE):
 *
 *   { "workload_sockets": [ { "path": "/run/hwid/workload.sock", ... } ] }
 *
 * docs/DEVICE.md lists every member.
 *
 * Library code: events go to the caller's log callback; never prints. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cleanup.h"

#define WORKLOAD_MAX_SOCKETS 8
#define WORKLOAD_MAX_AUDIENCES 64
#define WORKLOAD_MAX_ALLOWED 64      /* uids, and gids, per socket */
#define WORKLOAD_AUDIENCE_MAX 255    /* bytes */
#define WORKLOAD_CONFIG_MAX (64 * 1024)

#define WORKLOAD_TTL_DEFAULT 600
#define WORKLOAD_REUSE_DEFAULT 0.5
#define WORKLOAD_MAX_CONNECTIONS_DEFAULT 64
#define WORKLOAD_MAX_CONNECTIONS_PER_UID_DEFAULT 16
#define WORKLOAD_TIMEOUT 10          /* seconds a connection may idle */

typedef struct workload_socket_conf {
        char *path;                 /* absolute */
        mode_t mode;                /* default 0660 */
        uid_t owner;                /* default: the agent's uid */
        gid_t group;                /* default: the agent's gid */
        uid_t *allow_uids;
        size_t n_allow_uids;
        gid_t *allow_gids;
        size_t n_allow_gids;
        char **audiences;           /* NULL-terminated, at least one */
        char *claims;               /* the operator's extra claims (a JSON object as text), or NULL */
        unsigned identity_claims;   /* JWS_IDENTITY_ISS | JWS_IDENTITY_SUB */
        int64_t ttl;                /* seconds */
        double reuse;               /* fraction of a token's lifetime it is handed out for, (0, 1] */
        unsigned max_connections;
        unsigned max_connections_per_uid;
} workload_socket_conf;

typedef struct workload_conf {
        workload_socket_conf *sockets;
        size_t n_sockets;
} workload_conf;

/* Parses the configuration (name: for messages, "FILE: member: problem");
 * user and group names are looked up here.  -HWID_E_CONFIG. */
int workload_conf_parse(const char *text, size_t len, const char *name, workload_conf **ret);
int workload_conf_load(const char *path, workload_conf **ret);
void workload_conf_free(workload_conf *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(workload_conf *, workload_conf_free)

typedef void (*workload_log_fn)(void *userdata, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

typedef struct workload_opts {
        const char *dir;
        const char *tcti;
        const workload_conf *conf;  /* must outlive the server */
        pthread_mutex_t *tpm_turn;  /* agent_opts.tpm_turn: taken for each signature; may be NULL */
        workload_log_fn log;        /* called from the server's threads */
        void *userdata;
} workload_opts;

typedef struct workload_server workload_server;

/* Creates every socket and starts serving; a stale socket file (nobody
 * listening) is replaced, a live one is an error.  All or none: on
 * failure no socket is left. */
int workload_server_start(const workload_opts *o, workload_server **ret);
/* Stops serving (requests under way finish first) and removes the
 * socket files. */
void workload_server_stop(workload_server *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(workload_server *, workload_server_stop)
