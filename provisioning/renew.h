/* hwid renew: a new certificate for the identity in DIR, over mutual TLS
 * with the current key (inside the TPM/HSM).  When the profile wants key
 * rotation, a new key is made in the device first; the old key is
 * removed only after the new certificate is safely on disk. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "join.h"

typedef struct renew_opts {
        const char *dir;
        const char *tcti;
        bool rotate;           /* make a new key even if the profile does not ask */
        int64_t clock_skew;    /* seconds, DEVICE_CLOCK_SKEW_DEFAULT */
        /* TPM attestation of the key (docs/ATTESTATION.md): always with
         * attest; else when the profile requires it and the key is new or
         * the certificate was not attested, or to keep an attested
         * certificate attested across a new key.  ek: tpm_ek_alg. */
        bool attest;
        int ek;
        /* EST (RFC 7030) instead of the native API: simplereenroll, with no
         * status request before (rotate alone decides the key; no
         * attestation). */
        bool est;
        long http_timeout;
        progress_fn progress;
        void *progress_data;
        /* Told when a request leaves an unavailable server for the next
         * one (several servers: client.h); NULL: progress. */
        progress_fn note;
        void *note_data;
        /* If not NULL: when renew_run fails with -HWID_E_TOO_EARLY, set to
         * the moment the server's renewal window opens (its
         * renewal_opens_at, Unix seconds; 0 if it did not say). */
        int64_t *window_opens_at;
} renew_opts;

typedef struct renew_result {
        int generation;
        int64_t not_before;
        int64_t not_after;
        bool rotated;
} renew_result;

/* -HWID_E_EXPIRED / -HWID_E_REVOKED mean: bootstrap again with a token;
 * DIR is then marked (device_mark_bootstrap) so that hwid join starts over. */
int renew_run(const renew_opts *o, renew_result *ret);

typedef struct renew_status {
        int64_t renew_after;   /* when the server's renewal window opens */
        bool rotate_key;       /* the profile wants a new key at each renewal */
        int attestation;       /* the profile's: 0 none, 1 optional, 2 required */
        bool attested;         /* the current certificate's key was attested */
} renew_status;

/* Asks the server, over mutual TLS with the current key, what it says of
 * the identity in DIR (GET /v1/identities/NAME).  Bootstrap errors as for
 * renew_run. */
int renew_fetch_status(const renew_opts *o, renew_status *ret);

/* When a "too early" answer (403 renewal_not_open) says the window opens:
 * its renewal_opens_at, else now + Retry-After, else 0 (unknown). */
struct client_response;
int64_t renew_window_opens_at(const struct client_response *resp);

/* Whether r means the device can no longer renew and must join again. */
bool renew_needs_bootstrap(int r);

/* The one line that says why r ends the identity and what to do: r's
 * reason (without any advice of its own, which the server adds too) and
 * "; bootstrap again: run hwid join with a new token", once. */
void renew_bootstrap_message(int r, char *out, size_t n);

/* Deletes keys of earlier generations left by an interrupted renewal. */
int renew_cleanup(const renew_opts *o);
