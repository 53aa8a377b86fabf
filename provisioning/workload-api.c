/* The requests on a workload socket (see workload.h), JSON answers:
 *
 *   GET /v1/certificate         200 {identity, generation, not_before, not_after,
 *                                    certificate, chain, ca}
 *   GET /v1/token?audience=AUD  200 {token, audience, issued_at, expires_at}
 *
 * and errors as hwidd's: {"error": slug, "message": text}: 403 for a
 * caller outside the allow-lists (before anything else is looked at) or
 * an audience the socket does not serve, 400 for a malformed request, 404
 * and 405, 503 when the device cannot sign (no identity, expired, marked
 * for bootstrap, the TPM unreachable: nothing the caller can fix).
 *
 * What libmicrohttpd lets through and HTTP does not (http-syntax.h) is
 * 400 as soon as the headers are in, and the connection closed: a NUL in
 * the target ("audience=inventory%00x" would be read as "inventory"), a
 * field name that is not a token ("Content-Length : 5" would leave the
 * body unframed, read as the next request), a control character in a
 * field value, a body whose length could be read two ways. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>
#include <openssl/x509.h>

#include "device.h"
#include "error.h"
#include "http-syntax.h"
#include "jws.h"
#include "ossl-util.h"
#include "workload-internal.h"
#include "x509-util.h"

/* What *req_cls points to: whether the raw target is sound (api_begin()),
 * then once the headers are in, and once a body came. */
static char target_sound, target_bad, request_seen, request_with_body;

/* close: end the connection after the answer. */
static enum MHD_Result respond_close(struct MHD_Connection *conn, unsigned status, json_object *o, bool close) {
        const char *text = o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
                             : NULL;
        size_t len = text ? strlen(text) : 0;
        char *body = text ? malloc(len + 2) : NULL;
        struct MHD_Response *resp = NULL;
        enum MHD_Result ret = MHD_NO;

        if (body) {
                memcpy(body, text, len);
                memcpy(body + len, "\n", 2);
                resp = MHD_create_response_from_buffer(len + 1, body, MHD_RESPMEM_MUST_FREE);
        }
        json_object_put(o);
        if (!resp) {
                free(body);
                return MHD_NO; /* out of memory: the connection is closed */
        }
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
        if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET");
        if (close)
                MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
        ret = MHD_queue_response(conn, status, resp);
        MHD_destroy_response(resp);
        return ret;
}

static enum MHD_Result respond(struct MHD_Connection *conn, unsigned status, json_object *o) {
        return respond_close(conn, status, o, false);
}

/* {"error": slug, "message": the detail of r}. */
static json_object *error_json(int r) {
        json_object *o = json_object_new_object();

        if (o) {
                json_object_object_add(o, "error", json_object_new_string(hwid_err_slug(r)));
                json_object_object_add(o, "message", json_object_new_string(hwid_strerror(r)));
        }
        return o;
}

static enum MHD_Result respond_error(struct MHD_Connection *conn, unsigned status, int r) {
        return respond(conn, status, error_json(r));
}

static enum MHD_Result refuse(struct MHD_Connection *conn, unsigned status, hwid_err code, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static enum MHD_Result refuse(struct MHD_Connection *conn, unsigned status, hwid_err code, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = hwid_failv(code, fmt, ap);
        va_end(ap);
        return respond_error(conn, status, r);
}

/* ---------- the query string ---------- */

typedef struct query {
        const char *audience;
        char other[64];  /* the first parameter that is not audience (or a second audience) */
} query;

static enum MHD_Result on_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        query *q = cls;

        if (strcmp(key, "audience") == 0 && !q->audience)
                q->audience = value ? value : "";
        else if (!q->other[0])
                snprintf(q->other, sizeof(q->other), "%s", key[0] ? key : "(empty)");
        return MHD_YES;
}

/* ---------- GET /v1/token ---------- */

static enum MHD_Result answer_token(wl_socket *ws, struct MHD_Connection *conn, const query *q) {
        wl_token t = { 0 };
        json_object *o;
        int r;

        if (q->other[0])
                return refuse(conn, MHD_HTTP_BAD_REQUEST, HWID_E_INVALID,
                              "unknown or repeated parameter '%s' (GET /v1/token?audience=AUD)", q->other);
        if (!q->audience || !q->audience[0])
                return refuse(conn, MHD_HTTP_BAD_REQUEST, HWID_E_INVALID,
                              "no audience: GET /v1/token?audience=AUD");
        r = wl_tokens_get(wl_socket_tokens(ws), q->audience, &t);
        if (r == -HWID_E_FORBIDDEN)
                return respond_error(conn, MHD_HTTP_FORBIDDEN, r);
        if (r < 0)
                return respond_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, r);
        if ((o = json_object_new_object())) {
                json_object_object_add(o, "token", json_object_new_string(t.token));
                json_object_object_add(o, "audience", json_object_new_string(q->audience));
                json_object_object_add(o, "issued_at", json_object_new_int64(t.iat));
                json_object_object_add(o, "expires_at", json_object_new_int64(t.exp));
        }
        wl_token_clear(&t);
        return respond(conn, MHD_HTTP_OK, o);
}

/* ---------- GET /v1/certificate ---------- */

/* The certificates of chain from index from on, as PEM. */
static int chain_pem(STACK_OF(X509) *chain, int from, char **ret) {
        _cleanup_free_ char *all = strdup("");
        int r;

        for (int i = from; all && i < sk_X509_num(chain); i++) {
                _cleanup_free_ char *pem = NULL;
                char *more = NULL;
                if ((r = cert_to_pem(sk_X509_value(chain, i), &pem)) < 0)
                        return r;
                if (asprintf(&more, "%s%s", all, pem) < 0)
                        more = NULL;
                free(all);
                all = more;
        }
        if (!all)
                return hwid_fail(HWID_E_NOMEM, NULL);
        *ret = TAKE_PTR(all);
        return 0;
}

static int certificate_json(const device_state *s, STACK_OF(X509) *chain, json_object **ret) {
        _cleanup_free_ char *leaf = NULL, *above = NULL;
        json_object *o;
        int r;

        if ((r = cert_to_pem(sk_X509_value(chain, 0), &leaf)) < 0 || (r = chain_pem(chain, 1, &above)) < 0)
                return r;
        if (!(o = json_object_new_object()))
                return hwid_fail(HWID_E_NOMEM, NULL);
        json_object_object_add(o, "identity", json_object_new_string(s->identity));
        json_object_object_add(o, "generation", json_object_new_int(s->generation));
        json_object_object_add(o, "not_before", json_object_new_int64(s->not_before));
        json_object_object_add(o, "not_after", json_object_new_int64(s->not_after));
        json_object_object_add(o, "certificate", json_object_new_string(leaf));
        json_object_object_add(o, "chain", json_object_new_string(above));
        json_object_object_add(o, "ca", json_object_new_string(s->ca_pem));
        *ret = o;
        return 0;
}

static enum MHD_Result answer_certificate(wl_socket *ws, struct MHD_Connection *conn, const query *q) {
        _cleanup_(sk_X509_pop_freep) STACK_OF(X509) *chain = NULL;
        json_object *o = NULL;
        device_state s;
        int r;

        if (q->other[0] || q->audience)
                return refuse(conn, MHD_HTTP_BAD_REQUEST, HWID_E_INVALID, "GET /v1/certificate takes no parameters");
        if ((r = jws_device_load(wl_socket_opts(ws)->dir, (int64_t) time(NULL), &s, &chain)) < 0)
                return respond_error(conn, MHD_HTTP_SERVICE_UNAVAILABLE, r);
        r = certificate_json(&s, chain, &o);
        device_state_clear(&s);
        if (r < 0)
                return respond_error(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, r);
        return respond(conn, MHD_HTTP_OK, o);
}

/* ---------- routing ---------- */

/* 0 if the caller may use the socket; else the status to refuse it with,
 * and *ret_r its error. */
static unsigned caller_refused(wl_socket *ws, struct MHD_Connection *conn, int *ret_r) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
        const wl_peer *p = ci ? ci->socket_context : NULL;

        if (!p) {
                *ret_r = hwid_fail(HWID_E_FORBIDDEN, "the caller's credentials are unknown");
                return MHD_HTTP_FORBIDDEN;
        }
        if (p->over_share) { /* shut down as it came; a request read before that */
                *ret_r = hwid_fail(HWID_E_RATE_LIMITED, "uid %u has its share of this socket's connections open",
                                   (unsigned) p->uid);
                return MHD_HTTP_TOO_MANY_REQUESTS;
        }
        if (!wl_peer_allowed(wl_socket_conf(ws), p)) {
                wl_socket_log_refusal(ws, p, "not in allow_uids or allow_gids");
                *ret_r = hwid_fail(HWID_E_FORBIDDEN, "uid %u (gid %u) may not use this socket", (unsigned) p->uid,
                                   (unsigned) p->gid);
                return MHD_HTTP_FORBIDDEN;
        }
        return 0;
}

static enum MHD_Result answer(wl_socket *ws, struct MHD_Connection *conn, const char *url, const char *method,
                              bool with_body) {
        query q = { 0 };
        unsigned status;
        int r;

        if ((status = caller_refused(ws, conn, &r)))
                return respond_error(conn, status, r);
        if (strcmp(url, "/v1/token") != 0 && strcmp(url, "/v1/certificate") != 0)
                return refuse(conn, MHD_HTTP_NOT_FOUND, HWID_E_NOT_FOUND,
                              "no such resource: GET /v1/token?audience=AUD or GET /v1/certificate");
        if (strcmp(method, MHD_HTTP_METHOD_GET) != 0)
                return refuse(conn, MHD_HTTP_METHOD_NOT_ALLOWED, HWID_E_INVALID, "%s: only GET", url);
        if (with_body)
                return refuse(conn, MHD_HTTP_BAD_REQUEST, HWID_E_INVALID, "a GET request has no body");
        MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, on_arg, &q);
        if (strcmp(url, "/v1/token") == 0)
                return answer_token(ws, conn, &q);
        return answer_certificate(ws, conn, &q);
}

/* ---------- what HTTP does not allow ---------- */

/* Each request's raw target, before libmicrohttpd decodes "%00" into a
 * NUL that ends its strings early. */
static void *api_begin(void *cls, const char *uri, struct MHD_Connection *conn) {
        return !uri || http_target_bad(uri) ? &target_bad : &target_sound;
}

typedef struct fields {
        http_framing framing;
        const char *problem;
} fields;

static enum MHD_Result check_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        fields *f = cls;

        if (!http_field_name_ok(key))
                f->problem = "a header field name is not a token (no whitespace before the colon)";
        else if (!http_field_value_ok(value))
                f->problem = "a header field value holds a control character";
        http_framing_add(&f->framing, key, value);
        return f->problem ? MHD_NO : MHD_YES;
}

/* NULL if the request's target and fields are what HTTP allows, else why not. */
static const char *malformed(struct MHD_Connection *conn, const char *version, bool bad_target) {
        fields f = { 0 };
        const char *why = NULL;

        if (bad_target)
                return "the request target holds a NUL or a control character";
        MHD_get_connection_values(conn, MHD_HEADER_KIND, check_field, &f);
        if (f.problem)
                return f.problem;
        (void) http_framing_check(&f.framing, version && strcmp(version, MHD_HTTP_VERSION_1_1) == 0, &why);
        return why;
}

/* Refused as soon as the headers are in, and the connection closed (what
 * follows on it may not be what it seems): 400, unless the caller may not
 * use the socket at all (its refusal comes first). */
static enum MHD_Result refuse_malformed(wl_socket *ws, struct MHD_Connection *conn, const char *why) {
        unsigned status;
        int r;

        if (!(status = caller_refused(ws, conn, &r))) {
                status = MHD_HTTP_BAD_REQUEST;
                r = hwid_fail(HWID_E_INVALID, "%s", why);
        }
        return respond_close(conn, status, error_json(r), true);
}

/* libmicrohttpd's access handler; cls is the wl_socket. */
static enum MHD_Result api_access(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **req_cls) {
        const char *why;

        if (*req_cls != &request_seen && *req_cls != &request_with_body) { /* the headers are in */
                why = malformed(conn, version, *req_cls != &target_sound);
                *req_cls = &request_seen;
                if (why)
                        return refuse_malformed(cls, conn, why);
                return MHD_YES; /* wait for the end of the request */
        }
        if (*upload_data_size) { /* a body: read and dropped, refused at its end */
                *upload_data_size = 0;
                *req_cls = &request_with_body;
                return MHD_YES;
        }
        return answer(cls, conn, url, method, *req_cls == &request_with_body);
}

int workload_server_start(const workload_opts *o, workload_server **ret) {
        return wl_server_start(o, api_access, api_begin, ret);
}
