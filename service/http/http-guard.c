/* The connection budgets of hwidd's HTTPS transport: what a connection may
 * hold of the server, so that misbehaving clients cannot starve the rest.
 *
 * - Accepting (http_guard_accept(), before any TLS): connections per
 *   address are rate limited (every handshake costs an HSM signature; the
 *   burst is twice the requests'), and an address holds at most
 *   `per_address` connections.  When the total reaches `max_connections`,
 *   the address holding the most gives up its oldest connection that is
 *   not in a request (fair share), or else the oldest idle connection of
 *   the newcomer's address or of one holding more goes; a newcomer is
 *   refused when no connection may give way.
 * - Handshaking connections (accepted, TLS handshake not done) have a cap
 *   of their own, `handshake_cap`, and a deadline of their own,
 *   `handshake_timeout` (unless what the client sent waits unread: then
 *   the server is the slow one): the oldest is evicted when a new one
 *   would pass the cap, so that half-open handshakes never take the slots
 *   completed ones need, and every honest handshake gets its turn.
 * - Every connection has a deadline per phase: receiving a request (from
 *   the accept, or from the end of the previous response: TLS handshake,
 *   headers and body) and sending a response must each end within
 *   `timeout` seconds, however steadily the bytes trickle.  While the
 *   handler runs there is none (it is ours, and bounded).
 *
 * Evicting is shutting the socket down (SHUT_RDWR): libmicrohttpd then
 * sees the connection end as it would a lost peer, on its own thread, and
 * closes it.  A reaper thread does that for deadlines, ten times a second.
 * Connections sit in a list per state, oldest first, and in their
 * address's list, oldest first; addresses in a hash table keyed by a
 * per-process random key. */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include <netinet/in.h>

#include "error.h"
#include "http-internal.h"
#include "http.h"
#include "ratelimit.h"

#define REAPER_TICK_MS 100
#define ADDR_BUCKETS 4096 /* power of two */

typedef enum list_kind { LIST_HANDSHAKING, LIST_IDLE, LIST_ACTIVE, _LIST_MAX } list_kind;

/* Connections in age order, oldest first: each connection is in two such
 * chains at once (its state's, its address's), through a link of each. */
typedef struct conn_link {
        http_conn *prev, *next;
} conn_link;

typedef struct chain {
        http_conn *oldest, *newest;
} chain;

typedef struct http_addr http_addr;
struct http_addr {
        uint8_t raw[16];
        size_t len;
        unsigned count;
        chain conns;     /* its connections (through http_conn.in_addr) */
        http_addr *next; /* hash chain */
};

struct http_conn {
        http_guard *guard;
        void *owner;
        struct MHD_Connection *mhd;
        void *tls; /* gnutls_session_t, NULL without TLS */
        int fd;
        http_phase phase;
        list_kind list;
        int64_t accepted_ms;
        int64_t deadline_ms; /* monotonic; 0: none */
        uint64_t handshake_ns;  /* when the handshake began */
        bool reaped;
        bool hello_seen, version_ok; /* the TLS handshake got that far */
        http_addr *addr;
        conn_link in_list; /* its state's list */
        conn_link in_addr; /* its address's connections */
};

typedef struct conn_list {
        chain conns; /* through http_conn.in_list */
        unsigned n;
        unsigned evicted; /* of n: evicted, not closed yet */
} conn_list;

struct http_guard {
        pthread_mutex_t lock; /* everything below */
        pthread_cond_t wake;
        pthread_t reaper;
        bool reaper_started;
        bool stopping;
        http_budget b;
        ratelimit *accept_rl; /* NULL: connections are not rate limited */
        conn_list lists[_LIST_MAX];
        unsigned total, reaped;
        http_addr *buckets[ADDR_BUCKETS];
        http_addr *heaviest; /* a hint: the address holding the most, or NULL */
        uint64_t hash_key[2];
        _Atomic uint64_t evicted[_HTTP_EVICT_MAX];
        _Atomic uint64_t refused[_HTTP_REFUSE_MAX];
        histogram handshakes;
};

/* The connection this thread serves now (set by every callback of its). */
static _Thread_local http_conn *current;

int64_t http_now_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --- lists ------------------------------------------------------------------ */

#define LINK(c, off) ((conn_link *) ((char *) (c) + (off)))

static void chain_add(chain *ch, http_conn *c, size_t off) {
        LINK(c, off)->prev = ch->newest;
        LINK(c, off)->next = NULL;
        if (ch->newest)
                LINK(ch->newest, off)->next = c;
        else
                ch->oldest = c;
        ch->newest = c;
}

static void chain_del(chain *ch, http_conn *c, size_t off) {
        conn_link *l = LINK(c, off);

        if (l->prev)
                LINK(l->prev, off)->next = l->next;
        else
                ch->oldest = l->next;
        if (l->next)
                LINK(l->next, off)->prev = l->prev;
        else
                ch->newest = l->prev;
        l->prev = l->next = NULL;
}

static void list_add(conn_list *l, http_conn *c) {
        chain_add(&l->conns, c, offsetof(http_conn, in_list));
        l->n++;
}

static void list_del(conn_list *l, http_conn *c) {
        chain_del(&l->conns, c, offsetof(http_conn, in_list));
        l->n--;
}

static void move_to(http_guard *g, http_conn *c, list_kind k) {
        list_del(&g->lists[c->list], c);
        if (c->reaped) {
                g->lists[c->list].evicted--;
                g->lists[k].evicted++;
        }
        c->list = k;
        list_add(&g->lists[k], c);
}

/* Connections of l not evicted. */
static unsigned live(const conn_list *l) {
        return l->n - l->evicted;
}

/* --- addresses ------------------------------------------------------------------ */

/* FNV-1a over the key and the address: cheap, and keyed so that a client
 * cannot choose addresses that share a chain. */
static size_t addr_bucket(const http_guard *g, const uint8_t *raw, size_t len) {
        uint64_t h = 1469598103934665603ULL ^ g->hash_key[0];

        for (size_t i = 0; i < len; i++)
                h = (h ^ raw[i]) * 1099511628211ULL;
        h ^= g->hash_key[1];
        h *= 1099511628211ULL;
        return (size_t) (h >> 17) & (ADDR_BUCKETS - 1);
}

static http_addr *addr_find(http_guard *g, const uint8_t *raw, size_t len) {
        for (http_addr *a = g->buckets[addr_bucket(g, raw, len)]; a; a = a->next)
                if (a->len == len && memcmp(a->raw, raw, len) == 0)
                        return a;
        return NULL;
}

static http_addr *addr_get(http_guard *g, const uint8_t *raw, size_t len) {
        http_addr *a = addr_find(g, raw, len);
        size_t i;

        if (a)
                return a;
        a = calloc(1, sizeof(*a));
        if (!a)
                return NULL;
        memcpy(a->raw, raw, len);
        a->len = len;
        i = addr_bucket(g, raw, len);
        a->next = g->buckets[i];
        g->buckets[i] = a;
        return a;
}

static void addr_put(http_guard *g, http_addr *a) {
        http_addr **p;

        if (a->count > 0)
                return;
        for (p = &g->buckets[addr_bucket(g, a->raw, a->len)]; *p && *p != a; p = &(*p)->next)
                ;
        if (*p)
                *p = a->next;
        if (g->heaviest == a)
                g->heaviest = NULL;
        free(a);
}

static void addr_link(http_guard *g, http_addr *a, http_conn *c) {
        c->addr = a;
        chain_add(&a->conns, c, offsetof(http_conn, in_addr));
        a->count++;
        if (!g->heaviest || a->count > g->heaviest->count)
                g->heaviest = a;
}

static void addr_unlink(http_guard *g, http_conn *c) {
        http_addr *a = c->addr;

        if (!a)
                return;
        chain_del(&a->conns, c, offsetof(http_conn, in_addr));
        a->count--;
        c->addr = NULL;
        addr_put(g, a);
}

/* The address holding the most connections: the hint if it still is one,
 * else found by a walk over every address (only ever at the limit). */
static http_addr *heaviest(http_guard *g) {
        http_addr *best = g->heaviest;

        if (best)
                return best;
        for (size_t i = 0; i < ADDR_BUCKETS; i++)
                for (http_addr *a = g->buckets[i]; a; a = a->next)
                        if (!best || a->count > best->count)
                                best = a;
        return g->heaviest = best;
}

/* An address of sa (4 or 16 raw bytes), false for another family. */
static bool sockaddr_raw(const struct sockaddr *sa, socklen_t len, uint8_t raw[16], size_t *ret_len) {
        if (sa && sa->sa_family == AF_INET && len >= (socklen_t) sizeof(struct sockaddr_in)) {
                memcpy(raw, &((const struct sockaddr_in *) sa)->sin_addr, 4);
                *ret_len = 4;
                return true;
        }
        if (sa && sa->sa_family == AF_INET6 && len >= (socklen_t) sizeof(struct sockaddr_in6)) {
                memcpy(raw, &((const struct sockaddr_in6 *) sa)->sin6_addr, 16);
                *ret_len = 16;
                return true;
        }
        return false;
}

static const char *const evict_names[_HTTP_EVICT_MAX] = {
        [HTTP_EVICT_HANDSHAKE_TIMEOUT] = "handshake_timeout", [HTTP_EVICT_HANDSHAKE_CAP] = "handshake_cap",
        [HTTP_EVICT_FAIR_SHARE] = "fair_share",               [HTTP_EVICT_IDLE_AT_LIMIT] = "idle_at_limit",
        [HTTP_EVICT_DEADLINE] = "deadline",
};
static const char *const refuse_names[_HTTP_REFUSE_MAX] = {
        [HTTP_REFUSE_RATE] = "rate", [HTTP_REFUSE_PER_ADDRESS] = "per_address", [HTTP_REFUSE_LIMIT] = "limit",
};

const char *http_evict_name(http_evict e) {
        return (unsigned) e < _HTTP_EVICT_MAX ? evict_names[e] : "unknown";
}

const char *http_refuse_name(http_refuse r) {
        return (unsigned) r < _HTTP_REFUSE_MAX ? refuse_names[r] : "unknown";
}

/* --- evictions ---------------------------------------------------------------- */

/* Shuts c's socket down, with the lock held: libmicrohttpd sees the
 * connection end and closes it.  The socket is still open here: MHD tells
 * us a connection is gone (http_guard_conn_free) before it closes it. */
static void shut(http_guard *g, http_conn *c) {
        c->reaped = true;
        g->reaped++;
        g->lists[c->list].evicted++;
        (void) shutdown(c->fd, SHUT_RDWR);
}

static void evict(http_guard *g, http_conn *c, http_evict why) {
        if (c->reaped)
                return;
        shut(g, c);
        atomic_fetch_add_explicit(&g->evicted[why], 1, memory_order_relaxed);
}

/* A handshake past its deadline whose socket holds bytes the server has
 * not read yet is late by the server's doing (its I/O threads busy with
 * other handshakes), not the client's: it gets another second, within
 * the request's deadline from the accept. */
static bool server_behind(http_guard *g, http_conn *c, int64_t now) {
        int unread = 0;

        if (now >= c->accepted_ms + (int64_t) g->b.timeout * 1000 || ioctl(c->fd, FIONREAD, &unread) < 0 ||
            unread <= 0)
                return false;
        c->deadline_ms = now + 1000;
        return true;
}

static void reap_list(http_guard *g, list_kind k, int64_t now) {
        for (http_conn *c = g->lists[k].conns.oldest; c; c = c->in_list.next) {
                if (!c->deadline_ms || now < c->deadline_ms || c->reaped)
                        continue;
                if (k == LIST_HANDSHAKING && server_behind(g, c, now))
                        continue;
                evict(g, c, k == LIST_HANDSHAKING ? HTTP_EVICT_HANDSHAKE_TIMEOUT : HTTP_EVICT_DEADLINE);
        }
}

static void *reaper_main(void *arg) {
        http_guard *g = arg;
        struct timespec until;

        pthread_mutex_lock(&g->lock);
        while (!g->stopping) {
                int64_t now = http_now_ms();

                for (int k = 0; k < _LIST_MAX; k++)
                        reap_list(g, (list_kind) k, now);
                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_nsec += REAPER_TICK_MS * 1000000L;
                if (until.tv_nsec >= 1000000000L) {
                        until.tv_sec++;
                        until.tv_nsec -= 1000000000L;
                }
                pthread_cond_timedwait(&g->wake, &g->lock, &until);
        }
        pthread_mutex_unlock(&g->lock);
        return NULL;
}

/* The oldest connection of l that is not evicted yet, or NULL. */
static http_conn *oldest_live(conn_list *l) {
        for (http_conn *c = l->conns.oldest; c; c = c->in_list.next)
                if (!c->reaped)
                        return c;
        return NULL;
}

/* The oldest idle connection that may give way to a newcomer holding
 * `mine`: the newcomer's own, or one of an address holding more.  Never a
 * lighter address's: the heaviest address, reconnecting at its share, would
 * otherwise close everyone else's keep-alive (or a request about to come
 * on a connection just through its handshake) one after the other. */
static http_conn *idle_to_yield(http_guard *g, const http_addr *newcomer, unsigned mine) {
        for (http_conn *c = g->lists[LIST_IDLE].conns.oldest; c; c = c->in_list.next)
                if (!c->reaped && (c->addr == newcomer || !c->addr || c->addr->count > mine))
                        return c;
        return NULL;
}

/* At the limit: a connection of the address holding the most (if it holds
 * more than the newcomer's would), oldest first, handshaking or idle, never
 * one in a request; else the oldest idle connection idle_to_yield() allows. */
static bool make_room(http_guard *g, http_addr *newcomer) {
        http_addr *h = heaviest(g);
        unsigned mine = newcomer ? newcomer->count : 0;
        http_conn *c;

        if (h && h != newcomer && h->count > mine + 1)
                for (c = h->conns.oldest; c; c = c->in_addr.next)
                        if (!c->reaped && c->list != LIST_ACTIVE) {
                                evict(g, c, HTTP_EVICT_FAIR_SHARE);
                                return true;
                        }
        if ((c = idle_to_yield(g, newcomer, mine))) {
                evict(g, c, HTTP_EVICT_IDLE_AT_LIMIT);
                return true;
        }
        return false;
}

static bool admit(http_guard *g, const uint8_t *raw, size_t len) {
        http_addr *a = addr_find(g, raw, len);

        if (a && a->count >= g->b.per_address)
                return atomic_fetch_add(&g->refused[HTTP_REFUSE_PER_ADDRESS], 1), false;
        /* Connections being closed still hold their socket: a few over
         * the limit are fine (the daemon's own limit has room for them). */
        if (g->total >= g->b.max_connections + g->b.slack)
                return atomic_fetch_add(&g->refused[HTTP_REFUSE_LIMIT], 1), false;
        if (g->total - g->reaped >= g->b.max_connections && !make_room(g, a))
                return atomic_fetch_add(&g->refused[HTTP_REFUSE_LIMIT], 1), false;
        return true;
}

/* admit()'s decision may be stale by the time the connection joins the
 * lists: libmicrohttpd's I/O threads accept at once, and two admitted
 * together each saw room for one.  The shares that must hold exactly are
 * checked again under the lock that adds it: past its address's share it
 * is shut at once, and past the handshake cap the oldest handshaking
 * connection goes.  (max_connections has its slack for this.) */
static void recheck(http_guard *g, http_conn *c) {
        http_conn *old;

        if (c->addr && c->addr->count > g->b.per_address) {
                shut(g, c);
                atomic_fetch_add(&g->refused[HTTP_REFUSE_PER_ADDRESS], 1);
                return;
        }
        if (c->list == LIST_HANDSHAKING && live(&g->lists[LIST_HANDSHAKING]) > g->b.handshake_cap &&
            (old = oldest_live(&g->lists[LIST_HANDSHAKING])) && old != c)
                evict(g, old, HTTP_EVICT_HANDSHAKE_CAP);
}

bool http_guard_accept(http_guard *g, const struct sockaddr *sa, socklen_t len) {
        uint8_t raw[16];
        size_t n;
        bool ok;

        if (!g || !sockaddr_raw(sa, len, raw, &n))
                return true;
        if (g->accept_rl && ratelimit_take(g->accept_rl, raw, n) > 0) {
                atomic_fetch_add(&g->refused[HTTP_REFUSE_RATE], 1);
                return false;
        }
        pthread_mutex_lock(&g->lock);
        ok = admit(g, raw, n);
        pthread_mutex_unlock(&g->lock);
        return ok;
}

/* --- the guard ------------------------------------------------------------------ */

/* The burst of requests (ratelimit_new()'s default when 0). */
static unsigned request_burst(double rate, unsigned burst) {
        unsigned b = (unsigned) rate;

        if (burst)
                return burst;
        if ((double) b < rate)
                b++;
        return b ? b : 1;
}

int http_guard_new(const http_budget *b, http_guard **ret) {
        http_guard *g = calloc(1, sizeof(*g));
        int r = 0;

        if (!g)
                return hwid_fail(HWID_E_NOMEM, NULL);
        pthread_mutex_init(&g->lock, NULL);
        pthread_cond_init(&g->wake, NULL);
        g->b = *b;
        if (getrandom(g->hash_key, sizeof(g->hash_key), 0) != (ssize_t) sizeof(g->hash_key))
                r = hwid_fail(HWID_E_INTERNAL, "cannot seed the address table: %s", strerror(errno));
        if (r >= 0 && b->rate > 0)
                r = ratelimit_new(b->rate, 2 * request_burst(b->rate, b->burst), 0, &g->accept_rl);
        if (r >= 0 && (errno = pthread_create(&g->reaper, NULL, reaper_main, g)) != 0)
                r = hwid_fail(HWID_E_INTERNAL, "cannot start the connection reaper: %s", strerror(errno));
        if (r < 0) {
                http_guard_free(g);
                return r;
        }
        g->reaper_started = true;
        *ret = g;
        return 0;
}

/* Every connection must have been freed (MHD stopped) first. */
void http_guard_free(http_guard *g) {
        if (!g)
                return;
        if (g->reaper_started) {
                pthread_mutex_lock(&g->lock);
                g->stopping = true;
                pthread_cond_signal(&g->wake);
                pthread_mutex_unlock(&g->lock);
                pthread_join(g->reaper, NULL);
        }
        ratelimit_free(g->accept_rl);
        pthread_cond_destroy(&g->wake);
        pthread_mutex_destroy(&g->lock);
        free(g);
}

void http_guard_stats(http_guard *g, http_stats *ret) {
        pthread_mutex_lock(&g->lock);
        ret->handshaking = live(&g->lists[LIST_HANDSHAKING]);
        ret->idle = live(&g->lists[LIST_IDLE]);
        ret->active = live(&g->lists[LIST_ACTIVE]);
        ret->closing = g->reaped;
        pthread_mutex_unlock(&g->lock);
        for (int i = 0; i < _HTTP_EVICT_MAX; i++)
                ret->evicted[i] = atomic_load_explicit(&g->evicted[i], memory_order_relaxed);
        for (int i = 0; i < _HTTP_REFUSE_MAX; i++)
                ret->refused[i] = atomic_load_explicit(&g->refused[i], memory_order_relaxed);
        histogram_snapshot_take(&g->handshakes, &histogram_bounds_sign, &ret->handshake);
}

/* --- connections ------------------------------------------------------------ */

http_conn *http_guard_conn_new(http_guard *g, void *owner, struct MHD_Connection *mhd, int fd, void *tls,
                               const struct sockaddr *sa, socklen_t salen) {
        http_conn *c = calloc(1, sizeof(*c));
        uint8_t raw[16];
        size_t n;

        if (!c)
                return NULL;
        *c = (http_conn) { .guard = g, .owner = owner, .mhd = mhd, .fd = fd, .tls = tls, .phase = HTTP_PHASE_RECEIVING,
                           .list = tls ? LIST_HANDSHAKING : LIST_IDLE, .handshake_ns = histogram_now_ns() };
        pthread_mutex_lock(&g->lock);
        c->accepted_ms = http_now_ms();
        c->deadline_ms = c->accepted_ms + (tls ? (int64_t) g->b.handshake_timeout : (int64_t) g->b.timeout) * 1000;
        if (sockaddr_raw(sa, salen, raw, &n)) {
                http_addr *a = addr_get(g, raw, n);
                if (a)
                        addr_link(g, a, c);
        }
        list_add(&g->lists[c->list], c);
        g->total++;
        recheck(g, c);
        pthread_mutex_unlock(&g->lock);
        return c;
}

void http_guard_conn_free(http_conn *c) {
        http_guard *g;

        if (!c)
                return;
        g = c->guard;
        pthread_mutex_lock(&g->lock);
        list_del(&g->lists[c->list], c);
        addr_unlink(g, c);
        g->total--;
        if (c->reaped) {
                g->reaped--;
                g->lists[c->list].evicted--;
        }
        pthread_mutex_unlock(&g->lock);
        if (current == c)
                current = NULL;
        free(c);
}

bool http_conn_evicted(http_conn *c) {
        bool r;

        pthread_mutex_lock(&c->guard->lock);
        r = c->reaped;
        pthread_mutex_unlock(&c->guard->lock);
        return r;
}

void *http_conn_owner(const http_conn *c) {
        return c ? c->owner : NULL;
}

void *http_conn_tls(const http_conn *c) {
        return c ? c->tls : NULL;
}

int http_conn_fd(const http_conn *c) {
        return c ? c->fd : -1;
}

void http_conn_set_current(http_conn *c) {
        current = c;
}

http_conn *http_conn_current(void) {
        return current;
}

/* Called with the lock held: the handshake is over, the first request's
 * deadline runs from the accept. */
static void handshake_done(http_guard *g, http_conn *c) {
        if (c->list != LIST_HANDSHAKING)
                return;
        move_to(g, c, LIST_IDLE);
        c->deadline_ms = c->accepted_ms + (int64_t) g->b.timeout * 1000;
        histogram_observe(&g->handshakes, &histogram_bounds_sign, histogram_now_ns() - c->handshake_ns);
}

void http_conn_handshake_done(http_conn *c) {
        if (!c)
                return;
        pthread_mutex_lock(&c->guard->lock);
        handshake_done(c->guard, c);
        pthread_mutex_unlock(&c->guard->lock);
}

void http_conn_tls_progress(http_conn *c, bool hello_seen, bool version_ok) {
        if (!c)
                return;
        c->hello_seen |= hello_seen;
        c->version_ok |= version_ok;
}

void http_conn_tls_where(const http_conn *c, bool *ret_hello_seen, bool *ret_version_ok) {
        *ret_hello_seen = c && c->hello_seen;
        *ret_version_ok = c && c->version_ok;
}

/* A request begins (RECEIVING, from on_uri), its handler runs (HANDLING),
 * its response is on its way (SENDING); between requests a connection is
 * idle, receiving the next one (http_conn_idle()). */
void http_conn_phase(http_conn *c, http_phase phase) {
        http_guard *g;

        if (!c)
                return;
        g = c->guard;
        pthread_mutex_lock(&g->lock);
        handshake_done(g, c); /* a request came: whatever the hooks said */
        c->phase = phase;
        if (c->list != LIST_ACTIVE)
                move_to(g, c, LIST_ACTIVE);
        if (phase == HTTP_PHASE_HANDLING)
                c->deadline_ms = 0;
        else if (phase == HTTP_PHASE_SENDING)
                c->deadline_ms = http_now_ms() + (int64_t) g->b.timeout * 1000;
        pthread_mutex_unlock(&g->lock);
}

void http_conn_idle(http_conn *c) {
        http_guard *g;

        if (!c)
                return;
        g = c->guard;
        pthread_mutex_lock(&g->lock);
        c->phase = HTTP_PHASE_RECEIVING;
        if (c->list != LIST_IDLE)
                move_to(g, c, LIST_IDLE);
        c->deadline_ms = http_now_ms() + (int64_t) g->b.timeout * 1000;
        pthread_mutex_unlock(&g->lock);
}

http_phase http_conn_get_phase(http_conn *c) {
        http_phase p;

        pthread_mutex_lock(&c->guard->lock);
        p = c->phase;
        pthread_mutex_unlock(&c->guard->lock);
        return p;
}
