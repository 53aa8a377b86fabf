/* The connection budgets of hwidd's HTTPS transport: what a connection may
 * hold of the server, so that misbehaving clients cannot starve the rest.
 * A client is an address: an IPv4 address, or the /64 of an IPv6 one
 * (http-addr.c).
 *
 * - Accepting (http_guard_accept(), before any TLS): connections per
 *   address are rate limited (every handshake costs an HSM signature; the
 *   burst is twice the requests'), and an address holds at most
 *   `per_address` connections.  When the total reaches `max_connections`,
 *   the address holding the most gives up one connection if it holds
 *   more than the newcomer's would (fair share): one waiting (in its
 *   handshake, or idle between requests) if it has one, else the one
 *   inside a request that has been silent longest (stalled, trickling, or
 *   not reading its answer), never one being handled; or else a request
 *   that has not progressed for seconds (of the newcomer's address or of
 *   one holding as many); or else the oldest idle connection of the
 *   newcomer's address or of one holding more; a newcomer is refused
 *   when no connection may give way.  So addresses holding connections
 *   inside requests they never finish cannot keep a new address out.
 * - Handshaking connections (accepted, TLS handshake not done) have a cap
 *   of their own, `handshake_cap`, and a deadline of their own,
 *   `handshake_timeout` (unless what the client sent waits unread: then
 *   the server is the slow one): when a new one passes the cap, the
 *   address with the most handshakes in progress gives up its oldest, so
 *   that half-open handshakes never take the slots completed ones need,
 *   and one address's flood never closes another's honest handshake.
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
 * per-process random key (http-addr.c). */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include "error.h"
#include "http-guard.h"
#include "http.h"

#define REAPER_TICK_MS 100
#define STALL_MS 2000  /* a request silent this long is not progressing */
#define STALL_SCAN 64  /* the oldest requests looked at for one */

int64_t http_now_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (int64_t) ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* --- lists ------------------------------------------------------------------ */

static void list_add(conn_list *l, http_conn *c) {
        chain_add(&l->conns, c, offsetof(http_conn, in_list));
        l->n++;
}

static void list_del(conn_list *l, http_conn *c) {
        chain_del(&l->conns, c, offsetof(http_conn, in_list));
        l->n--;
}

/* c's address counts its live handshakes: -1 before a change of c's list
 * or of its eviction, +1 after. */
static void count_handshake(http_conn *c, int delta) {
        if (c->addr && c->list == LIST_HANDSHAKING && !c->reaped)
                c->addr->handshaking += (unsigned) delta;
}

static void move_to(http_guard *g, http_conn *c, list_kind k) {
        count_handshake(c, -1);
        list_del(&g->lists[c->list], c);
        if (c->reaped) {
                g->lists[c->list].evicted--;
                g->lists[k].evicted++;
        }
        c->list = k;
        list_add(&g->lists[k], c);
        count_handshake(c, +1);
}

/* Connections of l not evicted. */
static unsigned live(const conn_list *l) {
        return l->n - l->evicted;
}

static const char *const evict_names[_HTTP_EVICT_MAX] = {
        [HTTP_EVICT_HANDSHAKE_TIMEOUT] = "handshake_timeout", [HTTP_EVICT_HANDSHAKE_CAP] = "handshake_cap",
        [HTTP_EVICT_FAIR_SHARE] = "fair_share",               [HTTP_EVICT_IDLE_AT_LIMIT] = "idle_at_limit",
        [HTTP_EVICT_DEADLINE] = "deadline",                   [HTTP_EVICT_STALLED] = "stalled",
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
        count_handshake(c, -1);
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

/* --- who gives way ------------------------------------------------------------- */

/* The connections an address holds (those being closed too: they hold
 * their socket until their I/O thread closes them), 0 for none. */
static unsigned held_by(const http_addr *a) {
        return a ? a->count : 0;
}

static int64_t silent_since(const http_conn *c) {
        return atomic_load_explicit(&c->progress_ms, memory_order_relaxed);
}

/* The connection of address a that gives way to a newcomer, or NULL:
 * never one being handled (the server's work, bounded by it); one waiting
 * (in its TLS handshake, or idle between requests), the oldest, before one
 * in a request; of those, the one silent longest (a request stalled or
 * trickling, a response its client stopped reading). */
static http_conn *yielder(const http_addr *a) {
        http_conn *best = NULL;

        for (http_conn *c = a->conns.oldest; c; c = c->in_addr.next) {
                if (c->reaped || c->phase == HTTP_PHASE_HANDLING)
                        continue;
                if (c->list != LIST_ACTIVE)
                        return c;
                if (!best || silent_since(c) < silent_since(best))
                        best = c;
        }
        return best;
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

/* A request not progressing: of the oldest requests (those that end leave
 * the front of the list), the one silent longest if it has been silent
 * STALL_MS, not being handled, of the newcomer's address or of one
 * holding at least as many (an address cannot churn lighter ones' out). */
static http_conn *stalled(http_guard *g, const http_addr *newcomer, unsigned mine) {
        int64_t before = http_now_ms() - STALL_MS;
        http_conn *best = NULL;
        unsigned n = 0;

        for (http_conn *c = g->lists[LIST_ACTIVE].conns.oldest; c && n < STALL_SCAN; c = c->in_list.next, n++)
                if (!c->reaped && c->phase != HTTP_PHASE_HANDLING && silent_since(c) <= before &&
                    (c->addr == newcomer || held_by(c->addr) >= mine) &&
                    (!best || silent_since(c) < silent_since(best)))
                        best = c;
        return best;
}

/* At the limit: the address holding the most connections gives up one
 * (yielder()) if it holds more than the newcomer's would; else a request
 * not progressing (stalled()); else the oldest idle connection
 * idle_to_yield() allows. */
static bool make_room(http_guard *g, http_addr *newcomer) {
        http_addr *h = guard_heaviest(g);
        unsigned mine = held_by(newcomer);
        http_conn *c;

        if (h && h != newcomer && h->count > mine + 1 && (c = yielder(h))) {
                evict(g, c, HTTP_EVICT_FAIR_SHARE);
                return true;
        }
        if ((c = stalled(g, newcomer, mine))) {
                evict(g, c, HTTP_EVICT_STALLED);
                return true;
        }
        if ((c = idle_to_yield(g, newcomer, mine))) {
                evict(g, c, HTTP_EVICT_IDLE_AT_LIMIT);
                return true;
        }
        return false;
}

/* Past the handshake cap: the oldest handshake of the address with the
 * most handshakes in progress goes, so that one address opening
 * handshakes never closes another's honest one while it has more. */
static http_conn *handshake_to_yield(http_guard *g) {
        http_conn *best = NULL;

        for (http_conn *c = g->lists[LIST_HANDSHAKING].conns.oldest; c; c = c->in_list.next)
                if (!c->reaped && (!best || (c->addr ? c->addr->handshaking : 1) >
                                                    (best->addr ? best->addr->handshaking : 1)))
                        best = c;
        return best;
}

static bool admit(http_guard *g, const uint8_t *raw, size_t len) {
        http_addr *a = guard_addr_find(g, raw, len);

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
 * is shut at once, and past the handshake cap a handshake goes
 * (handshake_to_yield()).  (max_connections has its slack for this.) */
static void recheck(http_guard *g, http_conn *c) {
        if (c->addr && c->addr->count > g->b.per_address) {
                shut(g, c);
                atomic_fetch_add(&g->refused[HTTP_REFUSE_PER_ADDRESS], 1);
                return;
        }
        if (c->list == LIST_HANDSHAKING && live(&g->lists[LIST_HANDSHAKING]) > g->b.handshake_cap)
                evict(g, handshake_to_yield(g), HTTP_EVICT_HANDSHAKE_CAP);
}

bool http_guard_accept(http_guard *g, const struct sockaddr *sa, socklen_t len) {
        uint8_t key[HTTP_ADDR_KEY_MAX];
        size_t n;
        bool ok;

        if (!g || !http_addr_key(sa, len, key, &n))
                return true;
        if (g->accept_rl && ratelimit_take(g->accept_rl, key, n) > 0) {
                atomic_fetch_add(&g->refused[HTTP_REFUSE_RATE], 1);
                return false;
        }
        pthread_mutex_lock(&g->lock);
        ok = admit(g, key, n);
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
        uint8_t key[HTTP_ADDR_KEY_MAX];
        size_t n;

        if (!c)
                return NULL;
        c->guard = g;
        c->owner = owner;
        c->mhd = mhd;
        c->fd = fd;
        c->tls = tls;
        c->phase = HTTP_PHASE_RECEIVING;
        c->list = tls ? LIST_HANDSHAKING : LIST_IDLE;
        c->handshake_ns = histogram_now_ns();
        pthread_mutex_lock(&g->lock);
        c->accepted_ms = http_now_ms();
        atomic_init(&c->progress_ms, c->accepted_ms);
        c->deadline_ms = c->accepted_ms + (tls ? (int64_t) g->b.handshake_timeout : (int64_t) g->b.timeout) * 1000;
        if (http_addr_key(sa, salen, key, &n))
                guard_addr_link(g, key, n, c);
        list_add(&g->lists[c->list], c);
        count_handshake(c, +1);
        g->total++;
        recheck(g, c);
        pthread_mutex_unlock(&g->lock);
        return c;
}

/* On c's I/O thread, before MHD closes its socket. */
void http_guard_conn_free(http_conn *c) {
        http_guard *g;

        if (!c)
                return;
        g = c->guard;
        pthread_mutex_lock(&g->lock);
        count_handshake(c, -1);
        list_del(&g->lists[c->list], c);
        guard_addr_unlink(g, c);
        g->total--;
        if (c->reaped) {
                g->reaped--;
                g->lists[c->list].evicted--;
        }
        http_current_forget(c);
        pthread_mutex_unlock(&g->lock);
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

struct MHD_Connection *http_conn_mhd(const http_conn *c) {
        return c ? c->mhd : NULL;
}

void http_conn_io(http_conn *c, bool reading, ssize_t n) {
        if (!c)
                return;
        if (reading)
                http_current_read(c);
        else
                http_conn_set_current(c);
        if (n > 0)
                atomic_store_explicit(&c->progress_ms, http_now_ms(), memory_order_relaxed);
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
