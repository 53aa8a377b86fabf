/* What libmicrohttpd 0.9 lets through and HTTP does not, checked once a
 * request's headers are in, before its body is read: the size of the
 * header block and how many fields it has, the field names and values
 * (http-syntax.h), the Host rules, a NUL or control character in the
 * target, and how long the body is (message framing). */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>

#include "http-internal.h"
#include "http-syntax.h"

static enum MHD_Result sum_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        size_t *sum = cls;

        *sum += (key ? strlen(key) : 0) + (value ? strlen(value) : 0) + 4; /* ": " and CRLF */
        return MHD_YES;
}

size_t http_check_header_size(struct MHD_Connection *conn, const char *url, const char *query) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
        size_t n = strlen(url) + (query ? strlen(query) : 0);

        /* As received: the request line, the fields with their
         * whitespace, every CRLF.  (Only a header block not complete yet
         * has no size: then what the fields hold.) */
        if (ci)
                return ci->header_size;
        MHD_get_connection_values(conn, MHD_HEADER_KIND, sum_header, &n);
        return n;
}

unsigned http_check_fields(struct MHD_Connection *conn) {
        int n = MHD_get_connection_values(conn, HTTP_FIELD_KINDS, NULL, NULL);

        return n > 0 ? (unsigned) n : 0;
}

bool http_check_header_within(struct MHD_Connection *conn, size_t max) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);

        return ci && ci->header_size <= max;
}

typedef struct fields {
        unsigned hosts;
        const char *problem;
} fields;

static enum MHD_Result check_field(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        fields *f = cls;

        if (!http_field_name_ok(key))
                f->problem = "a header field name is not a token (RFC 9112 5.1: no whitespace before the colon)";
        else if (!http_field_value_ok(value))
                f->problem = "a header field value holds a control character";
        else if (strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
                f->hosts++;
        return f->problem ? MHD_NO : MHD_YES;
}

/* What MHD 0.9 lets through and HTTP does not: a field name that is not a
 * token (MHD keeps "Content-Length " as a name of its own, and frames
 * the body without it), a control character in a value; an HTTP/1.1
 * request has exactly one Host header, an HTTP/1.0 one at most (RFC 9112
 * 3.2); and a target never holds a NUL, encoded or not (MHD decodes the
 * path in place, so "/ca%00x" would be routed as "/ca").  NULL if none
 * of that. */
const char *http_check_request(struct MHD_Connection *conn, const char *version, bool bad_target) {
        fields f = { 0 };

        MHD_get_connection_values(conn, MHD_HEADER_KIND, check_field, &f);
        if (f.problem)
                return f.problem;
        if (f.hosts > 1)
                return "the request has more than one Host header";
        if (f.hosts == 0 && version && strcmp(version, MHD_HTTP_VERSION_1_1) == 0)
                return "an HTTP/1.1 request needs a Host header";
        if (bad_target)
                return "the request target holds a NUL or a control character";
        return NULL;
}

static enum MHD_Result add_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        http_framing_add(cls, key, value);
        return MHD_YES;
}

int http_check_framing(struct MHD_Connection *conn, const char *version, const char **ret_msg) {
        http_framing f = { 0 };

        MHD_get_connection_values(conn, MHD_HEADER_KIND, add_framing, &f);
        return http_framing_check(&f, version && strcmp(version, MHD_HTTP_VERSION_1_1) == 0, ret_msg);
}

bool http_check_target_bad(const char *uri) {
        return http_target_bad(uri);
}

bool http_check_expects_continue(struct MHD_Connection *conn) {
        const char *e = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);

        return e && strcasecmp(e, "100-continue") == 0;
}
