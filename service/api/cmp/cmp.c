/* CMP over HTTP (RFC 6712, RFC 9483 §6.1): POST /.well-known/cmp and
 * /.well-known/cmp/p/<label> (a label is a profile, as for EST), body and
 * answer application/pkixcmp.  A CMP answer, refusals included, is 200
 * with a signed PKIMessage; only what is not a DER PKIMessage at all gets
 * an HTTP error (400, 404, 405, 415; 413 from the transport), and so does
 * an address past its share of signed answers to unauthenticated
 * messages (429).
 *
 * Each message is authenticated first (cmp-auth.c), once.  Every answer
 * is a signature by hwidd's TLS key, in the HSM or TPM: an address gets a
 * bounded number of them for messages nobody authenticated (unprotected,
 * or protection that does not verify), a token bucket per address; past
 * it, an unsigned 429.
 *
 * A transaction's messages may come on separate connections: its
 * OpenSSL server context stays here, by transactionID, until it ends
 * (pkiConf, an answer with implicit confirmation, a refusal) or times out.
 * Only an authenticated sender begins one, and only the same sender's
 * messages reach it: anyone else's (a certConf naming it, say) is answered
 * without touching it.  A transactionID seen lately cannot begin a
 * transaction again: a replayed request is refused (transactionIdInUse).
 * Open transactions are bounded overall, per client address and per
 * sender (a token, a signing certificate), so that no one fills the table
 * for everyone. */
#include <arpa/inet.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/err.h>

#include "cmp-internal.h"
#include "error.h"
#include "ossl-util.h"
#include "ratelimit.h"

#define CMP_PREFIX "/.well-known/cmp"
#define CMP_LABEL_PREFIX "/.well-known/cmp/p/"
#define CMP_LABEL_MAX 64
#define CMP_TABLE_MAX 4096        /* transactions open or seen lately */
#define CMP_OPEN_PER_PEER 64      /* open at once from one address */
#define CMP_OPEN_PER_SENDER 16    /* open at once by one token or certificate */
#define CMP_SEEN_TTL 3600         /* how long a transactionID stays used */
#define CMP_UNAUTH_RATE 1.0       /* signed answers a second to unauthenticated messages, per address, */
#define CMP_UNAUTH_BURST 16       /* after a burst of this many */

typedef struct cmp_table cmp_table;

typedef struct cmp_entry {
        uint8_t tid[CMP_TID_MAX];
        size_t tid_len;
        char peer[64];
        char sender[CMP_SENDER_MAX]; /* cmp_sender.key of who began it */
        cmp_txn *txn;      /* NULL: closed, remembered against replay */
        bool busy;         /* a message of it is being answered */
        int64_t expires;
} cmp_entry;

struct cmp_table {
        pthread_mutex_t lock;
        ratelimit *unauthenticated; /* signed answers to unauthenticated messages, per address */
        cmp_entry e[CMP_TABLE_MAX];
};

struct cmp_door {
        ca_service *ca;
        /* Made by the first CMP request (a megabyte nobody else needs). */
        pthread_mutex_t once;
        cmp_table *_Atomic table;
};

static void cmp_table_free(cmp_table *t);

static cmp_table *table_new(void) {
        cmp_table *t = calloc(1, sizeof(*t));

        if (t && ratelimit_new(CMP_UNAUTH_RATE, CMP_UNAUTH_BURST, 0, &t->unauthenticated) < 0) {
                free(t);
                return NULL;
        }
        if (t)
                pthread_mutex_init(&t->lock, NULL);
        return t;
}

static cmp_table *table_of(cmp_door *d) {
        cmp_table *t = atomic_load(&d->table);

        if (t)
                return t;
        pthread_mutex_lock(&d->once);
        if (!(t = atomic_load(&d->table)) && (t = table_new()))
                atomic_store(&d->table, t);
        pthread_mutex_unlock(&d->once);
        return t;
}

int cmp_door_new(ca_service *ca, cmp_door **ret) {
        cmp_door *d = calloc(1, sizeof(*d));

        if (!d)
                return hwid_fail(HWID_E_NOMEM, NULL);
        d->ca = ca;
        pthread_mutex_init(&d->once, NULL);
        *ret = d;
        return 0;
}

void cmp_door_free(cmp_door *d) {
        if (!d)
                return;
        cmp_table_free(atomic_load(&d->table));
        pthread_mutex_destroy(&d->once);
        free(d);
}

static void cmp_table_free(cmp_table *t) {
        if (!t)
                return;
        for (size_t i = 0; i < CMP_TABLE_MAX; i++)
                cmp_txn_free(t->e[i].txn);
        ratelimit_free(t->unauthenticated);
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

/* Open transactions from peer, and of sender. */
static void open_count(const cmp_table *t, const char *peer, const char *sender, size_t *ret_peer,
                       size_t *ret_sender) {
        *ret_peer = *ret_sender = 0;
        for (size_t i = 0; i < CMP_TABLE_MAX; i++) {
                if (!t->e[i].txn)
                        continue;
                *ret_peer += strcmp(t->e[i].peer, peer) == 0;
                *ret_sender += strcmp(t->e[i].sender, sender) == 0;
        }
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

/* Under t->lock: a new entry for the transaction m begins, within the
 * bounds per address, per sender and overall. */
static int open_locked(cmp_table *t, ca_service *ca, const http_request *req, const char *label,
                       const cmp_message *m, int64_t now, cmp_slot *ret) {
        const char *peer = req->peer_addr ? req->peer_addr : "";
        size_t from_peer, of_sender;
        cmp_entry *e;
        int r;

        open_count(t, peer, m->sender.key, &from_peer, &of_sender);
        if (from_peer >= CMP_OPEN_PER_PEER)
                return hwid_fail(HWID_E_RATE_LIMITED, "too many open CMP transactions from %s", peer);
        if (of_sender >= CMP_OPEN_PER_SENDER)
                return hwid_fail(HWID_E_RATE_LIMITED, "too many open CMP transactions of %s", m->sender.key);
        if (!(e = free_locked(t)))
                return hwid_fail(HWID_E_RATE_LIMITED, "too many open CMP transactions");
        if ((r = cmp_txn_new(ca, label, &ret->txn)) < 0)
                return r;
        cmp_txn_free(e->txn);
        *e = (cmp_entry) { .tid_len = m->view.tid_len, .txn = ret->txn, .busy = true, .expires = now };
        memcpy(e->tid, m->view.tid, m->view.tid_len);
        snprintf(e->peer, sizeof(e->peer), "%s", peer);
        snprintf(e->sender, sizeof(e->sender), "%s", m->sender.key);
        ret->entry = e;
        return 0;
}

static int take_slot(cmp_table *t, ca_service *ca, const http_request *req, const char *label,
                     const cmp_message *m, cmp_slot *ret) {
        bool authenticated = m->auth == 0 && m->sender.kind != CMP_AUTH_NONE;
        bool begins = begins_transaction(OSSL_CMP_MSG_get_bodytype(m->msg));
        int64_t now = (int64_t) time(NULL);
        cmp_entry *e;
        int r = 0;

        pthread_mutex_lock(&t->lock);
        e = find_locked(t, m->view.tid, m->view.tid_len, now);
        if (e && !begins && e->txn && !e->busy && authenticated && strcmp(e->sender, m->sender.key) == 0) {
                e->busy = true;
                ret->entry = e;
                ret->txn = e->txn;
        } else if (begins && !e && m->view.tid_len && authenticated) {
                r = open_locked(t, ca, req, label, m, now, ret);
        } else {
                /* A replay, a message of no transaction of its sender's (or
                 * of one answered right now), or one nobody authenticated:
                 * OpenSSL and the callbacks refuse it, the table unchanged. */
                ret->replayed = e && begins;
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
        ca_service_count_error(ca, "CMP request", r);
        http_respond_text(resp, hwid_err_http_status(r), hwid_err_slug(r), text);
}

/* The body as one PKIMessage in DER (RFC 6712 §3.3; BER is refused: what
 * hwid checks and what OpenSSL reads must be the very same bytes). */
static int decode_der(const http_request *req, OSSL_CMP_MSG **ret) {
        _cleanup_(OPENSSL_freep) unsigned char *der = NULL;
        const unsigned char *p = req->body;
        OSSL_CMP_MSG *msg = d2i_OSSL_CMP_MSG(NULL, &p, (long) req->body_len);
        int n = msg && p == req->body + req->body_len ? i2d_OSSL_CMP_MSG(msg, &der) : -1;

        if (n < 0 || (size_t) n != req->body_len || memcmp(der, req->body, req->body_len) != 0) {
                OSSL_CMP_MSG_free(msg);
                ERR_clear_error();
                return hwid_fail(HWID_E_INVALID, n < 0 ? "the body is not one DER PKIMessage (RFC 4210)"
                                                       : "the body is a PKIMessage but not in DER (RFC 6712 §3.3)");
        }
        *ret = msg;
        return 0;
}

static int decode(const http_request *req, cmp_message *m) {
        static const char want[] = "application/pkixcmp";
        const char *ct = req->content_type;
        size_t n = strlen(want);
        int r;

        if (!ct || strncasecmp(ct, want, n) != 0 || (ct[n] && ct[n] != ';' && ct[n] != ' '))
                return hwid_fail(HWID_E_INVALID, "CMP over HTTP wants Content-Type: application/pkixcmp, not %s",
                                 ct ? ct : "none");
        if (!req->body_len)
                return hwid_fail(HWID_E_INVALID, "the body is empty: send a DER PKIMessage");
        if ((r = decode_der(req, &m->msg)) < 0 || (r = cmp_view_parse(req->body, req->body_len, &m->view)) < 0)
                return r;
        m->der = req->body;
        m->der_len = req->body_len;
        if (m->view.protection_nid != NID_undef)
                return cmp_unprotected(req->body, req->body_len, &m->plain);
        if (!(m->plain = OSSL_CMP_MSG_dup(m->msg)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        return 0;
}

static void message_clear(cmp_message *m) {
        OSSL_CMP_MSG_free(m->plain);
        OSSL_CMP_MSG_free(m->msg);
        cmp_view_clear(&m->view);
        cmp_sender_clear(&m->sender);
}

/* The client's address as the rate limiter keys it: 4 or 16 bytes, 0 if
 * it has none. */
static size_t peer_raw(const http_request *req, uint8_t raw[16]) {
        if (req->peer_addr && inet_pton(AF_INET, req->peer_addr, raw) == 1)
                return 4;
        if (req->peer_addr && inet_pton(AF_INET6, req->peer_addr, raw) == 1)
                return 16;
        return 0;
}

/* An address's share of signed answers to messages nobody authenticated
 * (unprotected, or protection that does not verify): each takes a token
 * of its bucket before its answer is signed (take).  While the bucket is
 * empty, every CMP message from there is refused unsigned (429) before it
 * is looked at (!take): no MAC computed, no signature made. */
static int throttle(cmp_table *t, const http_request *req, bool take, http_response *resp) {
        uint8_t raw[16];
        size_t n = peer_raw(req, raw);
        int64_t wait;

        if (!n || (wait = take ? ratelimit_take(t->unauthenticated, raw, n) : ratelimit_peek(t->unauthenticated, raw, n)) <= 0)
                return 0;
        resp->retry_after = wait;
        return hwid_fail(HWID_E_RATE_LIMITED, "too many unauthenticated CMP messages from %s; retry after %lld s",
                         req->peer_addr, (long long) wait);
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

static void answer(cmp_door *d, const http_request *req, const char *label, http_response *resp) {
        ca_service *ca = d->ca;
        cmp_table *t = table_of(d);
        OSSL_CMP_MSG *rsp = NULL;
        cmp_message m = { 0 };
        cmp_slot s = { 0 };
        bool open = false;
        int r = t ? throttle(t, req, false, resp) : hwid_fail(HWID_E_NOMEM, NULL);

        if (r >= 0 && (r = decode(req, &m)) >= 0) {
                m.auth = cmp_authenticate(ca, m.msg, &m.view, &m.sender);
                if (m.auth < 0 || m.sender.kind == CMP_AUTH_NONE)
                        r = throttle(t, req, true, resp);
        }
        if (r >= 0 && (r = take_slot(t, ca, req, label, &m, &s)) >= 0) {
                rsp = cmp_txn_process(s.txn, req, &m, s.replayed, &open);
                release_slot(t, &s, open);
                r = encode(rsp, resp);
        }
        if (r < 0)
                http_fail(ca, resp, r);
        OSSL_CMP_MSG_free(rsp);
        message_clear(&m);
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

bool cmp_route(cmp_door *d, const http_request *req, http_response *resp) {
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
        if (label && (!label_ok(label) || !ca_profile_exists(d->ca, label))) {
                snprintf(msg, sizeof(msg), "no CMP label %.64s: a label is the name of a profile", label);
                http_respond_text(resp, 404, "not_found", msg);
        } else if (strcmp(req->method, "POST") != 0) {
                http_respond_text(resp, 405, "method_not_allowed", "CMP over HTTP is POST of a PKIMessage");
        } else {
                answer(d, req, label, resp);
        }
        return true;
}
