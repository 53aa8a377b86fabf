/* How an admin command (token, request, cert, audit list, ek, identity)
 * reaches the admin API (docs/OPERATIONS.md, "The admin API"): each
 * command builds its request once -- a method, a path, a JSON body --
 * and prints the answer once, whichever connection carried it:
 *
 *   - a remote hwidd over HTTPS, as an operator whose key is in a TPM or
 *     an HSM (--dir DIR, or --cert FILE --key URI: remote.h);
 *   - on the CA host (--config, or no operator identity at all), the
 *     admin API of the CA's own store in process, as the host's
 *     administrator (hwid-admin's connection, cli/admin/host-conn.c).
 *     The device's hwid has none: it hands the whole command line to
 *     hwid-admin (cli/hwid.c), which parses it again and connects.
 *
 * A connection is the struct of its kind, which begins with admin_conn. */
#pragma once

#include <stdbool.h>

#include <json-c/json.h>

#include "cleanup.h"
#include "remote.h"

DEFINE_TRIVIAL_CLEANUP_FUNC(json_object *, json_object_put)

typedef struct admin_conn admin_conn;

typedef struct admin_conn_ops {
        /* One call; see admin_conn_call(). */
        int (*call)(admin_conn *c, const char *method, const char *path, json_object *body, json_object **ret);
        /* The URLs devices join at (NULL-terminated). */
        const char *const *(*servers)(admin_conn *c);
        /* "sha256:<hex>" of the CA's public key, for join command lines. */
        int (*ca_pin)(admin_conn *c, const char **ret);
        void (*free)(admin_conn *c);
} admin_conn_ops;

struct admin_conn {
        const admin_conn_ops *ops;
        bool remote;  /* a remote hwidd, asked by an operator's certificate */
};

/* What a command needs of the CA host's connection beyond the store:
 * ca.token_key, which tokens are derived with (opened only for them). */
#define ADMIN_CONN_TOKEN_KEY 1u

/* The CA host's connection for cmd (e.g. "token create"), with the
 * configuration config (NULL: admin_config_path()) and, for the join
 * command lines, o's --server URLs; hwid's hands the command to
 * hwid-admin instead and returns only if it cannot. */
typedef int (*admin_local_fn)(const char *cmd, const char *config, const remote_opts *o, unsigned flags,
                              admin_conn **ret);
/* Set once by main(). */
void admin_conn_set_local(admin_local_fn fn);

/* The connection o asks for: remote with an operator identity
 * (remote_wanted()), else the CA host's.  Nothing is sent yet. */
int admin_conn_open(const char *cmd, const remote_opts *o, const char *config, unsigned flags, admin_conn **ret);
void admin_conn_free(admin_conn *c);
DEFINE_TRIVIAL_CLEANUP_FUNC(admin_conn *, admin_conn_free)

/* One call: body (NULL: none) goes as JSON; a 2xx answer's JSON object is
 * *ret (json_object_put() it), anything else is the refusal as an error
 * (remotely "server answered 403: <reason>"; on the CA host the reason). */
int admin_conn_call(admin_conn *c, const char *method, const char *path, json_object *body, json_object **ret);
const char *const *admin_conn_servers(admin_conn *c);
int admin_conn_ca_pin(admin_conn *c, const char **ret);
