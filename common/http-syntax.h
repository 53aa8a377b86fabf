/* What HTTP/1.1 allows in a request that libmicrohttpd 0.9 lets through:
 * checks on the strings it hands over, shared by hwidd's transport
 * (service/http/) and the agent's workload sockets (provisioning/).
 * libmicrohttpd keeps a field whose name ends in whitespace
 * ("Content-Length : 5") under that name, so it frames the body as if
 * there were no length (the body is read as the next request); it glues a
 * folded line (obs-fold, RFC 9112 5.2) to the field's NAME, so that
 * "Content-Length:" folded onto " 41" is a field named "Content-Length41"
 * with no value (the same); it decodes "%00" in the target to a NUL that
 * ends the string ("/v1/token%00x" is routed as "/v1/token"). */
#pragma once

#include <stdbool.h>

/* A field name is a token (RFC 9110 5.1): no whitespace (RFC 9112 5.1:
 * none between the name and the colon), no separator, not empty; and not
 * Content-Length or Transfer-Encoding with more after it (what
 * libmicrohttpd makes of either folded onto a second line). */
bool http_field_name_ok(const char *name);
/* A field value holds no control character but HTAB (RFC 9110 5.5). */
bool http_field_value_ok(const char *value);
/* The raw target (still percent-encoded) holds "%00" or a control
 * character. */
bool http_target_bad(const char *raw);

/* How long the body is, read one way only (RFC 9112 6.3): a proxy in front
 * that read it another way would pass a second request hidden in the
 * first (request smuggling).  Fed every field of a request. */
typedef struct http_framing {
        unsigned lengths;       /* Content-Length fields */
        bool lengths_differ;
        const char *length;     /* the first one's value (borrowed) */
        unsigned encodings;     /* Transfer-Encoding fields */
        unsigned chunked;       /* "chunked" codings among them */
        bool unknown_coding;    /* a coding other than chunked */
} http_framing;

void http_framing_add(http_framing *f, const char *name, const char *value);
/* 0 if the framing is sound; else the status to answer (and close) with:
 * 400, or 501 for a transfer coding other than chunked; *ret_msg says
 * why.  http11: the request is HTTP/1.1 (Transfer-Encoding needs it). */
int http_framing_check(const http_framing *f, bool http11, const char **ret_msg);
