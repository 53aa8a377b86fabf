#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "escape.h"
#include "log.h"

static const char *prog = "hwid";
static int max_level = LOG_LVL_INFO;
static int journal;

void log_init(const char *program) {
        prog = program;
        journal = getenv("JOURNAL_STREAM") != NULL;
}

void log_set_max_level(int level) {
        max_level = level;
}

void log_msg(int level, const char *fmt, ...) {
        char raw[1024], line[1024];
        va_list ap;

        if (level > max_level)
                return;
        va_start(ap, fmt);
        vsnprintf(raw, sizeof(raw), fmt, ap);
        va_end(ap);
        /* One event on one line whatever the message holds (a CN chosen by
         * a client): controls and bidi characters are escaped. */
        text_escape_into(raw, line, sizeof(line));
        if (journal) {
                fprintf(stderr, "<%d>%s\n", level, line);
        } else {
                char ts[32];
                time_t now = time(NULL);
                struct tm tm;
                strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
                fprintf(stderr, "%s %s: %s\n", ts, prog, line);
        }
}
