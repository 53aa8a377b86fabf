/* The clients the connection guard counts (http-guard.c): who a peer is,
 * and the table of those holding connections.
 *
 * A client is an IPv4 address, or the /64 of an IPv6 address: a /64 is
 * one network (a subscriber's, a host's), in which a host takes any of
 * 2^64 addresses at will, so counting IPv6 addresses one by one would give
 * one client as many shares as it likes.  Every per-address budget and
 * rate limit of the transport counts by this key. */
#include <string.h>
#include <sys/socket.h>

#include <netinet/in.h>

#include "http-guard.h"

bool http_addr_key(const struct sockaddr *sa, socklen_t len, uint8_t key[HTTP_ADDR_KEY_MAX], size_t *ret_len) {
        static const uint8_t v4mapped[12] = { [10] = 0xff, [11] = 0xff };
        const uint8_t *a6;

        if (sa && sa->sa_family == AF_INET && len >= (socklen_t) sizeof(struct sockaddr_in)) {
                memcpy(key, &((const struct sockaddr_in *) sa)->sin_addr, 4);
                *ret_len = 4;
                return true;
        }
        if (!sa || sa->sa_family != AF_INET6 || len < (socklen_t) sizeof(struct sockaddr_in6))
                return false;
        a6 = ((const struct sockaddr_in6 *) sa)->sin6_addr.s6_addr;
        if (memcmp(a6, v4mapped, sizeof(v4mapped)) == 0) { /* ::ffff:a.b.c.d is a.b.c.d */
                memcpy(key, a6 + 12, 4);
                *ret_len = 4;
        } else {
                memcpy(key, a6, 8);
                *ret_len = 8;
        }
        return true;
}

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

http_addr *guard_addr_find(http_guard *g, const uint8_t *raw, size_t len) {
        for (http_addr *a = g->buckets[addr_bucket(g, raw, len)]; a; a = a->next)
                if (a->len == len && memcmp(a->raw, raw, len) == 0)
                        return a;
        return NULL;
}

static http_addr *addr_get(http_guard *g, const uint8_t *raw, size_t len) {
        http_addr *a = guard_addr_find(g, raw, len);
        size_t i;

        if (a || len > sizeof(a->raw))
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

void guard_addr_link(http_guard *g, const uint8_t *raw, size_t len, http_conn *c) {
        http_addr *a = addr_get(g, raw, len);

        if (!a)
                return; /* out of memory: not counted */
        c->addr = a;
        chain_add(&a->conns, c, offsetof(http_conn, in_addr));
        a->count++;
        if (g->heaviest && a->count > g->heaviest->count)
                g->heaviest = a; /* (no hint: the next guard_heaviest() finds it) */
}

void guard_addr_unlink(http_guard *g, http_conn *c) {
        http_addr *a = c->addr;

        if (!a)
                return;
        chain_del(&a->conns, c, offsetof(http_conn, in_addr));
        a->count--;
        if (g->heaviest == a)
                g->heaviest = NULL; /* it may not be the heaviest any more */
        c->addr = NULL;
        addr_put(g, a);
}

http_addr *guard_heaviest(http_guard *g) {
        http_addr *best = g->heaviest;

        if (best)
                return best;
        for (size_t i = 0; i < ADDR_BUCKETS; i++)
                for (http_addr *a = g->buckets[i]; a; a = a->next)
                        if (!best || a->count > best->count)
                                best = a;
        return g->heaviest = best;
}
