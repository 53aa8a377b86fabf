/* CMP over HTTP (RFC 6712, RFC 9483 §6.1): POST /.well-known/cmp and
 * /.well-known/cmp/p/<label> (a label is a profile, as for EST), body and
 * answer application/pkixcmp.  A CMP answer, refusals included, is 200
 * with a signed PKIMessage; only what is not a PKIMessage at all gets an
 * HTTP error (400, 404, 405, 415; 413 from the transport).
 *
 * A transaction's messages may come on separate connections: its
 * OpenSSL server context stays here, by transactionID, until it ends
 * (pkiConf, an answer with implicit confirmation, a refusal) or times out.
 * A transactionID seen lately cannot begin a transaction again: a
 * replayed request is refused (transactionIdInUse).  The table is bounded
 * overall and per client address. */
#include <pthread.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/err.h>

#include "cmp.h"
#include "error.h"
#include "log.h"
#include "ossl-util.h"

#define CMP_PREFIX "/.well-known/cmp"
#define CMP_LABEL_PREFIX "/.well-known/cmp/p/"
#define CMP_LABEL_MAX 64
#define CMP_TABLE_MAX 4096        /* transactions open or seen lately */
#define CMP_OPEN_PER_PEER 64      /* open at once from one address */
#define CMP_SEEN_TTL 3600         /* how long a transactionID stays used */

typedef struct cmp_entry {
        uint8_t tid[CMP_TID_MAX];
        size_t tid_len;
        char peer[64];
        cmp_txn *txn;      /* NULL: closed, remembered against replay */
        bool busy;         /* a message of it is being answered */
        int64_t expires;
} cmp_entry;

struct cmp_table {
        pthread_mutex_t lock;
        cmp_entry e[CMP_TABLE_MAX];
};

static pthread_mutex_t table_once = PTHREAD_MUTEX_INITIALIZER;

static cmp_table *table_of(ca_service *ca) {
        cmp_table *t = atomic_load(&ca->cmp);

        if (t)
                return t;
        pthread_mutex_lock(&table_once);
        if (!(t = atomic_load(&ca->cmp)) && (t = calloc(1, sizeof(*t)))) {
                pthread_mutex_init(&t->lock, NULL);
                ca->cmp_free = cmp_table_free;
                atomic_store(&ca->cmp, t);
        }
        pthread_mutex_unlock(&table_once);
        return t;
}

void cmp_table_free(cmp_table *t) {
        if (!t)
                return;
        for (size_t i = 0; i < CMP_TABLE_MAX; i++)
                cmp_txn_free(t->e[i].txn);
        pthread_mutex_destroy(&t->lock);
        free(t);
}

/* Under t->lock: ends what has expired; the entry of tid, if any. */
static cmp_entry *find_locked(cmp_table *t, const uint8_t *tid, size_t len, int64_t now) {
        cmp_entry *hit = NULL;

        for (size_t i = 0; i < CMP_TABLE_MAX; i++) {
                cmp_entry *e = &t->e[i];

                if (e->tid_len && !e->busy && e->expires <= now) {
                        cmp_txn_free(e->txn);
                        *e = (cmp_entry) { 0 };
                }
                if (e->tid_len == len && len && memcmp(e->tid, tid, len) == 0)
                        hit = e;
        }
        return hit;
}

static size_t open_from(const cmp_table *t, const char *peer) {
        size_t n = 0;

        for (size_t i = 0; i < CMP_TABLE_MAX; i++)
                n += t->e[i].txn && strcmp(t->e[i].peer, peer) == 0;
        return n;
}

/* A free entry, else the closed one that expires first. */
static cmp_entry *free_locked(cmp_table *t) {
        cmp_entry *best = NULL;

        for (size_t i = 0; i < CMP_TABLE_MAX; i++) {
                cmp_entry *e = &t->e[i];

                if (!e->tid_len)
                        return e;
                if (!e->txn && !e->busy && (!best || e->expires < best->expires))
                        best = e;
        }
        return best;
}

static bool begins_transaction(int type) {
        return type == CMP_BODY_IR || type == CMP_BODY_CR || type == CMP_BODY_P10CR ||
               type == CMP_BODY_KUR || type == CMP_BODY_RR || type == CMP_BODY_GENM;
}

/* The transaction a message belongs to: *ret_entry (busy, in the table)
 * or, for one that cannot be kept, *ret_txn alone (freed by the caller). */
typedef struct cmp_slot {
        cmp_entry *entry;
        cmp_txn *txn;
        bool replayed;
} cmp_slot;

static int take_slot(cmp_table *t, ca_service *ca, const http_request *req, const char *label, int type,
                     const cmp_view *v, cmp_slot *ret) {
        int64_t now = (int64_t) time(NULL);
        cmp_entry *e;
        int r = 0;

        pthread_mutex_lock(&t->lock);
        e = find_locked(t, v->tid, v->tid_len, now);
        if (e && !begins_transaction(type) && e->txn && !e->busy) {
                e->busy = true;
                ret->entry = e;
                ret->txn = e->txn;
        } else if (begins_transaction(type) && !e && v->tid_len) {
                if (open_from(t, req->peer_addr) >= CMP_OPEN_PER_PEER)
                        r = hwid_fail(HWID_E_RATE_LIMITED, "too many open CMP transactions from %s", req->peer_addr);
                else if (!(e = free_locked(t)))
                        r = hwid_fail(HWID_E_RATE_LIMITED, "too many open CMP transactions");
                else if ((r = cmp_txn_new(ca, label, &ret->txn)) >= 0) {
                        cmp_txn_free(e->txn);
                        *e = (cmp_entry) { .tid_len = v->tid_len, .txn = ret->txn, .busy = true, .expires = now };
                        memcpy(e->tid, v->tid, v->tid_len);
                        snprintf(e->peer, sizeof(e->peer), "%s", req->peer_addr ? req->peer_addr : "");
                        ret->entry = e;
                }
        } else {
                /* A replay, a message of no open transaction, or one answered
                 * right now: OpenSSL and the callbacks refuse it. */
                ret->replayed = e && begins_transaction(type);
                r = cmp_txn_new(ca, label, &ret->txn);
        }
        pthread_mutex_unlock(&t->lock);
        return r;
}

static void release_slot(cmp_table *t, cmp_slot *s, bool open) {
        int64_t now = (int64_t) time(NULL);

        if (!s->entry) {
                cmp_txn_free(s->txn);
                return;
        }
        pthread_mutex_lock(&t->lock);
        s->entry->busy = false;
        if (open) {
                s->entry->expires = now + cmp_txn_ttl(s->txn);
        } else {
                cmp_txn_free(s->entry->txn);
                s->entry->txn = NULL;
                s->entry->expires = now + CMP_SEEN_TTL;
        }
        pthread_mutex_unlock(&t->lock);
}

/* ---------- HTTP ---------- */

static void http_fail(ca_service *ca, http_response *resp, int r) {
        char text[512];

        snprintf(text, sizeof(text), "%s", hwid_public_message(r));
        if (hwid_err_http_status(r) >= 500) {
                atomic_fetch_add(&ca->n_errors, 1);
                log_error("CMP request failed: %s", hwid_strerror(r));
        }
        http_respond_text(resp, hwid_err_http_status(r), hwid_err_slug(r), text);
}

static int decode(const http_request *req, OSSL_CMP_MSG **ret_msg, cmp_view *ret_view) {
        static const char want[] = "application/pkixcmp";
        const char *ct = req->content_type;
        const unsigned char *p = req->body;
        OSSL_CMP_MSG *msg;
        size_t n = strlen(want);
        int r;

        if (!ct || strncasecmp(ct, want, n) != 0 || (ct[n] && ct[n] != ';' && ct[n] != ' '))
                return hwid_fail(HWID_E_INVALID, "CMP over HTTP wants Content-Type: application/pkixcmp, not %s",
                                 ct ? ct : "none");
        if (!req->body_len)
                return hwid_fail(HWID_E_INVALID, "the body is empty: send a DER PKIMessage");
        msg = d2i_OSSL_CMP_MSG(NULL, &p, (long) req->body_len);
        if (!msg || p != req->body + req->body_len) {
                OSSL_CMP_MSG_free(msg);
                ERR_clear_error();
                return hwid_fail(HWID_E_INVALID, "the body is not one DER PKIMessage (RFC 4210)");
        }
        if ((r = cmp_view_parse(req->body, req->body_len, ret_view)) < 0) {
                OSSL_CMP_MSG_free(msg);
                return r;
        }
        *ret_msg = msg;
        return 0;
}

static int encode(const OSSL_CMP_MSG *rsp, http_response *resp) {
        unsigned char *der = NULL;
        int len = rsp ? i2d_OSSL_CMP_MSG(rsp, &der) : -1;
        int r = 0;

        if (len <= 0)
                return hwid_fail_ossl(HWID_E_INTERNAL, "no CMP answer could be made");
        buf_reset(&resp->body);
        if (buf_append(&resp->body, der, (size_t) len) < 0)
                r = hwid_fail(HWID_E_NOMEM, NULL);
        OPENSSL_free(der);
        resp->status = 200;
        resp->content_type = "application/pkixcmp";
        return r;
}

static void answer(ca_service *ca, const http_request *req, const char *label, http_response *resp) {
        cmp_table *t = table_of(ca);
        OSSL_CMP_MSG *msg = NULL, *rsp = NULL;
        cmp_view v = { 0 };
        cmp_slot s = { 0 };
        bool open = false;
        int r = t ? decode(req, &msg, &v) : hwid_fail(HWID_E_NOMEM, NULL);

        if (r >= 0 && (r = take_slot(t, ca, req, label, OSSL_CMP_MSG_get_bodytype(msg), &v, &s)) >= 0) {
                rsp = cmp_txn_process(s.txn, req, msg, &v, s.replayed, &open);
                release_slot(t, &s, open);
                r = encode(rsp, resp);
        }
        if (r < 0)
                http_fail(ca, resp, r);
        OSSL_CMP_MSG_free(rsp);
        OSSL_CMP_MSG_free(msg);
        cmp_view_clear(&v);
}

static bool label_ok(const char *s) {
        size_t n = strlen(s);

        if (n == 0 || n > CMP_LABEL_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.", s[i]))
                        return false;
        return true;
}

bool ca_cmp_route(ca_service *ca, const http_request *req, http_response *resp) {
        const char *label = NULL;
        char msg[160];

        if (strncmp(req->path, CMP_LABEL_PREFIX, strlen(CMP_LABEL_PREFIX)) == 0)
                label = req->path + strlen(CMP_LABEL_PREFIX);
        else if (strcmp(req->path, CMP_PREFIX) != 0 && strcmp(req->path, CMP_PREFIX "/") != 0)
                return strncmp(req->path, CMP_PREFIX "/", strlen(CMP_PREFIX "/")) == 0
                       ? (http_respond_text(resp, 404, "not_found",
                                            "no such CMP path: POST /.well-known/cmp or /.well-known/cmp/p/<profile>"),
                          true)
                       : false;
        if (label && (!label_ok(label) || !policy_profile_find(ca->cfg->policy, label))) {
                snprintf(msg, sizeof(msg), "no CMP label %.64s: a label is the name of a profile", label);
                http_respond_text(resp, 404, "not_found", msg);
        } else if (strcmp(req->method, "POST") != 0) {
                http_respond_text(resp, 405, "method_not_allowed", "CMP over HTTP is POST of a PKIMessage");
        } else {
                answer(ca, req, label, resp);
        }
        return true;
}
