/* hwid join: a device's first identity, from a bootstrap token.
 *   1. fetch the CA without trusting it, check it against the pin (a
 *      mismatch stops everything: nothing else is sent, the token unused);
 *   2. the key: reuse the one at the URI, or create it inside the device;
 *   3. a CSR signed inside the device;
 *   4. enroll with the token over TLS verified against the pinned CA;
 *      a pending request is polled (or left for a later run);
 *      with attest, the TPM first proves to the CA that the key lives in
 *      it (POST /v1/attest, then the answer beside the CSR);
 *   5. the identity written to the directory atomically. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "hsm.h"
#include "progress.h"

/* How far the device's clock and the CA's may differ before the dates of
 * a certificate are held against it (seconds): a certificate counts as
 * expired only this long after its notAfter by the device's clock. */
#define DEVICE_CLOCK_SKEW_DEFAULT 300

/* Flushes what a join or renewal held loaded in the device
 * (hwid_key_release()) once the key has signed its last.  A flush the
 * TPM's going away lost is said as a warning naming what the TPM may
 * still hold, and fails nothing (the signatures stand).  Returns r with
 * its detail kept. */
int device_key_release(hwid_key *k, int r, progress_fn fn, void *userdata);

typedef struct join_opts {
        const char *server;    /* https://host:port */
        /* Several servers (replicas of one CA), NULL-terminated, tried in
         * order with failover (client.h); NULL: server alone.  The same
         * pin holds for all; DIR/device.json records them. */
        const char *const *servers;
        const char *token;     /* <id>.<secret>: a secret */
        const char *ca_hash;   /* sha256:<hex> */
        const char *key_uri;
        const char *cn;
        const char *dir;
        const char *san;       /* NULL or dns:..,ip:.. */
        hwid_key_type type;    /* when the key is created */
        const char *tcti;
        bool no_wait;          /* pending: save and return instead of polling */
        /* TPM attestation (docs/ATTESTATION.md): prove to the CA that the key
         * lives in this TPM, with the EK of type ek (TPM_EK_AUTO: the first
         * certificate in NV).  token may then be NULL: a TPM on the CA's EK
         * allowlist enrolls without one. */
        bool attest;
        int ek;                /* tpm_ek_alg */
        /* EST (RFC 7030, docs/EST.md) instead of the native API: cacerts for
         * the pin, simpleenroll with the token as HTTP Basic credentials; a
         * request pending approval is asked again (no pending.json).  Not
         * with attest. */
        bool est;
        int64_t wait_timeout;  /* seconds to poll a pending request, default 1800 */
        int64_t clock_skew;    /* seconds, DEVICE_CLOCK_SKEW_DEFAULT */
        long http_timeout;     /* seconds per HTTP request */
        progress_fn progress;  /* may be NULL */
        void *progress_data;
} join_opts;

typedef enum join_result {
        JOIN_ENROLLED,
        JOIN_ALREADY_ENROLLED,
        JOIN_PENDING,
} join_result;

/* DIR already enrolled (and neither revoked nor expired): nothing to do,
 * JOIN_ALREADY_ENROLLED.  A revoked identity (DIR/needs-bootstrap, left
 * by renew) or an expired one is started over: its keys are deleted, DIR
 * forgets it, and the token enrolls a new one. */
int join_run(const join_opts *o, join_result *ret);

/* Whether join_run on DIR would need a token: false when DIR holds a live
 * identity or a pending request to resume. */
bool join_needs_token(const char *dir, int64_t clock_skew);

/* Checks sha256:<64 hex> syntax. */
bool ca_hash_valid(const char *s);
