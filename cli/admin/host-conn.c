/* The admin commands' connection on the CA host (host-cmd.h): the admin
 * API of the CA's own store, called in process -- the same door
 * (service/api/admin) and the same core call a remote operator's request
 * gets, as the host's administrator admin:<login>, who may do anything
 * and whose reads are not audited, as when these commands worked on the
 * store themselves.  Nothing here opens the CA key; the token key only
 * for the commands that create tokens. */
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/pem.h>

#include "admin-api.h"
#include "ca.h"
#include "cli.h"
#include "error.h"
#include "fsutil.h"
#include "host-cmd.h"
#include "json-read.h"
#include "ossl-util.h"
#include "token.h"
#include "x509-util.h"

/* As a remote hwid takes it (remote.c): the audit log can be long. */
#define HOST_MAX_ANSWER (64u << 20)
#define CA_PEM_MAX (256 * 1024)

typedef struct host_conn {
        admin_conn conn;
        hwidd_config *cfg;
        ca_service *ca;
        char *servers[CLI_MAX_SERVERS + 1]; /* the join command's URLs, NULL-terminated */
        char pin[72];                       /* "" until asked for */
        char actor[80];
} host_conn;

static void host_free(host_conn *h) {
        if (!h)
                return;
        ca_service_free(h->ca);
        config_free(h->cfg);
        for (char **p = h->servers; *p; p++)
                free(*p);
        free(h);
}
DEFINE_TRIVIAL_CLEANUP_FUNC(host_conn *, host_free)

/* The CA's token key (ca.token_key), which the tokens are derived with;
 * a TPM's is watched until it has answered (cli_tpm_reachable()). */
static int open_token_key(const char *cmd, const hwidd_config *cfg, hwid_mac_key **ret) {
        hsm_options ho;
        int r;

        if (!cfg->token_key)
                return hwid_fail(HWID_E_CONFIG, "%s: " TOKEN_KEY_MISSING, cfg->path);
        cli_hsm_options(&ho, cfg->tcti);
        if (strncmp(cfg->token_key, "tpm2:", 5) == 0 && (r = cli_tpm_reachable(cmd, &ho)) < 0)
                return r;
        r = hwid_mac_key_open(cfg->token_key, &ho, ret);
        cli_tpm_done();
        return r;
}

/* Where devices join: the --server URLs, else hwidd's listen address. */
static int set_servers(host_conn *h, const remote_opts *o) {
        if (!o->n_servers)
                return asprintf(&h->servers[0], "https://%s", h->cfg->listen) < 0 ? hwid_fail(HWID_E_NOMEM, NULL) : 0;
        for (size_t i = 0; i < o->n_servers && i < CLI_MAX_SERVERS; i++)
                if (!(h->servers[i] = strdup(o->servers[i])))
                        return hwid_fail(HWID_E_NOMEM, NULL);
        return 0;
}

static void set_actor(host_conn *h) {
        struct passwd *pw = getpwuid(getuid());

        snprintf(h->actor, sizeof(h->actor), "admin:%s", pw ? pw->pw_name : "unknown");
}

/* ---------- one call ---------- */

/* The refusal in an error answer ({"error": slug, "message"}), as the
 * error it was in the core. */
static int refusal(const http_response *resp) {
        _cleanup_(json_object_putp) json_object *o = NULL;
        json_object *slug = NULL, *msg = NULL;
        int code = HWID_E_INTERNAL;

        (void) json_read(resp->body.data, resp->body.len, 4, 0, "the answer", &o);
        if (o && json_object_object_get_ex(o, "error", &slug) && json_object_is_type(slug, json_type_string))
                for (int c = 1; c < _HWID_E_MAX; c++)
                        if (strcmp(hwid_err_slug(-c), json_object_get_string(slug)) == 0 &&
                            hwid_err_http_status(-c) == resp->status) {
                                code = c;
                                break;
                        }
        if (o && json_object_object_get_ex(o, "message", &msg) && json_object_is_type(msg, json_type_string))
                return hwid_fail((hwid_err) code, "%s", json_object_get_string(msg));
        return hwid_fail((hwid_err) code, "the admin API answered %d", resp->status);
}

/* The request as the transport would hand it to the door: the path
 * percent-decoded, the query as sent. */
static int make_request(const char *target, const char *body, http_request *req, char **ret_path) {
        const char *q = strchr(target, '?');
        size_t n = q ? (size_t) (q - target) : strlen(target);
        int len = 0;
        char *p = curl_easy_unescape(NULL, target, (int) n, &len);

        if (!p)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((size_t) len != strlen(p) || !(*ret_path = strdup(p))) {
                curl_free(p);
                return hwid_fail(HWID_E_INVALID, "the path %s holds a NUL byte", target);
        }
        curl_free(p);
        req->path = *ret_path;
        req->query = q ? q + 1 : NULL;
        req->body = (const uint8_t *) body;
        req->body_len = body ? strlen(body) : 0;
        req->content_type = body ? "application/json" : NULL;
        req->peer_addr = "the CA host";
        return 0;
}

static int host_call(admin_conn *c, const char *method, const char *target, json_object *body, json_object **ret) {
        host_conn *h = (host_conn *) c;
        const char *text = body ? json_object_to_json_string_ext(body, JSON_C_TO_STRING_PLAIN) : NULL;
        _cleanup_free_ char *path = NULL;
        http_request req = { .method = method };
        http_response resp = { 0 };
        int r;

        if ((r = make_request(target, text, &req, &path)) < 0)
                return r;
        buf_init(&resp.body, HOST_MAX_ANSWER);
        if (!admin_route_host(h->ca, h->actor, &req, &resp))
                r = hwid_fail(HWID_E_INTERNAL, "%s is no path of the admin API", target);
        else if (resp.status >= 200 && resp.status < 300)
                r = json_read(resp.body.data, resp.body.len, 16, 0, "the admin API's answer", ret);
        else
                r = refusal(&resp);
        /* An answer to token create holds secrets. */
        buf_wipe(&resp.body);
        return r;
}

/* ---------- the join command's ---------- */

static const char *const *host_servers(admin_conn *c) {
        return (const char *const *) ((host_conn *) c)->servers;
}

/* The pin of ca.cert, read when first asked for. */
static int host_ca_pin(admin_conn *c, const char **ret) {
        host_conn *h = (host_conn *) c;
        _cleanup_free_ char *pem = NULL;
        _cleanup_(BIO_free_allp) BIO *b = NULL;
        _cleanup_(X509_freep) X509 *x = NULL;
        size_t len;
        int r;

        if (!h->pin[0]) {
                if ((r = read_file_capped(h->cfg->ca_cert, CA_PEM_MAX, &pem, &len)) < 0)
                        return r;
                b = BIO_new_mem_buf(pem, (int) len);
                x = b ? PEM_read_bio_X509(b, NULL, NULL, NULL) : NULL;
                if (!x)
                        return hwid_fail_ossl(HWID_E_CONFIG, "%s holds no certificate", h->cfg->ca_cert);
                if ((r = spki_sha256_pin(X509_get0_pubkey(x), h->pin)) < 0)
                        return r;
        }
        *ret = h->pin;
        return 0;
}

static void host_conn_free(admin_conn *c) {
        host_free((host_conn *) c);
}

static const admin_conn_ops host_ops = {
        .call = host_call,
        .servers = host_servers,
        .ca_pin = host_ca_pin,
        .free = host_conn_free,
};

int host_conn_open(const char *cmd, const char *config, const remote_opts *o, unsigned flags, admin_conn **ret) {
        _cleanup_(host_freep) host_conn *h = calloc(1, sizeof(*h));
        hwid_mac_key *token_key = NULL;
        int r;

        if (!h)
                return hwid_fail(HWID_E_NOMEM, NULL);
        h->conn = (admin_conn) { .ops = &host_ops };
        set_actor(h);
        if ((r = config_load(admin_config_path(config), &h->cfg)) < 0 || (r = set_servers(h, o)) < 0)
                return r;
        if ((flags & ADMIN_CONN_TOKEN_KEY) && (r = open_token_key(cmd, h->cfg, &token_key)) < 0)
                return r;
        if ((r = ca_service_new_host(h->cfg, token_key, &h->ca)) < 0)
                return r;
        *ret = &TAKE_PTR(h)->conn;
        return 0;
}
