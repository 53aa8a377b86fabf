/* The admin API: /v1/admin/... over mutual TLS, for the holders of
 * certificates hwid issued under operator profiles (role admin, approver,
 * provisioner or auditor, as recorded with the certificate).
 *
 * Per request, one way: authenticate the client certificate against our
 * records -> the authorizer chain decides the action for the recorded
 * role (policy/roles.c) -> parse the body -> the handler -> an audit
 * record naming the actor, whatever the outcome. */
#include <string.h>
#include <time.h>

#include "admin-internal.h"
#include "error.h"
#include "json-read.h"
#include "log.h"

#define ADMIN_PREFIX "/v1/admin/"
#define BODY_DEPTH 4

typedef struct admin_route {
        const char *method;
        const char *prefix;  /* the whole path, or what comes before the parameter */
        const char *suffix;  /* NULL: no parameter; else what follows it ("" at the end) */
        bool slashes;        /* the parameter may hold '/' (an identity; the suffix delimits it) */
        policy_action action;
        admin_fn fn;
} admin_route;

static const admin_route routes[] = {
        { "GET", "/v1/admin/tokens", NULL, false, ACTION_TOKEN_LIST, admin_token_list },
        { "POST", "/v1/admin/tokens", NULL, false, ACTION_TOKEN_CREATE, admin_token_create },
        { "POST", "/v1/admin/tokens/", "/revoke", false, ACTION_TOKEN_REVOKE, admin_token_revoke },
        { "GET", "/v1/admin/requests", NULL, false, ACTION_REQUEST_LIST, admin_request_list },
        { "POST", "/v1/admin/requests/", "/approve", false, ACTION_REQUEST_APPROVE, admin_request_approve },
        { "POST", "/v1/admin/requests/", "/deny", false, ACTION_REQUEST_DENY, admin_request_deny },
        { "GET", "/v1/admin/certificates", NULL, false, ACTION_CERT_LIST, admin_cert_list },
        { "GET", "/v1/admin/certificates/", "", false, ACTION_CERT_SHOW, admin_cert_show },
        { "POST", "/v1/admin/certificates/", "/revoke", false, ACTION_CERT_REVOKE, admin_cert_revoke },
        { "POST", "/v1/admin/identities/", "/revoke", true, ACTION_CERT_REVOKE, admin_identity_revoke },
        { "GET", "/v1/admin/audit", NULL, false, ACTION_AUDIT_READ, admin_audit_read },
        { "GET", "/v1/admin/ek", NULL, false, ACTION_EK_LIST, admin_ek_list },
        { "POST", "/v1/admin/ek", NULL, false, ACTION_EK_ADD, admin_ek_add },
        { "POST", "/v1/admin/ek/import", NULL, false, ACTION_EK_IMPORT, admin_ek_import },
        { "POST", "/v1/admin/ek/", "/remove", true, ACTION_EK_REMOVE, admin_ek_remove },
        { "GET", "/v1/admin/identities", NULL, false, ACTION_IDENTITY_LIST, admin_identity_list },
        { "POST", "/v1/admin/identities/", "/release", true, ACTION_IDENTITY_RELEASE, admin_identity_release },
};

/* Whether path is the route's, and its parameter (into arg). */
static bool path_matches(const admin_route *rt, const char *path, char *arg, size_t size) {
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

/* An allowed call's record says why it was allowed unless the handler
 * has something more telling. */
static int authorize(admin_call *c) {
        policy_decision d;

        policy_authorize(c->ca->cfg->policy, &c->auth.who, c->action, c->arg, &d);
        snprintf(c->note, sizeof(c->note), "%s", d.reason);
        return ca_decision(c->ca, &c->auth, policy_action_name(c->action), c->target[0] ? c->target : NULL, &d);
}

static void serve(ca_service *ca, const admin_route *rt, const char *arg, const http_request *req,
                  http_response *resp) {
        admin_call c = { .ca = ca, .req = req, .resp = resp, .action = rt->action, .arg = arg,
                         .now = (int64_t) time(NULL) };
        const char *name = policy_action_name(rt->action);
        int r;

        /* What the audit record names: the parameter as sent, but one
         * line of printable text whatever the path held, and of a request
         * id (a poll capability) only its prefix. */
        if (arg && (rt->action == ACTION_REQUEST_APPROVE || rt->action == ACTION_REQUEST_DENY))
                snprintf(c.target, sizeof(c.target), REQUEST_ID_FMT, arg);
        else
                snprintf(c.target, sizeof(c.target), "%s", arg ? arg : "");
        for (char *p = c.target; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        *p = '?';
        r = ca_auth_peer(ca, req, c.now, &c.auth);
        if (r >= 0)
                r = authorize(&c);
        if (r >= 0)
                r = parse_body(&c);
        if (r >= 0)
                r = rt->fn(&c);
        if (r < 0)
                ca_fail_request(ca, &c.auth, name, c.target[0] ? c.target : NULL, resp, r);
        else if (!c.audited)
                ca_audit(ca, c.auth.actor, name, c.target[0] ? c.target : NULL, "allow", c.note[0] ? c.note : NULL,
                         NULL);
        json_object_put(c.body);
        ca_auth_clear(&c.auth);
}

bool ca_admin_route(ca_service *ca, const http_request *req, http_response *resp) {
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
                serve(ca, &routes[i], routes[i].suffix ? arg : NULL, req, resp);
                return true;
        }
        if (path_known)
                http_error(resp, 405, "method_not_allowed", "this admin endpoint does not take that method");
        else
                http_error(resp, 404, "not_found", "no such admin endpoint");
        return true;
}
