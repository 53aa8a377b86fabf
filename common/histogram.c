#include <time.h>

#include "histogram.h"
#include "prom.h"

#define MS 1000000ull
#define US 1000ull

const histogram_bounds histogram_bounds_request = {
        .n = 14,
        .le_ns = { 500 * US, 1 * MS, 2500 * US, 5 * MS, 10 * MS, 25 * MS, 50 * MS, 100 * MS, 250 * MS, 500 * MS,
                   1000 * MS, 2500 * MS, 5000 * MS, 10000 * MS },
};

const histogram_bounds histogram_bounds_sign = {
        .n = 15,
        .le_ns = { 100 * US, 250 * US, 500 * US, 1 * MS, 2500 * US, 5 * MS, 10 * MS, 25 * MS, 50 * MS, 100 * MS,
                   250 * MS, 500 * MS, 1000 * MS, 2500 * MS, 5000 * MS },
};

void histogram_observe(histogram *h, const histogram_bounds *b, uint64_t ns) {
        size_t i = 0;

        while (i < b->n && ns > b->le_ns[i])
                i++;
        atomic_fetch_add_explicit(&h->counts[i], 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&h->sum_ns, ns, memory_order_relaxed);
}

void histogram_snapshot_take(const histogram *h, const histogram_bounds *b, histogram_snapshot *ret) {
        uint64_t total = 0;

        for (size_t i = 0; i <= b->n; i++) {
                total += atomic_load_explicit(&h->counts[i], memory_order_relaxed);
                ret->cumulative[i] = total;
        }
        ret->count = total;
        ret->sum_seconds = (double) atomic_load_explicit(&h->sum_ns, memory_order_relaxed) / 1e9;
}

uint64_t histogram_now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000ull + (uint64_t) ts.tv_nsec;
}

/* ---- exposition ---- */

int prom_header(buf *out, const char *name, const char *type, const char *help) {
        return buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

int prom_histogram(buf *out, const char *name, const char *labels, const histogram_snapshot *h,
                   const histogram_bounds *b) {
        const char *sep = *labels ? "," : "", *open = *labels ? "{" : "", *close = *labels ? "}" : "";
        int r = 0;

        for (size_t i = 0; r >= 0 && i < b->n; i++)
                r = buf_printf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", name, labels, sep, (double) b->le_ns[i] / 1e9,
                               (unsigned long long) h->cumulative[i]);
        if (r >= 0)
                r = buf_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n%s_sum%s%s%s %.9f\n%s_count%s%s%s %llu\n", name,
                               labels, sep, (unsigned long long) h->count, name, open, labels, close, h->sum_seconds,
                               name, open, labels, close, (unsigned long long) h->count);
        return r;
}

int prom_gauge(buf *out, const char *name, const char *help, double v) {
        int r = prom_header(out, name, "gauge", help);

        return r < 0 ? r : buf_printf(out, "%s %.0f\n", name, v);
}
