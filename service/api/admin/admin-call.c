/* What the admin door reads of a call -- the body's fields, type
 * checked, and query parameters -- and how it answers (admin-internal.h).
 * Below the parsers, the encoders and the router (admin-api.c), which
 * call it. */
#include <string.h>

#include <microhttpd.h>

#include "admin-internal.h"
#include "error.h"

int admin_body_keys(const admin_call *c, const char *const *allowed) {
        json_object_object_foreach(c->body, key, val) {
                bool known = false;

                (void) val;
                for (size_t i = 0; allowed[i] && !known; i++)
                        known = strcmp(key, allowed[i]) == 0;
                if (!known)
                        return hwid_fail(HWID_E_INVALID, "unknown field \"%.64s\" in the request body", key);
        }
        return 0;
}

int admin_body_str(const admin_call *c, const char *key, size_t max, const char **ret) {
        json_object *v;
        const char *s;

        if (!json_object_object_get_ex(c->body, key, &v) || !v)
                return 0;
        if (!json_object_is_type(v, json_type_string))
                return hwid_fail(HWID_E_INVALID, "\"%s\" must be a string", key);
        s = json_object_get_string(v);
        if ((size_t) json_object_get_string_len(v) != strlen(s) || strlen(s) > max || !s[0])
                return hwid_fail(HWID_E_INVALID, "\"%s\" must be 1 to %zu bytes without NUL", key, max);
        for (const char *p = s; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f)
                        return hwid_fail(HWID_E_INVALID, "\"%s\" holds a control character", key);
        *ret = s;
        return 0;
}

int admin_body_int(const admin_call *c, const char *key, int64_t min, int64_t max, int64_t *ret) {
        json_object *v;
        int64_t n;

        if (!json_object_object_get_ex(c->body, key, &v) || !v)
                return 0;
        if (!json_object_is_type(v, json_type_int))
                return hwid_fail(HWID_E_INVALID, "\"%s\" must be an integer", key);
        n = json_object_get_int64(v);
        if (n < min || n > max)
                return hwid_fail(HWID_E_INVALID, "\"%s\" must be %lld to %lld", key, (long long) min, (long long) max);
        *ret = n;
        return 0;
}

int admin_query(const admin_call *c, const char *key, size_t max, char **ret) {
        _cleanup_free_ char *found = NULL;
        size_t klen = strlen(key);

        for (const char *p = c->req->query; p && *p; p += strcspn(p, "&"), p += *p == '&') {
                size_t n = strcspn(p, "&");

                if (n <= klen || strncmp(p, key, klen) != 0 || p[klen] != '=')
                        continue;
                if (n - klen - 1 > max * 3)
                        return hwid_fail(HWID_E_INVALID, "query parameter %s is too long", key);
                free(found);
                if (!(found = strndup(p + klen + 1, n - klen - 1)))
                        return hwid_fail(HWID_E_NOMEM, NULL);
                MHD_http_unescape(found);
                if (strlen(found) > max || !found[0])
                        return hwid_fail(HWID_E_INVALID, "query parameter %s must be 1 to %zu bytes", key, max);
        }
        *ret = TAKE_PTR(found);
        return 0;
}

json_object *admin_list_object(const char *key, json_object **ret_array) {
        json_object *o = json_object_new_object(), *a = json_object_new_array();

        if (!o || !a || json_object_object_add(o, key, a) < 0) {
                json_object_put(o);
                json_object_put(a);
                return NULL;
        }
        *ret_array = a;
        return o;
}

int admin_respond(admin_call *c, int status, json_object *o) {
        const char *s = o ? json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)
                          : NULL;
        int r = 0;

        buf_reset(&c->resp->body);
        /* One allocation for the answer, wiped when it has been sent. */
        c->resp->sensitive = true;
        if (!s || buf_reserve(&c->resp->body, strlen(s) + 1) < 0 || buf_append_str(&c->resp->body, s) < 0 ||
            buf_append_str(&c->resp->body, "\n") < 0)
                r = hwid_fail(HWID_E_NOMEM, "cannot build the answer");
        /* The answer may hold token secrets: the serialization is wiped. */
        if (s)
                explicit_bzero((char *) s, strlen(s));
        json_object_put(o);
        if (r < 0)
                return r;
        c->resp->status = status;
        c->resp->content_type = "application/json";
        return 0;
}
