/* Latency histograms for Prometheus: fixed buckets, updated with relaxed
 * atomic adds only, so that observing costs a handful of instructions on
 * the request path and never a lock.  A histogram is a plain struct that
 * lives inside whatever it measures (zero-initialised is empty); the
 * bucket bounds are the static arrays below, shared by every histogram
 * of a kind, so that the exposition names each bucket once.
 *
 * A snapshot read while others observe may be off by the observations in
 * flight (count and buckets are read one after the other); Prometheus
 * tolerates that, and nothing else reads these. */
#pragma once

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define HISTOGRAM_BUCKETS_MAX 16

typedef struct histogram_bounds {
        size_t n;                              /* finite upper bounds; +Inf follows */
        uint64_t le_ns[HISTOGRAM_BUCKETS_MAX]; /* ascending, nanoseconds */
} histogram_bounds;

/* HTTP requests and store commits: 0.5 ms .. 10 s. */
extern const histogram_bounds histogram_bounds_request;
/* Device signatures: 100 us .. 5 s (SoftHSM2 ~60 us, swtpm ~0.6 ms, a
 * real TPM tens to hundreds of ms). */
extern const histogram_bounds histogram_bounds_sign;

typedef struct histogram {
        /* counts[i]: observations in bucket i alone (not cumulative);
         * counts[n] is the +Inf bucket. */
        _Atomic uint64_t counts[HISTOGRAM_BUCKETS_MAX + 1];
        _Atomic uint64_t sum_ns;
} histogram;

typedef struct histogram_snapshot {
        uint64_t cumulative[HISTOGRAM_BUCKETS_MAX + 1]; /* Prometheus' le buckets; [n] = count */
        uint64_t count;
        double sum_seconds;
} histogram_snapshot;

void histogram_observe(histogram *h, const histogram_bounds *b, uint64_t ns);
void histogram_snapshot_take(const histogram *h, const histogram_bounds *b, histogram_snapshot *ret);

/* CLOCK_MONOTONIC in nanoseconds, for measuring what to observe. */
uint64_t histogram_now_ns(void);
