/* Progress reports of join, renew and the agent: one finished line per
 * step, for the caller to show.  Below all of them. */
#pragma once

/* Progress reports: one finished line per step, for the caller to show. */
typedef void (*progress_fn)(void *userdata, const char *message);

/* Formats a progress line and hands it to fn (nothing if fn is NULL). */
void progress_say(progress_fn fn, void *userdata, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
