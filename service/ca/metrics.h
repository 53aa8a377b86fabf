/* hwidd's Prometheus metrics: what the request path records (with atomic
 * adds into fixed arrays, never a lock) and the text exposition (format
 * 0.0.4) of GET /metrics.  The list, with what each means, is in
 * docs/OPERATIONS.md. */
#pragma once

#include <stdint.h>

#include "buf.h"
#include "hsm.h"
#include "ca.h"
#include "store.h"

typedef struct metrics metrics;

/* Whose writes a store commit was, for its duration histogram. */
typedef enum metrics_commit {
        COMMIT_CERTIFICATE, /* an issuance: certificate, token use, audit record */
        COMMIT_REQUEST,     /* a request held for approval */
        COMMIT_AUDIT,       /* an audit record alone */
        _COMMIT_MAX,
} metrics_commit;

int metrics_new(metrics **ret);
void metrics_free(metrics *m);
DEFINE_TRIVIAL_CLEANUP_FUNC(metrics *, metrics_free)

/* A request handled: how long, and its status (2xx success but 202
 * pending, 4xx client_error, 5xx server_error); error is the JSON error slug of a
 * refusal (NULL otherwise), counted by slug. */
void metrics_request(metrics *m, ca_endpoint ep, int status, const char *error, uint64_t ns);
/* A refusal counted by its slug alone: by the transport before any
 * handler ran (413, 429, 431), or in a CMP answer (200). */
void metrics_refusal(metrics *m, const char *error);
void metrics_commit_observe(metrics *m, metrics_commit op, uint64_t ns);

/* Audit records the syslog sink could not deliver (audit-syslog.c). */
void metrics_syslog_dropped(metrics *m);

/* Attestation challenges (POST /v1/attest): made, older ones of the same
 * requester replaced by the per-requester bound, refused (all requesters'
 * max_pending reached). */
typedef enum metrics_challenge {
        CHALLENGE_ISSUED,
        CHALLENGE_REPLACED,
        CHALLENGE_REFUSED,
        _CHALLENGE_MAX,
} metrics_challenge;
void metrics_challenge_count(metrics *m, metrics_challenge what, unsigned long n);

/* CMP's PasswordBasedMac (api/cmp/cmp-auth.c, ca_service_count_pbm()):
 * computed to check a message, or refused before any computing
 * (parameters outside the allow-list, no such token); enrollments
 * answered as replays (ca-enroll.c): audited, or counted only (one record
 * per certificate and hour); how bootstrap tokens' secrets were checked
 * (ca.c). */
typedef enum metrics_event {
        EVENT_PBM_COMPUTED,
        EVENT_PBM_REFUSED,
        EVENT_REPLAY_AUDITED,
        EVENT_REPLAY_UNAUDITED,
        EVENT_TOKEN_DEVICE,  /* a bootstrap token's secret: an HMAC in the HSM/TPM */
        EVENT_TOKEN_MEMORY,  /* ... checked before: from memory (token-memo.h) */
        EVENT_TOKEN_HASH,    /* ... a legacy token's: a SHA-256 */
        _EVENT_MAX,
} metrics_event;
void metrics_event_count(metrics *m, metrics_event e);

/* A CA generation served (ca-gens.h). */
typedef struct metrics_gen {
        int generation;
        const char *state;        /* "active", "prepared", "previous" */
        int64_t not_after;
} metrics_gen;
#define METRICS_GENS_MAX 8

/* Everything else the exposition shows, gathered by the caller. */
typedef struct metrics_sources {
        int64_t now;
        /* The counters hwidd kept before the histograms. */
        unsigned long requests, issued, renewed, pending, denied, errors, unauthenticated;
        hwid_key *ca_key;
        hwid_key *tls_key;        /* NULL until hwidd has one */
        bool have_stats;          /* store_stats_get() answered */
        store_stats stats;
        int64_t ca_not_after;     /* the active CA's */
        metrics_gen gens[METRICS_GENS_MAX];
        size_t n_gens;
        int64_t tls_not_after;    /* 0: unknown */
        int64_t crl_made_at;      /* the active CA's CRL; 0: none made yet */
} metrics_sources;

int metrics_render(metrics *m, const metrics_sources *src, buf *out);
