/* The responses every handler sends, made the same way whoever sends
 * them: JSON errors {"error": slug, "message"} (http.h), PEM and JSON
 * bodies, and Retry-After.  Below the handlers: it knows nothing of CAs;
 * what a CA counts about an error (ca_respond_error()) is the CA's. */
#include <stdio.h>
#include <time.h>

#include <json-c/json.h>

#include "error.h"
#include "http.h"
#include "json-read.h"

#define HTTP_ERROR_MESSAGE_MAX 1024 /* longer messages are cut */

static void set_static_error(http_response *resp) {
        buf_reset(&resp->body);
        (void) buf_append_str(&resp->body, "{\"error\":\"internal\",\"message\":\"internal error\"}");
}

void http_error(http_response *resp, int status, const char *slug, const char *message) {
        char msg[HTTP_ERROR_MESSAGE_MAX + 1];
        json_object *o;
        const char *s;

        resp->status = status;
        resp->content_type = "application/json";
        resp->error = slug ? slug : "internal";
        if (resp->body.max == 0)
                resp->body.max = HTTP_ERROR_MESSAGE_MAX * 8;
        snprintf(msg, sizeof(msg), "%s", message ? message : "");
        o = json_object_new_object();
        if (!o || json_object_object_add(o, "error", json_object_new_string(slug ? slug : "internal")) < 0 ||
            json_object_object_add(o, "message", json_object_new_string(msg)) < 0) {
                json_object_put(o);
                set_static_error(resp);
                return;
        }
        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        buf_reset(&resp->body);
        if (!s || buf_append_str(&resp->body, s) < 0)
                set_static_error(resp);
        json_object_put(o);
}

void http_error_from(http_response *resp, int r) {
        if (r >= 0)
                r = -HWID_E_INTERNAL;
        http_error(resp, hwid_err_http_status(r), hwid_err_slug(r), hwid_public_message(r));
}

void http_respond_pem(http_response *resp, int status, const char *pem) {
        resp->status = status;
        resp->content_type = "application/x-pem-file";
        if (buf_append_str(&resp->body, pem) < 0)
                http_error_from(resp, -HWID_E_NOMEM);
}

void http_respond_json(http_response *resp, int status, const char *json) {
        resp->status = status;
        resp->content_type = "application/json";
        if (buf_append_str(&resp->body, json) < 0 || buf_append_str(&resp->body, "\n") < 0)
                http_error_from(resp, -HWID_E_NOMEM);
}

void http_respond_text(http_response *resp, int status, const char *slug, const char *text) {
        resp->status = status;
        resp->error = slug;
        resp->content_type = "text/plain; charset=utf-8";
        buf_reset(&resp->body);
        if (buf_printf(&resp->body, "%s\n", text) < 0)
                http_error_from(resp, -HWID_E_NOMEM);
}

/* "Not yet valid" tells the client our clock, so that a device can tell
 * its clock from ours: {"error", "message", "server_time": Unix seconds}. */
static void respond_with_time(http_response *resp, int r) {
        json_object *o = json_object_new_object();
        const char *s;

        json_object_object_add(o, "error", json_object_new_string(hwid_err_slug(r)));
        json_object_object_add(o, "message", json_object_new_string(hwid_strerror(r)));
        json_object_object_add(o, "server_time", json_object_new_int64((int64_t) time(NULL)));
        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        resp->status = hwid_err_http_status(r);
        resp->content_type = "application/json";
        resp->error = hwid_err_slug(r);
        if (!s || buf_append_str(&resp->body, s) < 0)
                http_error_from(resp, r);
        json_object_put(o);
}

void http_respond_error(http_response *resp, int r) {
        buf_reset(&resp->body);
        if (r == -HWID_E_NOT_YET_VALID)
                respond_with_time(resp, r);
        else
                http_error_from(resp, r);
}

json_object *http_response_json(const http_response *resp) {
        json_object *o = NULL;

        return json_read(resp->body.data, resp->body.len, 8, 0, "the answer", &o) >= 0 ? o : NULL;
}

void http_error_retry_at(http_response *resp, const char *key, int64_t at, int64_t now) {
        json_object *o = http_response_json(resp);
        const char *s;

        resp->retry_after = at > now ? at - now : 1;
        if (!o || !json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                return; /* not a JSON error body: Retry-After alone */
        }
        json_object_object_add(o, key, json_object_new_int64(at));
        s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (s) {
                buf_reset(&resp->body);
                if (buf_append_str(&resp->body, s) < 0)
                        http_error_from(resp, -HWID_E_NOMEM);
        }
        json_object_put(o);
}
