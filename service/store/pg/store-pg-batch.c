/* Group commit for the PostgreSQL store: issuances that arrive while a
 * commit is under way share the next transaction, each in a savepoint of
 * its own (one that fails is rolled back alone), and one COMMIT -- one
 * WAL flush and one turn of the audit chain's lock for all of them.
 * Every caller returns only once its own job is committed or has failed,
 * with its own error.  As in the SQLite store (store-sqlite.c). */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "store-pg.h"

#define JOB_ATTEMPTS 8

static void job_fail(pg_job *j, int r) {
        j->r = r;
        snprintf(j->detail, sizeof(j->detail), "%s", hwid_strerror(r));
}

/* One job in its own savepoint, run again when it lost a race that the
 * next attempt sees settled (a deadlock, a replaced certificate). Fails
 * only when the transaction as a whole is lost. */
static int run_job(pg_slot *c, pg_job *j) {
        size_t queued = c->n_queue;
        int r;

        for (int i = 0; i < JOB_ATTEMPTS; i++) {
                j->r = 0;
                hwid_error_clear();
                c->retry = false;
                if ((r = pg_exec(c, NULL, "manage a savepoint", "SAVEPOINT job", NULL)) < 0)
                        return r;
                if ((r = j->run(c, j->userdata)) >= 0)
                        return pg_exec(c, NULL, "manage a savepoint", "RELEASE job", NULL);
                job_fail(j, r);
                pg_sink_truncate(c, queued);
                if (c->lost)
                        return r;
                if ((r = pg_exec(c, NULL, "manage a savepoint", "ROLLBACK TO job", NULL)) < 0)
                        return r;
                if (!c->retry)
                        break;
        }
        return pg_exec(c, NULL, "manage a savepoint", "RELEASE job", NULL);
}

static int run_batch_once(store_pg *p, pg_job *batch, const char *what, bool *ret_retry) {
        _cleanup_(pg_leavep) pg_slot *c = NULL;
        pg_job *j;
        int r = pg_enter(p, &c);

        *ret_retry = false;
        if (r >= 0)
                r = pg_begin_write(c, what);
        for (j = batch; r >= 0 && j; j = j->next)
                r = run_job(c, j);
        if (r >= 0) {
                r = pg_exec(c, NULL, what, "COMMIT", NULL);
                if (r >= 0)
                        pg_sink_flush(c);
                return r;
        }
        /* Broken before COMMIT was sent: nothing happened, all may run again. */
        *ret_retry = c && c->lost;
        if (c && c->conn)
                PQclear(PQexec(c->conn, "ROLLBACK"));
        return r;
}

static void run_batch(store_pg *p, pg_job *batch, const char *what) {
        bool retry = true;
        pg_job *j;
        int r = -HWID_E_STORE;

        for (int i = 0; i < 2 && retry; i++) {
                for (j = batch; j; j = j->next)
                        j->r = 0;
                r = run_batch_once(p, batch, what, &retry);
        }
        if (r >= 0)
                return;
        /* Nothing of the batch is durable: every job fails, those that
         * failed on their own with their own reason. */
        for (j = batch; j; j = j->next)
                if (j->r >= 0)
                        job_fail(j, r);
}

static void batch_done(store_pg *p, pg_job *batch) {
        pg_job *j, *next;

        for (j = batch; j; j = next) {
                next = j->next;
                j->done = true;
                pthread_cond_signal(&j->wake);
        }
        p->gc_busy = false;
        if (p->gc_head)
                pthread_cond_signal(&p->gc_head->wake);
}

int pg_group_commit(store_pg *p, pg_tx_fn fn, void *userdata, const char *what) {
        pg_job job = { .run = fn, .userdata = userdata };

        pthread_cond_init(&job.wake, NULL);
        pthread_mutex_lock(&p->gc_lock);
        *p->gc_tail = &job;
        p->gc_tail = &job.next;
        while (!job.done) {
                pg_job *batch;

                if (p->gc_busy) {
                        pthread_cond_wait(&job.wake, &p->gc_lock);
                        continue;
                }
                batch = p->gc_head;
                p->gc_head = NULL;
                p->gc_tail = &p->gc_head;
                p->gc_busy = true;
                pthread_mutex_unlock(&p->gc_lock);
                run_batch(p, batch, what);
                pthread_mutex_lock(&p->gc_lock);
                batch_done(p, batch);
        }
        pthread_mutex_unlock(&p->gc_lock);
        pthread_cond_destroy(&job.wake);
        if (job.r < 0)
                return hwid_fail((hwid_err) -job.r, "%s", job.detail);
        return 0;
}
