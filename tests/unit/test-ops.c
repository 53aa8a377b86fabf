/* Pieces of hwidd's operations that need no server: the audit hash of
 * the spec (answers computed independently, with Python's hashlib, from
 * docs/OPERATIONS.md), the syslog line and its escaping, the endpoint
 * labels and the histogram buckets. */
#include <stdio.h>
#include <string.h>

#include "audit-syslog.h"
#include "check.h"
#include "error.h"
#include "histogram.h"
#include "api.h"
#include "metrics.h"
#include "store.h"

static void hex(const uint8_t *h, char out[65]) {
        for (int i = 0; i < 32; i++)
                snprintf(out + 2 * i, 3, "%02x", h[i]);
}

static void audit_hash_known_answers(void) {
        store_audit a = { .at = 1700000000, .actor = "token:abc123", .action = "enroll", .target = "edge-1",
                          .outcome = "allow", .reason = "issued under profile default", .token_id = "abc123" };
        /* NULL and the empty string differ; a time before 1970 is signed. */
        store_audit b = { .at = -5, .actor = "admin:root", .action = "token.revoke", .outcome = "deny", .reason = "" };
        uint8_t h1[32], h2[32], h3[32];
        char x[65];

        CHECK(store_audit_hash(NULL, &a, h1) == 0);
        hex(h1, x);
        CHECK_STREQ(x, "66e1a985cfc4a7a0ce761f22542e012ad45f06bb28a70480adf17c19a22b9930");
        CHECK(store_audit_hash(h1, &b, h2) == 0);
        hex(h2, x);
        CHECK_STREQ(x, "0351c38734abd4ace6f5702ba92d4d9dbdc33b5aeeb02ba3f6cbfbe842a958ca");
        /* id is not hashed: the order is the links'. */
        a.id = 42;
        CHECK(store_audit_hash(NULL, &a, h3) == 0 && memcmp(h1, h3, 32) == 0);
        /* Every field counts, and the boundary between fields does too. */
        a.action = "enrol";
        a.target = "ledge-1";
        CHECK(store_audit_hash(NULL, &a, h3) == 0 && memcmp(h1, h3, 32) != 0);
}

static void syslog_line(void) {
        uint8_t prev[32] = { 0 }, hash[32];
        store_audit a = { .id = 7, .at = 1700000000, .actor = "token:abc123", .action = "enroll",
                          .target = "ev\"il\\\nname\xe2\x80\xae", .outcome = "deny", .reason = NULL,
                          .prev_hash = prev, .hash = hash };
        char line[1024], small[260];
        size_t n;

        memset(hash, 0xab, sizeof(hash));
        n = audit_syslog_format(&a, line, sizeof(line));
        CHECK(n == strlen(line));
        CHECK_CONTAINS(line, "hwid-audit id=7 at=2023-11-14T22:13:20Z hash=abababab");
        CHECK_CONTAINS(line, " prev=0000000000");
        CHECK_CONTAINS(line, " actor=\"token:abc123\" action=\"enroll\" outcome=\"deny\"");
        CHECK_CONTAINS(line, " target=\"ev\\\"il\\\\\\x0aname\\xe2\\x80\\xae\"");
        CHECK(!strstr(line, "reason=")); /* NULL: left out */
        CHECK(!strchr(line, '\n'));
        /* Cut short: whole pieces only, never half an escape. */
        n = audit_syslog_format(&a, small, sizeof(small));
        CHECK(n > 200 && n == strlen(small) && n < sizeof(small));
        CHECK_CONTAINS(small, " target=\"ev");
        CHECK(small[n - 1] != '\\');
}

static void endpoints(void) {
        CHECK(metrics_endpoint_of("POST", "/csr") == CA_EP_ENROLL);
        CHECK(metrics_endpoint_of("GET", "/csr") == CA_EP_OTHER);
        CHECK(metrics_endpoint_of("GET", "/v1/requests/abc") == CA_EP_POLL);
        CHECK(metrics_endpoint_of("POST", "/v1/renew") == CA_EP_RENEW);
        CHECK(metrics_endpoint_of("GET", "/readyz") == CA_EP_READYZ);
        CHECK(metrics_endpoint_of("DELETE", "/v1/admin/tokens/x") == CA_EP_ADMIN);
        CHECK(metrics_endpoint_of("POST", "/.well-known/est/simpleenroll") == CA_EP_EST);
        CHECK(metrics_endpoint_of("GET", "/made/up/by/a/client") == CA_EP_OTHER);
}

static void buckets(void) {
        histogram h = { 0 };
        histogram_snapshot s;

        histogram_observe(&h, &histogram_bounds_request, 700000);        /* 0.7 ms */
        histogram_observe(&h, &histogram_bounds_request, 1000000);       /* 1 ms: le is inclusive */
        histogram_observe(&h, &histogram_bounds_request, 20000000000ull); /* 20 s: +Inf only */
        histogram_snapshot_take(&h, &histogram_bounds_request, &s);
        CHECK(s.count == 3);
        CHECK(s.cumulative[0] == 0);                               /* le 0.0005 */
        CHECK(s.cumulative[1] == 2);                               /* le 0.001 */
        CHECK(s.cumulative[histogram_bounds_request.n - 1] == 2);  /* le 10 */
        CHECK(s.cumulative[histogram_bounds_request.n] == 3);      /* +Inf */
        CHECK(s.sum_seconds > 20.0016 && s.sum_seconds < 20.0018);
}

int main(void) {
        audit_hash_known_answers();
        syslog_line();
        endpoints();
        buckets();
        if (check_failures)
                fprintf(stderr, "test-ops: %d check(s) failed\n", check_failures);
        return check_failures ? 1 : 0;
}
