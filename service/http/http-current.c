/* Which connection an I/O thread serves now, and which connection a line
 * that libmicrohttpd logs is about.
 *
 * MHD's log lines (a request it refuses by itself, a TLS handshake that
 * failed) do not name their connection: they come on the I/O thread that
 * serves it, while MHD processes it.  Every read and write of a TLS
 * connection goes through our transport functions (http-tls.c), and
 * every callback of MHD names its connection, so the thread's current
 * connection is the last one it did anything for.  That is the one MHD
 * processes, unless MHD read another connection without reading its
 * socket: GnuTLS hands out the rest of a TLS record it decrypted before
 * (a record holds up to 16 KiB, MHD asks for what its buffer has room
 * for) without a word to us.  So whenever a thread turns from one
 * connection to another, it notes whether the one it leaves still holds
 * decrypted bytes: such a connection is "held" until its socket is read
 * again (GnuTLS reads only once it has handed out all it held) or it
 * closes.
 *
 * http_conn_logged() names the connection a line is about only when one
 * connection alone could be it: of the current one and the held ones,
 * those in the state the line is about.  Otherwise it names none: acting
 * on a wrong one (answering it, sending it an alert, closing it) would
 * drop a client for what another sent. */
#include <gnutls/gnutls.h>

#include "http-guard.h"

/* The connection this thread serves now, and its connections holding
 * decrypted bytes, the current one aside (through http_conn.in_held).
 * A connection lives and dies on one I/O thread (MHD's thread pool). */
static _Thread_local http_conn *current;
static _Thread_local chain held;

static void set_held(http_conn *c, bool on) {
        if (on == c->held)
                return;
        if (on)
                chain_add(&held, c, offsetof(http_conn, in_held));
        else
                chain_del(&held, c, offsetof(http_conn, in_held));
        c->held = on;
}

void http_conn_set_current(http_conn *c) {
        if (current && current != c)
                set_held(current, current->tls && gnutls_record_check_pending(current->tls) > 0);
        current = c;
}

void http_current_read(http_conn *c) {
        http_conn_set_current(c);
        set_held(c, false); /* GnuTLS reads the socket only once it holds nothing */
}

void http_current_forget(http_conn *c) {
        set_held(c, false);
        if (current == c)
                current = NULL;
}

/* Could c be the connection of a line about a TLS handshake, or about a
 * request?  (With the guard's lock.) */
static bool may_be(const http_conn *c, bool handshake) {
        if (handshake)
                return c->list == LIST_HANDSHAKING;
        return c->list != LIST_HANDSHAKING && c->phase == HTTP_PHASE_RECEIVING;
}

http_conn *http_conn_logged(bool handshake) {
        http_conn *found = NULL;
        unsigned n = 0;
        http_guard *g;

        if (!current)
                return NULL;
        g = current->guard;
        pthread_mutex_lock(&g->lock);
        if (may_be(current, handshake)) {
                found = current;
                n++;
        }
        for (http_conn *c = held.oldest; c; c = c->in_held.next)
                if (c != current && may_be(c, handshake)) {
                        found = c;
                        n++;
                }
        pthread_mutex_unlock(&g->lock);
        return n == 1 ? found : NULL;
}
