#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <curl/curl.h>

#include "error.h"
#include "factory.h"
#include "fsutil.h"
#include "secret.h"

#define DEVICES_FILE_MAX (16 * 1024 * 1024)
#define TOKENS_FILE_MAX (16 * 1024 * 1024)
#define TOKEN_MAX 128
#define NAME_MAX_LEN 64

const char *factory_outcome_name(factory_outcome o) {
        static const char *const names[] = { "enrolled", "already enrolled", "pending", "failed" };

        return o <= FACTORY_FAILED ? names[o] : "?";
}

static void device_clear(factory_device *d) {
        free(d->name);
        free(d->tcti);
        free(d->key_uri);
        free(d->dir);
}

static void devices_free(factory_device *v, size_t n) {
        for (size_t i = 0; v && i < n; i++)
                device_clear(&v[i]);
        free(v);
}

void factory_report_free(factory_report *r) {
        if (!r)
                return;
        devices_free(r->devices, r->n);
        for (size_t i = 0; r->results && i < r->n; i++)
                free(r->results[i].reason);
        free(r->results);
        free(r);
}

/* A name that is also safe as a directory name under OUT_DIR. */
static bool name_ok(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > NAME_MAX_LEN || strcmp(s, ".") == 0 || strcmp(s, "..") == 0)
                return false;
        for (const char *p = s; *p; p++)
                if (!isalnum((unsigned char) *p) && !strchr("._-", *p))
                        return false;
        return true;
}

/* Splits one line into at most 4 whitespace-separated fields, '#' starting
 * a comment; *ret_n is how many there were (5 means too many). */
static void split_fields(char *line, char *f[4], int *ret_n) {
        char *save = NULL, *tok;
        int n = 0;

        line[strcspn(line, "#")] = '\0';
        for (tok = strtok_r(line, " \t\r", &save); tok; tok = strtok_r(NULL, " \t\r", &save)) {
                if (n == 4) {
                        n = 5;
                        break;
                }
                f[n++] = tok;
        }
        *ret_n = n;
}

static int device_from_fields(const char *path, unsigned lineno, char *f[4], int n, const char *out_dir,
                              factory_device *ret) {
        factory_device d = { .line = lineno };

        if (n < 3 || n > 4)
                return hwid_fail(HWID_E_INVALID, "%s:%u: expected NAME TCTI KEY-URI [DIR]", path, lineno);
        if (!name_ok(f[0]))
                return hwid_fail(HWID_E_INVALID, "%s:%u: '%.80s' is not a device name (1-%d letters, digits, "
                                 "'.', '_', '-')", path, lineno, f[0], NAME_MAX_LEN);
        d.name = strdup(f[0]);
        d.tcti = strcmp(f[1], "-") == 0 ? NULL : strdup(f[1]);
        d.key_uri = strdup(f[2]);
        d.dir = n == 4 ? strdup(f[3]) : path_join(out_dir, f[0]);
        if (!d.name || (!d.tcti && strcmp(f[1], "-") != 0) || !d.key_uri || !d.dir) {
                device_clear(&d);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *ret = d;
        return 0;
}

static int cmp_str(const void *a, const void *b) {
        return strcmp(*(const char *const *) a, *(const char *const *) b);
}

/* Two devices with one name or one directory would trample each other. */
static int check_unique(const char *path, const factory_device *v, size_t n, bool dirs) {
        _cleanup_free_ const char **s = calloc(n ? n : 1, sizeof(char *));

        if (!s)
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (size_t i = 0; i < n; i++)
                s[i] = dirs ? v[i].dir : v[i].name;
        qsort(s, n, sizeof(char *), cmp_str);
        for (size_t i = 1; i < n; i++)
                if (strcmp(s[i - 1], s[i]) == 0)
                        return hwid_fail(HWID_E_INVALID, "%s: %s '%s' appears twice", path,
                                         dirs ? "directory" : "device", s[i]);
        return 0;
}

static int parse_devices(const char *path, char *text, const char *out_dir, factory_device *v, size_t *n) {
        unsigned lineno = 0;
        char *line;
        int r;

        /* strsep keeps empty lines, so line numbers stay right. */
        for (char *rest = text; (line = strsep(&rest, "\n"));) {
                char *f[4];
                int nf;

                lineno++;
                split_fields(line, f, &nf);
                if (nf == 0)
                        continue;
                if (*n == FACTORY_MAX_DEVICES)
                        return hwid_fail(HWID_E_TOO_LARGE, "%s: more than %d devices", path, FACTORY_MAX_DEVICES);
                if ((r = device_from_fields(path, lineno, f, nf, out_dir, &v[*n])) < 0)
                        return r;
                (*n)++;
        }
        return 0;
}

int factory_read_devices(const char *path, const char *out_dir, factory_device **ret, size_t *ret_n) {
        _cleanup_free_ char *text = NULL;
        factory_device *v = NULL;
        size_t len, n = 0, lines = 1;
        int r;

        if ((r = read_file_capped(path, DEVICES_FILE_MAX, &text, &len)) < 0)
                return r;
        for (size_t i = 0; i < len; i++)
                lines += text[i] == '\n';
        if (!(v = calloc(lines < FACTORY_MAX_DEVICES ? lines : FACTORY_MAX_DEVICES, sizeof(*v))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        r = parse_devices(path, text, out_dir ? out_dir : ".", v, &n);
        if (r >= 0 && n == 0)
                r = hwid_fail(HWID_E_INVALID, "%s names no device", path);
        if (r >= 0 && (r = check_unique(path, v, n, false)) >= 0)
                r = check_unique(path, v, n, true);
        if (r < 0) {
                devices_free(v, n);
                return r;
        }
        *ret = v;
        *ret_n = n;
        return 0;
}

static void tokens_free(char **t, size_t n) {
        for (size_t i = 0; t && i < n; i++)
                secret_free(t[i]);
        free(t);
}

/* One token per line; blank lines and '#' comments skipped.  The file's
 * text is wiped before it is freed.  Never names a token in an error. */
static int read_tokens(const char *path, char ***ret, size_t *ret_n) {
        char *text = NULL, *line, *rest;
        char **t = NULL;
        size_t len, n = 0, lineno = 0, lines = 1;
        int r;

        if ((r = read_file_capped(path, TOKENS_FILE_MAX, &text, &len)) < 0)
                return r;
        for (size_t i = 0; i < len; i++)
                lines += text[i] == '\n';
        if (!(t = calloc(lines + 1, sizeof(char *))))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        for (rest = text; r >= 0 && (line = strsep(&rest, "\n"));) {
                lineno++;
                line[strcspn(line, "\r")] = '\0';
                if (!line[0] || line[0] == '#')
                        continue;
                if (strlen(line) > TOKEN_MAX || strcspn(line, " \t") != strlen(line) || !strchr(line, '.'))
                        r = hwid_fail(HWID_E_TOKEN_INVALID, "%s:%zu does not hold a token (<id>.<secret>)", path,
                                      lineno);
                else if (!(t[n++] = strdup(line)))
                        r = hwid_fail(HWID_E_NOMEM, NULL);
        }
        secret_wipe(text, len);
        free(text);
        if (r < 0) {
                tokens_free(t, n);
                return r;
        }
        *ret = t;
        *ret_n = n;
        return 0;
}

typedef struct station {
        const factory_opts *o;
        factory_report *rep;
        char **tokens;          /* per device: its token, or NULL */
        pthread_mutex_t lock;
        size_t next, done;
} station;

static double now_seconds(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

static factory_outcome outcome_of(int r, join_result jr) {
        if (r == -HWID_E_PENDING)
                return FACTORY_PENDING;
        if (r < 0)
                return FACTORY_FAILED;
        return jr == JOIN_ENROLLED ? FACTORY_ENROLLED : jr == JOIN_ALREADY_ENROLLED ? FACTORY_ALREADY : FACTORY_PENDING;
}

/* One device, in a worker thread: only this thread touches tokens[i]. */
static void enroll_one(station *st, size_t i) {
        const factory_opts *o = st->o;
        factory_device *d = &st->rep->devices[i];
        join_opts jo = {
                .server = o->server, .servers = o->servers, .token = st->tokens[i], .ca_hash = o->ca_hash, .key_uri = d->key_uri,
                .cn = d->name, .dir = d->dir, .type = o->type, .tcti = d->tcti, .no_wait = true,
                .http_timeout = o->http_timeout, .clock_skew = DEVICE_CLOCK_SKEW_DEFAULT, .progress = o->progress,
                .progress_data = d, .attest = o->attest, .ek = o->ek,
        };
        factory_result res = { 0 };
        join_result jr = JOIN_PENDING;
        double t0 = now_seconds();
        int r;

        hwid_error_clear();
        r = join_run(&jo, &jr);
        secret_free(TAKE_PTR(st->tokens[i]));
        res.seconds = now_seconds() - t0;
        res.outcome = outcome_of(r, jr);
        if (res.outcome == FACTORY_FAILED && !(res.reason = strdup(hwid_strerror(r))))
                res.reason = NULL; /* the count still says it failed */
        pthread_mutex_lock(&st->lock);
        st->rep->results[i] = res;
        st->rep->counts[res.outcome]++;
        st->done++;
        if (o->done)
                o->done(o->userdata, st->rep, i, st->done);
        pthread_mutex_unlock(&st->lock);
}

static void *worker(void *p) {
        station *st = p;

        for (;;) {
                size_t i;

                pthread_mutex_lock(&st->lock);
                i = st->next++;
                pthread_mutex_unlock(&st->lock);
                if (i >= st->rep->n)
                        return NULL;
                enroll_one(st, i);
        }
}

/* Hands the tokens out in file order to the devices that need one; with
 * attestation, those left without one enroll by their EK. */
static int assign_tokens(const factory_opts *o, char **tokens, size_t n_tokens, const factory_report *rep,
                         char **per_device) {
        const char *path = o->tokens_file;
        size_t k = 0, need = 0;

        for (size_t i = 0; i < rep->n; i++)
                need += join_needs_token(rep->devices[i].dir, DEVICE_CLOCK_SKEW_DEFAULT);
        if (need > n_tokens && !o->attest)
                return hwid_fail(HWID_E_TOKEN_INVALID, "%s holds %zu token%s for %zu device%s that need one", path,
                                 n_tokens, n_tokens == 1 ? "" : "s", need, need == 1 ? "" : "s");
        for (size_t i = 0; i < rep->n && k < n_tokens; i++)
                if (join_needs_token(rep->devices[i].dir, DEVICE_CLOCK_SKEW_DEFAULT)) {
                        per_device[i] = TAKE_PTR(tokens[k]); /* TAKE_PTR evaluates twice: no k++ inside */
                        k++;
                }
        return 0;
}

static int run_workers(station *st, unsigned parallel) {
        pthread_t th[FACTORY_MAX_PARALLEL];
        unsigned started = 0;

        if (parallel > st->rep->n)
                parallel = (unsigned) st->rep->n;
        while (started < parallel && pthread_create(&th[started], NULL, worker, st) == 0)
                started++;
        if (started == 0)
                return hwid_fail(HWID_E_INTERNAL, "cannot start a worker thread");
        for (unsigned i = 0; i < started; i++)
                pthread_join(th[i], NULL);
        return 0;
}

static int report_new(factory_device *devices, size_t n, factory_report **ret) {
        factory_report *rep = calloc(1, sizeof(*rep));

        if (!rep || !(rep->results = calloc(n, sizeof(*rep->results)))) {
                free(rep);
                devices_free(devices, n);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        rep->devices = devices;
        rep->n = n;
        *ret = rep;
        return 0;
}

int factory_run(const factory_opts *o, factory_report **ret) {
        _cleanup_(factory_report_freep) factory_report *rep = NULL;
        station st = { .o = o };
        factory_device *devices;
        char **tokens = NULL;
        size_t n, n_tokens = 0;
        double t0 = now_seconds();
        int r;

        if (o->parallel < 1 || o->parallel > FACTORY_MAX_PARALLEL)
                return hwid_fail(HWID_E_USAGE, "parallel must be 1..%d", FACTORY_MAX_PARALLEL);
        if ((r = factory_read_devices(o->devices_file, o->out_dir, &devices, &n)) < 0 ||
            (r = report_new(devices, n, &rep)) < 0 ||
            (o->tokens_file && (r = read_tokens(o->tokens_file, &tokens, &n_tokens)) < 0))
                return r;
        if (!(st.tokens = calloc(n, sizeof(char *))))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        if (r >= 0)
                r = assign_tokens(o, tokens, n_tokens, rep, st.tokens);
        tokens_free(tokens, n_tokens); /* the ones no device took */
        /* Global initialisation before any thread runs. */
        if (r >= 0 && curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
                r = hwid_fail(HWID_E_INTERNAL, "cannot initialise libcurl");
        else if (r >= 0) {
                if ((r = hsm_init()) >= 0) {
                        st.rep = rep;
                        pthread_mutex_init(&st.lock, NULL);
                        r = run_workers(&st, o->parallel);
                        pthread_mutex_destroy(&st.lock);
                }
                curl_global_cleanup();
        }
        tokens_free(st.tokens, st.tokens ? n : 0);
        if (r < 0)
                return r;
        rep->seconds = now_seconds() - t0;
        *ret = TAKE_PTR(rep);
        return 0;
}
