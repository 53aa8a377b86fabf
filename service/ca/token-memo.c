/* Checked bootstrap token secrets, remembered (token-memo.h). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "error.h"
#include "secret.h"
#include "token-memo.h"

#define DIGEST_LEN 32

typedef struct memo_entry {
        bool used;
        char id[sizeof(((store_token *) 0)->id)];
        uint8_t nonce[STORE_TOKEN_NONCE_LEN];
        uint8_t digest[DIGEST_LEN]; /* HMAC-SHA256(salt, secret) */
} memo_entry;

struct token_memo {
        pthread_mutex_t lock;
        uint8_t salt[32];
        size_t n;
        memo_entry *slots;
};

int token_memo_new(size_t slots, token_memo **ret) {
        token_memo *m = calloc(1, sizeof(*m));

        if (!m || !(m->slots = calloc(slots ? slots : 1, sizeof(*m->slots)))) {
                free(m);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        m->n = slots ? slots : 1;
        pthread_mutex_init(&m->lock, NULL);
        if (RAND_bytes(m->salt, sizeof(m->salt)) != 1) {
                token_memo_free(m);
                return hwid_fail(HWID_E_CRYPTO, "no randomness for the token memo's salt");
        }
        *ret = m;
        return 0;
}

void token_memo_free(token_memo *m) {
        if (!m)
                return;
        secret_wipe(m->salt, sizeof(m->salt));
        secret_wipe(m->slots, m->n * sizeof(*m->slots));
        free(m->slots);
        pthread_mutex_destroy(&m->lock);
        free(m);
}

/* The slot of (id, nonce): the nonce is random, its first bytes spread
 * tokens over the table. */
static memo_entry *slot_of(token_memo *m, const store_token *t) {
        uint64_t h;

        memcpy(&h, t->nonce, sizeof(h));
        return &m->slots[h % m->n];
}

static bool digest_of(const token_memo *m, const char *secret, uint8_t out[DIGEST_LEN]) {
        unsigned len = DIGEST_LEN;

        return HMAC(EVP_sha256(), m->salt, sizeof(m->salt), (const uint8_t *) secret, strlen(secret), out, &len) &&
               len == DIGEST_LEN;
}

static bool same_token(const memo_entry *e, const store_token *t) {
        return e->used && strcmp(e->id, t->id) == 0 && memcmp(e->nonce, t->nonce, sizeof(e->nonce)) == 0;
}

token_memo_verdict token_memo_check(token_memo *m, const store_token *t, const char *secret) {
        token_memo_verdict v = TOKEN_MEMO_UNKNOWN;
        uint8_t d[DIGEST_LEN], want[DIGEST_LEN];
        memo_entry *e;

        if (!t->derived || !digest_of(m, secret, d))
                return TOKEN_MEMO_UNKNOWN;
        pthread_mutex_lock(&m->lock);
        e = slot_of(m, t);
        if (same_token(e, t)) {
                memcpy(want, e->digest, sizeof(want));
                v = TOKEN_MEMO_MISMATCH;
        }
        pthread_mutex_unlock(&m->lock);
        if (v == TOKEN_MEMO_MISMATCH && secret_equal(d, want, sizeof(d)))
                v = TOKEN_MEMO_MATCH;
        secret_wipe(d, sizeof(d));
        secret_wipe(want, sizeof(want));
        return v;
}

void token_memo_remember(token_memo *m, const store_token *t, const char *secret) {
        memo_entry fresh = { .used = true };

        if (!t->derived || !digest_of(m, secret, fresh.digest))
                return;
        memcpy(fresh.id, t->id, sizeof(fresh.id));
        memcpy(fresh.nonce, t->nonce, sizeof(fresh.nonce));
        pthread_mutex_lock(&m->lock);
        *slot_of(m, t) = fresh;
        pthread_mutex_unlock(&m->lock);
        secret_wipe(&fresh, sizeof(fresh));
}
