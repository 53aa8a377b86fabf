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
        long http_timeout;
        progress_fn progress;
        void *progress_data;
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
} renew_status;

/* Asks the server, over mutual TLS with the current key, what it says of
 * the identity in DIR (GET /v1/identities/NAME).  Bootstrap errors as for
 * renew_run. */
int renew_fetch_status(const renew_opts *o, renew_status *ret);

/* Whether r means the device can no longer renew and must join again. */
bool renew_needs_bootstrap(int r);

/* Deletes keys of earlier generations left by an interrupted renewal. */
int renew_cleanup(const renew_opts *o);
