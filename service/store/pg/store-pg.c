/* The PostgreSQL store's connections, statements and transactions
 * (store-pg.h says how the store is organised). */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "store-pg.h"

#define PG_TX_ATTEMPTS 8
#define PG_CONNECT_TIMEOUT "5"
/* Sequential scans off: a plan cached while a table was a page long (a
 * prepared statement's, a PL/pgSQL function's) must not go on reading all
 * of it once it has grown (store-pg.h, PG_STMT_*).  Statements with no
 * index to use still scan; the others use one. */
#define PG_SESSION_OPTIONS "-c lock_timeout=5s -c enable_seqscan=off"

/* ---- slots ---- */

/* Server notices ("already exists, skipping") are not hwidd's to print. */
static void notice_quiet(void *arg, const char *message) {
        (void) arg;
        (void) message;
}

/* Forgets a broken connection: the next call connects again. */
static void slot_drop(pg_slot *c) {
        PQfinish(c->conn);
        c->conn = NULL;
        c->prepared = 0;
        atomic_store(&c->up, false);
}

static int slot_connect(pg_slot *c) {
        /* A connection the server closed while it sat idle (a restart, an
         * idle timeout) shows as readable end-of-file: PQconsumeInput()
         * reads what is there without waiting and marks it broken, so that
         * a write is not sent on it only to end in doubt. */
        if (c->conn && PQstatus(c->conn) == CONNECTION_OK && PQconsumeInput(c->conn) == 1 &&
            PQstatus(c->conn) == CONNECTION_OK)
                return 0;
        if (c->conn)
                slot_drop(c);
        /* Defaults, which the URI's own values override: an unreachable
         * server costs a request seconds, not minutes; a lock held by
         * someone else (a replica, an admin's psql) is waited for as long as
         * SQLite's busy timeout, then the request gets 503 instead of
         * hanging (lock_timeout covers row and advisory locks alike). */
        atomic_fetch_add(&c->p->connecting, 1);
        c->conn = PQconnectdbParams((const char *const[]) { "connect_timeout", "options", "dbname", NULL },
                                    (const char *const[]) { PG_CONNECT_TIMEOUT, PG_SESSION_OPTIONS,
                                                            c->p->conninfo, NULL }, 1);
        atomic_fetch_sub(&c->p->connecting, 1);
        if (!c->conn)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (PQstatus(c->conn) != CONNECTION_OK) {
                /* libpq's message names host and port, never the password. */
                int r = hwid_fail(HWID_E_STORE, "cannot connect to PostgreSQL %s: %s", c->p->label,
                                  PQerrorMessage(c->conn));
                slot_drop(c);
                return r;
        }
        PQsetNoticeProcessor(c->conn, notice_quiet, NULL);
        atomic_store(&c->up, true);
        return 0;
}

/* A free slot, connected if one is: a new connection is opened only when
 * every connected slot is busy and no other is being opened, so that a
 * burst -- or every request at once when the database is back from a
 * restart -- grows the pool one connection at a time instead of opening
 * all of them together. */
static pg_slot *slot_try(pg_store *p, size_t start) {
        bool grow = atomic_load(&p->connecting) == 0;
        size_t n = p->n_slots;

        for (int pass = 0; pass < 2; pass++)
                for (size_t i = 0; i < n; i++) {
                        pg_slot *c = &p->slots[(start + i) % n];
                        if ((pass == 0) != atomic_load(&c->up) || (pass == 1 && !grow))
                                continue;
                        if (pthread_mutex_trylock(&c->lock) == 0)
                                return c;
                }
        return NULL;
}

/* Waits for a connected slot (any, when none is); except: NULL. */
static pg_slot *slot_wait(pg_store *p, size_t start, const pg_slot *except) {
        size_t n = p->n_slots;
        pg_slot *c = NULL;

        for (size_t i = 0; i < n && !c; i++) {
                pg_slot *s = &p->slots[(start + i) % n];
                if (s != except && atomic_load(&s->up))
                        c = s;
        }
        if (!c && except)
                return NULL;
        if (!c)
                c = &p->slots[start];
        pthread_mutex_lock(&c->lock);
        return c;
}

static int slot_ready(pg_slot *c) {
        int r;

        c->retry = c->lost = c->begin_pending = c->bump_revocations = false;
        c->sqlstate[0] = c->constraint[0] = '\0';
        if ((r = slot_connect(c)) < 0)
                pthread_mutex_unlock(&c->lock);
        return r;
}

int pg_enter(pg_store *p, pg_slot **ret) {
        size_t start = p->next++ % p->n_slots;
        pg_slot *c = slot_try(p, start), *other;
        bool grew = c && !atomic_load(&c->up);
        int r;

        if (!c)
                c = slot_wait(p, start, NULL);
        /* A new connection that could not be opened (the server slow to
         * take one under load) is no reason to fail while others work. */
        if ((r = slot_ready(c)) < 0 && grew && (other = slot_wait(p, start, c)))
                r = slot_ready(c = other);
        if (r < 0)
                return r;
        *ret = c;
        return 0;
}

void pg_leavep(pg_slot **slot) {
        if (!*slot)
                return;
        pg_sink_drop(*slot);
        pthread_mutex_unlock(&(*slot)->lock);
        *slot = NULL;
}

/* ---- statements ---- */

static const pg_query begin_query = { .what = "begin a transaction", .sql = "BEGIN ISOLATION LEVEL READ COMMITTED" };

static int params_bind(pg_params *q, const char *fmt, va_list ap) {
        for (; *fmt; fmt++, q->n++) {
                int i = q->n;
                if (i >= PG_PARAMS_MAX)
                        return hwid_fail(HWID_E_INTERNAL, "too many statement parameters");
                switch (*fmt) {
                case 't':
                        q->v[i] = va_arg(ap, const char *);
                        break;
                case 'b':
                        q->v[i] = va_arg(ap, const char *);
                        q->len[i] = (int) va_arg(ap, size_t);
                        q->fmt[i] = 1;
                        break;
                case 'i':
                        snprintf(q->num[i], sizeof(q->num[i]), "%d", va_arg(ap, int));
                        q->v[i] = q->num[i];
                        break;
                case 'I':
                        snprintf(q->num[i], sizeof(q->num[i]), "%lld", (long long) va_arg(ap, int64_t));
                        q->v[i] = q->num[i];
                        break;
                case 'B':
                        q->v[i] = va_arg(ap, int) ? "true" : "false";
                        break;
                default:
                        return hwid_fail(HWID_E_INTERNAL, "bad statement parameter format '%c'", *fmt);
                }
        }
        return 0;
}

static int query_vbind(pg_query *q, const char *what, const char *sql, const char *fmt, va_list ap) {
        *q = (pg_query) { .what = what, .sql = sql };
        return params_bind(&q->p, fmt ? fmt : "", ap);
}

_Static_assert(PG_STMT_MAX_ <= 32, "pg_slot.prepared has a bit per named statement");

int pg_named(pg_query *q, pg_stmt s, int bound) {
        q->stmt = s;
        return bound;
}

int pg_bind(pg_query *q, const char *what, const char *sql, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = query_vbind(q, what, sql, fmt, ap);
        va_end(ap);
        return r;
}

/* Why a statement failed, from its SQLSTATE. */
static int result_fail(pg_slot *c, PGresult *res, const char *what) {
        const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
        const char *cons = res ? PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME) : NULL;

        snprintf(c->sqlstate, sizeof(c->sqlstate), "%s", state ? state : "");
        snprintf(c->constraint, sizeof(c->constraint), "%s", cons ? cons : "");
        if (strcmp(c->sqlstate, "40001") == 0 || strcmp(c->sqlstate, "40P01") == 0)
                c->retry = true;
        /* A statement the server forgot (DISCARD ALL, a pooler in between)
         * is prepared again on its next use. */
        if (strcmp(c->sqlstate, "26000") == 0)
                c->prepared = 0;
        if (strncmp(c->sqlstate, "23", 2) == 0)
                return hwid_fail(HWID_E_INVALID, "cannot %s in %s: %s", what, c->p->label,
                                 PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY));
        /* A broken connection is dropped: the next call connects again. */
        if (PQstatus(c->conn) != CONNECTION_OK) {
                slot_drop(c);
                c->lost = true;
                return hwid_fail(HWID_E_STORE, "cannot %s: lost the connection to PostgreSQL %s", what, c->p->label);
        }
        return hwid_fail(HWID_E_STORE, "cannot %s in PostgreSQL %s: %s", what, c->p->label,
                         res ? PQresultErrorMessage(res) : PQerrorMessage(c->conn));
}

static bool result_ok(PGresult *res) {
        return res && (PQresultStatus(res) == PGRES_COMMAND_OK || PQresultStatus(res) == PGRES_TUPLES_OK);
}

int pg_run(pg_slot *c, const pg_query *q, PGresult **ret) {
        PGresult *res = NULL;
        int r;

        if (!c->conn)
                return hwid_fail(HWID_E_STORE, "cannot %s: not connected to PostgreSQL %s", q->what, c->p->label);
        if (c->begin_pending || q->stmt != PG_STMT_NONE) {
                /* The transaction's BEGIN goes with its first statement, a
                 * statement's preparation with its first run. */
                if ((r = pg_pipeline(c, q, 1, &res)) < 0)
                        return r;
        } else if (!result_ok(res = PQexecParams(c->conn, q->sql, q->p.n, NULL, q->p.v, q->p.len, q->p.fmt, 0))) {
                r = result_fail(c, res, q->what);
                PQclear(res);
                return r;
        }
        if (ret)
                *ret = res;
        else
                PQclear(res);
        return 0;
}

int pg_exec(pg_slot *c, PGresult **ret, const char *what, const char *sql, const char *fmt, ...) {
        pg_query q;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = query_vbind(&q, what, sql, fmt, ap);
        va_end(ap);
        return r < 0 ? r : pg_run(c, &q, ret);
}

/* The connection is in no state to go on with (a pipeline cut short):
 * dropped, as a broken one is. */
static int pipeline_broken(pg_slot *c, const char *what) {
        int r = hwid_fail(HWID_E_STORE, "cannot %s: lost the connection to PostgreSQL %s", what, c->p->label);

        slot_drop(c);
        c->lost = true;
        return r;
}

/* Query i's one result, then the end of its results. */
static int pipeline_result(pg_slot *c, const pg_query *q, int r, PGresult **ret) {
        PGresult *res = PQgetResult(c->conn), *end;

        if (!res)
                return pipeline_broken(c, q->what);
        if (PQresultStatus(res) == PGRES_PIPELINE_ABORTED)
                r = r < 0 ? r : hwid_fail(HWID_E_STORE, "cannot %s: the pipeline was aborted", q->what);
        else if (!result_ok(res))
                r = r < 0 ? r : result_fail(c, res, q->what);
        else if (r >= 0)
                *ret = TAKE_PTR(res);
        PQclear(res);
        if ((end = PQgetResult(c->conn))) {
                PQclear(end);
                return pipeline_broken(c, q->what);
        }
        return r;
}

/* A named statement's name on the connection. */
static void stmt_name(pg_stmt s, char name[static 16]) {
        snprintf(name, 16, "hwid_s%d", (int) s);
}

/* q, prepared first if it is a named statement not yet prepared on this
 * connection nor in this pipeline (*sending: bit s, the preparations sent
 * with it; NULL: none may be, q goes with its text if it is not prepared);
 * *ret_prepare: a preparation went before it. */
static int pipeline_send(pg_slot *c, const pg_query *q, uint32_t *sending, bool *ret_prepare) {
        uint32_t bit = UINT32_C(1) << q->stmt, known = c->prepared | (sending ? *sending : 0);
        char name[16];
        int ok;

        *ret_prepare = false;
        if (q->stmt == PG_STMT_NONE || (!sending && !(known & bit)))
                return PQsendQueryParams(c->conn, q->sql, q->p.n, NULL, q->p.v, q->p.len, q->p.fmt, 0) == 1
                       ? 0 : pipeline_broken(c, q->what);
        stmt_name(q->stmt, name);
        if (!(known & bit)) {
                if (PQsendPrepare(c->conn, name, q->sql, q->p.n, NULL) != 1)
                        return pipeline_broken(c, q->what);
                *sending |= bit;
                *ret_prepare = true;
        }
        ok = PQsendQueryPrepared(c->conn, name, q->p.n, q->p.v, q->p.len, q->p.fmt, 0);
        return ok == 1 ? 0 : pipeline_broken(c, q->what);
}

/* The result of q's preparation: from now on q runs by name here. */
static int prepare_result(pg_slot *c, const pg_query *q, int r) {
        PGresult *res = NULL;

        if ((r = pipeline_result(c, q, r, &res)) >= 0)
                c->prepared |= UINT32_C(1) << q->stmt;
        PQclear(res);
        return r;
}

/* The results of a pipeline sent, the transaction's BEGIN first if it
 * went with it, each statement's preparation before it if one went (bit i
 * of prepares), then its Sync. */
static int pipeline_read(pg_slot *c, bool begin, const pg_query *q, size_t n, uint64_t prepares,
                         PGresult **ret) {
        PGresult *res = NULL, *sync;
        int r = 0;

        if (begin && (r = pipeline_result(c, &begin_query, r, &res)) >= 0)
                PQclear(res);
        for (size_t i = 0; i < n && c->conn; i++) {
                if (prepares & (UINT64_C(1) << i))
                        r = prepare_result(c, &q[i], r);
                if (c->conn)
                        r = pipeline_result(c, &q[i], r, &ret[i]);
        }
        if (!c->conn)
                return r;
        sync = PQgetResult(c->conn);
        if (!sync || PQresultStatus(sync) != PGRES_PIPELINE_SYNC || PQexitPipelineMode(c->conn) != 1)
                r = pipeline_broken(c, q[0].what);
        PQclear(sync);
        return r;
}

int pg_pipeline(pg_slot *c, const pg_query *q, size_t n, PGresult **ret) {
        bool begin = c->begin_pending, prepare;
        uint64_t prepares = 0;
        uint32_t sending = 0;
        int r = 0;

        for (size_t i = 0; i < n; i++)
                ret[i] = NULL;
        if (!c->conn)
                return hwid_fail(HWID_E_STORE, "cannot %s: not connected to PostgreSQL %s", q[0].what, c->p->label);
        c->begin_pending = false;
        if (PQenterPipelineMode(c->conn) != 1)
                return pipeline_broken(c, q[0].what);
        if (begin)
                r = pipeline_send(c, &begin_query, NULL, &prepare);
        /* Statements past the 64th (prepares has a bit each for 64) are
         * not prepared here. */
        for (size_t i = 0; r >= 0 && i < n; i++)
                if ((r = pipeline_send(c, &q[i], i < 64 ? &sending : NULL, &prepare)) >= 0 && prepare)
                        prepares |= UINT64_C(1) << i;
        if (r >= 0 && PQpipelineSync(c->conn) != 1)
                r = pipeline_broken(c, q[0].what);
        if (r >= 0)
                r = pipeline_read(c, begin, q, n, prepares, ret);
        if (r < 0)
                for (size_t i = 0; i < n; i++) {
                        PQclear(ret[i]);
                        ret[i] = NULL;
                }
        return r;
}

/* The transaction's BEGIN, now, for what cannot take it along. */
static int begin_now(pg_slot *c, const char *what) {
        if (!c->conn)
                return hwid_fail(HWID_E_STORE, "cannot %s: not connected to PostgreSQL %s", what, c->p->label);
        if (!c->begin_pending)
                return 0;
        c->begin_pending = false;
        return pg_run(c, &begin_query, NULL);
}

int pg_exec_params(pg_slot *c, const char *what, const char *sql, int n, const char *const *values,
                   const int *lengths, const int *formats) {
        PGresult *res;
        int r = begin_now(c, what);

        if (r < 0)
                return r;
        res = PQexecParams(c->conn, sql, n, NULL, values, lengths, formats, 0);
        if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
                r = result_fail(c, res, what);
        PQclear(res);
        return r;
}

int pg_exec_script(pg_slot *c, const char *what, const char *sql) {
        PGresult *res;
        int r = begin_now(c, what);

        if (r < 0)
                return r;
        res = PQexec(c->conn, sql);
        if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
                r = result_fail(c, res, what);
        PQclear(res);
        return r;
}

/* ---- transactions ---- */

static void rollback(pg_slot *c) {
        if (c->conn && PQtransactionStatus(c->conn) != PQTRANS_IDLE)
                PQclear(PQexec(c->conn, "ROLLBACK"));
        c->begin_pending = c->bump_revocations = false;
        pg_sink_drop(c);
}

/* COMMIT, sent in one pipeline with what waited for it (the revocation
 * sequence, the audit records to chain; BEGIN too when nothing else was
 * sent): whatever row that takes -- the audit chain's head above all --
 * is held from there to the end of the commit, never across a round
 * trip. */
static int tx_commit(pg_slot *c, const char *what) {
        _cleanup_free_ char *audit = NULL;
        PGresult *res[3];
        pg_query q[3];
        size_t n = 0, at = 0;
        int r = 0;

        if (c->begin_pending && !c->bump_revocations && c->n_queue == 0) {
                c->begin_pending = false; /* nothing was sent: nothing to commit */
                return 0;
        }
        if (c->bump_revocations)
                r = pg_bind(&q[n++], "bump the revocation sequence",
                            "UPDATE meta SET value = value + 1 WHERE key = 'revocation_seq'", NULL);
        if (r >= 0 && c->n_queue > 0 && (r = pg_audit_json(c, &audit)) >= 0) {
                at = n;
                r = pg_bind(&q[n++], "append to the audit log",
                            "SELECT rec_id, rec_prev, rec_hash FROM hwid_audit_append($1::jsonb)", "t", audit);
        }
        if (r < 0 || (r = pg_bind(&q[n++], what, "COMMIT", NULL)) < 0 || (r = pg_pipeline(c, q, n, res)) < 0)
                return r;
        if (audit)
                r = pg_audit_chained(c, res[at]);
        for (size_t i = 0; i < n; i++)
                PQclear(res[i]);
        c->bump_revocations = false;
        return r;
}

/* A connection that broke before COMMIT was sent changed nothing: the
 * transaction runs again on a new one (the database may be back, or the
 * connection was one from before it restarted).  One that broke during
 * COMMIT may or may not have committed: that is the caller's 503. */
static int tx_once(pg_slot *c, pg_tx_fn fn, void *userdata, const char *what) {
        int r;

        c->begin_pending = true; /* sent with the first statement (pg_run()) */
        r = fn(c, userdata);
        if (r >= 0) {
                c->lost = false;
                r = tx_commit(c, what);
                if (c->lost)
                        return r; /* in doubt: not run again */
        }
        if (r < 0)
                rollback(c);
        if (c->lost)
                c->retry = true;
        return r;
}

int pg_tx(pg_store *p, pg_tx_fn fn, void *userdata, const char *what) {
        _cleanup_(pg_leavep) pg_slot *c = NULL;
        int r = -HWID_E_STORE;

        for (int i = 0; i < PG_TX_ATTEMPTS; i++) {
                if ((r = pg_enter(p, &c)) < 0)
                        return r;
                r = tx_once(c, fn, userdata, what);
                if (r >= 0) {
                        pg_sink_flush(c);
                        return 0;
                }
                if (!c->retry)
                        return r;
                pg_leavep(&c);
                pg_backoff();
        }
        return r;
}

void pg_backoff(void) {
        nanosleep(&(struct timespec) { .tv_nsec = (long) (1 + rand() % 20) * 1000000L }, NULL);
}

/* One statement, in a transaction of its own (autocommit): what ends in
 * doubt is as for tx_once(), and a failure the server answered changed
 * nothing and runs again when it was a serialization failure or deadlock. */
int pg_statement(pg_store *p, const pg_query *q, pg_slot **ret_slot, PGresult **ret) {
        _cleanup_(pg_leavep) pg_slot *c = NULL;
        int r = -HWID_E_STORE;

        for (int i = 0; i < PG_TX_ATTEMPTS; i++) {
                if ((r = pg_enter(p, &c)) < 0)
                        return r;
                if ((r = pg_run(c, q, ret)) >= 0) {
                        *ret_slot = TAKE_PTR(c);
                        return 0;
                }
                if (!c->retry || c->lost)
                        return r;
                pg_leavep(&c);
                pg_backoff();
        }
        return r;
}

/* A read on a connection that turns out broken runs once more on a new one. */
int pg_read(pg_store *p, pg_tx_fn fn, void *userdata) {
        _cleanup_(pg_leavep) pg_slot *c = NULL;
        int r = pg_enter(p, &c);

        if (r >= 0 && (r = fn(c, userdata)) < 0 && c->lost) {
                pg_leavep(&c);
                if ((r = pg_enter(p, &c)) >= 0)
                        r = fn(c, userdata);
        }
        return r;
}
