/* Opening a store: the table of backends, each saying which database
 * strings it takes, and the one place that picks among them; and the
 * claim on a database file that keeps a restore from replacing it under a
 * running hwidd. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "error.h"
#include "store-pg.h"
#include "store-sqlite.h"

/* In the order they are asked: the last takes any path. */
static const store_backend *const backends[] = { &pg_backend, &sqlite_backend };

int store_open(const char *database, store **ret) {
        return store_open_pooled(database, 0, ret);
}

int store_open_pooled(const char *database, unsigned connections, store **ret) {
        size_t i = 0;

        while (i + 1 < ELEMENTSOF(backends) && !backends[i]->takes(database))
                i++;
        return backends[i]->open(database, connections, ret);
}

int store_claim(const char *database, bool exclusive, int *ret_fd) {
        _cleanup_free_ char *path = NULL;
        int fd;

        /* A database server (a postgresql:// URI, a conninfo string) has
         * no file beside which to lock: nothing to claim. */
        if (strstr(database, "://") || strchr(database, '=')) {
                *ret_fd = -1;
                return 0;
        }
        if (asprintf(&path, "%s.lock", database) < 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        if (fd < 0)
                return hwid_fail(HWID_E_STORE, "cannot open %s: %s", path, strerror(errno));
        if (flock(fd, (exclusive ? LOCK_EX : LOCK_SH) | LOCK_NB) < 0) {
                int e = errno;

                close(fd);
                if (e != EWOULDBLOCK)
                        return hwid_fail(HWID_E_STORE, "cannot lock %s: %s", path, strerror(e));
                return exclusive ? hwid_fail(HWID_E_CONFLICT, "hwidd is running on %s: stop it first", database)
                                 : hwid_fail(HWID_E_CONFLICT, "%s is being restored (hwid ca restore)", database);
        }
        *ret_fd = fd;
        return 0;
}
