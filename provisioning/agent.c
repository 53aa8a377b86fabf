#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <openssl/err.h>
#include <openssl/rand.h>

#include "agent.h"
#include "device.h"
#include "error.h"
#include "fsutil.h"
#include "log.h"
#include "renew.h"

#define SLICE 60 /* longest single wait: a clock step or a suspend is noticed within it */

typedef struct agent_state {
        bool loaded;            /* DIR has been read once */
        int failures;           /* renewals failed in a row */
        int64_t retry_at;       /* next attempt after a failure or a "too early", 0: none due */
        int64_t opens_at;       /* the server's renewal_opens_at of the last "too early" */
        int64_t not_after;      /* of the certificate in DIR, 0 if unknown */
        char identity[128];
} agent_state;

#define say(o, level, ...)                                                    \
        do {                                                                  \
                if ((o)->log)                                                 \
                        (o)->log((o)->userdata, (level), __VA_ARGS__);        \
        } while (0)

static double random_fraction(void) {
        uint32_t v;

        if (RAND_bytes((unsigned char *) &v, sizeof(v)) != 1) {
                ERR_clear_error();
                return 0.5;
        }
        return (double) v / 4294967296.0;
}

int64_t agent_renewal_time(const agent_opts *o, int64_t start, int64_t not_after, int64_t renew_after, double rnd) {
        int64_t life = not_after > start ? not_after - start : 1;
        int64_t at = start + (int64_t) ((o->renew_at + rnd * o->jitter) * (double) life);

        if (renew_after >= 0 && at < renew_after)
                at = renew_after;
        if (at > not_after - 1)
                at = not_after - 1;
        return at;
}

int64_t agent_backoff(const agent_opts *o, int failures, int64_t now, int64_t not_after) {
        int64_t d = o->min_backoff, cap = o->max_backoff;

        for (int i = 1; i < failures && d < cap; i++)
                d *= 2;
        /* Room for a few more attempts before the certificate runs out.
         * Once it has (by this clock: the server decides), only
         * max_backoff caps: retrying fast no longer buys anything. */
        if (not_after > now && (not_after - now) / 4 < cap)
                cap = (not_after - now) / 4;
        if (d > cap)
                d = cap;
        return d < o->min_backoff ? o->min_backoff : d;
}

/* A server that was unavailable is worth knowing of (a replica is down):
 * logged at info, not as one of renew's steps. */
static void on_failover(void *ud, const char *message) {
        const agent_opts *o = ud;

        say(o, LOG_LVL_INFO, "%s", message);
}

/* The server's renew_after, or -1 when it cannot say now. */
static int ask_window(const agent_opts *o, const device_state *s, int64_t *ret) {
        renew_opts ro = { .dir = o->dir, .tcti = o->tcti, .http_timeout = o->http_timeout,
                          .clock_skew = o->clock_skew, .note = on_failover, .note_data = (void *) o };
        renew_status st;
        int r = renew_fetch_status(&ro, &st);

        if (renew_needs_bootstrap(r))
                return r;
        if (r < 0) {
                say(o, LOG_LVL_INFO, "cannot ask %s when renewal opens (%s); going by the certificate alone",
                    s->server, hwid_strerror(r));
                st.renew_after = -1;
        }
        *ret = st.renew_after;
        return 0;
}

/* The later of notBefore and the arrival of the certificate in DIR. */
static int64_t effective_start(const device_state *s) {
        _cleanup_free_ char *p = path_join(s->dir, "cert.pem");
        struct stat st;

        if (p && stat(p, &st) == 0 && (int64_t) st.st_mtime > s->not_before)
                return (int64_t) st.st_mtime;
        return s->not_before;
}

/* Loads DIR and picks the moment of the next attempt. */
static int schedule(const agent_opts *o, agent_state *a, int64_t *ret_at) {
        char when[32];
        device_state s;
        int64_t renew_after = -1, at, now;
        int r = device_load(o->dir, &s);

        if (r < 0)
                return r;
        a->loaded = true;
        a->not_after = s.not_after;
        snprintf(a->identity, sizeof(a->identity), "%s", s.identity);
        if (a->retry_at > 0) {
                *ret_at = a->retry_at;
                device_state_clear(&s);
                return 0;
        }
        r = ask_window(o, &s, &renew_after);
        if (r >= 0) {
                at = agent_renewal_time(o, effective_start(&s), s.not_after, renew_after, random_fraction());
                now = (int64_t) time(NULL);
                device_fmt_utc(at, when);
                say(o, LOG_LVL_INFO, "%s (generation %d): next renewal at %s (in %llds)", s.identity, s.generation,
                    when, (long long) (at > now ? at - now : 0));
                *ret_at = at;
        }
        device_state_clear(&s);
        return r;
}

/* Sleeps until the wall-clock moment at, in slices; true when asked to stop. */
static bool wait_until(const agent_opts *o, int64_t at) {
        for (;;) {
                int64_t left = at - (int64_t) time(NULL);

                if (left <= 0)
                        return o->wait(o->userdata, 0);
                if (o->wait(o->userdata, left > SLICE ? SLICE : left))
                        return true;
        }
}

static int renew_once(const agent_opts *o, agent_state *a) {
        renew_opts ro = { .dir = o->dir, .tcti = o->tcti, .http_timeout = o->http_timeout,
                          .clock_skew = o->clock_skew, .progress = o->progress, .progress_data = o->userdata,
                          .note = on_failover, .note_data = (void *) o, .window_opens_at = &a->opens_at };
        renew_result res;
        char until[32];
        int r;

        a->opens_at = 0;
        if (o->tpm_turn)
                pthread_mutex_lock(o->tpm_turn);
        r = renew_run(&ro, &res);
        if (o->tpm_turn)
                pthread_mutex_unlock(o->tpm_turn);
        if (r < 0)
                return r;
        a->failures = 0;
        a->retry_at = 0;
        a->not_after = res.not_after;
        device_fmt_utc(res.not_after, until);
        say(o, LOG_LVL_NOTICE, "%s renewed: generation %d, valid until %s%s", a->identity, res.generation, until,
            res.rotated ? ", new key" : "");
        return 0;
}

/* The server said when its renewal window opens: wait until then, no
 * guessing and no backoff (this is no failure). */
static bool wait_for_window(const agent_opts *o, agent_state *a, int r, int64_t now) {
        char when[32];

        if (r != -HWID_E_TOO_EARLY || a->opens_at <= now)
                return false;
        a->retry_at = a->opens_at;
        device_fmt_utc(a->opens_at, when);
        say(o, LOG_LVL_INFO, "%s: the server's renewal window opens at %s (renewal_opens_at %lld); waiting until then",
            a->identity[0] ? a->identity : o->dir, when, (long long) a->opens_at);
        return true;
}

static void retry_later(const agent_opts *o, agent_state *a, int r) {
        int64_t now = (int64_t) time(NULL), delay;

        if (wait_for_window(o, a, r, now))
                return;
        a->failures++;
        delay = agent_backoff(o, a->failures, now, a->not_after);
        a->retry_at = now + delay;
        say(o, LOG_LVL_WARNING, "renewal of %s failed (attempt %d): %s; retrying in %llds",
            a->identity[0] ? a->identity : o->dir, a->failures, hwid_strerror(r), (long long) delay);
}

static int give_up(const agent_opts *o, const agent_state *a, int r) {
        char line[640];

        if (renew_needs_bootstrap(r)) {
                renew_bootstrap_message(r, line, sizeof(line));
                say(o, LOG_LVL_ERR, "%s can no longer renew: %s", a->identity[0] ? a->identity : o->dir, line);
        } else {
                say(o, LOG_LVL_ERR, "%s: %s%s", o->dir, hwid_strerror(r),
                    r == -HWID_E_NOT_FOUND ? " (run hwid join first)" : "");
        }
        return r;
}

int agent_run(const agent_opts *o) {
        agent_state a = { 0 };

        for (;;) {
                int64_t at;
                int r = schedule(o, &a, &at);

                if (r >= 0) {
                        if (wait_until(o, at))
                                break;
                        r = renew_once(o, &a);
                }
                if (r >= 0 && o->once)
                        return 0;
                if (r < 0 && (renew_needs_bootstrap(r) || !a.loaded))
                        return give_up(o, &a, r);
                if (r < 0)
                        retry_later(o, &a, r);
                if (o->wait(o->userdata, 0))
                        break;
        }
        say(o, LOG_LVL_INFO, "stopping");
        return 0;
}
