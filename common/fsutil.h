/* Files written so that a crash never leaves a half file: temporary file
 * in the same directory, fsync, rename, fsync of the directory. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

/* Writes data to path atomically with the given mode.  Returns 0 or
 * -hwid_err; on failure the old file (if any) is untouched. */
int write_file_atomic(const char *path, const void *data, size_t len, mode_t mode);

/* Reads a whole file of at most max bytes (NUL-terminated). */
int read_file_capped(const char *path, size_t max, char **ret_data, size_t *ret_len);

/* mkdir -p with the given mode for each created level. */
int mkdir_parents(const char *path, mode_t mode);

/* Path join into a newly allocated string; NULL on allocation failure. */
char *path_join(const char *dir, const char *name);

/* Copies from to a new file `to` (never over an existing one), synced;
 * on failure nothing is left at `to`. */
int copy_file(const char *from, const char *to, mode_t mode);

/* fsyncs the directory holding path (after a rename or unlink). */
int fsync_parent_dir(const char *path);
