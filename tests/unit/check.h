/* Minimal assertions for unit tests: every failed CHECK is reported with
 * its location and the test exits non-zero at the end. */
#pragma once

#include <stdio.h>
#include <string.h>

/* One count per test binary, shared by all of its files (a test and the
 * fixture compiled into it): each file has a weak definition, and the
 * linker makes them one. */
__attribute__((weak)) int check_failures;

#define CHECK(cond)                                                                     \
        do {                                                                            \
                if (!(cond)) {                                                          \
                        fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
                        check_failures++;                                               \
                }                                                                       \
        } while (0)

#define CHECK_STREQ(a, b)                                                               \
        do {                                                                            \
                const char *_a = (a), *_b = (b);                                        \
                if (!_a || !_b || strcmp(_a, _b) != 0) {                                \
                        fprintf(stderr, "%s:%d: CHECK failed: \"%s\" == \"%s\"\n", __FILE__, __LINE__, \
                                _a ? _a : "(null)", _b ? _b : "(null)");                \
                        check_failures++;                                               \
                }                                                                       \
        } while (0)

#define CHECK_CONTAINS(hay, needle)                                                     \
        do {                                                                            \
                const char *_h = (hay), *_n = (needle);                                 \
                if (!_h || !strstr(_h, _n)) {                                           \
                        fprintf(stderr, "%s:%d: CHECK failed: \"%s\" contains \"%s\"\n", __FILE__, \
                                __LINE__, _h ? _h : "(null)", _n);                      \
                        check_failures++;                                               \
                }                                                                       \
        } while (0)

static inline int check_done(const char *name) {
        if (check_failures)
                fprintf(stderr, "%s: %d check(s) failed\n", name, check_failures);
        return check_failures ? 1 : 0;
}
