/* sign-ceiling: the raw signing rate of a key on its backend, the ceiling
 * hwidd's issuance rate is compared with (bench/run.sh).
 *
 *   sign-ceiling p11 --module SO --token LABEL --object LABEL --pin-file F
 *                    [--threads N] [--seconds S]
 *       C_SignInit + C_Sign (CKM_ECDSA over a SHA-256 digest) in a loop, one
 *       session per thread, the module loaded through p11-kit.  No hwid
 *       code in the path: this is what the token itself can do.
 *   sign-ceiling hsm --key URI [--tcti T] [--seconds S]
 *       signatures of a digest through hsm/ (hwid's provider and backend),
 *       e.g. a TPM key on swtpm: what one hwid signature costs there.
 *   sign-ceiling openssl [--threads N] [--seconds S]
 *       OpenSSL's software ECDSA P-256: sign, then verify, of a digest.
 *
 * Prints key=value lines: "op=sign threads=N ops=… seconds=… rate=…". */
#include <getopt.h>
#include <stdarg.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench-util.h"

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <p11-kit/p11-kit.h>
#include <p11-kit/pkcs11.h>

#include "error.h"
#include "hsm.h"

#define MAX_THREADS 64

typedef struct opts {
        const char *mode, *module, *token, *object, *pin_file, *key, *tcti;
        int threads;
        double seconds;
} opts;

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        die_prog("sign-ceiling", fmt, ap);
}

/* Runs fn on n threads for `seconds`; each returns its operation count. */
typedef struct worker {
        pthread_t th;
        void *arg;
        unsigned long ops;
} worker;

static atomic_bool stop_flag;
static pthread_barrier_t start_barrier;

static void report(const char *op, int threads, unsigned long ops, double secs) {
        printf("op=%s threads=%d ops=%lu seconds=%.3f rate=%.1f\n", op, threads, ops, secs,
               secs > 0 ? (double) ops / secs : 0.0);
        fflush(stdout);
}

static void run_threads(const char *op, int n, double seconds, void *(*fn)(void *), void **args) {
        worker w[MAX_THREADS];
        unsigned long total = 0;
        double t0, t1;

        atomic_store(&stop_flag, false);
        pthread_barrier_init(&start_barrier, NULL, (unsigned) n + 1);
        for (int i = 0; i < n; i++) {
                w[i] = (worker) { .arg = args[i] };
                if (pthread_create(&w[i].th, NULL, fn, &w[i]) != 0)
                        die("cannot start a thread");
        }
        pthread_barrier_wait(&start_barrier);
        t0 = now_s();
        while (now_s() - t0 < seconds) {
                struct timespec ts = { 0, 20 * 1000 * 1000 };
                nanosleep(&ts, NULL);
        }
        atomic_store(&stop_flag, true);
        for (int i = 0; i < n; i++) {
                pthread_join(w[i].th, NULL);
                total += w[i].ops;
        }
        t1 = now_s();
        pthread_barrier_destroy(&start_barrier);
        report(op, n, total, t1 - t0);
}

/* ---- PKCS#11 ---- */

typedef struct p11_ctx {
        CK_FUNCTION_LIST *m;
        CK_SLOT_ID slot;
        CK_OBJECT_HANDLE key;
} p11_ctx;

static CK_SLOT_ID find_slot(CK_FUNCTION_LIST *m, const char *label) {
        CK_SLOT_ID slots[64];
        CK_ULONG n = 64;

        if (m->C_GetSlotList(CK_TRUE, slots, &n) != CKR_OK)
                die("C_GetSlotList failed");
        for (CK_ULONG i = 0; i < n; i++) {
                CK_TOKEN_INFO ti;
                if (m->C_GetTokenInfo(slots[i], &ti) != CKR_OK)
                        continue;
                size_t l = strlen(label);
                if (l <= sizeof(ti.label) && memcmp(ti.label, label, l) == 0 &&
                    (l == sizeof(ti.label) || ti.label[l] == ' '))
                        return slots[i];
        }
        die("no token labelled '%s'", label);
}

static void read_pin(const char *path, char *pin, size_t n) {
        FILE *f = fopen(path, "r");
        size_t len;

        if (!f || !fgets(pin, (int) n, f))
                die("cannot read the PIN from %s", path);
        fclose(f);
        len = strcspn(pin, "\r\n");
        pin[len] = '\0';
}

static CK_OBJECT_HANDLE find_key(CK_FUNCTION_LIST *m, CK_SESSION_HANDLE s, const char *label) {
        CK_OBJECT_CLASS cls = CKO_PRIVATE_KEY;
        CK_ATTRIBUTE t[] = { { CKA_CLASS, &cls, sizeof(cls) }, { CKA_LABEL, (void *) label, strlen(label) } };
        CK_OBJECT_HANDLE h = CK_INVALID_HANDLE;
        CK_ULONG found = 0;

        if (m->C_FindObjectsInit(s, t, 2) != CKR_OK || m->C_FindObjects(s, &h, 1, &found) != CKR_OK ||
            m->C_FindObjectsFinal(s) != CKR_OK || found != 1)
                die("no private key labelled '%s'", label);
        return h;
}

static void *p11_worker(void *arg) {
        worker *w = arg;
        p11_ctx *c = w->arg;
        CK_MECHANISM mech = { CKM_ECDSA, NULL, 0 };
        CK_SESSION_HANDLE s;
        unsigned char digest[32], sig[512];

        RAND_bytes(digest, sizeof(digest));
        if (c->m->C_OpenSession(c->slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s) != CKR_OK)
                die("C_OpenSession failed");
        pthread_barrier_wait(&start_barrier);
        while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
                CK_ULONG len = sizeof(sig);
                CK_RV rv = c->m->C_SignInit(s, &mech, c->key);
                if (rv == CKR_OK)
                        rv = c->m->C_Sign(s, digest, sizeof(digest), sig, &len);
                if (rv != CKR_OK)
                        die("C_Sign failed: %s (0x%lx)", p11_kit_strerror(rv), (unsigned long) rv);
                w->ops++;
        }
        c->m->C_CloseSession(s);
        return NULL;
}

static void run_p11(const opts *o) {
        p11_ctx c = { 0 };
        CK_SESSION_HANDLE s;
        char pin[256];
        void *args[MAX_THREADS];
        CK_RV rv;

        if (!o->module || !o->token || !o->object || !o->pin_file)
                die("p11 needs --module, --token, --object and --pin-file");
        c.m = p11_kit_module_load(o->module, 0);
        if (!c.m)
                die("cannot load %s: %s", o->module, p11_kit_message());
        if ((rv = p11_kit_module_initialize(c.m)) != CKR_OK)
                die("cannot initialize %s: %s", o->module, p11_kit_strerror(rv));
        c.slot = find_slot(c.m, o->token);
        read_pin(o->pin_file, pin, sizeof(pin));
        /* Login state belongs to the application: one login serves every session. */
        if (c.m->C_OpenSession(c.slot, CKF_SERIAL_SESSION | CKF_RW_SESSION, NULL, NULL, &s) != CKR_OK)
                die("C_OpenSession failed");
        rv = c.m->C_Login(s, CKU_USER, (CK_UTF8CHAR *) pin, strlen(pin));
        if (rv != CKR_OK && rv != CKR_USER_ALREADY_LOGGED_IN)
                die("C_Login failed: %s", p11_kit_strerror(rv));
        c.key = find_key(c.m, s, o->object);
        for (int i = 0; i < o->threads; i++)
                args[i] = &c;
        run_threads("p11-sign", o->threads, o->seconds, p11_worker, args);
        c.m->C_CloseSession(s);
        p11_kit_module_finalize(c.m);
        p11_kit_module_release(c.m);
}

/* ---- hsm/ (any backend) ---- */

static void run_hsm(const opts *o) {
        hsm_options ho = { .tcti = o->tcti };
        hwid_key *k = NULL;
        unsigned char digest[32], sig[512];
        unsigned long ops = 0;
        double t0, t;
        int r;

        if (!o->key)
                die("hsm needs --key URI");
        if ((r = hsm_init()) < 0 || (r = hwid_key_open(o->key, &ho, &k)) < 0)
                die("%s", hwid_strerror(r));
        RAND_bytes(digest, sizeof(digest));
        t0 = now_s();
        do {
                EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, hwid_key_pkey(k), HSM_PROPQ);
                size_t len = sizeof(sig);
                if (!ctx || EVP_PKEY_sign_init(ctx) <= 0 || EVP_PKEY_sign(ctx, sig, &len, digest, sizeof(digest)) <= 0)
                        die("signing through hsm/ failed: %s", hwid_strerror(-HWID_E_CRYPTO));
                EVP_PKEY_CTX_free(ctx);
                ops++;
                t = now_s();
        } while (t - t0 < o->seconds);
        report("hsm-sign", 1, ops, t - t0);
        hwid_key_free(k);
}

/* ---- OpenSSL software P-256 ---- */

typedef struct ossl_ctx {
        EVP_PKEY *key;
        bool verify;
        unsigned char digest[32], sig[80];
        size_t sig_len;
} ossl_ctx;

static void *ossl_worker(void *arg) {
        worker *w = arg;
        ossl_ctx *c = w->arg;
        EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, c->key, NULL);
        unsigned char sig[80];

        if (!ctx || (c->verify ? EVP_PKEY_verify_init(ctx) : EVP_PKEY_sign_init(ctx)) <= 0)
                die("EVP_PKEY init failed");
        pthread_barrier_wait(&start_barrier);
        while (!atomic_load_explicit(&stop_flag, memory_order_relaxed)) {
                size_t len = sizeof(sig);
                int ok = c->verify ? EVP_PKEY_verify(ctx, c->sig, c->sig_len, c->digest, sizeof(c->digest))
                                   : EVP_PKEY_sign(ctx, sig, &len, c->digest, sizeof(c->digest));
                if (ok != 1)
                        die("OpenSSL %s failed", c->verify ? "verify" : "sign");
                w->ops++;
        }
        EVP_PKEY_CTX_free(ctx);
        return NULL;
}

static void run_openssl(const opts *o) {
        ossl_ctx c[MAX_THREADS];
        void *args[MAX_THREADS];
        EVP_PKEY *key = EVP_EC_gen("P-256");

        if (!key)
                die("cannot make a P-256 key");
        for (int v = 0; v < 2; v++) {
                for (int i = 0; i < o->threads; i++) {
                        EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_pkey(NULL, key, NULL);
                        c[i] = (ossl_ctx) { .key = key, .verify = v == 1, .sig_len = sizeof(c[i].sig) };
                        RAND_bytes(c[i].digest, sizeof(c[i].digest));
                        if (!ctx || EVP_PKEY_sign_init(ctx) <= 0 ||
                            EVP_PKEY_sign(ctx, c[i].sig, &c[i].sig_len, c[i].digest, sizeof(c[i].digest)) != 1)
                                die("OpenSSL sign failed");
                        EVP_PKEY_CTX_free(ctx);
                        args[i] = &c[i];
                }
                run_threads(v ? "openssl-verify" : "openssl-sign", o->threads, o->seconds, ossl_worker, args);
        }
        EVP_PKEY_free(key);
}

static void usage(void) {
        fprintf(stderr, "usage: sign-ceiling p11 --module SO --token LABEL --object LABEL --pin-file F "
                        "[--threads N] [--seconds S]\n"
                        "       sign-ceiling hsm --key URI [--tcti T] [--seconds S]\n"
                        "       sign-ceiling openssl [--threads N] [--seconds S]\n");
        exit(2);
}

int main(int argc, char **argv) {
        static const struct option lo[] = {
                { "module", required_argument, NULL, 'm' }, { "token", required_argument, NULL, 't' },
                { "object", required_argument, NULL, 'o' }, { "pin-file", required_argument, NULL, 'p' },
                { "key", required_argument, NULL, 'k' },    { "tcti", required_argument, NULL, 'T' },
                { "threads", required_argument, NULL, 'n' }, { "seconds", required_argument, NULL, 's' },
                {},
        };
        opts o = { .threads = 1, .seconds = 3 };
        int c;

        if (argc < 2)
                usage();
        o.mode = argv[1];
        optind = 2;
        while ((c = getopt_long(argc, argv, "", lo, NULL)) >= 0) {
                switch (c) {
                case 'm': o.module = optarg; break;
                case 't': o.token = optarg; break;
                case 'o': o.object = optarg; break;
                case 'p': o.pin_file = optarg; break;
                case 'k': o.key = optarg; break;
                case 'T': o.tcti = optarg; break;
                case 'n': o.threads = atoi(optarg); break;
                case 's': o.seconds = atof(optarg); break;
                default: usage();
                }
        }
        if (o.threads < 1 || o.threads > MAX_THREADS || o.seconds <= 0)
                usage();
        if (strcmp(o.mode, "p11") == 0)
                run_p11(&o);
        else if (strcmp(o.mode, "hsm") == 0)
                run_hsm(&o);
        else if (strcmp(o.mode, "openssl") == 0)
                run_openssl(&o);
        else
                usage();
        return 0;
}
