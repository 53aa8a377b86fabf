/* Small pieces both benchmark tools use. */
#pragma once

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double now_s(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

/* Prints "PROG: message" and exits 1: a benchmark that cannot measure
 * must not print a number. */
static inline void die_prog(const char *prog, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0), noreturn));
static inline void die_prog(const char *prog, const char *fmt, va_list ap) {
        fprintf(stderr, "%s: ", prog);
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        exit(1);
}
