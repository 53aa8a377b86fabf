/* The admin API's door: /v1/admin/... over mutual TLS, for the holders
 * of certificates hwid issued under operator profiles (role admin,
 * approver, provisioner or auditor, as recorded with the certificate).
 *
 * Per request, one way: the route -> the path, query and body parsed
 * (admin-parse.c) -> one call of the CA core, which authenticates the
 * client certificate against its records, has the authorizer chain decide
 * the action for the recorded role, refuses what could not be parsed,
 * does the work and audits it, whatever the outcome (ca-admin.h) -> the
 * answer (admin-encode.c).  The CA host's administrator makes the same
 * calls in process (admin_route_host(), hwid-admin), named instead of
 * authenticated by a certificate. */
#include <string.h>
#include <time.h>

#include "admin-internal.h"
#include "error.h"
#include "json-read.h"

#define ADMIN_PREFIX "/v1/admin/"
#define BODY_DEPTH 4

typedef struct admin_path {
        const char *method;
        const char *prefix;  /* the whole path, or what comes before the parameter */
        const char *suffix;  /* NULL: no parameter; else what follows it ("" at the end) */
        bool slashes;        /* the parameter may hold '/' (an identity; the suffix delimits it) */
        ca_admin_op op;
        admin_parse_fn parse; /* NULL: nothing to read */
        admin_encode_fn encode;
} admin_path;

static const admin_path routes[] = {
        { "GET", "/v1/admin/tokens", NULL, false, CA_ADMIN_TOKEN_LIST, NULL, admin_encode_tokens },
        { "POST", "/v1/admin/tokens", NULL, false, CA_ADMIN_TOKEN_CREATE, admin_parse_token_create,
          admin_encode_token_create },
        { "POST", "/v1/admin/tokens/", "/revoke", false, CA_ADMIN_TOKEN_REVOKE, admin_parse_no_keys,
          admin_encode_token_revoke },
        { "GET", "/v1/admin/requests", NULL, false, CA_ADMIN_REQUEST_LIST, admin_parse_request_list,
          admin_encode_requests },
        { "POST", "/v1/admin/requests/", "/approve", false, CA_ADMIN_REQUEST_APPROVE, admin_parse_no_keys,
          admin_encode_approve },
        { "POST", "/v1/admin/requests/", "/deny", false, CA_ADMIN_REQUEST_DENY, admin_parse_deny, admin_encode_deny },
        { "GET", "/v1/admin/certificates", NULL, false, CA_ADMIN_CERT_LIST, admin_parse_cert_list,
          admin_encode_certs },
        { "GET", "/v1/admin/certificates/", "", false, CA_ADMIN_CERT_SHOW, NULL, admin_encode_cert },
        { "POST", "/v1/admin/certificates/", "/revoke", false, CA_ADMIN_CERT_REVOKE, admin_parse_cert_revoke,
          admin_encode_cert_revoke },
        { "POST", "/v1/admin/identities/", "/revoke", true, CA_ADMIN_IDENTITY_REVOKE, admin_parse_identity_revoke,
          admin_encode_identity_revoke },
        { "GET", "/v1/admin/audit", NULL, false, CA_ADMIN_AUDIT_READ, admin_parse_audit_read, admin_encode_audit },
        { "GET", "/v1/admin/ek", NULL, false, CA_ADMIN_EK_LIST, admin_parse_no_keys, admin_encode_eks },
        { "POST", "/v1/admin/ek", NULL, false, CA_ADMIN_EK_ADD, admin_parse_ek_add, admin_encode_ek },
        { "POST", "/v1/admin/ek/import", NULL, false, CA_ADMIN_EK_IMPORT, admin_parse_ek_import,
          admin_encode_ek_import },
        { "POST", "/v1/admin/ek/", "/remove", true, CA_ADMIN_EK_REMOVE, admin_parse_no_keys, admin_encode_ek_remove },
        { "GET", "/v1/admin/identities", NULL, false, CA_ADMIN_IDENTITY_LIST, admin_parse_no_keys,
          admin_encode_bindings },
        { "POST", "/v1/admin/identities/", "/release", true, CA_ADMIN_IDENTITY_RELEASE, admin_parse_no_keys,
          admin_encode_release },
};

/* Whether path is the route's, and its parameter (into arg). */
static bool path_matches(const admin_path *rt, const char *path, char *arg, size_t size) {
        size_t plen = strlen(rt->prefix), len = strlen(path), slen, alen;

        if (!rt->suffix)
                return strcmp(path, rt->prefix) == 0;
        slen = strlen(rt->suffix);
        if (len <= plen + slen || strncmp(path, rt->prefix, plen) != 0 || strcmp(path + len - slen, rt->suffix) != 0)
                return false;
        alen = len - plen - slen;
        if (alen >= size || (!rt->slashes && memchr(path + plen, '/', alen)))
                return false;
        memcpy(arg, path + plen, alen);
        arg[alen] = '\0';
        return true;
}

/* ---------- the body ---------- */

static int parse_body(admin_call *c) {
        if (c->req->body_len == 0) {
                c->body = json_object_new_object();
                return c->body ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
        }
        return json_read(c->req->body, c->req->body_len, BODY_DEPTH, 0, "the request body", &c->body);
}

/* ---------- one call ---------- */

/* What the route reads of the call, into c->args: -hwid_err for the core
 * to refuse after authentication. */
static int parse(admin_call *c, const admin_path *rt) {
        int r = parse_body(c);

        return r < 0 || !rt->parse ? r : rt->parse(c);
}

/* The CA host's administrator is told the core's refusal as it is: the
 * core gave it the whole detail (a store's too, which others read in the
 * log). */
static void respond_refusal(http_response *resp, const ca_result *res, const char *host_admin, int64_t now) {
        int r = res->error < 0 ? res->error : -HWID_E_INTERNAL;

        if (host_admin)
                http_error(resp, hwid_err_http_status(r), hwid_err_slug(r), res->message);
        else
                door_respond_refusal(resp, res, NULL, now);
}

static void serve(ca_service *ca, const char *host_admin, const admin_path *rt, const char *arg,
                  const http_request *req, http_response *resp) {
        admin_call c = { .req = req, .resp = resp, .now = (int64_t) time(NULL),
                         .args = { .op = rt->op, .arg = arg } };
        ca_request in = { .op = CA_OP_ADMIN, .now = c.now, .peer = door_peer(req), .admin = &c.args,
                          .host_admin = host_admin };
        ca_result res;
        int r = parse(&c, rt);

        if (r < 0)
                ca_request_refuse(&in, r);
        if (ca_call(ca, &in, &res) != CA_DONE)
                respond_refusal(resp, &res, host_admin, c.now);
        else if ((r = rt->encode(&c, &res.admin)) < 0) {
                ca_service_count_error(ca, "request", r);
                http_respond_error(resp, r);
        }
        ca_result_clear(&res);
        json_object_put(c.answer);
        json_object_put(c.body);
        free(c.identity);
}

static bool route(ca_service *ca, const char *host_admin, const http_request *req, http_response *resp) {
        char arg[256];
        bool path_known = false;

        if (strncmp(req->path, ADMIN_PREFIX, strlen(ADMIN_PREFIX)) != 0)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(routes); i++) {
                if (!path_matches(&routes[i], req->path, arg, sizeof(arg)))
                        continue;
                path_known = true;
                if (strcmp(req->method, routes[i].method) != 0)
                        continue;
                serve(ca, host_admin, &routes[i], routes[i].suffix ? arg : NULL, req, resp);
                return true;
        }
        if (path_known)
                http_error(resp, 405, "method_not_allowed", "this admin endpoint does not take that method");
        else
                http_error(resp, 404, "not_found", "no such admin endpoint");
        return true;
}

bool admin_route(ca_service *ca, const http_request *req, http_response *resp) {
        return route(ca, NULL, req, resp);
}

bool admin_route_host(ca_service *ca, const char *actor, const http_request *req, http_response *resp) {
        return route(ca, actor, req, resp);
}
