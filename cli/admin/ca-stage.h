/* The files of a CA directory made where nothing reads them, and moved
 * into place only once every one of them is made: hwid ca init and hwid ca
 * import leave DIR as it was when they fail (or die) half-way, so that the
 * next run does not find half a CA there. */
#pragma once

#include <stdbool.h>

#include "cleanup.h"

typedef struct ca_stage ca_stage;

/* A staging directory DIR/.hwid-init.XXXXXX in dir (which exists);
 * made_dir: this run created dir, so that a failed run removes it again
 * (when it is empty). */
int ca_stage_open(const char *dir, bool made_dir, ca_stage **ret);

/* Where to write the file that is to become DIR/name (malloc'ed; NULL
 * when out of memory). */
char *ca_stage_path(const ca_stage *st, const char *name);

/* Moves every staged file into DIR, ca.pem and then hwidd.yaml last (a
 * directory holding them holds a whole CA), and removes the staging
 * directory. */
int ca_stage_commit(ca_stage *st);

/* Not committed: removes the staged files, the staging directory, and DIR
 * if this run made it and nothing else is in it (a key file the run
 * created there stays).  Committed: only frees. */
void ca_stage_free(ca_stage *st);
DEFINE_TRIVIAL_CLEANUP_FUNC(ca_stage *, ca_stage_free)
