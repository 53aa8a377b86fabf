/* WAL checkpoints off the commit path, and a WAL that stays bounded.
 *
 * SQLite's automatic checkpoint runs inside whichever COMMIT pushes the
 * WAL past 1000 pages, so that one issuance (and every issuance queued
 * behind it) waits for pages to be copied back into the database file and
 * synced.  Instead, commits only signal, and a thread with its own
 * connection checkpoints PASSIVE (never blocking writers) when signalled
 * or every second.
 *
 * A PASSIVE checkpoint alone does not bound the WAL: the file only starts
 * over from its beginning when a writer begins at a moment when every
 * frame has been copied back, which under a steady stream of commits is
 * almost never.  So when the WAL is still large after a PASSIVE round
 * that copied every frame, the thread takes the store's lock (in-process
 * writers wait on it rather than in SQLite's sleeping busy handler) and
 * checkpoints RESTART: the frames written since are copied and the next
 * commit writes from the start of the file, which journal_size_limit then
 * cuts back.  Once nothing has been committed for a round, it checkpoints
 * TRUNCATE and the file shrinks to nothing.
 *
 * Should the checkpointer fall behind all the same (a stream of commits
 * outrunning it on a busy machine), the WAL is still bounded: the commit
 * that takes it past half again the 1000 pages checkpoints RESTART itself,
 * before its caller goes on (on_wal()).
 *
 * A reader that keeps an old snapshot (a backup, a long listing) pins the
 * frames it reads: no checkpoint can copy them, so none waits for it,
 * and the WAL grows until it is done.
 *
 * Every checkpoint reports the frames in the WAL and those copied back;
 * those numbers, not the return code, show that it worked (a connection
 * that had never read the database did not know it was in WAL mode, and
 * its "checkpoints" returned OK having done nothing). */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "store-sqlite.h"

#define CHECKPOINT_PAGES 1000
/* The WAL's bound: past it the committing writer checkpoints itself. */
#define CHECKPOINT_HARD_PAGES (CHECKPOINT_PAGES * 3 / 2)
#define CHECKPOINT_PERIOD_MS 1000
/* How long a RESTART or TRUNCATE waits for a reader (or another process's
 * writer) to get out of the way while holding the store's lock: short,
 * since issuances wait behind it; it is tried again the next round. */
#define CHECKPOINT_WAIT_MS 50

static int on_wal(void *userdata, sqlite3 *db, const char *name, int pages) {
        sqlite_store *s = userdata;

        /* The checkpointer fell behind (starved of CPU, or of the store's
         * lock by a stream of commits): the writer checkpoints itself
         * before its caller goes on.  It holds the store's write lock, so
         * nothing else of ours uses this connection meanwhile.  A reader
         * in the way (a CRL being built, a backup) is not waited for: what
         * it still reads stays in the WAL, which only it can release, and
         * the next commit tries again; waiting would stall every issuance
         * behind it, commit after commit. */
        if (pages >= CHECKPOINT_HARD_PAGES) {
                sqlite3_busy_timeout(db, 0);
                (void) sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_RESTART, NULL, NULL);
                sqlite3_busy_timeout(db, SQLITE_STORE_BUSY_TIMEOUT_MS);
        }
        pthread_mutex_lock(&s->ck_lock);
        s->ck_commits++;
        if (pages >= CHECKPOINT_PAGES) {
                s->ck_due = true;
                pthread_cond_signal(&s->ck_cond);
        }
        pthread_mutex_unlock(&s->ck_lock);
        return SQLITE_OK;
}

/* Waits until a checkpoint is due or a period has passed; false: stop.
 * *ret_idle: nothing was committed since the last round. */
static bool wait_for_work(sqlite_store *s, bool *ret_idle) {
        struct timespec until;
        bool stop;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += CHECKPOINT_PERIOD_MS / 1000;
        pthread_mutex_lock(&s->ck_lock);
        while (!s->ck_due && !s->ck_stop)
                if (pthread_cond_timedwait(&s->ck_cond, &s->ck_lock, &until) == ETIMEDOUT)
                        break;
        s->ck_due = false;
        *ret_idle = s->ck_commits == 0;
        s->ck_commits = 0;
        stop = s->ck_stop;
        pthread_mutex_unlock(&s->ck_lock);
        return !stop;
}

static const char *mode_name(int mode) {
        switch (mode) {
        case SQLITE_CHECKPOINT_PASSIVE: return "passive";
        case SQLITE_CHECKPOINT_RESTART: return "restart";
        case SQLITE_CHECKPOINT_TRUNCATE: return "truncate";
        default: return "full";
        }
}

int sqlite_checkpoint_run(sqlite_store *s, int mode, int *ret_log, int *ret_ckpt) {
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        int log = -1, ckpt = -1, rc, r;

        if (!s->ck_db)
                return hwid_fail(HWID_E_INTERNAL, "the store has no checkpoint connection");
        /* Anything beyond PASSIVE takes the write lock: our own writers
         * wait on the store's mutex meanwhile, not in SQLite. */
        if (mode != SQLITE_CHECKPOINT_PASSIVE && (r = sqlite_enter(s, false, &g)) < 0)
                return r;
        rc = sqlite3_wal_checkpoint_v2(s->ck_db, NULL, mode, &log, &ckpt);
        /* BUSY: a reader or another process was in the way; what could be
         * copied was copied. */
        if (rc != SQLITE_OK && (rc & 0xff) != SQLITE_BUSY)
                return hwid_fail(HWID_E_STORE, "cannot checkpoint (%s) %s: %s", mode_name(mode), s->path,
                                 sqlite3_errmsg(s->ck_db));
        if (log < 0 || ckpt < 0)
                return hwid_fail(HWID_E_STORE, "checkpoint (%s) of %s did not run: not in WAL mode", mode_name(mode),
                                 s->path);
        if (rc != SQLITE_OK)
                return hwid_fail(HWID_E_STORE, "checkpoint (%s) of %s copied %d of %d frames and could not finish: %s",
                                 mode_name(mode), s->path, ckpt, log, sqlite3_errmsg(s->ck_db));
        *ret_log = log;
        *ret_ckpt = ckpt;
        return 0;
}

static void checkpoint_round(sqlite_store *s, bool idle) {
        int log = 0, ckpt = 0;

        /* Failures are retried at the next round; there is no one to tell.
         * Frames PASSIVE could not copy are a reader's (a backup, a long
         * listing): RESTART would only wait for it with the store's lock
         * held, stalling every commit of every round until it is done. */
        if (sqlite_checkpoint_run(s, SQLITE_CHECKPOINT_PASSIVE, &log, &ckpt) < 0 || log == 0 || ckpt < log)
                return;
        if (idle)
                (void) sqlite_checkpoint_run(s, SQLITE_CHECKPOINT_TRUNCATE, &log, &ckpt);
        else if (log >= CHECKPOINT_PAGES)
                (void) sqlite_checkpoint_run(s, SQLITE_CHECKPOINT_RESTART, &log, &ckpt);
}

static void *checkpointer(void *userdata) {
        sqlite_store *s = userdata;
        bool idle;

        while (wait_for_work(s, &idle))
                checkpoint_round(s, idle);
        return NULL;
}

/* A connection learns that the database is in WAL mode only when it
 * first reads it; until then a checkpoint on it is a no-op that returns
 * OK.  So read, and make sure. */
static int ck_connect(sqlite_store *s) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        const unsigned char *mode;

        if (sqlite3_open_v2(s->path, &s->ck_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK)
                return hwid_fail(HWID_E_STORE, "cannot open a second connection to %s", s->path);
        sqlite3_busy_timeout(s->ck_db, CHECKPOINT_WAIT_MS);
        if (sqlite3_exec(s->ck_db, "SELECT count(*) FROM sqlite_schema", NULL, NULL, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(s->ck_db, "PRAGMA journal_mode", -1, &st, NULL) != SQLITE_OK ||
            sqlite3_step(st) != SQLITE_ROW)
                return hwid_fail(HWID_E_STORE, "cannot read %s for checkpoints: %s", s->path, sqlite3_errmsg(s->ck_db));
        mode = sqlite3_column_text(st, 0);
        if (!mode || strcmp((const char *) mode, "wal") != 0)
                return hwid_fail(HWID_E_STORE, "the checkpoint connection to %s is not in WAL mode (%s)", s->path,
                                 mode ? (const char *) mode : "unknown");
        return 0;
}

int sqlite_checkpointer_start(sqlite_store *s) {
        int r = ck_connect(s);

        if (r < 0)
                return r;
        if (pthread_mutex_init(&s->ck_lock, NULL) != 0 || pthread_cond_init(&s->ck_cond, NULL) != 0)
                return hwid_fail(HWID_E_NOMEM, "cannot create the checkpointer's lock");
        s->ck_ready = true;
        if (pthread_create(&s->ck_thread, NULL, checkpointer, s) != 0)
                return hwid_fail(HWID_E_NOMEM, "cannot start the checkpointer");
        s->ck_running = true;
        /* Replaces SQLite's automatic checkpoint on the writing connection. */
        sqlite3_wal_hook(s->db, on_wal, s);
        return 0;
}

void sqlite_checkpointer_stop(sqlite_store *s) {
        if (s->db)
                sqlite3_wal_hook(s->db, NULL, NULL);
        if (s->ck_running) {
                pthread_mutex_lock(&s->ck_lock);
                s->ck_stop = true;
                pthread_cond_signal(&s->ck_cond);
                pthread_mutex_unlock(&s->ck_lock);
                pthread_join(s->ck_thread, NULL);
                s->ck_running = false;
        }
        if (s->ck_ready) {
                pthread_cond_destroy(&s->ck_cond);
                pthread_mutex_destroy(&s->ck_lock);
                s->ck_ready = false;
        }
        sqlite3_close(s->ck_db);
        s->ck_db = NULL;
}
