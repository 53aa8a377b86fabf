/* libFuzzer target: the OCSP responder's request reader
 * (common/ocsp-wire.c) on hostile input, as POST /ocsp's body and as
 * GET /ocsp/<tail>.  Never a crash or leak; what is accepted is what
 * ocsp-wire.h promises: one certID with a known hash, a serial of at most
 * 20 octets as upper-case hex, a nonce of at most 32 octets, and bytes
 * that re-encode to themselves. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/err.h>

#include "ocsp-wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void accepted_as_promised(const uint8_t *der, size_t len) {
        ocsp_query q = { 0 };
        size_t n;

        if (ocsp_query_parse(der, len, &q) < 0)
                return;
        n = strlen(q.serial);
        if (!q.req || !q.id || len > OCSP_REQUEST_MAX || q.nonce_len > OCSP_NONCE_MAX || n == 0 ||
            n > 2 * OCSP_SERIAL_MAX || strspn(q.serial, "0123456789ABCDEF") != n ||
            (q.hash_nid != NID_sha1 && q.hash_nid != NID_sha256 && q.hash_nid != NID_sha384 &&
             q.hash_nid != NID_sha512))
                abort();
        ocsp_query_clear(&q);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);
        uint8_t *der = NULL;
        size_t len = 0;

        if (!s)
                return 0;
        accepted_as_promised(data, size);
        memcpy(s, data, size);
        s[size] = '\0';
        if (ocsp_get_decode(s, &der, &len) == 0) {
                accepted_as_promised(der, len);
                free(der);
        }
        free(s);
        ERR_clear_error();
        return 0;
}
