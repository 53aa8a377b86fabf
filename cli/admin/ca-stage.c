/* See ca-stage.h.  The staging directory is inside DIR, so that every move
 * is a rename(2) within one file system. */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ca-stage.h"
#include "error.h"
#include "fsutil.h"

struct ca_stage {
        char *dir;      /* DIR, where the files end up */
        char *tmp;      /* DIR/.hwid-init.XXXXXX, where they are made */
        bool made_dir;  /* this run created DIR */
        bool committed;
};

DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir)

/* Moved last, in this order: the files that say "this directory holds a
 * CA" (ca_prepare_dir() looks for ca.pem) and "ready to run". */
static const char *const last_names[] = { "ca.pem", "hwidd.yaml" };

static bool is_last(const char *name) {
        for (size_t i = 0; i < ELEMENTSOF(last_names); i++)
                if (strcmp(name, last_names[i]) == 0)
                        return true;
        return false;
}

static bool is_entry(const char *name) {
        return strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

int ca_stage_open(const char *dir, bool made_dir, ca_stage **ret) {
        _cleanup_(ca_stage_freep) ca_stage *st = calloc(1, sizeof(*st));

        if (!st || !(st->dir = strdup(dir)) || !(st->tmp = path_join(dir, ".hwid-init.XXXXXX")))
                return hwid_fail(HWID_E_NOMEM, NULL);
        st->made_dir = made_dir;
        if (!mkdtemp(st->tmp)) {
                int e = errno;
                free(TAKE_PTR(st->tmp));
                return hwid_fail(HWID_E_IO, "cannot create a staging directory in %s: %s", dir, strerror(e));
        }
        *ret = TAKE_PTR(st);
        return 0;
}

char *ca_stage_path(const ca_stage *st, const char *name) {
        return path_join(st->tmp, name);
}

static int move(const ca_stage *st, const char *name) {
        _cleanup_free_ char *from = path_join(st->tmp, name), *to = path_join(st->dir, name);

        if (!from || !to)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (rename(from, to) < 0)
                return hwid_fail(HWID_E_IO, "cannot move %s into %s: %s", name, st->dir, strerror(errno));
        return 0;
}

int ca_stage_commit(ca_stage *st) {
        _cleanup_(closedirp) DIR *d = opendir(st->tmp);
        _cleanup_free_ char *any = path_join(st->dir, last_names[0]);
        struct dirent *e;
        int r = 0;

        if (!d || !any)
                return d ? hwid_fail(HWID_E_NOMEM, NULL)
                         : hwid_fail(HWID_E_IO, "cannot read %s: %s", st->tmp, strerror(errno));
        while (r >= 0 && (e = readdir(d)))
                if (is_entry(e->d_name) && !is_last(e->d_name))
                        r = move(st, e->d_name);
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(last_names); i++) {
                _cleanup_free_ char *p = ca_stage_path(st, last_names[i]);
                if (!p)
                        return hwid_fail(HWID_E_NOMEM, NULL);
                if (access(p, F_OK) == 0)
                        r = move(st, last_names[i]);
        }
        if (r < 0 || (r = fsync_parent_dir(any)) < 0)
                return r;
        (void) rmdir(st->tmp);
        st->committed = true;
        return 0;
}

/* Empties and removes the staging directory: files only, made by us. */
static void stage_remove(const ca_stage *st) {
        _cleanup_(closedirp) DIR *d = opendir(st->tmp);
        struct dirent *e;

        while (d && (e = readdir(d))) {
                _cleanup_free_ char *p = is_entry(e->d_name) ? ca_stage_path(st, e->d_name) : NULL;
                if (p)
                        (void) unlink(p);
        }
        (void) rmdir(st->tmp);
}

void ca_stage_free(ca_stage *st) {
        if (!st)
                return;
        if (!st->committed && st->tmp) {
                stage_remove(st);
                if (st->made_dir)
                        (void) rmdir(st->dir); /* fails, as it should, when anything else is there */
        }
        free(st->dir);
        free(st->tmp);
        free(st);
}
