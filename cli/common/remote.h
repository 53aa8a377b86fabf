/* Remote administration: the admin commands (admin-conn.h) against
 * hwidd's admin API, over mutual TLS as an operator whose key is in a
 * TPM or HSM.  What the operator may do is the role hwidd recorded with
 * its certificate; nothing here decides it.
 *
 * The operator's identity is a joined identity directory (--dir DIR, as
 * `hwid join` writes it: its certificate, key URI, pinned CA and server)
 * or a certificate file and a key URI (--cert FILE --key URI, with the
 * CA pinned by --ca-hash and/or given by --ca-file).
 *
 * A replicated CA (docs/HA.md) has several servers: --server repeated, or
 * DIR/device.json's "servers".  A request moves on to the next one only
 * when it certainly was not carried out (client.h, at_most_once), and
 * every one is verified against the same pinned CA. */
#pragma once

#include <getopt.h>
#include <stdbool.h>

#include <json-c/json.h>

#include "cli.h"

typedef struct remote_opts {
        /* --server, in the order given (NULL-terminated); with --dir,
         * DIR's servers by default.  n_servers counts every one given,
         * also those beyond the room (a usage error). */
        const char *servers[CLI_MAX_SERVERS + 1];
        size_t n_servers;
        const char *dir;
        const char *cert;
        const char *key;
        const char *ca_hash;  /* sha256:<hex> of the CA's public key */
        const char *ca_file;  /* the CA certificate (PEM) */
        const char *tcti;
} remote_opts;

enum {
        OPT_REMOTE_SERVER = 0x300,
        OPT_REMOTE_DIR,
        OPT_REMOTE_CERT,
        OPT_REMOTE_KEY,
        OPT_REMOTE_CA_HASH,
        OPT_REMOTE_CA_FILE,
        OPT_REMOTE_TCTI,
};

/* The long options every admin command takes, for its option table. */
#define REMOTE_OPTIONS                                                                                  \
        { "server", required_argument, NULL, OPT_REMOTE_SERVER },                                       \
        { "dir", required_argument, NULL, OPT_REMOTE_DIR },                                             \
        { "cert", required_argument, NULL, OPT_REMOTE_CERT },                                           \
        { "key", required_argument, NULL, OPT_REMOTE_KEY },                                             \
        { "ca-hash", required_argument, NULL, OPT_REMOTE_CA_HASH },                                     \
        { "ca-file", required_argument, NULL, OPT_REMOTE_CA_FILE },                                     \
        { "tcti", required_argument, NULL, OPT_REMOTE_TCTI }

/* Their help, for every command's --help (one option a line). */
#define REMOTE_HELP                                                                                      \
        "\nRemote, against hwidd's admin API as an operator (instead of --config):\n"                   \
        "      --dir DIR            the operator's identity, joined with hwid join (key in a\n"         \
        "                           TPM or HSM; server and pinned CA from DIR)\n"                        \
        "      --cert FILE          or the operator's certificate (PEM) ...\n"                          \
        "      --key URI            ... and the URI of its key\n"                                       \
        "      --server URL         hwidd, e.g. https://ca.example.org:8443; repeated for the\n"        \
        "                           replicas of one CA, tried in order when one cannot be reached\n"   \
        "                           or answers 503 (never on a refusal, a 502/504 or a failure\n"      \
        "                           after the request was sent); with --dir, DIR's servers by default\n" \
        "      --ca-hash sha256:H   the CA pin (hwid ca hash); with --cert, this or --ca-file\n"         \
        "      --ca-file FILE       the CA certificate to trust\n"                                       \
        "      --tcti TCTI          the TPM holding the operator's key (tpm2: URIs)\n"

/* Takes getopt's option c if it is a remote one; returns whether it did. */
bool remote_option(remote_opts *o, int c, const char *arg);
/* Whether the command goes to a server: an operator identity was given. */
bool remote_wanted(const remote_opts *o);
/* The combinations that make sense (e.g. --config is local, --cert needs
 * --key and --server): 0, or a usage error printed for cmd (EXIT_USAGE).
 * server_alone: --server without an identity is fine (hwid token create
 * on the CA host, where it is the join command's URL). */
int remote_check_usage(const char *cmd, const remote_opts *o, const char *config, bool server_alone);

typedef struct admin_conn admin_conn;

/* Loads the identity, opens its key, pins the CA: nothing is sent before
 * the CA checks out.  The connection's servers are the ones it tries, in
 * order; its CA pin the pinned CA's. */
int remote_open(const remote_opts *o, admin_conn **ret);
/* s percent-encoded for a path segment or query value; caller frees. */
char *remote_escape(const char *s);
