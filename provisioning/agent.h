/* hwid agent: keeps the identity in DIR renewed, unattended.
 *
 * Each round: load DIR, ask the server when its renewal window opens
 * (best effort), sleep until renew_at of the lifetime plus a random
 * jitter (never before the window), renew.  A failed renewal is retried
 * with exponential backoff, capped so that a retry still comes before
 * expiry: min(max_backoff, remaining / 4), never under min_backoff (past
 * expiry by this clock, max_backoff alone caps it).
 * Server outages and TPM restarts are just failures to retry (every
 * round opens the key, and so the TPM connection, anew).  An identity the
 * server calls revoked or expired ends the agent: the device must
 * bootstrap again.  One it calls not yet valid (a wrong clock) is retried.
 *
 * Library code: events go to the caller's log callback; waiting goes
 * through the caller's wait callback, which is where a stop request
 * (SIGTERM) is noticed — never in the middle of a renewal. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "join.h"

typedef void (*agent_log_fn)(void *userdata, int level, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Waits up to seconds (0: just looks); returns true when the agent must stop. */
typedef bool (*agent_wait_fn)(void *userdata, int64_t seconds);

typedef struct agent_opts {
        const char *dir;
        const char *tcti;
        double renew_at;        /* fraction of the lifetime, default 0.66 */
        double jitter;          /* random extra fraction, default 0.05 */
        int64_t min_backoff;    /* seconds, default 5 */
        int64_t max_backoff;    /* seconds, default 600 */
        int64_t clock_skew;     /* seconds, DEVICE_CLOCK_SKEW_DEFAULT */
        bool once;              /* stop after the first successful renewal */
        long http_timeout;
        /* Held for each renewal's whole run, or NULL: a renewal keeps keys
         * loaded in the TPM between its commands, and what else in this
         * process uses the TPM (workload signatures) takes it too, so that
         * the two never share the TPM's few object slots (3 on a TPM
         * without a resource manager, swtpm). */
        pthread_mutex_t *tpm_turn;
        agent_log_fn log;       /* levels of common/log.h */
        agent_wait_fn wait;
        void *userdata;         /* for log and wait */
        progress_fn progress;   /* renew's steps, may be NULL */
} agent_opts;

#define AGENT_RENEW_AT_DEFAULT 0.66
#define AGENT_JITTER_DEFAULT 0.05
#define AGENT_MIN_BACKOFF_DEFAULT 5
#define AGENT_MAX_BACKOFF_DEFAULT 600

/* Runs until stopped (0), --once is done (0), the identity needs a new
 * bootstrap (-HWID_E_REVOKED / -HWID_E_EXPIRED) or DIR holds no identity
 * at start (-HWID_E_NOT_FOUND). */
int agent_run(const agent_opts *o);

/* When to renew a certificate that is good from start to not_after: at
 * renew_at of that lifetime plus rnd (in [0, 1)) times jitter of it, not
 * before renew_after (< 0: unknown), and not after its last second.
 * start is the later of notBefore and when the certificate arrived (its
 * file's time): hwidd backdates notBefore for clock skew, which would
 * otherwise put the moment of a short-lived certificate in the past and
 * renew it in a loop. */
int64_t agent_renewal_time(const agent_opts *o, int64_t start, int64_t not_after, int64_t renew_after, double rnd);

/* The delay before retry number failures (1, 2, ...) at now. */
int64_t agent_backoff(const agent_opts *o, int failures, int64_t now, int64_t not_after);
