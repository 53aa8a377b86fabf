/* A tiny server around service/http/http.c for tests/integration/http-transport.sh.
 *
 *   http-test-server create-key URI TYPE      creates a key in the device,
 *                                             prints its public key (PEM)
 *   http-test-server serve --key URI --cert PEM [options]
 *
 * serve prints "port N" once listening and stops gracefully on SIGTERM or
 * SIGINT ("stopping", then "stopped").  The handler echoes what the
 * transport delivered as JSON; a few paths exercise the response side:
 *   /slow?ms=N   sleeps N ms (at most 10 s) first
 *   /error       a JSON error from a hwid_err with a detail to escape
 *   /pending     202 with Retry-After and Location
 *   /ca          a cacheable plain-text answer
 *   /big         a response larger than the response cap
 *   /large       an 8 MiB response (for slow readers)
 *   /stats       the transport's counters (http_server_stats()) as JSON
 * Every echo carries "calls": how many times the handler ran, so a test can
 * tell that a refused request never reached it. */
#include <getopt.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <json-c/json.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "error.h"
#include "hsm.h"
#include "http.h"

static atomic_long calls;
static http_server *server;

static char *read_text(const char *path) {
        FILE *f = fopen(path, "re");
        char *s = NULL;
        size_t n = 0;
        long len;

        if (!f)
                return NULL;
        if (fseek(f, 0, SEEK_END) == 0 && (len = ftell(f)) >= 0 && len < (1 << 20) &&
            fseek(f, 0, SEEK_SET) == 0 && (s = calloc(1, (size_t) len + 1)))
                n = fread(s, 1, (size_t) len, f);
        fclose(f);
        if (s && n != (size_t) len) {
                free(s);
                return NULL;
        }
        return s;
}

static void add_str(json_object *o, const char *k, const char *v) {
        json_object_object_add(o, k, v ? json_object_new_string(v) : NULL);
}

static void add_peer(json_object *o, const http_request *req) {
        unsigned char md[EVP_MAX_MD_SIZE];
        char hex[2 * EVP_MAX_MD_SIZE + 1] = "", subject[256] = "";
        unsigned mdlen = 0;
        const unsigned char *p = req->peer_cert;
        X509 *x;

        json_object_object_add(o, "peer_verified", json_object_new_boolean(req->peer_verified));
        json_object_object_add(o, "peer_expired", json_object_new_boolean(req->peer_expired));
        if (!req->peer_cert) {
                json_object_object_add(o, "peer_cert", NULL);
                return;
        }
        EVP_Digest(req->peer_cert, req->peer_cert_len, md, &mdlen, EVP_sha256(), NULL);
        for (unsigned i = 0; i < mdlen; i++)
                sprintf(hex + 2 * i, "%02x", md[i]);
        add_str(o, "peer_cert", hex);
        x = d2i_X509(NULL, &p, (long) req->peer_cert_len);
        if (x)
                X509_NAME_oneline(X509_get_subject_name(x), subject, sizeof(subject));
        X509_free(x);
        add_str(o, "peer_subject", subject);
}

static void echo(const http_request *req, http_response *resp) {
        json_object *o = json_object_new_object();

        add_str(o, "method", req->method);
        add_str(o, "path", req->path);
        add_str(o, "query", req->query);
        add_str(o, "content_type", req->content_type);
        add_str(o, "authorization", req->authorization);
        json_object_object_add(o, "body", json_object_new_string_len((const char *) req->body, (int) req->body_len));
        json_object_object_add(o, "body_len", json_object_new_int64((int64_t) req->body_len));
        add_str(o, "peer_addr", req->peer_addr);
        add_peer(o, req);
        json_object_object_add(o, "calls", json_object_new_int64(atomic_load(&calls)));
        resp->status = 200;
        resp->content_type = "application/json";
        buf_append_str(&resp->body, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
}

static void stats(http_response *resp) {
        json_object *o = json_object_new_object(), *ev = json_object_new_object(), *rf = json_object_new_object();
        http_stats st;

        http_server_stats(server, &st);
        json_object_object_add(o, "handshaking", json_object_new_int64(st.handshaking));
        json_object_object_add(o, "idle", json_object_new_int64(st.idle));
        json_object_object_add(o, "active", json_object_new_int64(st.active));
        json_object_object_add(o, "handshakes", json_object_new_int64((int64_t) st.handshake.count));
        json_object_object_add(o, "tls_failures", json_object_new_int64((int64_t) st.tls_failures));
        for (int i = 0; i < _HTTP_EVICT_MAX; i++)
                json_object_object_add(ev, http_evict_name(i), json_object_new_int64((int64_t) st.evicted[i]));
        for (int i = 0; i < _HTTP_REFUSE_MAX; i++)
                json_object_object_add(rf, http_refuse_name(i), json_object_new_int64((int64_t) st.refused[i]));
        json_object_object_add(o, "evicted", ev);
        json_object_object_add(o, "refused", rf);
        resp->status = 200;
        resp->content_type = "application/json";
        buf_append_str(&resp->body, json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
        json_object_put(o);
}

static void handler(void *userdata, const http_request *req, http_response *resp) {
        if (strcmp(req->path, "/stats") == 0) {
                stats(resp);
                return;
        }
        atomic_fetch_add(&calls, 1);
        if (strcmp(req->path, "/slow") == 0) {
                long ms = req->query && strncmp(req->query, "ms=", 3) == 0 ? strtol(req->query + 3, NULL, 10) : 1000;
                struct timespec ts = { .tv_sec = (ms > 10000 ? 10000 : ms < 0 ? 0 : ms) / 1000 };

                ts.tv_nsec = ((ms > 10000 ? 10000 : ms < 0 ? 0 : ms) % 1000) * 1000000L;
                nanosleep(&ts, NULL);
        } else if (strcmp(req->path, "/error") == 0) {
                http_error_from(resp, hwid_fail(HWID_E_FORBIDDEN, "denied: \"quoted\" \\ </script>\n\x01"));
                return;
        } else if (strcmp(req->path, "/pending") == 0) {
                resp->status = 202;
                resp->retry_after = 7;
                snprintf(resp->location, sizeof(resp->location), "/v1/requests/abc123");
                resp->content_type = "application/json";
                buf_append_str(&resp->body, "{\"status\":\"pending\"}");
                return;
        } else if (strcmp(req->path, "/ca") == 0) {
                resp->status = 200;
                resp->cacheable = true;
                resp->content_type = "text/plain";
                buf_append_str(&resp->body, "ca\n");
                return;
        } else if (strcmp(req->path, "/large") == 0) {
                static const char chunk[4096] = { 'x' };

                resp->status = 200;
                resp->content_type = "text/plain";
                for (int i = 0; i < 2048; i++)
                        buf_append(&resp->body, chunk, sizeof(chunk));
                return;
        } else if (strcmp(req->path, "/big") == 0) {
                static const char chunk[4096] = { 'x' };
                int r = 0;
                while (r == 0)
                        r = buf_append(&resp->body, chunk, sizeof(chunk));
                http_error_from(resp, r);
                return;
        }
        echo(req, resp);
}

static int create_key(const char *uri, const char *type_s) {
        hwid_key_type type;
        hwid_key *k = NULL;
        int r;

        if ((r = hwid_key_type_from_string(type_s, &type)) < 0 ||
            (r = hwid_key_create(uri, type, false, NULL, &k)) < 0) {
                fprintf(stderr, "create-key: %s\n", hwid_strerror(r));
                return 1;
        }
        PEM_write_PUBKEY(stdout, hwid_key_public(k));
        hwid_key_free(k);
        return 0;
}

static const struct option serve_opts[] = {
        { "key", required_argument, NULL, 'k' },       { "cert", required_argument, NULL, 'c' },
        { "client-ca", required_argument, NULL, 'a' }, { "listen", required_argument, NULL, 'l' },
        { "max-body", required_argument, NULL, 'b' },  { "max-header", required_argument, NULL, 'h' },
        { "timeout", required_argument, NULL, 't' },   { "max-conn", required_argument, NULL, 'm' },
        { "per-ip", required_argument, NULL, 'i' },    { "handshake-cap", required_argument, NULL, 'H' },
        { "handshake-timeout", required_argument, NULL, 'T' }, { "workers", required_argument, NULL, 'w' },
        { "rate", required_argument, NULL, 'r' },      { "burst", required_argument, NULL, 'u' },
        { NULL, 0, NULL, 0 },
};

static int serve(int argc, char **argv) {
        http_options o = { .listen = "127.0.0.1:0", .max_body = 65536, .max_header = 8192,
                           .timeout = 10, .max_connections = 64 };
        const char *key_uri = NULL, *cert = NULL, *client_ca = NULL;
        char *cert_pem = NULL, *ca_pem = NULL;
        http_server *srv = NULL;
        hwid_key *key = NULL;
        sigset_t mask;
        int c, r, sig = 0;

        while ((c = getopt_long(argc, argv, "", serve_opts, NULL)) != -1) {
                switch (c) {
                case 'k': key_uri = optarg; break;
                case 'c': cert = optarg; break;
                case 'a': client_ca = optarg; break;
                case 'l': o.listen = optarg; break;
                case 'b': o.max_body = strtoul(optarg, NULL, 10); break;
                case 'h': o.max_header = strtoul(optarg, NULL, 10); break;
                case 't': o.timeout = (unsigned) strtoul(optarg, NULL, 10); break;
                case 'm': o.max_connections = (unsigned) strtoul(optarg, NULL, 10); break;
                case 'i': o.max_connections_per_ip = (unsigned) strtoul(optarg, NULL, 10); break;
                case 'H': o.handshake_cap = (unsigned) strtoul(optarg, NULL, 10); break;
                case 'T': o.handshake_timeout = (unsigned) strtoul(optarg, NULL, 10); break;
                case 'w': o.workers = (unsigned) strtoul(optarg, NULL, 10); break;
                case 'r': o.rate_per_ip = strtod(optarg, NULL); break;
                case 'u': o.rate_burst = (unsigned) strtoul(optarg, NULL, 10); break;
                default: return 2;
                }
        }
        if (!key_uri || !cert) {
                fprintf(stderr, "serve: --key and --cert are required\n");
                return 2;
        }
        cert_pem = read_text(cert);
        ca_pem = client_ca ? read_text(client_ca) : NULL;
        if (!cert_pem || (client_ca && !ca_pem)) {
                fprintf(stderr, "serve: cannot read %s\n", !cert_pem ? cert : client_ca);
                return 1;
        }
        o.tls_cert_pem = cert_pem;
        o.client_ca_pem = ca_pem;

        /* Block the stop signals before MHD starts its threads, then wait. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        pthread_sigmask(SIG_BLOCK, &mask, NULL);

        if ((r = hwid_key_open(key_uri, NULL, &key)) < 0 || (o.tls_key = key, r = http_server_start(&o, handler, NULL, &srv)) < 0) {
                fprintf(stderr, "serve: %s\n", hwid_strerror(r));
                hwid_key_free(key);
                free(cert_pem);
                free(ca_pem);
                return 1;
        }
        server = srv;
        printf("port %d\n", http_server_port(srv));
        fflush(stdout);
        sigwait(&mask, &sig);
        printf("stopping\n");
        fflush(stdout);
        http_server_stop(srv);
        printf("stopped\n");
        fflush(stdout);
        hwid_key_free(key);
        free(cert_pem);
        free(ca_pem);
        return 0;
}

int main(int argc, char **argv) {
        if (argc == 4 && strcmp(argv[1], "create-key") == 0)
                return create_key(argv[2], argv[3]);
        if (argc >= 2 && strcmp(argv[1], "serve") == 0)
                return serve(argc - 1, argv + 1);
        fprintf(stderr, "usage: %s create-key URI TYPE | serve --key URI --cert PEM [options]\n", argv[0]);
        return 2;
}
