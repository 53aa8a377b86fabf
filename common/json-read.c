/* json-read.c — json_read() (json-read.h): json-c reads strictly, jansson
 * is asked whether an object names a member twice. */
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "error.h"
#include "json-read-dup.h"
#include "json-read.h"

static bool all_space(const char *s, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (!strchr(" \t\r\n", s[i]))
                        return false;
        return true;
}

/* json-c's strict reading: the value, or NULL. */
static json_object *strict_parse(const char *text, size_t len, unsigned max_depth, unsigned flags) {
        json_tokener *tok = json_tokener_new_ex((int) max_depth);
        json_object *o = NULL;
        size_t end;

        if (!tok)
                return NULL;
        json_tokener_set_flags(tok, JSON_TOKENER_STRICT | JSON_TOKENER_VALIDATE_UTF8);
        o = json_tokener_parse_ex(tok, text, (int) len);
        end = o ? json_tokener_get_parse_end(tok) : 0;
        json_tokener_free(tok);
        /* json-c may count white space after the value as read. */
        if (o && (!all_space(text + end, len - end) ||
                  ((flags & JSON_READ_NO_TRAILING_SPACE) && strchr(" \t\r\n", text[len - 1])))) {
                json_object_put(o);
                o = NULL;
        }
        return o;
}

int json_read(const void *text, size_t len, unsigned max_depth, unsigned flags, const char *what,
              json_object **ret) {
        json_object *o;
        int r;

        o = text && len > 0 && len <= INT32_MAX && max_depth > 0 && max_depth <= 64 && !memchr(text, '\0', len)
                ? strict_parse(text, len, max_depth, flags) : NULL;
        if (!o || !json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                return hwid_fail(HWID_E_INVALID, "%s is not one JSON object", what);
        }
        if ((r = json_read_no_duplicates(text, len, what)) < 0) {
                json_object_put(o);
                return r;
        }
        *ret = o;
        return 0;
}
