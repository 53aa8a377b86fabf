/* Token buckets per client address in a fixed, hashed table. */
#include <math.h> /* isfinite only: no libm needed */
#include <pthread.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>

#include <openssl/rand.h>

#include "error.h"
#include "ratelimit.h"

#define RATELIMIT_DEFAULT_SLOTS 4096
#define RATELIMIT_WAYS 8 /* slots an address may occupy (probe window) */

typedef struct bucket {
        uint8_t addr[16];
        uint8_t addr_len; /* 0: free */
        double tokens;
        double last; /* monotonic seconds of the last refill */
} bucket;

struct ratelimit {
        pthread_mutex_t lock;
        double rate;
        double burst;
        size_t nslots;
        uint64_t key[2]; /* hash key, random per process */
        bucket *slots;
};

/* Whole seconds >= 1 for a positive wait, capped at a day. */
static int64_t ceil_secs(double x) {
        int64_t n;

        if (!(x < 86400.0))
                return 86400;
        n = (int64_t) x;
        if ((double) n < x)
                n++;
        return n < 1 ? 1 : n;
}

int ratelimit_new(double rate, unsigned burst, size_t slots, ratelimit **ret) {
        ratelimit *rl;

        if (!(rate > 0) || !isfinite(rate))
                return hwid_fail(HWID_E_INVALID, "rate limit must be a positive number");
        if (slots == 0)
                slots = RATELIMIT_DEFAULT_SLOTS;
        if (slots < RATELIMIT_WAYS)
                slots = RATELIMIT_WAYS;
        rl = calloc(1, sizeof(*rl));
        if (!rl)
                return hwid_fail(HWID_E_NOMEM, NULL);
        rl->slots = calloc(slots, sizeof(bucket));
        if (!rl->slots) {
                free(rl);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        if (RAND_bytes((unsigned char *) rl->key, sizeof(rl->key)) != 1) {
                free(rl->slots);
                free(rl);
                return hwid_fail_ossl(HWID_E_CRYPTO, "cannot seed the rate limiter");
        }
        pthread_mutex_init(&rl->lock, NULL);
        rl->rate = rate;
        rl->burst = burst > 0 ? (double) burst : (double) ceil_secs(rate);
        rl->nslots = slots;
        *ret = rl;
        return 0;
}

void ratelimit_free(ratelimit *rl) {
        if (!rl)
                return;
        pthread_mutex_destroy(&rl->lock);
        free(rl->slots);
        free(rl);
}

/* Keyed hash of the address: a few rounds of a 64-bit mixer (splitmix64
 * finaliser) over key-whitened input.  Not a MAC; it only has to make slot
 * positions unpredictable to clients. */
static uint64_t mix64(uint64_t x) {
        x ^= x >> 30;
        x *= 0xbf58476d1ce4e5b9ULL;
        x ^= x >> 27;
        x *= 0x94d049bb133111ebULL;
        x ^= x >> 31;
        return x;
}

static uint64_t addr_hash(const ratelimit *rl, const uint8_t *a, size_t n) {
        uint64_t h = rl->key[0] ^ n, w[2] = { 0, 0 };

        memcpy(w, a, n);
        h = mix64(h ^ w[0]);
        h = mix64(h ^ w[1] ^ rl->key[1]);
        return h;
}

static double monotonic_now(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* The slot for addr: its own, else a free one, else the least recently
 * used one in its probe window (reset to a full bucket). */
static bucket *find_slot(ratelimit *rl, const uint8_t *a, size_t n, double now) {
        size_t base = (size_t) (addr_hash(rl, a, n) % rl->nslots);
        bucket *victim = NULL;

        for (size_t i = 0; i < RATELIMIT_WAYS; i++) {
                bucket *b = &rl->slots[(base + i) % rl->nslots];

                if (b->addr_len == n && memcmp(b->addr, a, n) == 0)
                        return b;
                if (!victim || (victim->addr_len != 0 && (b->addr_len == 0 || b->last < victim->last)))
                        victim = b;
        }
        memset(victim, 0, sizeof(*victim));
        memcpy(victim->addr, a, n);
        victim->addr_len = (uint8_t) n;
        victim->tokens = rl->burst;
        victim->last = now;
        return victim;
}

/* Under rl->lock: the address's bucket, refilled up to now. */
static bucket *refilled_locked(ratelimit *rl, const void *addr, size_t addr_len, double now) {
        bucket *b = find_slot(rl, addr, addr_len, now);

        if (now > b->last) {
                b->tokens += (now - b->last) * rl->rate;
                if (b->tokens > rl->burst)
                        b->tokens = rl->burst;
                b->last = now;
        }
        return b;
}

static int64_t take_or_peek(ratelimit *rl, const void *addr, size_t addr_len, double now, bool take) {
        int64_t wait = 0;
        bucket *b;

        if (!rl || !addr || addr_len == 0 || addr_len > 16)
                return 0;
        pthread_mutex_lock(&rl->lock);
        b = refilled_locked(rl, addr, addr_len, now);
        if (b->tokens < 1.0)
                wait = ceil_secs((1.0 - b->tokens) / rl->rate);
        else if (take)
                b->tokens -= 1.0;
        pthread_mutex_unlock(&rl->lock);
        return wait;
}

int64_t ratelimit_take_at(ratelimit *rl, const void *addr, size_t addr_len, double now) {
        return take_or_peek(rl, addr, addr_len, now, true);
}

int64_t ratelimit_peek(ratelimit *rl, const void *addr, size_t addr_len) {
        return take_or_peek(rl, addr, addr_len, monotonic_now(), false);
}

int64_t ratelimit_take(ratelimit *rl, const void *addr, size_t addr_len) {
        return ratelimit_take_at(rl, addr, addr_len, monotonic_now());
}
