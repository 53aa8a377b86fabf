/* Backups of the SQLite store.
 *
 * A backup is SQLite's online backup of every page in one step: one read
 * transaction, so one consistent snapshot, while hwidd keeps committing
 * (WAL readers do not stop writers).  The copy is then checked with
 * integrity_check before anyone is told it exists. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "store-sqlite.h"

#define BACKUP_BUSY_MS 30000 /* how long a backup waits for a moment to read */

static int db_fail(sqlite3 *db, const char *what, const char *path) {
        return hwid_fail(HWID_E_STORE, "cannot %s %s: %s", what, path, db ? sqlite3_errmsg(db) : "out of memory");
}

static int check_pages(sqlite3 *db, const char *path) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        const unsigned char *verdict;

        if (sqlite3_prepare_v2(db, "PRAGMA integrity_check(1)", -1, &st, NULL) != SQLITE_OK ||
            sqlite3_step(st) != SQLITE_ROW)
                return db_fail(db, "check the integrity of", path);
        verdict = sqlite3_column_text(st, 0);
        if (!verdict || strcmp((const char *) verdict, "ok") != 0)
                return hwid_fail(HWID_E_STORE, "%s fails SQLite's integrity check: %s", path,
                                 verdict ? (const char *) verdict : "no answer");
        return 0;
}

int sqlite_integrity_check(store *base) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        int r = sqlite_enter(s, false, &g);

        return r < 0 ? r : check_pages(s->db, s->path);
}

/* Every page, in one step (one snapshot); retried while the source is
 * busy (a checkpoint restarting the WAL). */
static int copy_pages(sqlite3 *src, sqlite3 *dst, const char *from, const char *to) {
        struct timespec pause = { 0, 20 * 1000 * 1000 };
        sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
        int rc = SQLITE_OK;

        if (!b)
                return db_fail(dst, "start a backup into", to);
        for (int waited = 0; waited < BACKUP_BUSY_MS; waited += 20) {
                rc = sqlite3_backup_step(b, -1);
                if (rc != SQLITE_BUSY && rc != SQLITE_LOCKED)
                        break;
                nanosleep(&pause, NULL);
        }
        sqlite3_backup_finish(b);
        if (rc != SQLITE_DONE)
                return hwid_fail(HWID_E_STORE, "cannot copy %s to %s: %s", from, to, sqlite3_errstr(rc));
        return 0;
}

static int backup_into(const char *from, const char *to) {
        sqlite3 *src = NULL, *dst = NULL;
        int r = 0;

        if (sqlite3_open_v2(from, &src, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
                r = db_fail(src, "open for a backup", from);
        else if (sqlite3_open_v2(to, &dst, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
                r = db_fail(dst, "open", to);
        if (r >= 0) {
                sqlite3_busy_timeout(src, SQLITE_STORE_BUSY_TIMEOUT_MS);
                r = copy_pages(src, dst, from, to);
        }
        if (r >= 0)
                r = check_pages(dst, to);
        /* Closing the copy syncs it (its journal commits with synchronous=FULL). */
        if (dst && sqlite3_close(dst) != SQLITE_OK && r >= 0)
                r = hwid_fail(HWID_E_STORE, "cannot close %s", to);
        sqlite3_close(src);
        return r;
}

int sqlite_backup(store *base, const char *path) {
        sqlite_store *s = sqlite_of(base);
        int fd, r;

        /* Created here (owner only, never over an existing file), so that
         * the copy of every CSR and the audit trail is as private as the
         * database itself. */
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        if (fd < 0)
                return hwid_fail(errno == EEXIST ? HWID_E_EXISTS : HWID_E_IO, "cannot create %s: %s", path,
                                 strerror(errno));
        close(fd);
        r = backup_into(s->path, path);
        if (r < 0)
                (void) unlink(path);
        return r;
}
