#include <stdio.h>
#include <string.h>

#include <curl/curl.h>
#include <openssl/pem.h>

#include "admin-conn.h"
#include "cli.h"
#include "client.h"
#include "device.h"
#include "error.h"
#include "fsutil.h"
#include "join.h"
#include "json-read.h"
#include "ossl-util.h"
#include "pinned.h"
#include "remote.h"
#include "x509-util.h"

/* Lists and the audit log can be long; hwidd caps its answers at 64 MiB. */
#define REMOTE_MAX_RESPONSE (64u << 20)
#define REMOTE_TIMEOUT 120
#define PEM_MAX (256 * 1024)

typedef struct remote {
        admin_conn conn;
        char *servers[DEVICE_ORDER_MAX]; /* in the order to try them, NULL-terminated */
        char *cert_pem;
        char *anchor;         /* the pinned CA certificate, the one trust anchor */
        char pin[72];
        hwid_key *key;
        client_session *session;
} remote;

bool remote_option(remote_opts *o, int c, const char *arg) {
        switch (c) {
        case OPT_REMOTE_SERVER:
                /* One too many is counted, and refused by remote_check_usage(). */
                if (o->n_servers < CLI_MAX_SERVERS)
                        o->servers[o->n_servers] = arg;
                o->n_servers++;
                return true;
        case OPT_REMOTE_DIR: o->dir = arg; return true;
        case OPT_REMOTE_CERT: o->cert = arg; return true;
        case OPT_REMOTE_KEY: o->key = arg; return true;
        case OPT_REMOTE_CA_HASH: o->ca_hash = arg; return true;
        case OPT_REMOTE_CA_FILE: o->ca_file = arg; return true;
        case OPT_REMOTE_TCTI: o->tcti = arg; return true;
        default: return false;
        }
}

bool remote_wanted(const remote_opts *o) {
        return o->dir || o->cert || o->key;
}

/* Every --server an https:// URL, none twice. */
static int check_servers(const char *cmd, const remote_opts *o) {
        const char *list[CLI_MAX_SERVERS + 1];
        size_t n = 0;
        int r;

        for (size_t i = 0; i < o->n_servers; i++)
                if ((r = cli_add_server(cmd, o->servers[i], list, &n)) != 0)
                        return r;
        return 0;
}

int remote_check_usage(const char *cmd, const remote_opts *o, const char *config, bool server_alone) {
        bool is_remote = remote_wanted(o);

        if (o->n_servers > CLI_MAX_SERVERS)
                return cli_usage(cmd, "at most %d --server options", CLI_MAX_SERVERS);
        if (!is_remote && o->n_servers && !server_alone)
                return cli_usage(cmd, "--server needs the operator's identity (--dir DIR, or --cert FILE --key URI)");
        if (is_remote && config)
                return cli_usage(cmd, "--config is for the CA host; --dir or --cert/--key for a remote hwidd");
        if (!is_remote && (o->ca_hash || o->ca_file || o->tcti))
                return cli_usage(cmd, "--ca-hash, --ca-file and --tcti need the operator's identity "
                                      "(--dir DIR, or --cert FILE --key URI)");
        if (!is_remote)
                return 0;
        if (check_servers(cmd, o) != 0)
                return EXIT_USAGE;
        if (o->dir && (o->cert || o->key))
                return cli_usage(cmd, "give the operator's identity as --dir DIR or as --cert FILE --key URI, not both");
        if (!o->dir && (!o->cert || !o->key))
                return cli_usage(cmd, "--cert FILE and --key URI go together");
        if (o->dir && o->ca_file)
                return cli_usage(cmd, "--dir DIR holds the pinned CA; --ca-file is for --cert/--key");
        if (o->cert && !o->n_servers)
                return cli_usage(cmd, "--cert/--key need --server URL");
        if (o->cert && !o->ca_hash && !o->ca_file)
                return cli_usage(cmd, "--cert/--key need the CA: --ca-hash sha256:H (hwid ca hash) or --ca-file FILE");
        if (o->ca_hash && !ca_hash_valid(o->ca_hash))
                return cli_usage(cmd, "--ca-hash must be sha256:<64 lower-case hex digits>");
        return 0;
}

static void remote_free(remote *r) {
        if (!r)
                return;
        client_session_free(r->session);
        hwid_key_free(r->key);
        for (char **p = r->servers; *p; p++)
                free(*p);
        free(r->cert_pem);
        free(r->anchor);
        free(r);
}

/* The pinned anchor of pem (pinned_anchor(): its first certificate),
 * checked against the pin if one was given. */
static int set_anchor(remote *r, const char *pem, const char *what, const char *ca_hash) {
        _cleanup_(X509_freep) X509 *ca = NULL;
        int r2;

        if (pinned_anchor(pem, &r->anchor) < 0 || pem_first_cert(r->anchor, &ca) < 0)
                return hwid_fail(HWID_E_INVALID, "%s holds no certificate", what);
        if ((r2 = spki_sha256_pin(X509_get0_pubkey(ca), r->pin)) < 0)
                return r2;
        if (ca_hash && strcmp(ca_hash, r->pin) != 0)
                return hwid_fail(HWID_E_PIN_MISMATCH, "the CA in %s is %s, not the pinned %s: nothing was sent", what,
                                 r->pin, ca_hash);
        return 0;
}

static int copy_servers(remote *r, const char *const *list) {
        for (size_t i = 0; list[i] && i < DEVICE_ORDER_MAX - 1; i++)
                if (!(r->servers[i] = strdup(list[i])))
                        return hwid_fail(HWID_E_NOMEM, NULL);
        return 0;
}

/* --dir: what hwid join wrote there.  Its servers as a device tries them
 * (the one that answered it last first), unless --server says otherwise. */
static int load_dir(remote *r, const remote_opts *o, char **ret_key_uri) {
        const char *order[DEVICE_ORDER_MAX];
        device_state s;
        int ret;

        if ((ret = device_load(o->dir, &s)) < 0)
                return ret;
        device_server_order(&s, order);
        ret = copy_servers(r, o->n_servers ? o->servers : order);
        r->cert_pem = strdup(s.cert_pem);
        *ret_key_uri = strdup(s.key_uri);
        if (ret >= 0)
                ret = r->cert_pem && *ret_key_uri ? set_anchor(r, s.ca_pem, o->dir, o->ca_hash)
                                                  : hwid_fail(HWID_E_NOMEM, NULL);
        device_state_clear(&s);
        return ret;
}

/* A failover, one line on stderr (as the device says it). */
static void note_stderr(void *userdata, const char *message) {
        fprintf(stderr, "hwid: %s\n", message);
}

/* --cert FILE --key URI: the CA from --ca-file, or fetched and pinned. */
static int load_files(remote *r, const remote_opts *o, char **ret_key_uri) {
        _cleanup_free_ char *ca = NULL, *bundle = NULL;
        const char *from = NULL;
        unsigned dropped = 0;
        size_t len;
        int ret;

        if ((ret = read_file_capped(o->cert, PEM_MAX, &r->cert_pem, &len)) < 0 ||
            (ret = copy_servers(r, o->servers)) < 0)
                return ret;
        if (!(*ret_key_uri = strdup(o->key)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (o->ca_file) {
                if ((ret = read_file_capped(o->ca_file, PEM_MAX, &ca, &len)) < 0)
                        return ret;
                return set_anchor(r, ca, o->ca_file, o->ca_hash);
        }
        /* GET /ca changes nothing: any server may be asked in turn. */
        if ((ret = pinned_fetch_ca(&(client_opts) { .servers = (const char *const *) r->servers,
                                                    .timeout = REMOTE_TIMEOUT, .note = note_stderr },
                                   o->ca_hash, &bundle, &ca, &dropped, &from)) < 0)
                return ret;
        return set_anchor(r, ca, from, o->ca_hash);
}

/* The key must be the certificate's: said here, not by a TLS alert. */
static int open_key(remote *r, const char *uri, const char *tcti) {
        _cleanup_(X509_freep) X509 *x = NULL;
        hsm_options ho;
        int ret;

        cli_hsm_options(&ho, tcti);
        if (pem_first_cert(r->cert_pem, &x) < 0)
                return hwid_fail(HWID_E_INVALID, "the operator's certificate cannot be read");
        if ((ret = hwid_key_open(uri, &ho, &r->key)) < 0)
                return ret;
        if (EVP_PKEY_eq(X509_get0_pubkey(x), hwid_key_public(r->key)) != 1)
                return hwid_fail(HWID_E_INVALID, "the operator's certificate is not for the key %s", uri);
        return 0;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(remote *, remote_free)

static const admin_conn_ops remote_ops;

int remote_open(const remote_opts *o, admin_conn **ret) {
        _cleanup_(remote_freep) remote *r = calloc(1, sizeof(*r));
        _cleanup_free_ char *key_uri = NULL;
        client_opts co = { .timeout = REMOTE_TIMEOUT, .max_response = REMOTE_MAX_RESPONSE };
        int ret2;

        if (!r)
                return hwid_fail(HWID_E_NOMEM, NULL);
        r->conn = (admin_conn) { .ops = &remote_ops, .remote = true };
        ret2 = o->dir ? load_dir(r, o, &key_uri) : load_files(r, o, &key_uri);
        if (ret2 < 0 || (ret2 = open_key(r, key_uri, o->tcti)) < 0)
                return ret2;
        /* One anchor for every server: a replica is one the pinned CA verifies. */
        co.servers = (const char *const *) r->servers;
        co.at_most_once = true;
        co.note = note_stderr;
        co.ca_pem = r->anchor;
        co.key = r->key;
        co.cert_pem = r->cert_pem;
        if ((ret2 = client_session_new(&co, &r->session)) < 0)
                return ret2;
        *ret = &TAKE_PTR(r)->conn;
        return 0;
}

static int parse_answer(client_response *resp, json_object **ret) {
        return json_read(resp->body.data, resp->body.len, 16, 0, "the server's answer", ret);
}

static int remote_call(admin_conn *c, const char *method, const char *path, json_object *body, json_object **ret) {
        remote *r = (remote *) c;
        const char *text = body ? json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN) : NULL;
        client_response resp;
        int ret2;

        ret2 = client_session_request(r->session, method, path, NULL, (const uint8_t *) text, text ? strlen(text) : 0,
                                      text ? "application/json" : NULL, &resp);
        if (ret2 < 0)
                return ret2;
        if (resp.status >= 200 && resp.status < 300)
                ret2 = parse_answer(&resp, ret);
        else
                ret2 = client_error_from_response(&resp);
        /* An answer to token create holds secrets. */
        buf_wipe(&resp.body);
        client_response_clear(&resp);
        return ret2;
}

static const char *const *remote_servers(admin_conn *c) {
        return (const char *const *) ((remote *) c)->servers;
}

static int remote_ca_pin(admin_conn *c, const char **ret) {
        *ret = ((remote *) c)->pin;
        return 0;
}

static void remote_conn_free(admin_conn *c) {
        remote_free((remote *) c);
}

static const admin_conn_ops remote_ops = {
        .call = remote_call,
        .servers = remote_servers,
        .ca_pin = remote_ca_pin,
        .free = remote_conn_free,
};

char *remote_escape(const char *s) {
        char *e = curl_easy_escape(NULL, s, 0), *copy;

        if (!e)
                return NULL;
        copy = strdup(e);
        curl_free(e);
        return copy;
}
