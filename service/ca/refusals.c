/* Counting refusals of requests without a valid credential: a fixed
 * table of counters per error code, no allocation after refusals_new(). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "refusals.h"

struct refusals {
        pthread_mutex_t lock;
        int64_t since;                 /* start of the interval; 0: nothing counted in it */
        unsigned long count;           /* in the interval */
        unsigned long logged;          /* of which logged one by one */
        unsigned long by_code[_HWID_E_MAX];
        unsigned long total;
};

int refusals_new(refusals **ret) {
        refusals *rf = calloc(1, sizeof(*rf));

        if (!rf)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (pthread_mutex_init(&rf->lock, NULL) != 0) {
                free(rf);
                return hwid_fail(HWID_E_NOMEM, "cannot create the refusal counters' lock");
        }
        *ret = rf;
        return 0;
}

void refusals_free(refusals *rf) {
        if (!rf)
                return;
        pthread_mutex_destroy(&rf->lock);
        free(rf);
}

bool refusals_note(refusals *rf, int r, int64_t now) {
        hwid_err code = r < 0 && -r < _HWID_E_MAX ? (hwid_err) -r : HWID_E_INTERNAL;
        bool log;

        pthread_mutex_lock(&rf->lock);
        if (rf->count == 0)
                rf->since = now;
        rf->count++;
        rf->total++;
        rf->by_code[code]++;
        log = rf->logged < REFUSALS_LOG_BURST;
        if (log)
                rf->logged++;
        pthread_mutex_unlock(&rf->lock);
        return log;
}

/* "1200 bad_token, 34 unauthenticated" into buf, most frequent first. */
static void breakdown(const unsigned long *by_code, char *buf, size_t size) {
        unsigned long done[_HWID_E_MAX] = { 0 };
        size_t o = 0;

        buf[0] = '\0';
        for (;;) {
                int best = -1;
                for (int c = 0; c < _HWID_E_MAX; c++)
                        if (by_code[c] > done[c] && (best < 0 || by_code[c] > by_code[best]))
                                best = c;
                if (best < 0 || o >= size)
                        return;
                done[best] = by_code[best];
                o += (size_t) snprintf(buf + o, size - o, "%s%lu %s", o ? ", " : "", by_code[best],
                                       hwid_err_slug(-best));
        }
}

bool refusals_take_summary(refusals *rf, int64_t now, bool force, char *buf, size_t size) {
        unsigned long by_code[_HWID_E_MAX], count, logged;
        int64_t since;
        char parts[384];

        pthread_mutex_lock(&rf->lock);
        count = rf->count;
        if (count == 0 || (!force && now < rf->since + REFUSALS_INTERVAL)) {
                pthread_mutex_unlock(&rf->lock);
                return false;
        }
        since = rf->since;
        logged = rf->logged;
        memcpy(by_code, rf->by_code, sizeof(by_code));
        memset(rf->by_code, 0, sizeof(rf->by_code));
        rf->count = rf->logged = 0;
        rf->since = 0;
        pthread_mutex_unlock(&rf->lock);
        breakdown(by_code, parts, sizeof(parts));
        snprintf(buf, size, "%lu request%s without valid credentials refused in %llds: %s; %lu not logged one by one",
                 count, count == 1 ? "" : "s", (long long) (now > since ? now - since : 0), parts, count - logged);
        return true;
}

unsigned long refusals_total(refusals *rf) {
        unsigned long n;

        pthread_mutex_lock(&rf->lock);
        n = rf->total;
        pthread_mutex_unlock(&rf->lock);
        return n;
}
