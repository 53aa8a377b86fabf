/* Scope-bound cleanup, after systemd's macros.
 *
 * Every function that owns resources declares them with _cleanup_(fn) so
 * that every return path releases them; ownership leaves a scope only
 * through TAKE_PTR().  Output parameters are named ret_* and are written
 * only on success. */
#pragma once

#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))

/* Hands ownership of *p out of a cleanup scope. */
#define TAKE_PTR(p)                          \
        ({                                   \
                __typeof__(p) _p_ = (p);     \
                (p) = NULL;                  \
                _p_;                         \
        })

#define TAKE_FD(fd)                          \
        ({                                   \
                int _fd_ = (fd);             \
                (fd) = -1;                   \
                _fd_;                        \
        })

/* DEFINE_TRIVIAL_CLEANUP_FUNC(EVP_PKEY *, EVP_PKEY_free) defines
 * EVP_PKEY_freep(EVP_PKEY **) for use with _cleanup_. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)      \
        static inline void func##p(type *p) {        \
                if (*p)                              \
                        func(*p);                    \
        }

static inline void freep(void *p) {
        free(*(void **) p);
}

static inline void closep(int *fd) {
        if (*fd >= 0)
                close(*fd);
}

#define _cleanup_free_ _cleanup_(freep)
#define _cleanup_close_ _cleanup_(closep)

#define ELEMENTSOF(a) (sizeof(a) / sizeof((a)[0]))
