/* What a server's options mean (http-internal.h): checked, and turned
 * into the guard's budget and the number of I/O threads. */
#include <stdint.h>
#include <unistd.h>

#include <microhttpd.h>

#include "error.h"
#include "http-internal.h"

int http_options_check(const http_options *o) {
        if (!o || (o->tls_key && !o->tls_cert_pem))
                return hwid_fail(HWID_E_CONFIG, "the HTTPS server needs a TLS key and certificate");
        if (!o->tls_key && (o->tls_cert_pem || o->client_ca_pem))
                return hwid_fail(HWID_E_CONFIG, "a plain HTTP server has no certificates");
        if (o->max_body == 0 || o->max_header < 256 || o->timeout == 0 || o->max_connections == 0)
                return hwid_fail(HWID_E_CONFIG, "HTTP limits must be set (max_body > 0, max_header >= 256, "
                                                "timeout > 0, max_connections > 0)");
        if (o->max_header > (64u << 20) || o->max_body > SIZE_MAX / 2)
                return hwid_fail(HWID_E_CONFIG, "HTTP limits are too large");
        if (o->tls_key &&
            (!MHD_is_feature_supported(MHD_FEATURE_TLS) || !MHD_is_feature_supported(MHD_FEATURE_HTTPS_CERT_CALLBACK)))
                return hwid_fail(HWID_E_CONFIG, "libmicrohttpd was built without TLS certificate callbacks");
        return 0;
}

/* What a share of max_connections defaults to: a sixteenth, at least 16. */
static unsigned share(unsigned set, unsigned max) {
        unsigned n = set ? set : max / 16;

        if (!set && n < 16)
                n = 16;
        return n > max ? max : n;
}

void http_options_budget(const http_options *o, bool tls, http_budget *ret) {
        unsigned hs = o->handshake_timeout ? o->handshake_timeout : 10;

        *ret = (http_budget) {
                .max_connections = o->max_connections,
                /* Evicted connections hold their socket until their I/O
                 * thread closes them: room for those. */
                .slack = o->max_connections / 64 > 64 ? o->max_connections / 64 : 64,
                .per_address = share(o->max_connections_per_ip, o->max_connections),
                .handshake_cap = share(o->handshake_cap, o->max_connections),
                .handshake_timeout = hs < o->timeout ? hs : o->timeout,
                .timeout = o->timeout,
                .rate = o->rate_per_ip,
                .burst = o->rate_burst,
                .tls = tls,
        };
}

unsigned http_options_io_threads(const http_options *o) {
        long n = o->io_threads ? (long) o->io_threads : sysconf(_SC_NPROCESSORS_ONLN);

        return n < 2 ? 2 : n > 16 ? 16 : (unsigned) n;
}
