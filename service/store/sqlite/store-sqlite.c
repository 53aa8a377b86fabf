/* The SQLite store's connections: connecting, locking, transactions, group
 * commit and the statement cache.  Opening the store is in
 * store-sqlite-open.c, the tables in store-sqlite-schema.c, the operations
 * in store-sqlite-token.c, store-sqlite-cert.c and their neighbours.
 *
 * Every failure of SQLite becomes -HWID_E_STORE with a detail naming the
 * operation, the database and sqlite3_errmsg(); SQLite's messages name
 * tables and columns, never the values bound, so no secret can leak into
 * a detail (and the store holds no secret: tokens are kept as hashes). */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "log.h"
#include "store-sqlite.h"

int sqlite_sql_fail(sqlite_store *s, const char *what) {
        return hwid_fail(HWID_E_STORE, "cannot %s in %s: %s", what, s->path, sqlite3_errmsg(s->db));
}

int sqlite_last_code(sqlite_store *s) {
        return sqlite3_extended_errcode(s->db);
}

static uint64_t now_ms(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000 + (uint64_t) ts.tv_nsec / 1000000;
}

static void backoff(unsigned attempt) {
        /* 1, 2, 4, 8, 16 ms, then 16 ms: short, since a commit takes about one fsync. */
        unsigned ms = 1u << (attempt < 4 ? attempt : 4);
        struct timespec ts = { 0, (long) ms * 1000000L };

        nanosleep(&ts, NULL);
}

static bool rc_is_busy(int rc) {
        return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
}

/* ---- statements ---- */

int sqlite_stmt(sqlite_store *s, stmt_id id, const char *sql, sqlite3_stmt **ret) {
        if (!s->stmts[id] &&
            sqlite3_prepare_v3(s->db, sql, -1, SQLITE_PREPARE_PERSISTENT, &s->stmts[id], NULL) != SQLITE_OK)
                return sqlite_sql_fail(s, "prepare a statement");
        *ret = s->stmts[id];
        return 0;
}

int sqlite_bind(sqlite_store *s, sqlite3_stmt *st, const char *fmt, ...) {
        va_list ap;
        int rc = SQLITE_OK;

        va_start(ap, fmt);
        for (int i = 1; rc == SQLITE_OK && fmt[i - 1]; i++) {
                const char *t;
                const void *p;
                size_t n;

                switch (fmt[i - 1]) {
                case 't':
                        t = va_arg(ap, const char *);
                        rc = t ? sqlite3_bind_text(st, i, t, -1, SQLITE_STATIC) : sqlite3_bind_null(st, i);
                        break;
                case 'b':
                case 'B':
                        p = va_arg(ap, const void *);
                        n = va_arg(ap, size_t);
                        if (!p && fmt[i - 1] == 'B')
                                rc = sqlite3_bind_null(st, i);
                        else
                                rc = sqlite3_bind_blob64(st, i, p ? p : "", p ? n : 0, SQLITE_STATIC);
                        break;
                case 'i':
                        rc = sqlite3_bind_int(st, i, va_arg(ap, int));
                        break;
                default: /* 'I' */
                        rc = sqlite3_bind_int64(st, i, va_arg(ap, int64_t));
                        break;
                }
        }
        va_end(ap);
        return rc == SQLITE_OK ? 0 : sqlite_sql_fail(s, "bind a parameter");
}

int sqlite_step(sqlite_store *s, sqlite3_stmt *st, const char *what) {
        int rc = sqlite3_step(st);

        if (rc == SQLITE_ROW)
                return 1;
        if (rc == SQLITE_DONE)
                return 0;
        /* Bad input caught by a CHECK or foreign key is not an outage:
         * answering 503 would only make the client retry it. */
        if ((rc & 0xff) == SQLITE_CONSTRAINT)
                return hwid_fail(HWID_E_INVALID, "cannot %s: %s", what, sqlite3_errmsg(s->db));
        return sqlite_sql_fail(s, what);
}

/* ---- locking and transactions ---- */

/* BEGIN IMMEDIATE waits in SQLite's busy handler; it can still answer
 * SQLITE_BUSY early (another connection recovering the WAL), so it is
 * retried until the same deadline rather than failing a client. */
static int begin_immediate(sqlite_store *s) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        uint64_t deadline = now_ms() + SQLITE_STORE_BUSY_TIMEOUT_MS;
        int r = sqlite_stmt(s, ST_BEGIN_IMMEDIATE, "BEGIN IMMEDIATE", &st);

        if (r < 0)
                return r;
        for (unsigned attempt = 0;; attempt++) {
                int rc = sqlite3_step(st);

                if (rc == SQLITE_DONE)
                        return 0;
                if (!rc_is_busy(rc) || now_ms() >= deadline)
                        return sqlite_sql_fail(s, "start a transaction");
                sqlite3_reset(st);
                backoff(attempt);
        }
}

int sqlite_enter(sqlite_store *s, bool write, sqlite_store **ret_guard) {
        int e = pthread_mutex_lock(&s->lock);
        int r;

        /* The mutex checks errors: a callback of a foreach calling back
         * into the store gets an error instead of a deadlock. */
        if (e == EDEADLK)
                return hwid_fail(HWID_E_INTERNAL, "store used from inside one of its own callbacks");
        if (e != 0)
                return hwid_fail(HWID_E_INTERNAL, "cannot lock the store: %s", strerror(e));
        if (write) {
                r = begin_immediate(s);
                if (r < 0) {
                        pthread_mutex_unlock(&s->lock);
                        return r;
                }
        }
        *ret_guard = s;
        return 0;
}

void sqlite_leavep(sqlite_store **guard) {
        sqlite_store *s = *guard;

        if (!s)
                return;
        /* Quietly: the failure that led here has already set the detail.
         * A failed statement may already have rolled back by itself. */
        if (!sqlite3_get_autocommit(s->db))
                (void) sqlite3_exec(s->db, "ROLLBACK", NULL, NULL, NULL);
        sqlite_audit_sink_drop(s, 0); /* nothing of it was committed */
        pthread_mutex_unlock(&s->lock);
}

int sqlite_commit(sqlite_store *s, const char *what) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sqlite_stmt(s, ST_COMMIT, "COMMIT", &st);

        if (r < 0)
                return r;
        if (sqlite3_step(st) != SQLITE_DONE)
                return sqlite_sql_fail(s, what);
        sqlite_audit_sink_flush(s);
        return 0;
}

/* ---- group commit ---- */

/* With synchronous=FULL every COMMIT waits for an fsync of the WAL, which
 * costs a millisecond or more; issuances arriving while one commits wait
 * here and then share the next COMMIT. */

static void job_fail(sqlite_job *j, int r) {
        j->r = r;
        snprintf(j->detail, sizeof(j->detail), "%s", hwid_strerror(r));
}

static int exec_cached(sqlite_store *s, stmt_id id, const char *sql) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sqlite_stmt(s, id, sql, &st);

        if (r >= 0 && sqlite3_step(st) != SQLITE_DONE)
                r = sqlite_sql_fail(s, "manage a savepoint");
        return r;
}

/* Runs one job in its own savepoint.  Fails only when the transaction as
 * a whole is lost; a job's own failure is recorded in it and undone. */
static int run_job(sqlite_store *s, sqlite_job *j) {
        size_t queued = s->sink_n;
        int r;

        hwid_error_clear();
        if ((r = exec_cached(s, ST_SAVEPOINT, "SAVEPOINT job")) < 0)
                return r;
        r = j->run(s, j->userdata);
        if (r >= 0)
                return exec_cached(s, ST_RELEASE, "RELEASE job");
        job_fail(j, r);
        sqlite_audit_sink_drop(s, queued);
        /* I/O errors and a full disk roll the whole transaction back. */
        if (sqlite3_get_autocommit(s->db))
                return r;
        if ((r = exec_cached(s, ST_ROLLBACK_TO, "ROLLBACK TO job")) < 0 ||
            (r = exec_cached(s, ST_RELEASE, "RELEASE job")) < 0)
                return r;
        return 0;
}

static void run_batch(sqlite_store *s, sqlite_job *batch, const char *what) {
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        sqlite_job *j;
        int r = sqlite_enter(s, true, &g);

        for (j = batch; r >= 0 && j; j = j->next)
                r = run_job(s, j);
        if (r >= 0)
                r = sqlite_commit(s, what);
        if (r >= 0)
                return;
        /* Nothing of the batch is durable: every job fails, those that
         * failed on their own with their own reason. */
        for (j = batch; j; j = j->next)
                if (j->r >= 0)
                        job_fail(j, r);
}

/* Marks a committed batch done and wakes each of its callers, then the
 * first job queued meanwhile, which leads the next batch: one wake-up per
 * job (a broadcast woke every waiter for every batch). */
static void batch_done(sqlite_store *s, sqlite_job *batch) {
        sqlite_job *j, *next;

        for (j = batch; j; j = next) {
                next = j->next; /* j belongs to its waiter once done */
                j->done = true;
                pthread_cond_signal(&j->wake);
        }
        s->gc_busy = false;
        if (s->gc_head)
                pthread_cond_signal(&s->gc_head->wake);
}

int sqlite_group_commit(sqlite_store *s, sqlite_job *job, const char *what) {
        job->r = 0;
        job->detail[0] = '\0';
        job->done = false;
        job->next = NULL;
        pthread_cond_init(&job->wake, NULL);
        pthread_mutex_lock(&s->gc_lock);
        *s->gc_tail = job;
        s->gc_tail = &job->next;
        while (!job->done) {
                sqlite_job *batch;

                if (s->gc_busy) {
                        pthread_cond_wait(&job->wake, &s->gc_lock);
                        continue;
                }
                /* Lead: commit everything queued so far, this job included. */
                batch = s->gc_head;
                s->gc_head = NULL;
                s->gc_tail = &s->gc_head;
                s->gc_busy = true;
                pthread_mutex_unlock(&s->gc_lock);
                run_batch(s, batch, what);
                pthread_mutex_lock(&s->gc_lock);
                batch_done(s, batch);
        }
        pthread_mutex_unlock(&s->gc_lock);
        pthread_cond_destroy(&job->wake);
        if (job->r < 0)
                return hwid_fail((hwid_err) -job->r, "%s", job->detail);
        return 0;
}

/* ---- connections ---- */

/* Process-wide settings: they must precede SQLite's initialization, which
 * the first connection does. */
static void configure_library(void) {
        if (sqlite3_config(SQLITE_CONFIG_STMTJRNL_SPILL, SQLITE_STORE_SAVEPOINT_MEMORY) != SQLITE_OK)
                log_warning("SQLite was initialized before the store: savepoints over 64 KiB "
                            "go to temporary files");
}

int sqlite_connect(sqlite_store *s) {
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX; /* our mutex guards the connection */

        pthread_once(&once, configure_library);
        if (sqlite3_open_v2(s->path, &s->db, flags, NULL) != SQLITE_OK)
                return hwid_fail(HWID_E_STORE, "cannot open database %s: %s", s->path,
                                 s->db ? sqlite3_errmsg(s->db) : "out of memory");
        sqlite3_extended_result_codes(s->db, 1);
        sqlite3_busy_timeout(s->db, SQLITE_STORE_BUSY_TIMEOUT_MS);
        /* SQLite silently falls back to read-only; every write would then fail later. */
        if (sqlite3_db_readonly(s->db, "main") != 0)
                return hwid_fail(HWID_E_STORE, "database %s is read-only", s->path);
        return 0;
}

/* Switching to WAL needs a moment of exclusive access; other openers of
 * a new file may hold it, so retry like BEGIN IMMEDIATE. */
static int set_wal(sqlite_store *s) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        uint64_t deadline = now_ms() + SQLITE_STORE_BUSY_TIMEOUT_MS;
        const unsigned char *mode;
        int rc;

        if (sqlite3_prepare_v2(s->db, "PRAGMA journal_mode=WAL", -1, &st, NULL) != SQLITE_OK)
                return sqlite_sql_fail(s, "enable WAL mode");
        for (unsigned attempt = 0; rc_is_busy(rc = sqlite3_step(st)) && now_ms() < deadline; attempt++) {
                sqlite3_reset(st);
                backoff(attempt);
        }
        if (rc != SQLITE_ROW)
                return sqlite_sql_fail(s, "enable WAL mode");
        mode = sqlite3_column_text(st, 0);
        if (!mode || strcmp((const char *) mode, "wal") != 0)
                return hwid_fail(HWID_E_STORE, "cannot enable WAL mode on %s (journal mode stays %s)",
                                 s->path, mode ? (const char *) mode : "unknown");
        return 0;
}

int sqlite_configure(sqlite_store *s) {
        /* FULL: a commit is on disk (WAL fsynced) before we answer, so a
         * certificate handed out survives a power cut.  journal_size_limit:
         * when the WAL starts over (store-sqlite-checkpoint.c), the file
         * is cut back to this size rather than kept at its largest. */
        static const char pragmas[] =
                "PRAGMA synchronous=FULL;"
                "PRAGMA foreign_keys=ON;"
                "PRAGMA trusted_schema=OFF;";
        char limit[64];
        int r = set_wal(s);

        if (r < 0)
                return r;
        snprintf(limit, sizeof(limit), "PRAGMA journal_size_limit=%d", SQLITE_STORE_WAL_LIMIT_BYTES);
        if (sqlite3_exec(s->db, pragmas, NULL, NULL, NULL) != SQLITE_OK ||
            sqlite3_exec(s->db, limit, NULL, NULL, NULL) != SQLITE_OK)
                return sqlite_sql_fail(s, "configure the connection");
        return 0;
}

int sqlite_alloc(const char *path, sqlite_store **ret) {
        _cleanup_(sqlite_conn_freep) sqlite_store *s = calloc(1, sizeof(*s));
        pthread_mutexattr_t attr;

        if (!s || !(s->path = strdup(path)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        /* Error-checking: a callback calling back into the store, or a
         * thread after a read connection it holds, gets EDEADLK, not a hang. */
        pthread_mutexattr_init(&attr);
        pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
        s->lock_ready = pthread_mutex_init(&s->lock, &attr) == 0;
        pthread_mutexattr_destroy(&attr);
        if (!s->lock_ready)
                return hwid_fail(HWID_E_NOMEM, "cannot create the store's lock");
        s->gc_tail = &s->gc_head;
        *ret = TAKE_PTR(s);
        return 0;
}

void sqlite_conn_free(sqlite_store *s) {
        if (!s)
                return;
        for (size_t i = 0; i < _ST_MAX; i++)
                sqlite3_finalize(s->stmts[i]);
        /* The last connection to close checkpoints the WAL into the file. */
        sqlite3_close(s->db);
        if (s->lock_ready)
                pthread_mutex_destroy(&s->lock);
        if (s->gc_ready)
                pthread_mutex_destroy(&s->gc_lock);
        free(s->path);
        free(s);
}
