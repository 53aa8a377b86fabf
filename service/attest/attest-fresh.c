/* Pending attestation challenges: each answered once, before it expires.
 *
 * attest_fresh is an interface (attest_fresh_ops) with two tables behind
 * it.  hwidd's is the store's (store_challenge_put/take): a challenge
 * survives a restart and is answered once whichever hwidd sharing the
 * database gets the answer.  The in-memory one serves tests and tools: a
 * bounded array scanned linearly, expired entries dropped as new ones
 * come, small because a challenge lives for a minute or so and costs the
 * CA a MakeCredential to make. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attest-verify.h"
#include "error.h"
#include "secret.h"
#include "store.h"

struct attest_fresh {
        const attest_fresh_ops *ops;
        void *impl;
};

int attest_fresh_new(const attest_fresh_ops *ops, void *impl, attest_fresh **ret) {
        attest_fresh *f = calloc(1, sizeof(*f));

        if (!f) {
                ops->free(impl);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *f = (attest_fresh) { .ops = ops, .impl = impl };
        *ret = f;
        return 0;
}

int attest_fresh_put(attest_fresh *f, const attest_pending *p, uint64_t now) {
        return f->ops->put(f->impl, p, now);
}

int attest_fresh_take(attest_fresh *f, const uint8_t id[ATTEST_ID_LEN], uint64_t now, attest_pending *ret) {
        return f->ops->take(f->impl, id, now, ret);
}

void attest_fresh_free(attest_fresh *f) {
        if (!f)
                return;
        f->ops->free(f->impl);
        free(f);
}

/* ---- In memory ---- */

typedef struct mem_table {
        pthread_mutex_t lock;
        size_t max, n;
        attest_pending **entries; /* the first n are in use */
} mem_table;

static void entry_free(attest_pending *p) {
        secret_wipe(p, sizeof(*p));
        free(p);
}

/* Drops entry i (the last one takes its place); with the lock held. */
static void mem_drop(mem_table *t, size_t i) {
        entry_free(t->entries[i]);
        t->entries[i] = t->entries[--t->n];
}

static void mem_purge(mem_table *t, uint64_t now) {
        for (size_t i = 0; i < t->n;)
                if (t->entries[i]->expires <= now)
                        mem_drop(t, i);
                else
                        i++;
}

static int mem_put(void *impl, const attest_pending *p, uint64_t now) {
        mem_table *t = impl;
        attest_pending *copy;
        int r = 0;

        pthread_mutex_lock(&t->lock);
        mem_purge(t, now);
        if (t->n == t->max)
                r = hwid_fail(HWID_E_RATE_LIMITED, "%zu attestations are already waiting for an answer", t->max);
        else if (!(copy = malloc(sizeof(*copy))))
                r = hwid_fail(HWID_E_NOMEM, NULL);
        else {
                *copy = *p;
                t->entries[t->n++] = copy;
        }
        pthread_mutex_unlock(&t->lock);
        return r;
}

static int mem_take(void *impl, const uint8_t id[ATTEST_ID_LEN], uint64_t now, attest_pending *ret) {
        mem_table *t = impl;
        size_t i;
        int r = 0;

        pthread_mutex_lock(&t->lock);
        for (i = 0; i < t->n; i++)
                if (memcmp(t->entries[i]->id, id, ATTEST_ID_LEN) == 0)
                        break;
        if (i == t->n)
                r = hwid_fail(HWID_E_ATTESTATION, "unknown attestation challenge (already answered, "
                              "expired, or never made)");
        else if (t->entries[i]->expires <= now)
                r = hwid_fail(HWID_E_ATTESTATION, "the attestation challenge has expired");
        else
                *ret = *t->entries[i];
        if (i < t->n)
                mem_drop(t, i);
        pthread_mutex_unlock(&t->lock);
        return r;
}

static void mem_free(void *impl) {
        mem_table *t = impl;

        if (!t)
                return;
        while (t->n > 0)
                mem_drop(t, 0);
        pthread_mutex_destroy(&t->lock);
        free(t->entries);
        free(t);
}

static const attest_fresh_ops mem_ops = {
        .put = mem_put,
        .take = mem_take,
        .free = mem_free,
};

int attest_fresh_new_memory(size_t max, attest_fresh **ret) {
        mem_table *t;

        if (max == 0)
                return hwid_fail(HWID_E_INVALID, "an attestation table must hold at least one challenge");
        t = calloc(1, sizeof(*t));
        if (!t || !(t->entries = calloc(max, sizeof(*t->entries)))) {
                free(t);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        pthread_mutex_init(&t->lock, NULL);
        t->max = max;
        return attest_fresh_new(&mem_ops, t, ret);
}

/* ---- In the store ---- */

typedef struct store_table {
        store *s;
        attest_bounds b;
} store_table;

static void id_hex(const uint8_t id[ATTEST_ID_LEN], char out[2 * ATTEST_ID_LEN + 1]) {
        for (size_t i = 0; i < ATTEST_ID_LEN; i++)
                snprintf(out + 2 * i, 3, "%02x", id[i]);
}

static int store_put(void *impl, const attest_pending *p, uint64_t now) {
        store_table *t = impl;
        uint8_t ak[TPM_PUBLIC_MAX];
        store_challenge c = {
                .ak_public = ak,
                .ek_cert = (uint8_t *) p->ek_cert,
                .ek_cert_len = p->ek_cert_len,
                .expires_at = (int64_t) p->expires,
        };
        int r = tpm_public_marshal(&p->ak, ak, &c.ak_public_len);

        if (r < 0)
                return r;
        id_hex(p->id, c.id);
        memcpy(c.secret_sha256, p->secret_sha256, sizeof(c.secret_sha256));
        memcpy(c.nonce, p->nonce, sizeof(c.nonce));
        c.requester = t->b.requester;
        return store_challenge_put(t->s, &c, (int64_t) now, t->b.max, t->b.max_per_requester, t->b.replaced);
}

static int store_take(void *impl, const uint8_t id[ATTEST_ID_LEN], uint64_t now, attest_pending *ret) {
        store_table *t = impl;
        _cleanup_(store_challenge_clear) store_challenge c = { 0 };
        attest_pending p = { 0 };
        char hex[2 * ATTEST_ID_LEN + 1];
        int r;

        id_hex(id, hex);
        r = store_challenge_take(t->s, hex, &c);
        if (r == -HWID_E_NOT_FOUND)
                return hwid_fail(HWID_E_ATTESTATION, "unknown attestation challenge (already answered, "
                                 "expired, or never made)");
        if (r < 0)
                return r;
        if (c.expires_at <= (int64_t) now)
                return hwid_fail(HWID_E_ATTESTATION, "the attestation challenge has expired");
        if (c.ek_cert_len > sizeof(p.ek_cert))
                return hwid_fail(HWID_E_STORE, "attestation challenge %.8s... is damaged", hex);
        r = tpm_public_unmarshal(c.ak_public, c.ak_public_len, "the stored AK public area", &p.ak);
        if (r < 0)
                return hwid_fail(HWID_E_STORE, "attestation challenge %.8s... is damaged", hex);
        memcpy(p.id, id, ATTEST_ID_LEN);
        p.expires = (uint64_t) c.expires_at;
        memcpy(p.secret_sha256, c.secret_sha256, sizeof(p.secret_sha256));
        memcpy(p.nonce, c.nonce, sizeof(p.nonce));
        memcpy(p.ek_cert, c.ek_cert, c.ek_cert_len);
        p.ek_cert_len = c.ek_cert_len;
        *ret = p;
        return 0;
}

static void store_table_free(void *impl) {
        free(impl);
}

static const attest_fresh_ops store_ops = {
        .put = store_put,
        .take = store_take,
        .free = store_table_free,
};

int attest_fresh_new_store(store *s, const attest_bounds *b, attest_fresh **ret) {
        store_table *t;

        if (!s || b->max == 0)
                return hwid_fail(HWID_E_INVALID, "an attestation table needs a store and room for a challenge");
        t = calloc(1, sizeof(*t));
        if (!t)
                return hwid_fail(HWID_E_NOMEM, NULL);
        *t = (store_table) { .s = s, .b = *b };
        return attest_fresh_new(&store_ops, t, ret);
}
