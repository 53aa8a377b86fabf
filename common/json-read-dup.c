/* json-read-dup.c — jansson's half of json_read() (json-read.h): whether a
 * text names a member of an object twice.  Only asked about texts json-c
 * already read strictly, so the depth is bounded before jansson recurses. */
#include <jansson.h>

#include "error.h"
#include "json-read-dup.h"

int json_read_no_duplicates(const char *text, size_t len, const char *what) {
        json_error_t e;
        json_t *v = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &e);

        if (v) {
                json_decref(v);
                return 0;
        }
        if (json_error_code(&e) == json_error_out_of_memory)
                return hwid_fail(HWID_E_NOMEM, NULL);
        return hwid_fail(HWID_E_INVALID, "%s is not valid JSON: %s (line %d, column %d)", what,
                         json_error_code(&e) == json_error_duplicate_key ? "an object names a member twice" : e.text,
                         e.line, e.column);
}
