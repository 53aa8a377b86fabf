/* The tokens a workload socket hands out (see workload-internal.h).
 *
 * One entry per configured audience, made at start, so the cache is
 * bounded by the configuration and no caller can make it grow.  A fresh
 * token is read under `lock` alone; a token to make takes `sign_lock`
 * first, and whoever waited on it finds the token the one before it made
 * (so a burst of requests after a renewal still costs one signature per
 * audience), then the TPM's turn (workload.h).  Whether DIR's certificate
 * changed is one stat() of DIR/cert.pem per request: a renewal (this
 * agent's, or hwid renew's) writes a new file there. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <json-c/json.h>

#include "device.h"
#include "error.h"
#include "fsutil.h"
#include "jws.h"
#include "log.h"
#include "workload-internal.h"

/* After a failed signature, requests for that audience get its error for
 * this long without trying again: a TPM that is gone is not asked 1,000
 * times a second. */
#define RETRY_AFTER 1

/* Which certificate file DIR/cert.pem is (through its links). */
typedef struct wl_stamp {
        dev_t dev;
        ino_t ino;
        off_t size;
        struct timespec mtim, ctim;
} wl_stamp;

typedef struct wl_entry {
        const char *audience;  /* the configuration's */
        char *claims;          /* the operator's claims plus aud, as text */
        char *token;           /* NULL: none yet */
        int64_t iat, exp, refresh_at;
        wl_stamp stamp;        /* the certificate the token was made with */
        int64_t failed_at;     /* the last failed signature, 0: none since the last good one */
        int failed_r;
        char failed_why[384];
} wl_entry;

struct wl_tokens {
        const workload_opts *o;
        const workload_socket_conf *conf;
        char *cert_path;             /* DIR/cert.pem */
        pthread_mutex_t lock;        /* entries */
        pthread_mutex_t sign_lock;   /* one signature at a time */
        wl_entry *entries;
        size_t n;
};

void wl_token_clear(wl_token *t) {
        free(t->token);
        *t = (wl_token) { 0 };
}

void wl_tokens_free(wl_tokens *t) {
        if (!t)
                return;
        for (size_t i = 0; i < t->n; i++) {
                free(t->entries[i].claims);
                free(t->entries[i].token);
        }
        free(t->entries);
        free(t->cert_path);
        pthread_mutex_destroy(&t->lock);
        pthread_mutex_destroy(&t->sign_lock);
        free(t);
}

/* The claims every token for audience carries besides the identity's. */
static int entry_claims(const workload_socket_conf *conf, const char *audience, char **ret) {
        json_object *o = NULL;
        int r = 0;

        if (conf->claims)
                r = jws_json_object(conf->claims, strlen(conf->claims), false, "the claims", &o);
        else if (!(o = json_object_new_object()))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        if (r < 0)
                return r;
        json_object_object_add(o, "aud", json_object_new_string(audience));
        *ret = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
        return *ret ? 0 : hwid_fail(HWID_E_NOMEM, NULL);
}

int wl_tokens_new(const workload_opts *o, const workload_socket_conf *conf, wl_tokens **ret) {
        _cleanup_(wl_tokens_freep) wl_tokens *t = calloc(1, sizeof(*t));
        size_t n = 0;
        int r;

        if (!t)
                return hwid_fail(HWID_E_NOMEM, NULL);
        pthread_mutex_init(&t->lock, NULL);
        pthread_mutex_init(&t->sign_lock, NULL);
        t->o = o;
        t->conf = conf;
        while (conf->audiences[n])
                n++;
        if (!(t->cert_path = path_join(o->dir, "cert.pem")) || !(t->entries = calloc(n, sizeof(*t->entries))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (; t->n < n; t->n++) {
                t->entries[t->n].audience = conf->audiences[t->n];
                if ((r = entry_claims(conf, conf->audiences[t->n], &t->entries[t->n].claims)) < 0)
                        return r;
        }
        *ret = TAKE_PTR(t);
        return 0;
}

static int stamp_now(const wl_tokens *t, wl_stamp *ret) {
        struct stat st;

        if (stat(t->cert_path, &st) < 0)
                return hwid_fail(errno == ENOENT ? HWID_E_NOT_FOUND : HWID_E_IO, "%s holds no certificate: %s",
                                 t->o->dir, strerror(errno));
        *ret = (wl_stamp) { .dev = st.st_dev, .ino = st.st_ino, .size = st.st_size, .mtim = st.st_mtim,
                            .ctim = st.st_ctim };
        return 0;
}

static bool stamp_eq(const wl_stamp *a, const wl_stamp *b) {
        return a->dev == b->dev && a->ino == b->ino && a->size == b->size && a->mtim.tv_sec == b->mtim.tv_sec &&
               a->mtim.tv_nsec == b->mtim.tv_nsec && a->ctim.tv_sec == b->ctim.tv_sec &&
               a->ctim.tv_nsec == b->ctim.tv_nsec;
}

static wl_entry *find(wl_tokens *t, const char *audience) {
        for (size_t i = 0; i < t->n; i++)
                if (strcmp(t->entries[i].audience, audience) == 0)
                        return &t->entries[i];
        return NULL;
}

static int copy_out(const wl_entry *e, wl_token *ret) {
        char *tok = strdup(e->token);

        if (!tok)
                return hwid_fail(HWID_E_NOMEM, NULL);
        *ret = (wl_token) { .token = tok, .iat = e->iat, .exp = e->exp };
        return 1;
}

/* e's token has not expired and was made with the certificate st. */
static bool still_good(const wl_entry *e, const wl_stamp *st, int64_t now) {
        return e->token && stamp_eq(&e->stamp, st) && now >= e->iat && now < e->exp;
}

/* Under t->lock: 1 and a copy of e's token when it may be handed out at
 * now for the certificate st; the error of a signature that failed just
 * now (or the token still good meanwhile); else 0: a token must be made. */
static int handout(const wl_entry *e, const wl_stamp *st, int64_t now, wl_token *ret) {
        bool good = still_good(e, st, now);

        if (good && now < e->refresh_at)
                return copy_out(e, ret);
        if (e->failed_at && now >= e->failed_at && now < e->failed_at + RETRY_AFTER)
                return good ? copy_out(e, ret) : hwid_fail((hwid_err) -e->failed_r, "%s", e->failed_why);
        return 0;
}

/* A new token for e, and the certificate file it was made with (as it
 * was before signing: if a renewal comes meanwhile, the next request sees
 * a change and makes another). */
static int make_token(wl_tokens *t, wl_entry *e, int64_t now, wl_stamp *ret_stamp, char **ret_token,
                      int64_t *ret_exp) {
        jws_device_opts jo = { .dir = t->o->dir, .tcti = t->o->tcti, .claims = e->claims,
                               .identity_claims = t->conf->identity_claims, .ttl = t->conf->ttl, .now = now };
        wl_stamp before, after;
        int r;

        for (int attempt = 0;; attempt++) {
                if ((r = stamp_now(t, &before)) < 0)
                        return r;
                if ((r = jws_device_sign(&jo, ret_token, ret_exp)) >= 0) {
                        *ret_stamp = before;
                        return 0;
                }
                /* A renewal replaced the generation as it was read (its
                 * files removed, its old key deleted): once more. */
                if (attempt > 0 || stamp_now(t, &after) < 0 || stamp_eq(&before, &after))
                        return r;
        }
}

/* Under t->lock. */
static void store(wl_tokens *t, wl_entry *e, char *token, int64_t iat, int64_t exp, const wl_stamp *st) {
        free(e->token);
        *e = (wl_entry) { .audience = e->audience, .claims = e->claims, .token = token, .iat = iat, .exp = exp,
                          .refresh_at = iat + (int64_t) (t->conf->reuse * (double) (exp - iat)), .stamp = *st };
}

/* Under t->lock: a signature failed.  A token of the same certificate
 * that has not expired is still good: it is handed out meanwhile. */
static int failed(wl_tokens *t, wl_entry *e, int r, int64_t now, const wl_stamp *st, wl_token *ret) {
        e->failed_at = now;
        e->failed_r = r;
        snprintf(e->failed_why, sizeof(e->failed_why), "%s", hwid_strerror(r));
        wl_say(t->o, LOG_LVL_WARNING, "%s: cannot sign a token for audience '%s': %s", t->conf->path, e->audience,
               e->failed_why);
        if (still_good(e, st, now))
                return copy_out(e, ret);
        return hwid_fail((hwid_err) -r, "%s", e->failed_why);
}

/* The TPM's turn for a signature (see workload.h): 0 once taken; 1 with a
 * copy of e's token, still good, when a renewal has the turn. */
static int take_turn(wl_tokens *t, wl_entry *e, const wl_stamp *st, int64_t now, wl_token *ret) {
        pthread_mutex_t *turn = t->o->tpm_turn;
        int r = 0;

        if (!turn || pthread_mutex_trylock(turn) == 0)
                return 0;
        pthread_mutex_lock(&t->lock);
        if (still_good(e, st, now))
                r = copy_out(e, ret);
        pthread_mutex_unlock(&t->lock);
        if (r == 0)
                pthread_mutex_lock(turn);
        return r;
}

static void give_turn(wl_tokens *t) {
        if (t->o->tpm_turn)
                pthread_mutex_unlock(t->o->tpm_turn);
}

/* Under t->sign_lock: the token made by whoever held it before, or a new one. */
static int refresh(wl_tokens *t, wl_entry *e, wl_token *ret) {
        int64_t now = (int64_t) time(NULL), exp = 0;
        _cleanup_free_ char *token = NULL;
        wl_stamp st;
        char until[32];
        int r;

        if ((r = stamp_now(t, &st)) < 0)
                return r;
        pthread_mutex_lock(&t->lock);
        r = handout(e, &st, now, ret);
        pthread_mutex_unlock(&t->lock);
        if (r != 0 || (r = take_turn(t, e, &st, now, ret)) != 0)
                return r < 0 ? r : 0;
        now = (int64_t) time(NULL); /* the turn may have taken a while */
        r = make_token(t, e, now, &st, &token, &exp);
        give_turn(t);
        pthread_mutex_lock(&t->lock);
        if (r < 0)
                r = failed(t, e, r, now, &st, ret);
        else {
                store(t, e, TAKE_PTR(token), now, exp, &st);
                r = copy_out(e, ret);
        }
        pthread_mutex_unlock(&t->lock);
        if (r >= 0 && exp) {
                device_fmt_utc(exp, until);
                wl_say(t->o, LOG_LVL_INFO, "%s: token for audience '%s' signed, valid until %s", t->conf->path,
                       e->audience, until);
        }
        return r < 0 ? r : 0;
}

int wl_tokens_get(wl_tokens *t, const char *audience, wl_token *ret) {
        wl_entry *e = find(t, audience);
        wl_stamp st;
        int r;

        if (!e)
                return hwid_fail(HWID_E_FORBIDDEN, "audience '%.64s' is not served on %s", audience, t->conf->path);
        if ((r = stamp_now(t, &st)) < 0)
                return r;
        pthread_mutex_lock(&t->lock);
        r = handout(e, &st, (int64_t) time(NULL), ret);
        pthread_mutex_unlock(&t->lock);
        if (r != 0)
                return r < 0 ? r : 0;
        pthread_mutex_lock(&t->sign_lock);
        r = refresh(t, e, ret);
        pthread_mutex_unlock(&t->sign_lock);
        return r;
}
