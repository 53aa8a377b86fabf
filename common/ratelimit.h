/* Per-client-address token buckets: hwidd's HTTP transport, CMP's
 * unauthenticated answers and the OCSP responder's signatures.
 *
 * A fixed-size table (no allocation after ratelimit_new), hashed with a
 * per-process random key so that a client cannot aim its addresses at one
 * slot.  When the few slots an address may use are all taken, the one
 * idle longest is reused: an address that was evicted comes back with a
 * full bucket, so the table bounds memory, not fairness under a flood of
 * distinct addresses.  Thread-safe. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "cleanup.h"

typedef struct ratelimit ratelimit;

/* rate: tokens per second (> 0); burst: bucket size (0: rate rounded up, at least 1);
 * slots: table size (0: a default of 4096). */
int ratelimit_new(double rate, unsigned burst, size_t slots, ratelimit **ret);
void ratelimit_free(ratelimit *rl);
DEFINE_TRIVIAL_CLEANUP_FUNC(ratelimit *, ratelimit_free)

/* Takes one token for the address (addr: 4 or 16 raw bytes).  Returns 0
 * if the request may proceed; otherwise the number of whole seconds (>= 1)
 * after which a token will be available. */
int64_t ratelimit_take(ratelimit *rl, const void *addr, size_t addr_len);

/* Whether a token is there for the address, without taking it: 0, or
 * the whole seconds until one will be. */
int64_t ratelimit_peek(ratelimit *rl, const void *addr, size_t addr_len);

/* Same, at a given monotonic time in seconds (for tests). */
int64_t ratelimit_take_at(ratelimit *rl, const void *addr, size_t addr_len, double now);
