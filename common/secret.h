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
 * max bytes, stripping the trailing newline; a NUL byte in that line is
 * refused (-HWID_E_INVALID), not taken for the secret's end.  Returns 0
 * or -hwid_err.  Read with read(2): no stdio buffer holds a copy. */
int secret_read_file(const char *path, size_t max, char **ret);

/* Locked secrets (PINs): memory of their own, locked with mlock() when
 * RLIMIT_MEMLOCK allows (never swapped out), left out of core dumps
 * (MADV_DONTDUMP), and wiped whole when freed.  Free them with
 * secret_locked_free() only.  0 or -HWID_E_NOMEM. */
int secret_locked_new(size_t n, char **ret);       /* n zeroed bytes */
int secret_locked_dup(const char *s, char **ret);
void secret_locked_free(char *s);                 /* NULL is fine */
static inline void secret_locked_freep(char **s) {
        secret_locked_free(*s);
        *s = NULL;
}
#define _cleanup_locked_secret_ _cleanup_(secret_locked_freep)
/* secret_read_file() into a locked secret. */
int secret_read_file_locked(const char *path, size_t max, char **ret);
/* The same for a file only its owner may use (a PIN file): a regular
 * file with any group or other permission bit is refused
 * (-HWID_E_CONFIG, naming the chmod to run) before it is read. */
int secret_read_private_file_locked(const char *path, size_t max, char **ret);

/* For a process that holds secrets (hwidd): no core dumps (RLIMIT_CORE 0)
 * and not dumpable (PR_SET_DUMPABLE 0: no core, no ptrace by the same
 * user, /proc/PID/mem closed to it). */
int secret_protect_process(void);
