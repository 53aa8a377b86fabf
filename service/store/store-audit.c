/* The audit hash chain's verification, the same for every store backend:
 * a walk over the chain as the store gives it (store_audit_chain_read()),
 * each record's hash checked (store_audit_hash(), store/core/) and every
 * break explained; and the signed checkpoints' encoding and their
 * verification. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "error.h"
#include "ossl-util.h"
#include "store.h"

#define CHECKPOINT_DOMAIN "hwid-audit-checkpoint-v1" /* signed with its terminating NUL */
#define RECENT_MAX 1024 /* earlier hashes kept to explain a broken link */

static const uint8_t zero_hash[STORE_AUDIT_HASH_LEN];

/* ---- checkpoints ---- */

static void be64(uint8_t *out, int64_t v) {
        for (int i = 0; i < 8; i++)
                out[i] = (uint8_t) ((uint64_t) v >> (56 - 8 * i));
}

void store_audit_checkpoint_message(const store_audit_checkpoint *cp, uint8_t ret[STORE_CHECKPOINT_MSG_LEN]) {
        uint8_t *p = ret;

        memcpy(p, CHECKPOINT_DOMAIN, sizeof(CHECKPOINT_DOMAIN));
        p += sizeof(CHECKPOINT_DOMAIN);
        *p++ = (uint8_t) cp->kind;
        be64(p, cp->id);
        be64(p + 8, cp->record_at);
        memcpy(p + 16, cp->hash, STORE_AUDIT_HASH_LEN);
        be64(p + 16 + STORE_AUDIT_HASH_LEN, cp->at);
}

static bool checkpoint_signed(EVP_PKEY *key, const store_audit_checkpoint *cp) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = EVP_MD_CTX_new();
        uint8_t msg[STORE_CHECKPOINT_MSG_LEN];

        store_audit_checkpoint_message(cp, msg);
        return md && EVP_DigestVerifyInit_ex(md, NULL, "SHA256", NULL, NULL, key, NULL) > 0 &&
               EVP_DigestVerify(md, cp->sig, cp->sig_len, msg, sizeof(msg)) == 1;
}

/* ---- verification ---- */

typedef struct recent {
        int64_t id;
        uint8_t hash[STORE_AUDIT_HASH_LEN];
} recent;

typedef struct walk {
        store_audit_report *rep;
        const store_audit_link *anchor; /* filled before the first record */
        bool started;
        uint8_t expect[STORE_AUDIT_HASH_LEN]; /* the prev_hash the next record must carry */
        int64_t prev_id;                      /* the record (or anchor) that hash belongs to; 0: none */
        bool have_prev;
        /* A record whose prev_hash is no earlier record's: read on to see
         * whether a later one has that hash (reordered) or none (deleted). */
        bool pending;
        int64_t pending_id;
        int64_t pending_after; /* the record before it in storage */
        uint8_t pending_prev[STORE_AUDIT_HASH_LEN];
        recent ring[RECENT_MAX];
        size_t n_ring;
        int r; /* a failure of the hash itself */
        /* Checkpoints (with a key): the newest of the head, and of a pruning. */
        EVP_PKEY *key;
        store_audit_checkpoint head_cp, prune_cp; /* kind 0: none */
        bool head_cp_reached;
        /* The records every head checkpoint signed, sorted before the first
         * record: what a checkpoint's note in the chain is looked up in. */
        int64_t *signed_ids;
        size_t n_signed, cap_signed;
        bool sorted;
} walk;

static bool done(const walk *w) {
        return w->rep->problem != AUDIT_OK;
}

static void report(walk *w, store_audit_problem p, int64_t id, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
static void report(walk *w, store_audit_problem p, int64_t id, const char *fmt, ...) {
        va_list ap;

        w->rep->problem = p;
        w->rep->id = id;
        va_start(ap, fmt);
        vsnprintf(w->rep->detail, sizeof(w->rep->detail), fmt, ap);
        va_end(ap);
}

static const recent *ring_find(const walk *w, const uint8_t *hash) {
        for (size_t i = 0; i < w->n_ring && i < RECENT_MAX; i++)
                if (memcmp(w->ring[i].hash, hash, STORE_AUDIT_HASH_LEN) == 0)
                        return &w->ring[i];
        return NULL;
}

static void ring_add(walk *w, int64_t id, const uint8_t *hash) {
        recent *e = &w->ring[w->n_ring++ % RECENT_MAX];

        e->id = id;
        memcpy(e->hash, hash, STORE_AUDIT_HASH_LEN);
}

static void describe_gap(walk *w) {
        if (w->pending_after)
                report(w, AUDIT_DELETED, w->pending_id,
                       "record %" PRId64 " follows a record that is no longer in the log: record(s) between "
                       "%" PRId64 " and %" PRId64 " were deleted", w->pending_id, w->pending_after, w->pending_id);
        else
                report(w, AUDIT_DELETED, w->pending_id,
                       "record %" PRId64 " follows a record that is no longer in the log: the oldest record(s) "
                       "before it were deleted (not by retention pruning)", w->pending_id);
}

/* Record a's prev_hash is not the hash of the record stored before it. */
static void broken_link(walk *w, const store_audit *a) {
        const recent *earlier = ring_find(w, a->prev_hash);

        if (earlier) {
                report(w, AUDIT_REORDERED, a->id,
                       "record %" PRId64 " was written right after record %" PRId64 ", but record(s) stored "
                       "between them were moved or inserted there", a->id, earlier->id);
                return;
        }
        w->pending = true;
        w->pending_id = a->id;
        w->pending_after = w->have_prev ? w->prev_id : 0;
        memcpy(w->pending_prev, a->prev_hash, STORE_AUDIT_HASH_LEN);
}

static const char *utc(int64_t t, char buf[32]) {
        time_t tt = (time_t) t;
        struct tm tm;

        if (!gmtime_r(&tt, &tm) || !strftime(buf, 32, "%Y-%m-%dT%H:%M:%SZ", &tm))
                snprintf(buf, 32, "%lld", (long long) t);
        return buf;
}

static int signed_add(walk *w, int64_t id) {
        if (w->n_signed == w->cap_signed) {
                size_t cap = w->cap_signed ? 2 * w->cap_signed : 64;
                int64_t *p = reallocarray(w->signed_ids, cap, sizeof(*p));

                if (!p)
                        return hwid_fail(HWID_E_NOMEM, NULL);
                w->signed_ids = p;
                w->cap_signed = cap;
        }
        w->signed_ids[w->n_signed++] = id;
        return 0;
}

static int cmp_id(const void *a, const void *b) {
        int64_t x = *(const int64_t *) a, y = *(const int64_t *) b;

        return (x > y) - (x < y);
}

static bool signed_has(walk *w, int64_t id) {
        if (!w->sorted && w->n_signed > 0)
                qsort(w->signed_ids, w->n_signed, sizeof(*w->signed_ids), cmp_id);
        w->sorted = true;
        return w->n_signed > 0 && bsearch(&id, w->signed_ids, w->n_signed, sizeof(id), cmp_id);
}

/* Every checkpoint's signature; the newest of each kind is kept. */
static int check_checkpoint(const store_audit_checkpoint *cp, void *userdata) {
        walk *w = userdata;
        store_audit_checkpoint *keep;
        char t[32];

        if (done(w))
                return 0;
        w->rep->n_checkpoints++;
        if (!checkpoint_signed(w->key, cp)) {
                report(w, AUDIT_CHECKPOINT, cp->id, "the checkpoint of record %" PRId64 " made at %s does not verify "
                       "with the CA's key: it was forged or altered", cp->id, utc(cp->at, t));
                return 0;
        }
        if (cp->kind != STORE_CHECKPOINT_PRUNE && (w->r = signed_add(w, cp->id)) < 0)
                return w->r;
        keep = cp->kind == STORE_CHECKPOINT_PRUNE ? &w->prune_cp : &w->head_cp;
        if (!keep->kind || cp->at > keep->at || (cp->at == keep->at && cp->id >= keep->id))
                *keep = *cp;
        return 0;
}

/* The record the newest head checkpoint signed must be in the chain, as signed. */
static void check_signed_record(walk *w, const store_audit *a) {
        char t[32];

        if (!w->head_cp.kind || a->id != w->head_cp.id || done(w))
                return;
        w->head_cp_reached = true;
        if (memcmp(a->hash, w->head_cp.hash, STORE_AUDIT_HASH_LEN) != 0 || a->at != w->head_cp.record_at)
                report(w, AUDIT_CHECKPOINT, a->id, "record %" PRId64 " is not the one the checkpoint made at %s "
                       "signed: the log was rewritten from there", a->id, utc(w->head_cp.at, t));
}

static bool is_note(const store_audit *a) {
        return a->actor && a->action && strcmp(a->actor, STORE_CHECKPOINT_NOTE_ACTOR) == 0 &&
               strcmp(a->action, STORE_CHECKPOINT_NOTE_ACTION) == 0;
}

/* hwidd's note of a checkpoint (store.h): the checkpoint it names is still
 * stored, unless its record was pruned since. */
static void check_note(walk *w, const store_audit *a) {
        long long id = 0;
        char again[32] = "";

        if (!w->key || !is_note(a))
                return;
        if (a->target && sscanf(a->target, "record %lld", &id) == 1)
                snprintf(again, sizeof(again), "record %lld", id);
        if (!a->target || strcmp(again, a->target) != 0 || id <= 0 || id >= a->id)
                report(w, AUDIT_CHECKPOINT, a->id, "record %" PRId64 " is a note of a checkpoint that names no earlier "
                       "record (\"%s\"): it was altered", a->id, a->target ? a->target : "");
        else if (!(w->anchor->set && id <= w->anchor->id) && !signed_has(w, id))
                report(w, AUDIT_CHECKPOINT, a->id, "the signed checkpoint of record %lld, noted by record %" PRId64
                       ", is no longer stored: signed checkpoints were deleted", id, a->id);
}

static int check_record(const store_audit *a, void *userdata) {
        walk *w = userdata;
        uint8_t h[STORE_AUDIT_HASH_LEN];

        if (done(w))
                return 0;
        if (!w->started && w->anchor->set) {
                /* The oldest records were pruned: the chain goes on from the anchor. */
                memcpy(w->expect, w->anchor->hash, STORE_AUDIT_HASH_LEN);
                w->prev_id = w->anchor->id;
                ring_add(w, w->anchor->id, w->anchor->hash);
        }
        w->started = true;
        w->rep->n_records++;
        if (!w->rep->first_id) {
                w->rep->first_id = a->id;
                w->rep->first_at = a->at;
        }
        w->rep->last_id = a->id;
        if (w->pending && memcmp(a->hash ? a->hash : zero_hash, w->pending_prev, STORE_AUDIT_HASH_LEN) == 0) {
                report(w, AUDIT_REORDERED, w->pending_id,
                       "record %" PRId64 " is stored before record %" PRId64 ", but was written after it",
                       w->pending_id, a->id);
                return 0;
        }
        if (!a->hash || !a->prev_hash) {
                report(w, AUDIT_MODIFIED, a->id, "record %" PRId64 " has lost its hash", a->id);
                return 0;
        }
        if ((w->r = store_audit_hash(a->prev_hash, a, h)) < 0)
                return w->r;
        if (CRYPTO_memcmp(h, a->hash, sizeof(h)) != 0) {
                report(w, AUDIT_MODIFIED, a->id,
                       "record %" PRId64 " was modified: its content does not match its hash", a->id);
                return 0;
        }
        if (!w->pending && memcmp(a->prev_hash, w->expect, STORE_AUDIT_HASH_LEN) != 0)
                broken_link(w, a);
        check_signed_record(w, a);
        check_note(w, a);
        ring_add(w, a->id, a->hash);
        memcpy(w->expect, a->hash, STORE_AUDIT_HASH_LEN);
        w->prev_id = a->id;
        w->have_prev = true;
        return 0;
}

/* The newest record must be the head: records deleted at the end leave a
 * head that no record matches. */
static void check_head(walk *w, const store_audit_link *anchor, const store_audit_link *head) {
        if (!head->set && (w->have_prev || anchor->set)) {
                report(w, AUDIT_HEAD, w->prev_id, "the audit chain's head is missing (deleted from the database)");
                return;
        }
        if (!head->set || (head->id == w->prev_id && memcmp(head->hash, w->expect, STORE_AUDIT_HASH_LEN) == 0))
                return;
        if (head->id > w->prev_id)
                report(w, AUDIT_DELETED, w->prev_id,
                       "the newest record(s) were deleted: the log ends at record %" PRId64 ", the chain's head "
                       "is record %" PRId64, w->prev_id, head->id);
        else
                report(w, AUDIT_HEAD, head->id,
                       "the chain's head (record %" PRId64 ") does not match the newest record %" PRId64,
                       head->id, w->prev_id);
}

/* The newest head checkpoint's record was met (or pruned since): the log
 * was not cut back before it. */
static void check_reached(walk *w, const store_audit_link *anchor) {
        const store_audit_checkpoint *h = &w->head_cp;
        char t[32];

        if (!h->kind || w->head_cp_reached || (anchor->set && h->id <= anchor->id))
                return;
        if (!w->have_prev || h->id > w->prev_id)
                report(w, AUDIT_DELETED, h->id, "the newest record(s) were deleted: the log ends at record %" PRId64
                       ", but the checkpoint made at %s signed record %" PRId64, w->have_prev ? w->prev_id : 0,
                       utc(h->at, t), h->id);
        else
                report(w, AUDIT_DELETED, h->id, "record %" PRId64 ", signed by the checkpoint made at %s, is no "
                       "longer in the log (deleted)", h->id, utc(h->at, t));
}

/* An anchor is what a signed pruning left, of a record older than the
 * retention then: never a row copied into place after deleting. */
static void check_anchor(walk *w, const store_audit_link *anchor, int64_t retention) {
        const store_audit_checkpoint *p = &w->prune_cp;
        char t[32], t2[32];

        if (!anchor->set && p->kind)
                report(w, AUDIT_CHECKPOINT, p->id, "the chain's anchor is missing, though records up to %" PRId64
                       " were pruned (checkpoint made at %s)", p->id, utc(p->at, t));
        else if (anchor->set && (!p->kind || p->id != anchor->id || p->record_at != anchor->at ||
                                 memcmp(p->hash, anchor->hash, STORE_AUDIT_HASH_LEN) != 0))
                report(w, AUDIT_CHECKPOINT, anchor->id, "the chain's anchor (record %" PRId64 ") was not left by a "
                       "signed pruning%s: the oldest record(s) were deleted and an anchor put in their place",
                       anchor->id, p->kind ? " (the last one pruned up to another record)" : "");
        else if (anchor->set && retention > 0 && p->record_at > p->at - retention)
                report(w, AUDIT_CHECKPOINT, anchor->id, "record %" PRId64 " (written %s) was pruned at %s, within the "
                       "retention: records still to be kept were deleted", anchor->id, utc(p->record_at, t),
                       utc(p->at, t2));
}

/* The walk and the checks after it, into rep. */
static int verify_walk(store *s, walk *w, store_audit_report *rep, EVP_PKEY *ca_key, int64_t retention) {
        store_audit_link anchor = { 0 }, head = { 0 };
        int r;

        w->rep = rep;
        w->anchor = &anchor;
        w->key = ca_key;
        r = store_audit_chain_read(s, &anchor, &head, ca_key ? check_checkpoint : NULL, check_record, w);
        if (r < 0)
                return r;
        if (w->r < 0)
                return w->r;
        if (w->pending && !done(w))
                describe_gap(w);
        if (!w->started && anchor.set) { /* everything pruned: the head is the anchor */
                memcpy(w->expect, anchor.hash, STORE_AUDIT_HASH_LEN);
                w->prev_id = anchor.id;
                w->have_prev = true;
        }
        if (!done(w))
                check_head(w, &anchor, &head);
        if (!done(w) && ca_key)
                check_reached(w, &anchor);
        if (!done(w) && ca_key)
                check_anchor(w, &anchor, retention);
        rep->last = w->head_cp;
        rep->anchored = anchor.set;
        rep->anchor_id = anchor.set ? anchor.id : 0;
        return 0;
}

int store_audit_verify(store *s, EVP_PKEY *ca_key, int64_t retention, store_audit_report *ret) {
        store_audit_report rep = { .problem = AUDIT_OK };
        _cleanup_free_ walk *w = calloc(1, sizeof(*w));
        int r;

        if (!w)
                return hwid_fail(HWID_E_NOMEM, NULL);
        r = verify_walk(s, w, &rep, ca_key, retention);
        free(w->signed_ids);
        if (r < 0)
                return r;
        if ((r = store_audit_pending(s, &rep.n_unchained)) < 0)
                return r;
        *ret = rep;
        return 0;
}
