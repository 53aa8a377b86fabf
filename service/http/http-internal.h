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
#include <sys/types.h>

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
/* The chain and trust anchors of the handshakes from now on (the key
 * stays): one caller at a time; the sets before stay until t goes. */
int http_tls_set_certs(http_tls *t, const char *cert_pem, const char *client_ca_pem);

typedef struct http_conn http_conn;

/* A new connection's session may be resumed from a ticket (TLS 1.3 PSK,
 * TLS 1.2 RFC 5077) sealed with a key made when the server started:
 * a returning client skips the full handshake and the HSM signature.
 * The key lives in memory only (a restart makes every ticket void) and
 * GnuTLS rotates the keys it derives from it.  A resumed session keeps
 * its client certificate, which every request still checks as before.
 * With c, the session reads and writes c's socket itself (marking c as
 * its thread's current connection) and tells c how far its handshake got. */
void http_tls_session_start(http_tls *t, gnutls_session_t s, http_conn *c);
/* After a failed handshake of c: sends the TLS alert that says why
 * (protocol_version, handshake_failure; none if no ClientHello came) and
 * returns the reason, for the log. */
const char *http_tls_refuse(gnutls_session_t s, const http_conn *c);
/* Handshakes waiting for the TLS key's signature now. */
unsigned http_tls_signing(http_tls *t);

/* For a gnutls_certificate_retrieve_function2: the chain and the key,
 * owned by t (gnutls does not free them). */
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

/* http-mhd-response.c: resp as libmicrohttpd's response, with its
 * headers (close: "Connection: close"); takes resp's body (wiped when
 * freed if resp->sensitive).  NULL if out of memory. */
struct MHD_Response;
struct MHD_Response *http_mhd_response(http_response *resp, bool close);

/* http-check.c: what libmicrohttpd lets through and HTTP does not. */
struct MHD_Connection;
struct sockaddr;
/* Header fields a request may have (query parameters, cookies and
 * trailer fields count as fields: libmicrohttpd keeps a record of each),
 * and what each record costs of its memory pool (56 bytes, aligned to
 * 16). */
#define HTTP_MAX_FIELDS 100
#define HTTP_FIELD_COST 64
#define HTTP_FIELD_KINDS \
        ((enum MHD_ValueKind) (MHD_HEADER_KIND | MHD_COOKIE_KIND | MHD_GET_ARGUMENT_KIND | MHD_FOOTER_KIND))
/* The request line and headers as received, in bytes (as counted
 * against max_header). */
size_t http_check_header_size(struct MHD_Connection *conn, const char *url, const char *query);
/* The request's fields (HTTP_FIELD_KINDS), as far as MHD has read them. */
unsigned http_check_fields(struct MHD_Connection *conn);
/* The header block is all in, and holds at most max bytes. */
bool http_check_header_within(struct MHD_Connection *conn, size_t max);
/* Field names and values, the Host rules (RFC 9112 3.2) and the target:
 * NULL if sound, else why not. */
const char *http_check_request(struct MHD_Connection *conn, const char *version, bool bad_target);
/* Message framing (RFC 9112 6.3): 0 if sound, else the status to answer
 * and close with (400, 501 for a transfer coding not served). */
int http_check_framing(struct MHD_Connection *conn, const char *version, const char **ret_msg);
/* The raw target (still percent-encoded) holds "%00" or a control character. */
bool http_check_target_bad(const char *uri);
bool http_check_expects_continue(struct MHD_Connection *conn);

/* http-work.c: the worker threads that run handlers off the I/O threads. */
typedef struct http_job http_job;
struct http_job {
        void (*run)(http_job *j);
        http_job *next;
};
typedef struct http_work http_work;
int http_work_new(unsigned threads, http_work **ret);
void http_work_submit(http_work *w, http_job *j);
void http_work_load(http_work *w, unsigned *ret_queued, unsigned *ret_busy);
/* Runs every job still queued, then joins the threads. */
void http_work_free(http_work *w);

/* http-guard.c: the connection budgets (see there). */
typedef struct http_guard http_guard;

typedef enum http_phase {
        HTTP_PHASE_RECEIVING,
        HTTP_PHASE_HANDLING,
        HTTP_PHASE_SENDING,
} http_phase;

typedef struct http_budget {
        unsigned max_connections;
        unsigned slack;             /* connections being closed may pass max_connections by this */
        unsigned per_address;
        unsigned handshake_cap;
        unsigned handshake_timeout; /* seconds */
        unsigned timeout;           /* seconds per phase */
        double rate;                /* connections per second per address (0: off), burst 2 x burst */
        unsigned burst;
        bool tls;
} http_budget;

/* The key every per-address budget and rate limit counts a peer by: its
 * IPv4 address (4 bytes), or the /64 of its IPv6 address (8 bytes); false
 * for another family. */
#define HTTP_ADDR_KEY_MAX 16
bool http_addr_key(const struct sockaddr *sa, socklen_t len, uint8_t key[HTTP_ADDR_KEY_MAX], size_t *ret_len);

/* A server's options (http-options.c): refused with a clear reason when
 * inconsistent or unset; the guard's budget they make (each share
 * defaulting to a sixteenth of max_connections, at least 16); the I/O
 * threads (the CPUs, 2 to 16). */
int http_options_check(const http_options *o);
void http_options_budget(const http_options *o, bool tls, http_budget *ret);
unsigned http_options_io_threads(const http_options *o);

int64_t http_now_ms(void);
int http_guard_new(const http_budget *b, http_guard **ret);
/* Only once every connection is freed (the MHD daemon is stopped). */
void http_guard_free(http_guard *g);
void http_guard_stats(http_guard *g, http_stats *ret);
/* For MHD_OPTION_ACCEPT_POLICY_CALLBACK: false if the connection is
 * refused (closed before any TLS); may evict another to make room. */
bool http_guard_accept(http_guard *g, const struct sockaddr *sa, socklen_t len);
/* A new connection (fd: its socket; tls: its gnutls_session_t or NULL),
 * from sa; owner is the caller's.  NULL when out of memory. */
http_conn *http_guard_conn_new(http_guard *g, void *owner, struct MHD_Connection *mhd, int fd, void *tls,
                               const struct sockaddr *sa, socklen_t salen);
/* Before MHD closes the socket. */
void http_guard_conn_free(http_conn *c);
void *http_conn_owner(const http_conn *c);
/* The guard closed it (a deadline, a budget). */
bool http_conn_evicted(http_conn *c);
void *http_conn_tls(const http_conn *c);
int http_conn_fd(const http_conn *c);
struct MHD_Connection *http_conn_mhd(const http_conn *c);
void http_conn_phase(http_conn *c, http_phase phase);
http_phase http_conn_get_phase(http_conn *c);
/* The response went out: waiting for the next request. */
void http_conn_idle(http_conn *c);
void http_conn_handshake_done(http_conn *c);
void http_conn_tls_progress(http_conn *c, bool hello_seen, bool version_ok);
void http_conn_tls_where(const http_conn *c, bool *ret_hello_seen, bool *ret_version_ok);
/* A read (or write) of c's socket that moved n bytes (n <= 0: none): c is
 * its thread's current connection, and its client made progress. */
void http_conn_io(http_conn *c, bool reading, ssize_t n);
/* http-current.c: the connection the calling I/O thread serves now (every
 * callback and every TLS read or write of a connection sets it). */
void http_conn_set_current(http_conn *c);
/* The connection a line libmicrohttpd logs on this thread is about (a
 * TLS handshake that failed, or a request it refuses): NULL unless one
 * connection alone can be it (see http-current.c). */
http_conn *http_conn_logged(bool handshake);

/* http-answer.c: our JSON answer to libmicrohttpd's own refusals, and the
 * lingering close after it. */
typedef struct http_linger http_linger;
int http_linger_new(http_linger **ret);
void http_linger_free(http_linger *l);
/* From MHD's logger: if the message is MHD refusing a request, returns
 * its status (*ret_slug: our error slug for it), after answering it with
 * our JSON error instead of MHD's HTML when c, the connection the line is
 * about (NULL if not known), is a TLS connection receiving a request; 0
 * for any other message. */
int http_answer_refusal(http_linger *l, http_conn *c, size_t max_header, const char *fmt, va_list ap,
                        const char **ret_slug);
/* Answers c's request with resp (an error) and closes c, without MHD
 * (whose memory for the request may be spent): the answer goes out on c's
 * socket, its sending side is shut, and what the client still sends is
 * read and dropped for a while. */
void http_answer_close(http_linger *l, http_conn *c, const http_response *resp);
