/* Refusals of requests that carry no valid credential (no token, an
 * unknown or spent token, no client certificate or one we do not honour,
 * a request refused before anyone was authenticated).
 *
 * Anyone can send those, as fast as the network allows, so they must not
 * cost a database write each: they are counted here, a few per minute are
 * logged one by one, and once per interval the counts become one summary
 * (one audit record and one log line) instead of a record per refusal.
 * Thread-safe; no I/O: the caller writes what it is handed. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cleanup.h"

/* How often a summary is due, and how many refusals per interval are
 * logged one by one before the rest are only counted. */
#define REFUSALS_INTERVAL 60
#define REFUSALS_LOG_BURST 10

typedef struct refusals refusals;

int refusals_new(refusals **ret);
void refusals_free(refusals *rf);
DEFINE_TRIVIAL_CLEANUP_FUNC(refusals *, refusals_free)

/* Counts one refusal with error r (-hwid_err) at now; true if this one
 * may be logged by itself (the first REFUSALS_LOG_BURST of an interval). */
bool refusals_note(refusals *rf, int r, int64_t now);

/* If the interval that began with the first refusal counted has passed
 * (or force), writes its summary into buf ("1234 requests ... refused:
 * 1200 bad_token, 34 unauthenticated; 1224 not logged one by one"),
 * starts a new interval and returns true; false when there is nothing
 * to report. */
bool refusals_take_summary(refusals *rf, int64_t now, bool force, char *buf, size_t size);

/* Every refusal counted since the start (for /metrics). */
unsigned long refusals_total(refusals *rf);
