/* Internals of hwidd's HTTPS transport, shared by service/http*.c.
 *
 * http-tls.c, the GnuTLS side: the server's private key is a
 * gnutls_privkey_t built with gnutls_privkey_import_ext4() whose signing
 * callback signs through the hwid_key's provider-backed EVP_PKEY, so every
 * handshake signature is made by the HSM/TPM.  Client certificates are
 * verified with OpenSSL against the configured trust anchors. */
#pragma once

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>

#include "cleanup.h"
#include "hsm.h"
#include "http.h"

typedef struct http_tls http_tls;

/* cert_pem: the server certificate first, then its chain; its public key
 * must be the key's.  client_ca_pem: trust anchors for client
 * certificates, or NULL for no mutual TLS.  The key is borrowed and must
 * outlive the http_tls. */
int http_tls_new(hwid_key *key, const char *cert_pem, const char *client_ca_pem, http_tls **ret);
void http_tls_free(http_tls *t);
DEFINE_TRIVIAL_CLEANUP_FUNC(http_tls *, http_tls_free)

/* For a gnutls_certificate_retrieve_function2: the chain and the key,
 * owned by t (gnutls does not free them). */
/* A new connection's session may be resumed from a ticket (TLS 1.3 PSK,
 * TLS 1.2 RFC 5077) sealed with a key made when the server started:
 * a returning client skips the full handshake and the HSM signature.
 * The key lives in memory only (a restart makes every ticket void) and
 * GnuTLS rotates the keys it derives from it.  A resumed session keeps
 * its client certificate, which every request still checks as before. */
void http_tls_session_start(http_tls *t, gnutls_session_t s);

int http_tls_retrieve(http_tls *t, gnutls_pcert_st **ret_pcert, unsigned *ret_n,
                      gnutls_privkey_t *ret_key);

typedef struct http_peer {
        const uint8_t *cert; /* leaf DER, owned by the session; NULL if none */
        size_t cert_len;
        bool verified;
        /* Would verify but for the time: a certificate of the chain has
         * expired, or is not valid yet (before valid_from, the latest
         * notBefore of the chain, Unix seconds). */
        bool expired;
        bool not_yet_valid;
        int64_t valid_from;
} http_peer;

/* What the TLS peer of session s proved.  Never fails: anything that does
 * not verify is reported as not verified. */
void http_tls_peer(http_tls *t, gnutls_session_t s, http_peer *ret);

/* The channel binding of session s (RFC 7030 §3.5): RFC 9266
 * tls-exporter on TLS 1.3, tls-unique (RFC 5929) on TLS 1.2; *ret_len 0
 * and *ret_type NULL when there is none. */
void http_tls_binding(gnutls_session_t s, uint8_t ret[HTTP_TLS_BINDING_MAX], size_t *ret_len, const char **ret_type);

/* The GnuTLS priority string hwidd uses: TLS 1.2 and 1.3 only, no RSA key
 * exchange (the device key only signs). */
#define HTTP_TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-RSA"

/* http-listen.c: binds and listens on "ADDR:PORT" (numeric IPv4, or
 * "[IPv6]:PORT"; port 0 picks a free port).  The socket is non-blocking
 * and close-on-exec; IPv6 sockets are IPv6-only. */
int http_listen_open(const char *listen_on, int *ret_fd);
/* The local port of a bound socket, or -1. */
int http_listen_port(int fd);

/* http-guard.c: limits on slow and abusive clients (see there).  A
 * connection's deadline is `timeout` seconds for each phase: receiving a
 * request (from the accept or from the end of the previous response) and
 * sending a response; none while the handler runs. */
struct MHD_Connection;
struct sockaddr;
typedef struct http_guard http_guard;
typedef struct http_conn http_conn;

typedef enum http_phase {
        HTTP_PHASE_RECEIVING,
        HTTP_PHASE_HANDLING,
        HTTP_PHASE_SENDING,
} http_phase;

/* rate > 0: connections per second per client address, with twice the
 * requests' burst (burst 0: the rate rounded up). */
int http_guard_new(unsigned timeout, double rate, unsigned burst, http_guard **ret);
/* Only once every connection is freed (the MHD daemon is stopped). */
void http_guard_free(http_guard *g);
/* For MHD_OPTION_ACCEPT_POLICY_CALLBACK: false if the address is over its
 * connection rate (the connection is then closed before any TLS). */
bool http_guard_accept(http_guard *g, const struct sockaddr *sa, socklen_t len);
/* A new connection (fd: its socket), receiving its first request; owner is
 * the caller's.  NULL when out of memory. */
http_conn *http_guard_conn_new(http_guard *g, void *owner, struct MHD_Connection *mhd, int fd);
/* Before MHD closes the socket. */
void http_guard_conn_free(http_conn *c);
void *http_conn_owner(const http_conn *c);
void http_conn_phase(http_conn *c, http_phase phase);
/* Marks c as the connection served by the calling thread (MHD callbacks
 * that run on it: the TLS handshake, the request line). */
void http_conn_set_current(http_conn *c);
/* From MHD's logger: if the message is MHD refusing a request of the
 * calling thread's connection, answers it with our JSON error instead of
 * MHD's HTML and returns true. */
bool http_guard_mhd_log(http_guard *g, size_t max_header, const char *fmt, va_list ap);
