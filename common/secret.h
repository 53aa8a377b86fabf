/* Secrets (PINs, token secrets, TPM auth): wiped before their memory is
 * released and compared in constant time, after s2n-tls and curl. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "cleanup.h"

/* Zeroes n bytes in a way the compiler may not elide. */
void secret_wipe(void *p, size_t n);

/* Wipes and frees a NUL-terminated secret string; NULL is fine. */
void secret_free(char *s);

static inline void secret_freep(char **s) {
        secret_free(*s);
        *s = NULL;
}
#define _cleanup_secret_ _cleanup_(secret_freep)

/* Constant-time equality of two equal-length buffers. */
bool secret_equal(const void *a, const void *b, size_t n);

/* Constant-time equality of two strings: the time depends on the length
 * of `known` only, never on where the first difference is. */
bool secret_streq(const char *given, const char *known);

/* Reads a secret (PIN, token) from the first line of a file, capped at
 * max bytes, stripping the trailing newline.  Returns 0 or -hwid_err. */
int secret_read_file(const char *path, size_t max, char **ret);
