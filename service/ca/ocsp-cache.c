/* The OCSP responder's signed answers (ocsp-cache.h): a hash table of
 * entries, hashed with a per-process random seed, and a list of them from
 * the most to the least recently used. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "error.h"
#include "ocsp-cache.h"

typedef struct entry {
        struct entry *next;          /* in its bucket */
        struct entry *newer, *older; /* by use */
        uint64_t hash;
        uint8_t key[OCSP_CACHE_KEY_MAX];
        size_t key_len;
        ocsp_answer a;
        uint8_t *der;
        size_t len;
} entry;

struct ocsp_cache {
        pthread_mutex_t lock;
        size_t cap, n, mask;         /* mask + 1 buckets, a power of two */
        uint64_t seed;
        entry **buckets;
        entry *newest, *oldest;
};

int ocsp_cache_new(size_t cap, ocsp_cache **ret) {
        _cleanup_(ocsp_cache_freep) ocsp_cache *c = calloc(1, sizeof(*c));
        size_t nb = 16;

        if (!c)
                return hwid_fail(HWID_E_NOMEM, NULL);
        pthread_mutex_init(&c->lock, NULL);
        c->cap = cap ? cap : 1;
        while (nb < c->cap && nb < ((size_t) 1 << 24))
                nb <<= 1;
        c->mask = nb - 1;
        if (!(c->buckets = calloc(nb, sizeof(*c->buckets))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (RAND_bytes((unsigned char *) &c->seed, sizeof(c->seed)) != 1)
                return hwid_fail_ossl(HWID_E_CRYPTO, "no random seed for the OCSP cache");
        *ret = TAKE_PTR(c);
        return 0;
}

void ocsp_cache_free(ocsp_cache *c) {
        if (!c)
                return;
        for (entry *e = c->newest, *next; e; e = next) {
                next = e->older;
                free(e->der);
                free(e);
        }
        free(c->buckets);
        pthread_mutex_destroy(&c->lock);
        free(c);
}

/* FNV-1a from a secret start, then a final mix: a client cannot aim its
 * certIDs at one bucket it knows. */
static uint64_t key_hash(const ocsp_cache *c, const uint8_t *key, size_t len) {
        uint64_t h = 0xcbf29ce484222325ULL ^ c->seed;

        for (size_t i = 0; i < len; i++)
                h = (h ^ key[i]) * 0x100000001b3ULL;
        h ^= h >> 33;
        h *= 0xff51afd7ed558ccdULL;
        return h ^ (h >> 33);
}

/* The link that points to key's entry (*link NULL: none). */
static entry **find(ocsp_cache *c, uint64_t hash, const uint8_t *key, size_t len) {
        entry **link = &c->buckets[hash & c->mask];

        while (*link && !((*link)->hash == hash && (*link)->key_len == len && memcmp((*link)->key, key, len) == 0))
                link = &(*link)->next;
        return link;
}

static void lru_unlink(ocsp_cache *c, entry *e) {
        if (e->newer)
                e->newer->older = e->older;
        else
                c->newest = e->older;
        if (e->older)
                e->older->newer = e->newer;
        else
                c->oldest = e->newer;
        e->newer = e->older = NULL;
}

static void lru_front(ocsp_cache *c, entry *e) {
        e->older = c->newest;
        if (c->newest)
                c->newest->newer = e;
        c->newest = e;
        if (!c->oldest)
                c->oldest = e;
}

/* Removes the entry *link points to. */
static void drop(ocsp_cache *c, entry **link) {
        entry *e = *link;

        *link = e->next;
        lru_unlink(c, e);
        free(e->der);
        free(e);
        c->n--;
}

static bool same_status(const ocsp_answer *x, const ocsp_answer *y) {
        if (x->status != y->status)
                return false;
        return x->status != OCSP_CERT_REVOKED || (x->revoked_at == y->revoked_at && x->reason == y->reason);
}

int ocsp_cache_get(ocsp_cache *c, const uint8_t *key, size_t key_len, const ocsp_answer *a, int64_t now, buf *out,
                   bool *ret_fresh) {
        uint64_t hash = key_hash(c, key, key_len);
        entry **link, *e;
        int r = -HWID_E_NOT_FOUND;

        pthread_mutex_lock(&c->lock);
        link = find(c, hash, key, key_len);
        if ((e = *link) && (!same_status(&e->a, a) || now >= e->a.next_update)) {
                drop(c, link);
                e = NULL;
        }
        if (e && (r = buf_append(out, e->der, e->len)) >= 0) {
                *ret_fresh = now < e->a.this_update + (e->a.next_update - e->a.this_update) / 2;
                lru_unlink(c, e);
                lru_front(c, e);
        }
        pthread_mutex_unlock(&c->lock);
        return r;
}

/* A new entry for key holding a copy of der. */
static entry *entry_new(uint64_t hash, const uint8_t *key, size_t key_len, const ocsp_answer *a, const uint8_t *der,
                        size_t len) {
        entry *e = calloc(1, sizeof(*e));

        if (!e || !(e->der = malloc(len))) {
                free(e);
                return NULL;
        }
        e->hash = hash;
        memcpy(e->key, key, key_len);
        e->key_len = key_len;
        e->a = *a;
        memcpy(e->der, der, len);
        e->len = len;
        return e;
}

int ocsp_cache_put(ocsp_cache *c, const uint8_t *key, size_t key_len, const ocsp_answer *a, const uint8_t *der,
                   size_t len) {
        uint64_t hash = key_hash(c, key, key_len);
        entry **link, *e;

        if (key_len == 0 || key_len > OCSP_CACHE_KEY_MAX || len == 0)
                return hwid_fail(HWID_E_INVALID, "an OCSP answer the cache cannot keep");
        if (!(e = entry_new(hash, key, key_len, a, der, len)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        pthread_mutex_lock(&c->lock);
        if (*(link = find(c, hash, key, key_len)))
                drop(c, link);
        if (c->n >= c->cap)
                drop(c, find(c, c->oldest->hash, c->oldest->key, c->oldest->key_len));
        link = &c->buckets[hash & c->mask];
        e->next = *link;
        *link = e;
        lru_front(c, e);
        c->n++;
        pthread_mutex_unlock(&c->lock);
        return 0;
}

size_t ocsp_cache_size(ocsp_cache *c) {
        size_t n;

        pthread_mutex_lock(&c->lock);
        n = c->n;
        pthread_mutex_unlock(&c->lock);
        return n;
}
