/* An http_response as libmicrohttpd's: its body, and the headers every
 * answer carries (Content-Type, no-store unless cacheable, nosniff) or
 * that the handler asked for.  A header value the handler got wrong is
 * dropped, never sent split. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <microhttpd.h>

#include "http-internal.h"
#include "http.h"

static bool header_value_ok(const char *v) {
        for (; *v; v++)
                if ((unsigned char) *v < 0x20 || *v == 0x7f)
                        return false;
        return true;
}

static bool add_headers(struct MHD_Response *r, const http_response *resp, size_t len, bool close) {
        const char *ct = resp->content_type ? resp->content_type : len ? "application/octet-stream" : NULL;
        char ra[32];
        bool ok = true;

        if (ct)
                ok &= MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ct) == MHD_YES;
        if (!resp->cacheable)
                ok &= MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store") == MHD_YES;
        ok &= MHD_add_response_header(r, "X-Content-Type-Options", "nosniff") == MHD_YES;
        if (resp->retry_after > 0) {
                snprintf(ra, sizeof(ra), "%lld", (long long) resp->retry_after);
                ok &= MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, ra) == MHD_YES;
        }
        if (resp->www_authenticate)
                ok &= MHD_add_response_header(r, MHD_HTTP_HEADER_WWW_AUTHENTICATE, resp->www_authenticate) == MHD_YES;
        if (resp->transfer_encoding)
                ok &= MHD_add_response_header(r, "Content-Transfer-Encoding", resp->transfer_encoding) == MHD_YES;
        if (resp->location[0] && memchr(resp->location, '\0', sizeof(resp->location)) &&
            header_value_ok(resp->location))
                ok &= MHD_add_response_header(r, MHD_HTTP_HEADER_LOCATION, resp->location) == MHD_YES;
        if (close)
                ok &= MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close") == MHD_YES;
        return ok;
}

/* Frees a body that held a secret (a token minted through the admin API):
 * the whole allocation is wiped first. */
static void wipe_and_free(void *p) {
        if (p)
                explicit_bzero(p, malloc_usable_size(p));
        free(p);
}

struct MHD_Response *http_mhd_response(http_response *resp, bool close) {
        struct MHD_Response *r;
        size_t len = 0;
        uint8_t *data = buf_steal(&resp->body, &len);

        if (!data)
                return NULL;
        r = resp->sensitive ? MHD_create_response_from_buffer_with_free_callback(len, data, wipe_and_free)
                            : MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
        if (!r) {
                free(data);
                return NULL;
        }
        if (!add_headers(r, resp, len, close)) {
                MHD_destroy_response(r);
                return NULL;
        }
        return r;
}
