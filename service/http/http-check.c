/* What libmicrohttpd 0.9 lets through and HTTP does not, checked once a
 * request's headers are in, before its body is read: the size of the
 * header block, the Host rules, a NUL or control character in the target,
 * and how long the body is (message framing). */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include <microhttpd.h>

#include "http-internal.h"

static enum MHD_Result sum_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        size_t *sum = cls;

        *sum += (key ? strlen(key) : 0) + (value ? strlen(value) : 0) + 4; /* ": " and CRLF */
        return MHD_YES;
}

size_t http_check_header_size(struct MHD_Connection *conn, const char *url, const char *query) {
        size_t n = strlen(url) + (query ? strlen(query) : 0);

        MHD_get_connection_values(conn, MHD_HEADER_KIND, sum_header, &n);
        return n;
}

static enum MHD_Result count_host(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        if (key && strcasecmp(key, MHD_HTTP_HEADER_HOST) == 0)
                (*(unsigned *) cls)++;
        return MHD_YES;
}

/* What MHD 0.9 lets through and HTTP does not: an HTTP/1.1 request has
 * exactly one Host header, an HTTP/1.0 one at most (RFC 9112 3.2); and a
 * target never holds a NUL, encoded or not (MHD decodes the path in place,
 * so "/ca%00x" would be routed as "/ca").  NULL if none of that. */
const char *http_check_request(struct MHD_Connection *conn, const char *version, bool bad_target) {
        unsigned hosts = 0;

        MHD_get_connection_values(conn, MHD_HEADER_KIND, count_host, &hosts);
        if (hosts > 1)
                return "the request has more than one Host header";
        if (hosts == 0 && version && strcmp(version, MHD_HTTP_VERSION_1_1) == 0)
                return "an HTTP/1.1 request needs a Host header";
        if (bad_target)
                return "the request target holds a NUL or a control character";
        return NULL;
}

typedef struct framing {
        unsigned lengths;       /* Content-Length fields */
        bool lengths_differ;
        const char *length;     /* the first one's value */
        unsigned encodings;     /* Transfer-Encoding fields */
        unsigned chunked;       /* "chunked" codings among them */
        bool unknown_coding;    /* a coding other than chunked */
} framing;

/* One Transfer-Encoding field: a comma-separated list of codings. */
static void add_codings(framing *f, const char *v) {
        while (*v) {
                size_t n;

                v += strspn(v, " \t,");
                n = strcspn(v, ",");
                while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
                        n--;
                if (n == 7 && strncasecmp(v, "chunked", 7) == 0)
                        f->chunked++;
                else if (n > 0)
                        f->unknown_coding = true;
                v += strcspn(v, ",");
        }
}

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key, const char *value) {
        framing *f = cls;

        if (!key || !value)
                return MHD_YES;
        if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0) {
                if (f->lengths++ == 0)
                        f->length = value;
                else if (strcmp(f->length, value) != 0)
                        f->lengths_differ = true;
        } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
                f->encodings++;
                add_codings(f, value);
        }
        return MHD_YES;
}

/* How long the body is must be read one way only (RFC 9112 6.3): a proxy
 * in front that reads it another way would pass a second request hidden
 * in the first (request smuggling).  Returns the status to answer (and
 * close) with, 0 if the framing is sound; *ret_msg says why. */
int http_check_framing(struct MHD_Connection *conn, const char *version, const char **ret_msg) {
        framing f = { 0 };

        MHD_get_connection_values(conn, MHD_HEADER_KIND, count_framing, &f);
        *ret_msg = NULL;
        if (f.lengths_differ)
                *ret_msg = "the request has Content-Length fields that differ";
        else if (f.lengths > 0 && f.encodings > 0)
                *ret_msg = "the request has both Content-Length and Transfer-Encoding";
        else if (f.encodings > 0 && version && strcmp(version, MHD_HTTP_VERSION_1_1) != 0)
                *ret_msg = "Transfer-Encoding needs HTTP/1.1";
        else if (f.unknown_coding) {
                *ret_msg = "the only transfer coding served is chunked";
                return 501;
        } else if (f.chunked > 1)
                *ret_msg = "the request is chunked more than once";
        return *ret_msg ? 400 : 0;
}

/* The raw target (still percent-encoded): "%00" or a control character. */
bool http_check_target_bad(const char *uri) {
        for (const char *p = uri; *p; p++)
                if ((unsigned char) *p < 0x20 || *p == 0x7f || (p[0] == '%' && p[1] == '0' && p[2] == '0'))
                        return true;
        return false;
}

bool http_check_expects_continue(struct MHD_Connection *conn) {
        const char *e = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_EXPECT);

        return e && strcasecmp(e, "100-continue") == 0;
}
