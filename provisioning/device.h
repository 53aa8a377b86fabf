/* A device's identity directory.  Layout:
 *
 *   DIR/ca.pem          the CAs the device trusts: the pinned one (and its
 *                       chain), then those a rollover's links proved, 0644
 *   DIR/device.json     identity, servers (URLs, in the order given) and
 *                       server (the one that answered last), 0644
 *   DIR/current         symlink -> gen-N: the generation in use
 *   DIR/gen-N/cert.pem  the certificate of generation N, 0644
 *   DIR/gen-N/key.uri   the URI of its key (in the TPM/HSM), 0600
 *   DIR/gen-N/key.spki  the SHA-256 of the public key a renewal made for
 *                       gen-N, recorded before it asked the CA, 0600
 *   DIR/cert.pem        symlink -> current/cert.pem (for other tools)
 *   DIR/key.uri         symlink -> current/key.uri
 *   DIR/pending.json    a request waiting for approval, 0600
 *   DIR/needs-bootstrap the server refused to renew (revoked, expired):
 *                       hwid join starts over; one line, the reason
 *
 * A renewal writes gen-(N+1) completely, fsyncs it, and then swaps the
 * `current` symlink with one rename: whatever moment a crash hits, DIR
 * holds a certificate together with the key it belongs to. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <openssl/x509.h>

#include "cleanup.h"

typedef struct device_state {
        char *dir;
        char *server;       /* the server that answered last */
        char **servers;     /* every server, in the order given (NULL-terminated) */
        char *identity;
        char *ca_pem;       /* contents of DIR/ca.pem */
        char *cert_pem;     /* current certificate */
        char *key_uri;      /* current key */
        int generation;
        int64_t not_before, not_after;
} device_state;

/* Loads DIR; -HWID_E_NOT_FOUND if DIR holds no enrolled identity. */
int device_load(const char *dir, device_state *ret);
void device_state_clear(device_state *s);

/* What an identity takes on disk at most (certificates, links, a key
 * file), with block rounding to spare. */
#define DEVICE_ROOM (64 * 1024)

/* Creates DIR if needed and proves it can take an identity: DEVICE_ROOM
 * bytes are written there, synced and removed.  hwid join calls it before
 * it sends anything, so that a read-only or full DIR never costs a token. */
int device_check_writable(const char *dir);

/* First identity (join): writes ca.pem, device.json and generation 1.
 * servers: every server given (NULL-terminated); server: the one of them
 * that answered. */
int device_write_initial(const char *dir, const char *const *servers, const char *server, const char *identity,
                         const char *ca_pem, const char *cert_pem, const char *key_uri);

/* DIR/ca.pem replaced by ca_pem (a CA a rollover proved adopted), in
 * one rename: whatever fails, it holds the old set or the new. */
int device_write_ca(const device_state *s, const char *ca_pem);

/* The order to try the servers in: the one that answered last, then the
 * others in the order given; NULL-terminated, pointing into s. */
#define DEVICE_ORDER_MAX 10
void device_server_order(const device_state *s, const char *ret[DEVICE_ORDER_MAX]);

/* Records in device.json that server (one of s->servers) answered last,
 * so that the next run asks it first.  Nothing if it already is. */
int device_set_server(const device_state *s, const char *server);

/* Records the key a renewal is about to ask for, in gen-(N+1)/key.uri,
 * before it asks: if the answer is lost, the retry reuses that key and
 * the server hands the same certificate back. */
int device_write_next_key(const device_state *s, const char *key_uri);
/* -HWID_E_NOT_FOUND if no renewal is in the making. */
int device_read_next_key(const device_state *s, char **ret_uri);
/* The public key hash (SHA-256 hex of the SPKI) of the key a renewal made
 * for gen-(N+1), recorded before the server is asked: the only key found
 * at that URI later that the renewal may take as its own. */
int device_write_next_key_spki(const device_state *s, const char *spki_hex);
int device_read_next_key_spki(const device_state *s, char ret[65]);

/* Next generation (renew): writes gen-(N+1) and swaps `current` to it. */
int device_write_next(const device_state *s, const char *cert_pem, const char *key_uri, int *ret_generation);

/* A generation's certificate and key URI (-HWID_E_NOT_FOUND unless both
 * are there), and switching `current` to it: for a renewal that wrote its
 * generation but was interrupted before the switch. */
int device_read_generation(const device_state *s, int gen, char **ret_cert_pem, char **ret_key_uri);
int device_switch(const device_state *s, int gen);

/* A key that a generation of DIR names, with the SHA-256 (hex) of the
 * public key hwid knows it by: its generation's certificate's, or the one
 * recorded when a renewal made it (key.spki); "" when DIR knows neither —
 * then whatever is at that URI is not provably hwid's and is left alone. */
typedef struct device_key_ref {
        char *uri;
        char spki[65];
} device_key_ref;
/* Frees an array ending with a NULL uri. */
void device_key_refs_free(device_key_ref *v);
DEFINE_TRIVIAL_CLEANUP_FUNC(device_key_ref *, device_key_refs_free)

/* The keys of generations other than the current one (and the next, a
 * renewal in the making), other than the current key: for the caller to
 * delete from the device before device_remove_stale() removes their
 * directories. */
int device_stale_keys(const device_state *s, device_key_ref **ret);
int device_remove_stale(const device_state *s);

/* Pending request bookkeeping for hwid join --no-wait and resume. */
int device_write_pending(const char *dir, const char *server, const char *identity, const char *request_id,
                         const char *ca_pem, const char *key_uri);
int device_read_pending(const char *dir, char **ret_server, char **ret_identity, char **ret_request_id,
                        char **ret_ca_pem, char **ret_key_uri);
int device_clear_pending(const char *dir);

/* The identity in DIR is dead (revoked or expired): remember it, so that
 * hwid join starts over instead of reporting "already enrolled". */
int device_mark_bootstrap(const char *dir, const char *reason);
bool device_needs_bootstrap(const char *dir);

/* Every key of every generation in DIR, the current one included,
 * without duplicates. */
int device_all_keys(const device_state *s, device_key_ref **ret);
/* Forgets the identity: `current` first (from then on DIR holds none),
 * then the links, device.json, the generations and the marker. */
int device_forget(const device_state *s);

/* t (Unix seconds) as 2025-07-01T10:00:00Z, for messages. */
void device_fmt_utc(int64_t t, char out[32]);

/* Parses the first certificate of a PEM text. */
int pem_first_cert(const char *pem, X509 **ret);
