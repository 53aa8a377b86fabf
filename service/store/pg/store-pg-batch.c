/* Group commit for the PostgreSQL store: issuances that arrive while a
 * commit is under way share the next one -- one statement, hwid_issue()
 * (store-pg-functions.c), so one round trip and one WAL flush for all of
 * them.  In the database each runs in a subtransaction of its own (one
 * that fails is undone alone) and their audit records are queued at the
 * end, at once, for hwidd's linker to chain (store-pg-link.c).  An issuance that lost a deadlock to another replica's
 * batch is undone alone and runs again in a batch of its own once this
 * one committed.  Every caller returns only once its own issuance is
 * committed or has failed, with its own error.  As in the SQLite store
 * (store-sqlite.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

#include "error.h"
#include "store-pg.h"

#define BATCH_ATTEMPTS 8
#define JOB_PENDING 1   /* pg_job.r of a job whose turn has not come */

#define ISSUE_SQL "SELECT member, result, result_detail FROM hwid_issue($1::jsonb)"

static void job_fail(pg_job *j, int r) {
        j->r = r;
        snprintf(j->detail, sizeof(j->detail), "%s", hwid_strerror(r));
}

/* The pending jobs of batch as hwid_issue()'s argument (a job the
 * database need not see fails here); *ret_n: how many. */
static int batch_json(pg_job *batch, char **ret, size_t *ret_n) {
        json_object *all = json_object_new_array(), *m;
        size_t n = 0;
        int r;

        if (!all)
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (pg_job *j = batch; j; j = j->next) {
                if (j->r != JOB_PENDING)
                        continue;
                if ((r = pg_issue_json(j->in, j->now, &m)) < 0) {
                        job_fail(j, r);
                        continue;
                }
                if (json_object_array_add(all, m) < 0) {
                        json_object_put(m);
                        job_fail(j, hwid_fail(HWID_E_NOMEM, NULL));
                        continue;
                }
                j->sent = true;
                n++;
        }
        *ret = n ? strdup(json_object_to_json_string_ext(all, JSON_C_TO_STRING_PLAIN)) : NULL;
        json_object_put(all);
        if (n && !*ret)
                return hwid_fail(HWID_E_NOMEM, NULL);
        *ret_n = n;
        return 0;
}

/* One job's row: its result.  Its audit record is queued unchained (the
 * linker hands it to the sink: store-pg-link.c). */
static void job_result(pg_slot *c, pg_job *j, PGresult *res, int row) {
        const char *result = pg_val(res, row, 1);
        int r;

        if (!result || strcmp(result, "retry") == 0)
                return; /* pending: its turn comes again */
        if ((r = pg_issue_result(c->p, j->in, j->now, result, pg_val(res, row, 2))) < 0) {
                job_fail(j, r);
                return;
        }
        j->r = 0;
}

static int batch_results(pg_slot *c, pg_job *batch, PGresult *res, size_t n) {
        int row = 0;

        if ((size_t) PQntuples(res) != n)
                return hwid_fail(HWID_E_STORE, "PostgreSQL %s answered %d issuances, not %zu", c->p->label,
                                 PQntuples(res), n);
        for (pg_job *j = batch; j; j = j->next)
                if (j->sent) {
                        j->sent = false;
                        job_result(c, j, res, row++);
                }
        return 0;
}

/* The pending jobs, in one statement.  A failure of the statement as a
 * whole leaves them pending: nothing of them was committed, or -- the
 * connection lost on the way -- it is not known what was. */
static int run_once(pg_store *p, pg_job *batch) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        _cleanup_(pg_leavep) pg_slot *c = NULL;
        _cleanup_free_ char *json = NULL;
        pg_query q;
        size_t n = 0;
        int r = batch_json(batch, &json, &n);

        if (r < 0 || n == 0 ||
            (r = pg_named(&q, PG_STMT_ISSUE, pg_bind(&q, "commit the certificate", ISSUE_SQL, "t", json))) < 0 ||
            (r = pg_statement(p, &q, &c, &res)) < 0) {
                for (pg_job *j = batch; j; j = j->next)
                        j->sent = false;
                return r;
        }
        return batch_results(c, batch, res, n);
}

static void run_batch(pg_store *p, pg_job *batch) {
        bool pending = true;
        int r = 0;

        for (pg_job *j = batch; j; j = j->next)
                j->r = JOB_PENDING;
        for (int i = 0; r >= 0 && pending && i < BATCH_ATTEMPTS; i++) {
                if (i > 0)
                        pg_backoff();
                r = run_once(p, batch);
                pending = false;
                for (pg_job *j = batch; j; j = j->next)
                        pending |= j->r == JOB_PENDING;
        }
        if (r >= 0 && pending)
                r = hwid_fail(HWID_E_STORE, "cannot commit the certificate in PostgreSQL %s: it lost %d races in "
                              "a row", p->label, BATCH_ATTEMPTS);
        for (pg_job *j = batch; j; j = j->next)
                if (j->r == JOB_PENDING)
                        job_fail(j, r);
}

static void batch_done(pg_store *p, pg_job *batch) {
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

int pg_group_commit(pg_store *p, const store_issue *in, int64_t now) {
        pg_job job = { .in = in, .now = now };

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
                run_batch(p, batch);
                pthread_mutex_lock(&p->gc_lock);
                batch_done(p, batch);
        }
        pthread_mutex_unlock(&p->gc_lock);
        pthread_cond_destroy(&job.wake);
        if (job.r < 0)
                return hwid_fail((hwid_err) -job.r, "%s", job.detail);
        return 0;
}
