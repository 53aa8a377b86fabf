/* Unit tests for the parts of service/http*.c that need no key and no
 * peer: JSON errors, the rate limiter, listen address parsing, the
 * request syntax libmicrohttpd lets through (common/http-syntax.c), the
 * key a client is counted by (its IPv4 address, its IPv6 /64), and the
 * connection guard: its bookkeeping when I/O threads accept at once, who
 * gives way at max_connections (the heaviest address, a request not
 * progressing) and at the handshake cap.  The TLS side is
 * tested against real peers by tests/integration/http-transport.sh,
 * http-budgets.sh and http-fairness.sh. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <json-c/json.h>

#include "check.h"
#include "error.h"
#include "http-internal.h"
#include "http-syntax.h"
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

/* What libmicrohttpd lets through: a field name with whitespace before
 * the colon, a control character in a value, "%00" in the target, a body
 * framed two ways. */
static void test_syntax(void) {
        http_framing f = { 0 };
        const char *msg;

        CHECK(http_field_name_ok("Content-Length"));
        CHECK(http_field_name_ok("x-!#$%&'*+-.^_`|~09"));
        CHECK(!http_field_name_ok("Content-Length "));
        CHECK(!http_field_name_ok("Content-Length\t"));
        CHECK(!http_field_name_ok(" Host"));
        CHECK(!http_field_name_ok("a(b)"));
        CHECK(!http_field_name_ok("a\"b"));
        CHECK(!http_field_name_ok("\x80"));
        CHECK(!http_field_name_ok(""));
        CHECK(!http_field_name_ok(NULL));
        /* "Content-Length:" folded onto " 41", as libmicrohttpd reads it. */
        CHECK(!http_field_name_ok("Content-Length41"));
        CHECK(!http_field_name_ok("transfer-encodingchunked"));
        CHECK(http_field_name_ok("Content-Lengt"));
        CHECK(http_field_name_ok("X-Content-Length"));
        CHECK(http_field_value_ok("a\tb c \x80"));
        CHECK(http_field_value_ok(""));
        CHECK(!http_field_value_ok("a\x01"));
        CHECK(!http_field_value_ok("a\x7f"));
        CHECK(!http_field_value_ok("a\rb"));
        CHECK(http_target_bad("/a%00"));
        CHECK(http_target_bad("/a?x=%00"));
        CHECK(http_target_bad("/a\x01"));
        CHECK(http_target_bad("/a\x7f"));
        CHECK(!http_target_bad("/a%20b?c=%41&d=%0a"));

        CHECK(http_framing_check(&f, true, &msg) == 0 && !msg);
        http_framing_add(&f, "content-length", "5");
        http_framing_add(&f, "Content-Length", "5");
        CHECK(http_framing_check(&f, true, &msg) == 0);
        http_framing_add(&f, "Content-Length", "6");
        CHECK(http_framing_check(&f, true, &msg) == 400);
        CHECK_CONTAINS(msg, "differ");
        f = (http_framing) { 0 };
        http_framing_add(&f, "Content-Length", "5");
        http_framing_add(&f, "Transfer-Encoding", "chunked");
        CHECK(http_framing_check(&f, true, &msg) == 400);
        CHECK_CONTAINS(msg, "both");
        f = (http_framing) { 0 };
        http_framing_add(&f, "Transfer-Encoding", " Chunked ");
        CHECK(http_framing_check(&f, true, &msg) == 0);
        CHECK(http_framing_check(&f, false, &msg) == 400);
        http_framing_add(&f, "Transfer-Encoding", "chunked");
        CHECK(http_framing_check(&f, true, &msg) == 400);
        f = (http_framing) { 0 };
        http_framing_add(&f, "Transfer-Encoding", "gzip, chunked");
        CHECK(http_framing_check(&f, true, &msg) == 501);
}

static struct sockaddr_in6 v6(const char *text) {
        struct sockaddr_in6 sa = { .sin6_family = AF_INET6 };

        CHECK(inet_pton(AF_INET6, text, &sa.sin6_addr) == 1);
        return sa;
}

static struct sockaddr_in v4(uint32_t addr) {
        return (struct sockaddr_in) { .sin_family = AF_INET, .sin_addr.s_addr = htonl(addr) };
}

/* A client is its IPv4 address, or the /64 of its IPv6 address. */
static void test_addr_key(void) {
        struct sockaddr_in a4 = v4(0x0a000001);
        struct sockaddr_in6 a = v6("2001:db8:1:2::1"), b = v6("2001:db8:1:2:ffff:ffff:ffff:fffe"),
                            c = v6("2001:db8:1:3::1"), m = v6("::ffff:10.0.0.1");
        struct sockaddr_un u = { .sun_family = AF_UNIX };
        uint8_t k1[HTTP_ADDR_KEY_MAX], k2[HTTP_ADDR_KEY_MAX];
        size_t n1 = 0, n2 = 0;

        CHECK(http_addr_key((struct sockaddr *) &a4, sizeof(a4), k1, &n1) && n1 == 4);
        CHECK(memcmp(k1, "\x0a\x00\x00\x01", 4) == 0);
        CHECK(http_addr_key((struct sockaddr *) &m, sizeof(m), k2, &n2) && n2 == 4 && memcmp(k1, k2, 4) == 0);
        CHECK(http_addr_key((struct sockaddr *) &a, sizeof(a), k1, &n1) && n1 == 8);
        CHECK(memcmp(k1, a.sin6_addr.s6_addr, 8) == 0);
        CHECK(http_addr_key((struct sockaddr *) &b, sizeof(b), k2, &n2) && n2 == 8 && memcmp(k1, k2, 8) == 0);
        CHECK(http_addr_key((struct sockaddr *) &c, sizeof(c), k2, &n2) && n2 == 8 && memcmp(k1, k2, 8) != 0);
        CHECK(!http_addr_key((struct sockaddr *) &u, sizeof(u), k1, &n1));
        CHECK(!http_addr_key((struct sockaddr *) &a, sizeof(a4), k1, &n1));
        CHECK(!http_addr_key(NULL, 0, k1, &n1));
}

static int tls_session; /* any non-NULL session: the guard never looks into it */

/* A connection from sa, admitted and added as MHD does; NULL if refused. */
static http_conn *connect_from(http_guard *g, const void *sa, socklen_t len, bool tls, int fds[2]) {
        http_conn *c;

        if (!http_guard_accept(g, sa, len))
                return NULL;
        CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
        c = http_guard_conn_new(g, NULL, NULL, fds[0], tls ? &tls_session : NULL, sa, len);
        CHECK(c != NULL);
        return c;
}

static void conn_close(http_conn *c, int fds[2]) {
        if (!c)
                return;
        http_guard_conn_free(c);
        close(fds[0]);
        close(fds[1]);
}

/* IPv6 addresses of one /64 share one address's share; another /64 has its own. */
static void test_guard_v6_prefix(void) {
        http_budget b = { .max_connections = 64, .slack = 64, .per_address = 3, .handshake_cap = 64,
                          .handshake_timeout = 10, .timeout = 10, .tls = true };
        const char *addrs[] = { "2001:db8:1:2::1", "2001:db8:1:2::2", "2001:db8:1:2:1::3", "2001:db8:1:2::4",
                                "2001:db8:1:2:ffff::5", "2001:db8:1:3::1" };
        http_conn *conns[ELEMENTSOF(addrs)];
        int fds[ELEMENTSOF(addrs)][2];
        http_guard *g = NULL;
        http_stats st;

        CHECK(http_guard_new(&b, &g) == 0);
        if (!g)
                return;
        for (size_t i = 0; i < ELEMENTSOF(addrs); i++) {
                struct sockaddr_in6 sa = v6(addrs[i]);
                conns[i] = connect_from(g, &sa, sizeof(sa), true, fds[i]);
        }
        CHECK(conns[0] && conns[1] && conns[2] && !conns[3] && !conns[4] && conns[5]);
        http_guard_stats(g, &st);
        CHECK(st.refused[HTTP_REFUSE_PER_ADDRESS] == 2);
        for (size_t i = 0; i < ELEMENTSOF(addrs); i++)
                conn_close(conns[i], fds[i]);
        http_guard_free(g);
}

static void sleep_ms(long ms) {
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

        nanosleep(&ts, NULL);
}

/* At max_connections, connections inside a request give way to a new
 * address: the heaviest address's connection silent longest, never one
 * being handled; a lighter address keeps its own. */
static void test_guard_in_request(void) {
        http_budget b = { .max_connections = 4, .slack = 64, .per_address = 4, .handshake_cap = 64,
                          .handshake_timeout = 10, .timeout = 10 };
        struct sockaddr_in a = v4(0x0a000001), l = v4(0x0a000002), n = v4(0x0a000003), n2 = v4(0x0a000004);
        http_conn *heavy[3], *light, *newcomer, *again;
        int fds[6][2];
        http_guard *g = NULL;
        http_stats st;

        CHECK(http_guard_new(&b, &g) == 0);
        if (!g)
                return;
        light = connect_from(g, &l, sizeof(l), false, fds[3]);
        for (int i = 0; i < 3; i++)
                heavy[i] = connect_from(g, &a, sizeof(a), false, fds[i]);
        if (!light || !heavy[0] || !heavy[1] || !heavy[2])
                return;
        http_conn_phase(light, HTTP_PHASE_RECEIVING);
        for (int i = 0; i < 3; i++)
                http_conn_phase(heavy[i], HTTP_PHASE_RECEIVING);
        http_conn_phase(heavy[0], HTTP_PHASE_HANDLING);
        sleep_ms(20);
        http_conn_io(heavy[2], true, 10); /* heavy[1] is silent longest */
        http_conn_io(light, true, 10);
        newcomer = connect_from(g, &n, sizeof(n), false, fds[4]);
        CHECK(newcomer != NULL);
        CHECK(http_conn_evicted(heavy[1]));
        CHECK(!http_conn_evicted(heavy[0]) && !http_conn_evicted(heavy[2]) && !http_conn_evicted(light));
        conn_close(heavy[1], fds[1]);
        heavy[1] = NULL;
        /* 10.0.0.1 holds 2 (one being handled), the others 1 each: a
         * newcomer takes 10.0.0.1's last one in a request. */
        again = connect_from(g, &n2, sizeof(n2), false, fds[5]);
        CHECK(again != NULL && http_conn_evicted(heavy[2]) && !http_conn_evicted(heavy[0]));
        http_guard_stats(g, &st);
        CHECK(st.evicted[HTTP_EVICT_FAIR_SHARE] == 2 && st.refused[HTTP_REFUSE_LIMIT] == 0);
        conn_close(heavy[2], fds[2]);
        heavy[2] = NULL;
        /* Everyone holds one, one of them being handled: nobody gives way. */
        CHECK(!http_guard_accept(g, (struct sockaddr *) &a, sizeof(a)));
        http_guard_stats(g, &st);
        CHECK(st.refused[HTTP_REFUSE_LIMIT] == 1 && !http_conn_evicted(light));
        conn_close(heavy[0], fds[0]);
        conn_close(light, fds[3]);
        conn_close(newcomer, fds[4]);
        conn_close(again, fds[5]);
        http_guard_free(g);
}

/* At max_connections with no address heavier than the newcomer's: a
 * request silent for seconds gives way, not one progressing, not one being
 * handled, and not to an address holding more than its own. */
static void test_guard_stalled(void) {
        http_budget b = { .max_connections = 5, .slack = 64, .per_address = 4, .handshake_cap = 64,
                          .handshake_timeout = 10, .timeout = 10 };
        struct sockaddr_in x = v4(0x0a000001), sa = v4(0x0a000002), sb = v4(0x0a000003), sc = v4(0x0a000004),
                           se = v4(0x0a000005);
        http_conn *xs[2], *a, *bc, *cc, *e;
        int fds[6][2];
        http_guard *g = NULL;
        http_stats st;

        CHECK(http_guard_new(&b, &g) == 0);
        if (!g)
                return;
        for (int i = 0; i < 2; i++)
                xs[i] = connect_from(g, &x, sizeof(x), false, fds[i]);
        a = connect_from(g, &sa, sizeof(sa), false, fds[2]);
        bc = connect_from(g, &sb, sizeof(sb), false, fds[3]);
        cc = connect_from(g, &sc, sizeof(sc), false, fds[4]);
        if (!xs[0] || !xs[1] || !a || !bc || !cc)
                return;
        for (int i = 0; i < 2; i++)
                http_conn_phase(xs[i], HTTP_PHASE_HANDLING);
        http_conn_phase(a, HTTP_PHASE_RECEIVING);
        http_conn_phase(bc, HTTP_PHASE_RECEIVING);
        http_conn_phase(cc, HTTP_PHASE_HANDLING);
        sleep_ms(2100);
        http_conn_io(bc, true, 1);
        /* 10.0.0.1 holds 2: it may not take 10.0.0.2's stalled request. */
        CHECK(!http_guard_accept(g, (struct sockaddr *) &x, sizeof(x)));
        CHECK(!http_conn_evicted(a));
        e = connect_from(g, &se, sizeof(se), false, fds[5]);
        CHECK(e != NULL && http_conn_evicted(a));
        CHECK(!http_conn_evicted(bc) && !http_conn_evicted(cc) && !http_conn_evicted(xs[0]) && !http_conn_evicted(xs[1]));
        http_guard_stats(g, &st);
        CHECK(st.evicted[HTTP_EVICT_STALLED] == 1 && st.refused[HTTP_REFUSE_LIMIT] == 1);
        for (int i = 0; i < 2; i++)
                conn_close(xs[i], fds[i]);
        conn_close(a, fds[2]);
        conn_close(bc, fds[3]);
        conn_close(cc, fds[4]);
        conn_close(e, fds[5]);
        http_guard_free(g);
}

/* Past the handshake cap, the address with the most handshakes gives up
 * its oldest, even when another address's is older. */
static void test_guard_handshake_cap(void) {
        http_budget b = { .max_connections = 64, .slack = 64, .per_address = 64, .handshake_cap = 3,
                          .handshake_timeout = 10, .timeout = 10, .tls = true };
        struct sockaddr_in a = v4(0x0a000001), l = v4(0x0a000002);
        http_conn *light, *heavy[3];
        int fds[4][2];
        http_guard *g = NULL;
        http_stats st;

        CHECK(http_guard_new(&b, &g) == 0);
        if (!g)
                return;
        light = connect_from(g, &l, sizeof(l), true, fds[3]);
        for (int i = 0; i < 3; i++)
                heavy[i] = connect_from(g, &a, sizeof(a), true, fds[i]);
        CHECK(light && heavy[0] && heavy[1] && heavy[2]);
        CHECK(!http_conn_evicted(light) && http_conn_evicted(heavy[0]));
        CHECK(!http_conn_evicted(heavy[1]) && !http_conn_evicted(heavy[2]));
        http_guard_stats(g, &st);
        CHECK(st.handshaking == 3 && st.evicted[HTTP_EVICT_HANDSHAKE_CAP] == 1);
        for (int i = 0; i < 3; i++)
                conn_close(heavy[i], fds[i]);
        conn_close(light, fds[3]);
        http_guard_free(g);
}

int main(void) {
        test_error_json();
        test_syntax();
        test_addr_key();
        test_guard_admitted_together();
        test_guard_v6_prefix();
        test_guard_in_request();
        test_guard_stalled();
        test_guard_handshake_cap();
        test_ratelimit();
        test_listen();
        test_start_tls_or_plain();
        return check_done("test-http");
}
