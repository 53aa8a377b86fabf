/* The records of the connection guard, shared by http-guard.c (the
 * budgets) and http-current.c (which connection an I/O thread serves). */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "histogram.h"
#include "http-internal.h"
#include "ratelimit.h"

#define ADDR_BUCKETS 4096 /* power of two */

typedef enum list_kind { LIST_HANDSHAKING, LIST_IDLE, LIST_ACTIVE, _LIST_MAX } list_kind;

/* Connections in age order, oldest first: a connection is in several such
 * chains at once (its state's, its address's...), through a link of each. */
typedef struct conn_link {
        http_conn *prev, *next;
} conn_link;

typedef struct chain {
        http_conn *oldest, *newest;
} chain;

/* A client: an IPv4 address, or the /64 of an IPv6 one (http_addr_key()). */
typedef struct http_addr http_addr;
struct http_addr {
        uint8_t raw[HTTP_ADDR_KEY_MAX];
        size_t len;
        unsigned count;       /* its connections, those being closed too (sockets held) */
        unsigned handshaking; /* of count: in their TLS handshake, not evicted */
        chain conns;          /* its connections (through http_conn.in_addr) */
        http_addr *next;      /* hash chain */
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
        _Atomic int64_t progress_ms; /* the last byte the client sent, or read of ours */
        uint64_t handshake_ns;       /* when the handshake began */
        bool reaped;
        bool hello_seen, version_ok; /* the TLS handshake got that far */
        bool held;                   /* in its thread's list of held plaintext (http-current.c) */
        http_addr *addr;
        conn_link in_list; /* its state's list */
        conn_link in_addr; /* its address's connections */
        conn_link in_held; /* its thread's connections holding plaintext */
};

typedef struct conn_list {
        chain conns; /* through http_conn.in_list */
        unsigned n;
        unsigned evicted; /* of n: evicted, not closed yet */
} conn_list;

struct http_guard {
        pthread_mutex_t lock; /* everything below, and each connection's state */
        pthread_cond_t wake;
        pthread_t reaper;
        bool reaper_started;
        bool stopping;
        http_budget b;
        ratelimit *accept_rl; /* NULL: connections are not rate limited */
        conn_list lists[_LIST_MAX];
        unsigned total, reaped;
        http_addr *buckets[ADDR_BUCKETS];
        http_addr *heaviest; /* a hint: the address holding the most connections, or NULL */
        uint64_t hash_key[2];
        _Atomic uint64_t evicted[_HTTP_EVICT_MAX];
        _Atomic uint64_t refused[_HTTP_REFUSE_MAX];
        histogram handshakes;
};

#define LINK(c, off) ((conn_link *) ((char *) (c) + (off)))

static inline void chain_add(chain *ch, http_conn *c, size_t off) {
        LINK(c, off)->prev = ch->newest;
        LINK(c, off)->next = NULL;
        if (ch->newest)
                LINK(ch->newest, off)->next = c;
        else
                ch->oldest = c;
        ch->newest = c;
}

static inline void chain_del(chain *ch, http_conn *c, size_t off) {
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

/* http-addr.c: the table of clients.  An address's record lives while it
 * holds a connection; a connection linked to none (out of memory) is not
 * counted.  guard_heaviest(): the address holding the most connections (a
 * hint kept, else a walk over them all), NULL if none. */
http_addr *guard_addr_find(http_guard *g, const uint8_t *raw, size_t len);
void guard_addr_link(http_guard *g, const uint8_t *raw, size_t len, http_conn *c);
void guard_addr_unlink(http_guard *g, http_conn *c);
http_addr *guard_heaviest(http_guard *g);

/* http-current.c: a read of c's socket (it is the thread's current
 * connection, and GnuTLS holds nothing of it); c is gone (before it is
 * freed, on its I/O thread). */
void http_current_read(http_conn *c);
void http_current_forget(http_conn *c);
