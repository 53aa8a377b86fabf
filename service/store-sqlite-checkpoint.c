/* WAL checkpoints off the commit path.  SQLite's automatic checkpoint runs
 * inside whichever COMMIT pushes the WAL past 1000 pages, so that one
 * issuance (and every issuance queued behind it) waits for pages to be
 * copied back into the database file and synced.  Instead, commits only
 * signal, and a thread with its own connection checkpoints PASSIVE (never
 * blocking writers) when signalled or every second. */
#include <errno.h>
#include <time.h>

#include "error.h"
#include "store-sqlite.h"

#define CHECKPOINT_PAGES 1000
#define CHECKPOINT_PERIOD_MS 1000

static int on_wal(void *userdata, sqlite3 *db, const char *name, int pages) {
        store *s = userdata;

        if (pages >= CHECKPOINT_PAGES) {
                pthread_mutex_lock(&s->ck_lock);
                s->ck_due = true;
                pthread_cond_signal(&s->ck_cond);
                pthread_mutex_unlock(&s->ck_lock);
        }
        return SQLITE_OK;
}

/* Waits until a checkpoint is due or a period has passed; false: stop. */
static bool wait_for_work(store *s) {
        struct timespec until;
        bool stop;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += CHECKPOINT_PERIOD_MS / 1000;
        pthread_mutex_lock(&s->ck_lock);
        while (!s->ck_due && !s->ck_stop)
                if (pthread_cond_timedwait(&s->ck_cond, &s->ck_lock, &until) == ETIMEDOUT)
                        break;
        s->ck_due = false;
        stop = s->ck_stop;
        pthread_mutex_unlock(&s->ck_lock);
        return !stop;
}

static void *checkpointer(void *userdata) {
        store *s = userdata;

        while (wait_for_work(s)) {
                /* PASSIVE: copies what it can without waiting for anyone;
                 * a failure now is retried at the next round. */
                sqlite3_wal_checkpoint_v2(s->ck_db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
        }
        return NULL;
}

int store_checkpointer_start(store *s) {
        if (sqlite3_open_v2(s->path, &s->ck_db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
                sqlite3_close(s->ck_db);
                s->ck_db = NULL;
                return hwid_fail(HWID_E_STORE, "cannot open a second connection to %s", s->path);
        }
        sqlite3_busy_timeout(s->ck_db, STORE_BUSY_TIMEOUT_MS);
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

void store_checkpointer_stop(store *s) {
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
