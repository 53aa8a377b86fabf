/* ocsp-load: an OCSP load generator (bench/ocsp.sh).
 *
 *   ocsp-load --url URL --connections C --duration S REQUEST.der...
 *       C threads each keep one HTTP connection alive (a libcurl easy
 *       handle, reused; reopened when a server closes it) and POST the
 *       requests (DER, application/ocsp-request) round robin for S
 *       seconds, after one warm-up request each.  An answer counts when it
 *       is HTTP 200 with a successful OCSPResponse (responseStatus 0: a
 *       signed answer, never tryLater or another refusal).
 *
 * Output: key=value on one line (requests, errors, seconds, rate, p50_ms,
 * p99_ms, max_ms). */
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "bench-util.h"

#define MAX_CONNS 1024
#define MAX_REQS 4096
#define ANSWER_MAX (64 * 1024)
#define LAT_MAX (1L << 22)

typedef struct blob {
        uint8_t *data;
        size_t len;
} blob;

static const char *url;
static int conns = 1;
static double duration = 5;
static blob reqs[MAX_REQS];
static int n_reqs;
static double *lat;
static atomic_long n_lat, n_errors, next_req;
static pthread_barrier_t barrier;
static double t_start;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        die_prog("ocsp-load", fmt, ap);
}

static void read_blob(const char *path, blob *ret) {
        FILE *f = fopen(path, "rb");
        uint8_t *p = malloc(ANSWER_MAX);
        size_t n;

        if (!f || !p)
                die("cannot read %s", path);
        n = fread(p, 1, ANSWER_MAX, f);
        fclose(f);
        if (n == 0 || n == ANSWER_MAX)
                die("%s is empty or too long", path);
        *ret = (blob) { p, n };
}

static size_t on_data(char *p, size_t size, size_t n, void *ud) {
        blob *b = ud;
        size_t len = size * n;

        if (len > ANSWER_MAX - b->len)
                len = ANSWER_MAX - b->len;
        memcpy(b->data + b->len, p, len);
        b->len += len;
        return size * n;
}

/* OCSPResponse ::= SEQUENCE { responseStatus ENUMERATED (0: successful), responseBytes ... } */
static bool successful(const blob *b) {
        size_t at = 2;

        if (b->len < 5 || b->data[0] != 0x30)
                return false;
        if (b->data[1] & 0x80)
                at += b->data[1] & 0x7f;
        return at + 3 <= b->len && b->data[at] == 0x0a && b->data[at + 1] == 0x01 && b->data[at + 2] == 0x00;
}

static CURL *handle(blob *answer, struct curl_slist *hdrs) {
        CURL *h = curl_easy_init();

        if (!h)
                die("cannot make a curl handle");
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, answer);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 60L);
        curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long) CURL_HTTP_VERSION_1_1);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
        return h;
}

/* One request; whether its answer was a signed one. */
static bool ask(CURL *h, blob *answer, const blob *req) {
        long status = 0;

        curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->data);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long) req->len);
        answer->len = 0;
        if (curl_easy_perform(h) != CURLE_OK)
                return false;
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        return status == 200 && successful(answer);
}

static void *worker(void *arg) {
        struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/ocsp-request");
        blob answer = { malloc(ANSWER_MAX), 0 };
        CURL *h;

        hdrs = curl_slist_append(hdrs, "Expect:");
        if (!answer.data || !hdrs)
                die("out of memory");
        h = handle(&answer, hdrs);
        if (!ask(h, &answer, &reqs[(intptr_t) arg % n_reqs]))
                die("the warm-up request got no signed answer from %s", url);
        pthread_barrier_wait(&barrier);
        while (now_s() - t_start < duration) {
                long i = atomic_fetch_add(&next_req, 1);
                double t0 = now_s();
                bool ok = ask(h, &answer, &reqs[i % n_reqs]);
                long k = atomic_fetch_add(&n_lat, 1);

                if (k < LAT_MAX)
                        lat[k] = (now_s() - t0) * 1000.0;
                if (!ok)
                        atomic_fetch_add(&n_errors, 1);
        }
        curl_easy_cleanup(h);
        curl_slist_free_all(hdrs);
        free(answer.data);
        return NULL;
}

static int cmp_double(const void *a, const void *b) {
        double x = *(const double *) a, y = *(const double *) b;

        return x < y ? -1 : x > y;
}

static double pct(long n, double p) {
        long i = (long) ceil(p / 100.0 * (double) n) - 1;

        return n ? lat[i < 0 ? 0 : i >= n ? n - 1 : i] : 0;
}

static void run(void) {
        pthread_t th[MAX_CONNS];
        double elapsed;
        long n;

        if (!(lat = malloc(LAT_MAX * sizeof(*lat))))
                die("out of memory");
        pthread_barrier_init(&barrier, NULL, (unsigned) conns + 1);
        for (long i = 0; i < conns; i++)
                if (pthread_create(&th[i], NULL, worker, (void *) (intptr_t) i) != 0)
                        die("cannot start thread %ld", i);
        t_start = now_s() + 0.05;
        pthread_barrier_wait(&barrier);
        for (long i = 0; i < conns; i++)
                pthread_join(th[i], NULL);
        elapsed = now_s() - t_start;
        n = atomic_load(&n_lat) < LAT_MAX ? atomic_load(&n_lat) : LAT_MAX;
        qsort(lat, (size_t) n, sizeof(*lat), cmp_double);
        printf("conns=%d requests=%ld errors=%ld seconds=%.3f rate=%.1f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f\n", conns,
               atomic_load(&n_lat), atomic_load(&n_errors), elapsed,
               elapsed > 0 ? (double) (atomic_load(&n_lat) - atomic_load(&n_errors)) / elapsed : 0, pct(n, 50),
               pct(n, 99), n ? lat[n - 1] : 0);
}

int main(int argc, char **argv) {
        static const struct option lo[] = {
                { "url", required_argument, NULL, 'u' },
                { "connections", required_argument, NULL, 'n' },
                { "duration", required_argument, NULL, 'd' },
                {},
        };
        int ch;

        while ((ch = getopt_long(argc, argv, "", lo, NULL)) >= 0) {
                switch (ch) {
                case 'u': url = optarg; break;
                case 'n': conns = atoi(optarg); break;
                case 'd': duration = atof(optarg); break;
                default: die("usage: ocsp-load --url URL --connections C --duration S REQUEST.der...");
                }
        }
        if (!url || conns < 1 || conns > MAX_CONNS || optind >= argc || argc - optind > MAX_REQS)
                die("usage: ocsp-load --url URL --connections C --duration S REQUEST.der...");
        for (int i = optind; i < argc; i++)
                read_blob(argv[i], &reqs[n_reqs++]);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        run();
        curl_global_cleanup();
        return 0;
}
