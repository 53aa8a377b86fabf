/* load: an HTTPS load generator for issuance (bench/run.sh).
 *
 *   load --url URL... --cacert PEM [--mode hwid|cfssl] [--token T]
 *        [--connections C] [--requests N] [--duration S] [--rate R]
 *        [--prefix NAME] [--tag TEXT] [--latencies FILE]
 *       Makes N CSRs first (CN=NAME-<i>: one live certificate per
 *       identity; P-256 keys, 32 per generator thread), then C threads
 *       each keep one TLS connection alive (a libcurl easy handle,
 *       reused) and POST the CSRs until all are sent or S seconds have
 *       passed (N = 0: only connect and warm up, e.g. to count what a TLS
 *       handshake costs the HSM): hwidd's POST /csr with the token as
 *       bearer, or cfssl's POST /api/v1/cfssl/sign.  With --url given
 *       more than once (replicas), connection i goes to URL i mod their
 *       number: one process, so one set of CSRs made before one clock
 *       starts for all (loads started side by side would each make their
 *       CSRs while the others' clocks run).
 *       Connections are opened and warmed up (one cheap request each)
 *       before the clock starts.  --rate R paces the C connections to R
 *       requests/s in total; latency then counts from the scheduled send
 *       time, so a server that falls behind is not flattered.
 *       --latencies FILE writes each request's start (seconds from the
 *       clock's start) and latency (ms), one per line in the order they
 *       were sent, after a line "# start" with the clock's start (Unix
 *       time): to see when in a run the slow ones came.
 *   load --hold N --url URL --cacert PEM [--hold-seconds S]
 *       Opens N keep-alive connections (one GET /healthz each), spread
 *       over source addresses 127.0.0.1-16 (hwidd caps connections per
 *       address: 1,024 by default), prints "ready", and keeps them open
 *       S seconds.  Raises its own open-file limit to the hard limit.
 *
 * The bootstrap token comes from --token, else $HWID_TOKEN.
 *
 * Output: key=value on one line (requests, errors, seconds, rate, p50_ms,
 * p90_ms, p99_ms, max_ms, cpu_us_per_req: this process's CPU time per
 * request during the run, CSR making and warm-up excluded). */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "bench-util.h"
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#define MAX_CONNS 1024
#define MAX_URLS 16
#define BODY_MAX (64 * 1024)

typedef enum { MODE_HWID, MODE_CFSSL } load_mode;

typedef struct opts {
        const char *urls[MAX_URLS], *cacert, *token, *prefix, *tag, *latencies;
        int n_urls;
        load_mode mode;
        int conns, hold;
        long requests;
        double duration, rate, hold_seconds;
} opts;

typedef struct body {
        char *data;
        size_t len;
} body;

static opts o = { .mode = MODE_HWID, .conns = 1, .requests = 1000, .duration = 10, .prefix = "bench",
                  .tag = "", .hold_seconds = 30 };
static char **payloads;          /* one per request: CSR PEM or cfssl JSON */
static double *latency_ms;       /* per request index; NAN if not sent */
static double *start_s;          /* per request index: its start, from t_start */
static atomic_long next_req, n_errors;
static pthread_barrier_t barrier;
static double t_start;
static pthread_mutex_t err_lock = PTHREAD_MUTEX_INITIALIZER;
static bool err_shown;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        die_prog("load", fmt, ap);
}

/* ---- CSRs ---- */

/* A generator thread's P-256 keys, each with a request that carries it:
 * OpenSSL 3.0 spends far longer encoding a new key into a request than
 * signing one, so each key signs many requests (a new name each time). */
#define KEYS_PER_THREAD 32

typedef struct csr_maker {
        EVP_PKEY *key[KEYS_PER_THREAD];
        X509_REQ *req[KEYS_PER_THREAD];
} csr_maker;

static char *make_csr(csr_maker *m, long i) {
        int k = (int) (i % KEYS_PER_THREAD);
        X509_NAME *name = X509_NAME_new();
        BIO *b = BIO_new(BIO_s_mem());
        char cn[128], *data, *pem;
        long n;

        if (!m->key[k]) {
                m->key[k] = EVP_EC_gen("P-256");
                m->req[k] = X509_REQ_new();
                if (!m->key[k] || !m->req[k] || !X509_REQ_set_pubkey(m->req[k], m->key[k]))
                        die("cannot make a key");
        }
        snprintf(cn, sizeof(cn), "%s-%07ld", o.prefix, i);
        if (!name || !b || !X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (unsigned char *) cn, -1, -1, 0) ||
            !X509_REQ_set_subject_name(m->req[k], name) || X509_REQ_sign(m->req[k], m->key[k], EVP_sha256()) <= 0 ||
            !PEM_write_bio_X509_REQ(b, m->req[k]))
                die("cannot make a CSR");
        n = BIO_get_mem_data(b, &data);
        pem = strndup(data, (size_t) n);
        BIO_free(b);
        X509_NAME_free(name);
        if (!pem)
                die("out of memory");
        return pem;
}

/* cfssl's sign request: {"certificate_request": "<PEM, newlines escaped>"}. */
static char *cfssl_json(char *pem) {
        size_t n = strlen(pem), k = 0;
        char *j = malloc(2 * n + 64);

        if (!j)
                die("out of memory");
        k += (size_t) sprintf(j, "{\"certificate_request\":\"");
        for (size_t i = 0; i < n; i++) {
                if (pem[i] == '\n') {
                        j[k++] = '\\';
                        j[k++] = 'n';
                } else {
                        j[k++] = pem[i];
                }
        }
        strcpy(j + k, "\"}");
        free(pem);
        return j;
}

static void *gen_worker(void *arg) {
        long step = (long) (intptr_t) arg >> 16, first = (long) (intptr_t) arg & 0xffff;
        csr_maker m = { 0 };

        for (long i = first; i < o.requests; i += step) {
                char *pem = make_csr(&m, i);
                payloads[i] = o.mode == MODE_CFSSL ? cfssl_json(pem) : pem;
        }
        for (int k = 0; k < KEYS_PER_THREAD; k++) {
                X509_REQ_free(m.req[k]);
                EVP_PKEY_free(m.key[k]);
        }
        return NULL;
}

static void make_payloads(void) {
        long nth = sysconf(_SC_NPROCESSORS_ONLN);
        pthread_t th[16];

        if (nth < 1)
                nth = 1;
        if (nth > 16)
                nth = 16;
        payloads = calloc((size_t) o.requests + 1, sizeof(*payloads));
        latency_ms = malloc(((size_t) o.requests + 1) * sizeof(*latency_ms));
        start_s = malloc(((size_t) o.requests + 1) * sizeof(*start_s));
        if (!payloads || !latency_ms || !start_s)
                die("out of memory");
        for (long i = 0; i < o.requests; i++)
                latency_ms[i] = NAN;
        for (long t = 0; t < nth; t++)
                pthread_create(&th[t], NULL, gen_worker, (void *) (intptr_t) ((nth << 16) | t));
        for (long t = 0; t < nth; t++)
                pthread_join(th[t], NULL);
}

/* ---- HTTP ---- */

static size_t on_data(char *p, size_t size, size_t n, void *ud) {
        body *b = ud;
        size_t len = size * n, room = BODY_MAX - 1 - b->len;

        if (len > room)
                len = room; /* keep the start; it is only for error messages */
        memcpy(b->data + b->len, p, len);
        b->len += len;
        b->data[b->len] = '\0';
        return size * n;
}

typedef struct conn {
        CURL *h;
        struct curl_slist *hdrs;
        body resp;
        char err[CURL_ERROR_SIZE];
        const char *base; /* one of o.urls */
        char url[512];
} conn;

static void conn_init(conn *c, const char *base, const char *source) {
        char auth[512];

        c->base = base;
        c->h = curl_easy_init();
        c->resp.data = malloc(BODY_MAX);
        if (!c->h || !c->resp.data)
                die("cannot make a curl handle");
        curl_easy_setopt(c->h, CURLOPT_CAINFO, o.cacert);
        curl_easy_setopt(c->h, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(c->h, CURLOPT_WRITEDATA, &c->resp);
        curl_easy_setopt(c->h, CURLOPT_ERRORBUFFER, c->err);
        curl_easy_setopt(c->h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c->h, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(c->h, CURLOPT_TIMEOUT, 120L);
        curl_easy_setopt(c->h, CURLOPT_HTTP_VERSION, (long) CURL_HTTP_VERSION_1_1);
        if (source)
                curl_easy_setopt(c->h, CURLOPT_INTERFACE, source);
        c->hdrs = curl_slist_append(NULL, "Expect:");
        if (o.mode == MODE_HWID) {
                c->hdrs = curl_slist_append(c->hdrs, "Content-Type: application/pkcs10");
                if (o.token) {
                        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", o.token);
                        c->hdrs = curl_slist_append(c->hdrs, auth);
                }
        } else {
                c->hdrs = curl_slist_append(c->hdrs, "Content-Type: application/json");
        }
        curl_easy_setopt(c->h, CURLOPT_HTTPHEADER, c->hdrs);
}

static void conn_free(conn *c) {
        curl_slist_free_all(c->hdrs);
        curl_easy_cleanup(c->h);
        free(c->resp.data);
}

/* One request; the HTTP status, or 0 on a transport failure. */
static long do_request(conn *c, const char *path, const char *post) {
        long status = 0;

        snprintf(c->url, sizeof(c->url), "%s%s", c->base, path);
        curl_easy_setopt(c->h, CURLOPT_URL, c->url);
        if (post) {
                curl_easy_setopt(c->h, CURLOPT_POSTFIELDS, post);
                curl_easy_setopt(c->h, CURLOPT_POSTFIELDSIZE, (long) strlen(post));
        } else {
                curl_easy_setopt(c->h, CURLOPT_HTTPGET, 1L);
        }
        c->resp.len = 0;
        c->err[0] = '\0';
        if (curl_easy_perform(c->h) != CURLE_OK)
                return 0;
        curl_easy_getinfo(c->h, CURLINFO_RESPONSE_CODE, &status);
        return status;
}

static bool response_ok(const conn *c, long status) {
        if (o.mode == MODE_HWID)
                return status == 201 && c->resp.len > 0 && strstr(c->resp.data, "BEGIN CERTIFICATE");
        return status == 200 && c->resp.len > 0 && strstr(c->resp.data, "\"success\":true");
}

static void note_error(const conn *c, long status) {
        atomic_fetch_add(&n_errors, 1);
        pthread_mutex_lock(&err_lock);
        if (!err_shown) {
                fprintf(stderr, "load: first error: HTTP %ld %s %.300s\n", status, c->err,
                        c->resp.len ? c->resp.data : "");
                err_shown = true;
        }
        pthread_mutex_unlock(&err_lock);
}

static void warm_up(conn *c) {
        long st = o.mode == MODE_HWID ? do_request(c, "/healthz", NULL)
                                      : do_request(c, "/api/v1/cfssl/info", "{}");
        if (st != 200)
                die("warm-up request failed: HTTP %ld %s %.200s", st, c->err, c->resp.len ? c->resp.data : "");
}

static void *load_worker(void *arg) {
        long id = (long) (intptr_t) arg;
        const char *path = o.mode == MODE_HWID ? "/csr" : "/api/v1/cfssl/sign";
        double interval = o.rate > 0 ? (double) o.conns / o.rate : 0;
        conn c = { 0 };

        conn_init(&c, o.urls[id % o.n_urls], NULL);
        warm_up(&c);
        pthread_barrier_wait(&barrier);
        for (long k = 0;; k++) {
                double sched = t_start + (double) k * interval + (double) id * interval / o.conns, t0, t1;
                long i, st;

                if (o.rate > 0) {
                        t0 = now_s();
                        if (sched > t0) {
                                double d = sched - t0;
                                struct timespec ts = { (time_t) d, (long) ((d - (double) (time_t) d) * 1e9) };
                                nanosleep(&ts, NULL);
                        }
                }
                if (now_s() - t_start >= o.duration)
                        break;
                i = atomic_fetch_add(&next_req, 1);
                if (i >= o.requests)
                        break;
                t0 = o.rate > 0 ? sched : now_s();
                st = do_request(&c, path, payloads[i]);
                t1 = now_s();
                latency_ms[i] = (t1 - t0) * 1000.0;
                start_s[i] = t0 - t_start;
                if (!response_ok(&c, st))
                        note_error(&c, st);
        }
        conn_free(&c);
        return NULL;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;

        return x < y ? -1 : x > y;
}

static double pct(const double *v, long n, double p) {
        long i;

        if (n == 0)
                return 0;
        i = (long) ceil(p / 100.0 * (double) n) - 1;
        return v[i < 0 ? 0 : i >= n ? n - 1 : i];
}

/* CPU time of this process so far, in microseconds. */
static double cpu_us(void) {
        struct rusage ru;

        getrusage(RUSAGE_SELF, &ru);
        return (double) (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 +
               (double) (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

/* --latencies FILE: each request sent, its start and latency. */
static void write_latencies(void) {
        FILE *f = fopen(o.latencies, "w");
        struct timespec wall;

        if (!f)
                die("cannot write %s: %s", o.latencies, strerror(errno));
        clock_gettime(CLOCK_REALTIME, &wall); /* the clock's start as a time of day, to match logs */
        fprintf(f, "# start %.4f\n", (double) wall.tv_sec + (double) wall.tv_nsec / 1e9 - (now_s() - t_start));
        for (long i = 0; i < o.requests; i++)
                if (!isnan(latency_ms[i]))
                        fprintf(f, "%.4f %.2f\n", start_s[i], latency_ms[i]);
        if (fclose(f) != 0)
                die("cannot write %s: %s", o.latencies, strerror(errno));
}

static void run_load(void) {
        pthread_t th[MAX_CONNS];
        double elapsed, *v, sum = 0, cpu0;
        long n = 0;

        make_payloads();
        pthread_barrier_init(&barrier, NULL, (unsigned) o.conns + 1);
        for (long i = 0; i < o.conns; i++)
                if (pthread_create(&th[i], NULL, load_worker, (void *) (intptr_t) i) != 0)
                        die("cannot start thread %ld", i);
        t_start = now_s() + 0.05; /* every thread sees the same start */
        pthread_barrier_wait(&barrier);
        cpu0 = cpu_us(); /* CSRs made and connections warmed up: only the run counts */
        for (long i = 0; i < o.conns; i++)
                pthread_join(th[i], NULL);
        elapsed = now_s() - t_start;
        cpu0 = cpu_us() - cpu0;
        v = malloc(((size_t) o.requests + 1) * sizeof(*v));
        if (!v)
                die("out of memory");
        for (long i = 0; i < o.requests; i++)
                if (!isnan(latency_ms[i])) {
                        v[n++] = latency_ms[i];
                        sum += latency_ms[i];
                }
        qsort(v, (size_t) n, sizeof(*v), cmp_double);
        printf("tag=%s mode=%s conns=%d target_rate=%.0f requests=%ld errors=%ld seconds=%.3f rate=%.1f "
               "mean_ms=%.2f p50_ms=%.2f p90_ms=%.2f p99_ms=%.2f max_ms=%.2f cpu_us_per_req=%.1f\n",
               o.tag, o.mode == MODE_HWID ? "hwid" : "cfssl", o.conns, o.rate, n, atomic_load(&n_errors), elapsed,
               elapsed > 0 ? (double) n / elapsed : 0, n ? sum / (double) n : 0, pct(v, n, 50), pct(v, n, 90),
               pct(v, n, 99), n ? v[n - 1] : 0, n ? cpu0 / (double) n : 0);
        free(v);
        if (o.latencies)
                write_latencies();
}

static void run_hold(void) {
        conn *c = calloc((size_t) o.hold, sizeof(*c));
        char src[32];

        struct rlimit rl;

        if (!c)
                die("out of memory");
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                rl.rlim_cur = rl.rlim_max;
                (void) setrlimit(RLIMIT_NOFILE, &rl);
        }
        for (int i = 0; i < o.hold; i++) {
                snprintf(src, sizeof(src), "127.0.0.%d", 1 + i % 16);
                conn_init(&c[i], o.urls[0], src);
                if (do_request(&c[i], "/healthz", NULL) != 200)
                        die("connection %d: /healthz failed: %s", i, c[i].err);
        }
        printf("ready held=%d\n", o.hold);
        fflush(stdout);
        {
                double d = o.hold_seconds;
                struct timespec ts = { (time_t) d, (long) ((d - (double) (time_t) d) * 1e9) };
                nanosleep(&ts, NULL);
        }
        for (int i = 0; i < o.hold; i++)
                conn_free(&c[i]);
        free(c);
}

static void usage(void) {
        fprintf(stderr, "usage: load --url URL... --cacert PEM [--mode hwid|cfssl] [--token T] [--connections C]\n"
                        "            [--requests N] [--duration S] [--rate R] [--prefix NAME] [--tag TEXT]\n"
                        "            [--latencies FILE]\n"
                        "       load --hold N --url URL --cacert PEM [--hold-seconds S]\n");
        exit(2);
}

int main(int argc, char **argv) {
        static const struct option lo[] = {
                { "url", required_argument, NULL, 'u' },      { "cacert", required_argument, NULL, 'c' },
                { "mode", required_argument, NULL, 'm' },     { "token", required_argument, NULL, 't' },
                { "connections", required_argument, NULL, 'n' }, { "requests", required_argument, NULL, 'r' },
                { "duration", required_argument, NULL, 'd' }, { "rate", required_argument, NULL, 'R' },
                { "prefix", required_argument, NULL, 'p' },   { "tag", required_argument, NULL, 'g' },
                { "hold", required_argument, NULL, 'H' },     { "hold-seconds", required_argument, NULL, 'S' },
                { "latencies", required_argument, NULL, 'L' },
                {},
        };
        int ch;

        while ((ch = getopt_long(argc, argv, "", lo, NULL)) >= 0) {
                switch (ch) {
                case 'u':
                        if (o.n_urls == MAX_URLS)
                                die("at most %d --url", MAX_URLS);
                        o.urls[o.n_urls++] = optarg;
                        break;
                case 'c': o.cacert = optarg; break;
                case 'm':
                        if (strcmp(optarg, "hwid") == 0)
                                o.mode = MODE_HWID;
                        else if (strcmp(optarg, "cfssl") == 0)
                                o.mode = MODE_CFSSL;
                        else
                                usage();
                        break;
                case 't': o.token = optarg; break;
                case 'n': o.conns = atoi(optarg); break;
                case 'r': o.requests = atol(optarg); break;
                case 'd': o.duration = atof(optarg); break;
                case 'R': o.rate = atof(optarg); break;
                case 'p': o.prefix = optarg; break;
                case 'g': o.tag = optarg; break;
                case 'H': o.hold = atoi(optarg); break;
                case 'S': o.hold_seconds = atof(optarg); break;
                case 'L': o.latencies = optarg; break;
                default: usage();
                }
        }
        if (!o.n_urls || !o.cacert || o.conns < 1 || o.conns > MAX_CONNS || o.requests < 0 || o.requests >= (1L << 40) ||
            o.hold < 0 || o.hold > 100000)
                usage();
        if (!o.token)
                o.token = getenv("HWID_TOKEN"); /* a secret: better not in argv */
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
                die("curl_global_init failed");
        if (o.hold > 0)
                run_hold();
        else
                run_load();
        curl_global_cleanup();
        return 0;
}
