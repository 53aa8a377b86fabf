#include <stdarg.h>
#include <stdio.h>

#include "progress.h"

void progress_say(progress_fn fn, void *userdata, const char *fmt, ...) {
        char line[512];
        va_list ap;

        if (!fn)
                return;
        va_start(ap, fmt);
        vsnprintf(line, sizeof(line), fmt, ap);
        va_end(ap);
        fn(userdata, line);
}
