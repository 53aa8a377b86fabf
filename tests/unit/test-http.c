/* Unit tests for the parts of service/http*.c that need no key and no
 * peer: JSON errors, the rate limiter, listen address parsing, the
 * connection guard's bookkeeping when I/O threads accept at once.  The TLS
 * side is tested against real peers by tests/integration/http-transport.sh
 * and http-budgets.sh. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <netinet/in.h>

#include <json-c/json.h>

#include "check.h"
#include "error.h"
#include "http-internal.h"
#include "http.h"
#include "ratelimit.h"

static json_object *parse_body(const http_response *resp) {
        return resp->body.data ? json_tokener_parse((const char *) resp->body.data) : NULL;
}

static const char *field(json_object *o, const char *k) {
        json_object *v = NULL;

        return json_object_object_get_ex(o, k, &v) ? json_object_get_string(v) : NULL;
}

static void test_error_json(void) {
        http_response resp = { 0 };
        const char *nasty = "a \"quote\", a \\ backslash, </script>, a\nnewline and \x01";
        json_object *o;

        buf_init(&resp.body, 4096);
        buf_append_str(&resp.body, "left over from the handler");
        http_error(&resp, 400, "bad_csr", nasty);
        CHECK(resp.status == 400);
        CHECK_STREQ(resp.content_type, "application/json");
        o = parse_body(&resp);
        CHECK(o != NULL);
        CHECK_STREQ(field(o, "error"), "bad_csr");
        CHECK_STREQ(field(o, "message"), nasty);
        json_object_put(o);

        http_error_from(&resp, hwid_fail(HWID_E_TOKEN_INVALID, "token abc123 expired"));
        CHECK(resp.status == 401);
        o = parse_body(&resp);
        CHECK_STREQ(field(o, "error"), "bad_token");
        CHECK_STREQ(field(o, "message"), "token abc123 expired");
        json_object_put(o);

        /* Without a detail: the table's message. */
        hwid_error_clear();
        http_error_from(&resp, -HWID_E_RATE_LIMITED);
        CHECK(resp.status == 429);
        o = parse_body(&resp);
        CHECK_STREQ(field(o, "error"), "rate_limited");
        CHECK_STREQ(field(o, "message"), "too many requests");
        json_object_put(o);

        /* A success code is not an error: reported as internal. */
        http_error_from(&resp, 0);
        CHECK(resp.status == 500);
        buf_reset(&resp.body);

        /* A zeroed response (no cap set) still gets a body. */
        http_response z = { 0 };
        http_error(&z, 503, "hsm_unavailable", NULL);
        o = parse_body(&z);
        CHECK_STREQ(field(o, "message"), "");
        json_object_put(o);
        buf_reset(&z.body);
}

static void test_ratelimit(void) {
        ratelimit *rl = NULL;
        const uint8_t a[4] = { 10, 0, 0, 1 }, b[4] = { 10, 0, 0, 2 };
        uint8_t v6[16] = { 0x20, 0x01, 0x0d, 0xb8 };

        CHECK(ratelimit_new(0, 1, 0, &rl) == -HWID_E_INVALID);
        CHECK(ratelimit_new(2.0, 3, 16, &rl) == 0);
        /* A burst of 3, then refused with the wait until the next token. */
        CHECK(ratelimit_take_at(rl, a, 4, 100.0) == 0);
        CHECK(ratelimit_take_at(rl, a, 4, 100.0) == 0);
        CHECK(ratelimit_take_at(rl, a, 4, 100.0) == 0);
        CHECK(ratelimit_take_at(rl, a, 4, 100.0) == 1);
        /* Another address has its own bucket. */
        CHECK(ratelimit_take_at(rl, b, 4, 100.0) == 0);
        CHECK(ratelimit_take_at(rl, v6, 16, 100.0) == 0);
        /* 2 tokens per second: after 0.5 s one more. */
        CHECK(ratelimit_take_at(rl, a, 4, 100.5) == 0);
        CHECK(ratelimit_take_at(rl, a, 4, 100.5) == 1);
        /* Long idle: back to a full burst, never more. */
        CHECK(ratelimit_take_at(rl, a, 4, 1000.0) == 0);
        CHECK(ratelimit_take_at(rl, a, 4, 1000.0) == 0);
        CHECK(ratelimit_take_at(rl, a, 4, 1000.0) == 0);
        CHECK(ratelimit_take_at(rl, a, 4, 1000.0) > 0);
        ratelimit_free(rl);

        /* A slow rate says how long to wait; a flood of distinct addresses
         * stays in the fixed table. */
        CHECK(ratelimit_new(0.1, 1, 64, &rl) == 0);
        CHECK(ratelimit_take_at(rl, a, 4, 5.0) == 0);
        CHECK(ratelimit_take_at(rl, a, 4, 5.0) == 10);
        for (uint32_t i = 0; i < 100000; i++) {
                uint8_t x[4];
                memcpy(x, &i, 4);
                (void) ratelimit_take_at(rl, x, 4, 6.0);
        }
        ratelimit_free(rl);
}

static void test_listen(void) {
        const char *bad[] = { "", "localhost:80", "1.2.3.4", "1.2.3.4:99999", "1.2.3.4:-1",
                              "1.2.3.4:8x", "::1:80", "[::1]80", "[::1", "127.0.0.1:" };
        int fd = -1, fd2 = -1, port;
        char again[64];

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                int r = http_listen_open(bad[i], &fd);
                if (r != -HWID_E_CONFIG)
                        fprintf(stderr, "listen '%s' gave %d\n", bad[i], r);
                CHECK(r == -HWID_E_CONFIG);
        }
        CHECK(http_listen_open("127.0.0.1:0", &fd) == 0);
        port = http_listen_port(fd);
        CHECK(port > 0);
        snprintf(again, sizeof(again), "127.0.0.1:%d", port);
        CHECK(http_listen_open(again, &fd2) == -HWID_E_IO);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_IO), "address in use");
        close(fd);
        /* IPv6 loopback, if the host has it. */
        if (http_listen_open("[::1]:0", &fd) == 0) {
                CHECK(http_listen_port(fd) > 0);
                close(fd);
        }
}

static void plain_handler(void *userdata, const http_request *req, http_response *resp) {
        resp->status = 204;
}

/* Certificates without a TLS key are a mistake; no TLS key at all is a
 * plain-HTTP server (hwidd's CRL listener), which takes no client CA. */
static void test_start_tls_or_plain(void) {
        http_options o = { .listen = "127.0.0.1:0", .max_body = 1, .max_header = 8192,
                           .timeout = 1, .max_connections = 1, .tls_cert_pem = "x" };
        http_server *s = NULL;

        CHECK(http_server_start(&o, plain_handler, NULL, &s) == -HWID_E_CONFIG);
        CHECK(s == NULL);
        o.tls_cert_pem = NULL;
        o.client_ca_pem = "x";
        CHECK(http_server_start(&o, plain_handler, NULL, &s) == -HWID_E_CONFIG);
        CHECK(s == NULL);
        o.client_ca_pem = NULL;
        CHECK(http_server_start(&o, plain_handler, NULL, &s) == 0);
        CHECK(s && http_server_port(s) > 0);
        http_server_stop(s);
        http_server_stop(NULL);
}

/* Connections from 127.0.0.2, admitted (http_guard_accept()) all at once
 * and only then added (http_guard_conn_new()), as libmicrohttpd's I/O
 * threads do when they accept together: each saw room for one. */
static void admit_then_add(http_guard *g, unsigned n, http_conn **conns, int (*fds)[2]) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000002) };
        static int tls_session; /* any non-NULL session: the guard never looks into it */

        for (unsigned i = 0; i < n; i++)
                CHECK(http_guard_accept(g, (struct sockaddr *) &sa, sizeof(sa)));
        for (unsigned i = 0; i < n; i++) {
                CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds[i]) == 0);
                conns[i] = http_guard_conn_new(g, NULL, NULL, fds[i][0], &tls_session, (struct sockaddr *) &sa,
                                               sizeof(sa));
                CHECK(conns[i] != NULL);
        }
}

static void guard_run(const http_budget *b, unsigned n, http_stats *ret) {
        http_guard *g = NULL;
        http_conn *conns[8] = { 0 };
        int fds[8][2];

        CHECK(n <= ELEMENTSOF(conns));
        CHECK(http_guard_new(b, &g) == 0);
        if (!g || n > ELEMENTSOF(conns))
                return;
        admit_then_add(g, n, conns, fds);
        http_guard_stats(g, ret);
        for (unsigned i = 0; i < n; i++) {
                http_guard_conn_free(conns[i]);
                close(fds[i][0]);
                close(fds[i][1]);
        }
        http_guard_free(g);
}

/* The shares that must hold exactly (an address's, the handshake cap) still
 * hold when connections admitted together join the lists one by one. */
static void test_guard_admitted_together(void) {
        http_budget b = { .max_connections = 64, .slack = 64, .per_address = 2, .handshake_cap = 64,
                          .handshake_timeout = 10, .timeout = 10, .tls = true };
        http_stats st;

        guard_run(&b, 5, &st);
        CHECK(st.handshaking == 2);
        CHECK(st.refused[HTTP_REFUSE_PER_ADDRESS] == 3);
        b.per_address = 64;
        b.handshake_cap = 3;
        guard_run(&b, 6, &st);
        CHECK(st.handshaking == 3);
        CHECK(st.evicted[HTTP_EVICT_HANDSHAKE_CAP] == 3);
}

int main(void) {
        test_error_json();
        test_guard_admitted_together();
        test_ratelimit();
        test_listen();
        test_start_tls_or_plain();
        return check_done("test-http");
}
