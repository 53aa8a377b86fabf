/* The PostgreSQL store's connections, statements and transactions
 * (store-pg.h says how the store is organised). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "store-pg.h"

#define PG_PARAMS_MAX 20
#define PG_TX_ATTEMPTS 8
#define PG_CONNECT_TIMEOUT "5"
#define PG_SESSION_OPTIONS "-c lock_timeout=5s"

bool store_pg_is_uri(const char *database) {
        return database && (strncmp(database, "postgresql://", 13) == 0 || strncmp(database, "postgres://", 11) == 0);
}

/* ---- slots ---- */

/* Server notices ("already exists, skipping") are not hwidd's to print. */
static void notice_quiet(void *arg, const char *message) {
        (void) arg;
        (void) message;
}

static int slot_connect(pg_slot *c) {
        if (c->conn && PQstatus(c->conn) == CONNECTION_OK)
                return 0;
        if (c->conn) {
                PQfinish(c->conn);
                c->conn = NULL;
        }
        /* Defaults, which the URI's own values override: an unreachable
         * server costs a request seconds, not minutes; a lock held by
         * someone else (a replica, an admin's psql) is waited for as long as
         * SQLite's busy timeout, then the request gets 503 instead of
         * hanging (lock_timeout covers row and advisory locks alike). */
        c->conn = PQconnectdbParams((const char *const[]) { "connect_timeout", "options", "dbname", NULL },
                                    (const char *const[]) { PG_CONNECT_TIMEOUT, PG_SESSION_OPTIONS,
                                                            c->p->conninfo, NULL }, 1);
        if (!c->conn)
                return hwid_fail(HWID_E_NOMEM, NULL);
        if (PQstatus(c->conn) != CONNECTION_OK) {
                /* libpq's message names host and port, never the password. */
                int r = hwid_fail(HWID_E_STORE, "cannot connect to PostgreSQL %s: %s", c->p->label,
                                  PQerrorMessage(c->conn));
                PQfinish(c->conn);
                c->conn = NULL;
                return r;
        }
        PQsetNoticeProcessor(c->conn, notice_quiet, NULL);
        return 0;
}

int pg_enter(store_pg *p, pg_slot **ret) {
        pg_slot *c = NULL;
        int r;

        for (size_t i = 0; i < p->n_slots && !c; i++)
                if (pthread_mutex_trylock(&p->slots[i].lock) == 0)
                        c = &p->slots[i];
        if (!c) {
                c = &p->slots[p->next++ % p->n_slots];
                pthread_mutex_lock(&c->lock);
        }
        c->retry = c->lost = false;
        c->sqlstate[0] = c->constraint[0] = '\0';
        if ((r = slot_connect(c)) < 0) {
                pthread_mutex_unlock(&c->lock);
                return r;
        }
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

typedef struct pg_params {
        const char *v[PG_PARAMS_MAX];
        int len[PG_PARAMS_MAX];
        int fmt[PG_PARAMS_MAX];
        char num[PG_PARAMS_MAX][24];
        int n;
} pg_params;

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

/* Why a statement failed, from its SQLSTATE. */
static int result_fail(pg_slot *c, PGresult *res, const char *what) {
        const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
        const char *cons = res ? PQresultErrorField(res, PG_DIAG_CONSTRAINT_NAME) : NULL;

        snprintf(c->sqlstate, sizeof(c->sqlstate), "%s", state ? state : "");
        snprintf(c->constraint, sizeof(c->constraint), "%s", cons ? cons : "");
        if (strcmp(c->sqlstate, "40001") == 0 || strcmp(c->sqlstate, "40P01") == 0)
                c->retry = true;
        if (strncmp(c->sqlstate, "23", 2) == 0)
                return hwid_fail(HWID_E_INVALID, "cannot %s in %s: %s", what, c->p->label,
                                 PQresultErrorField(res, PG_DIAG_MESSAGE_PRIMARY));
        /* A broken connection is dropped: the next call connects again. */
        if (PQstatus(c->conn) != CONNECTION_OK) {
                PQfinish(c->conn);
                c->conn = NULL;
                c->lost = true;
                return hwid_fail(HWID_E_STORE, "cannot %s: lost the connection to PostgreSQL %s", what, c->p->label);
        }
        return hwid_fail(HWID_E_STORE, "cannot %s in PostgreSQL %s: %s", what, c->p->label,
                         res ? PQresultErrorMessage(res) : PQerrorMessage(c->conn));
}

int pg_exec(pg_slot *c, PGresult **ret, const char *what, const char *sql, const char *fmt, ...) {
        pg_params q = { .n = 0 };
        PGresult *res;
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = params_bind(&q, fmt ? fmt : "", ap);
        va_end(ap);
        if (r < 0)
                return r;
        if (!c->conn)
                return hwid_fail(HWID_E_STORE, "cannot %s: not connected to PostgreSQL %s", what, c->p->label);
        res = PQexecParams(c->conn, sql, q.n, NULL, q.v, q.len, q.fmt, 0);
        if (!res || (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK)) {
                r = result_fail(c, res, what);
                PQclear(res);
                return r;
        }
        if (ret)
                *ret = res;
        else
                PQclear(res);
        return 0;
}

int pg_exec_params(pg_slot *c, const char *what, const char *sql, int n, const char *const *values,
                   const int *lengths, const int *formats) {
        PGresult *res;
        int r = 0;

        if (!c->conn)
                return hwid_fail(HWID_E_STORE, "cannot %s: not connected to PostgreSQL %s", what, c->p->label);
        res = PQexecParams(c->conn, sql, n, NULL, values, lengths, formats, 0);
        if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
                r = result_fail(c, res, what);
        PQclear(res);
        return r;
}

int pg_exec_script(pg_slot *c, const char *what, const char *sql) {
        PGresult *res;
        int r = 0;

        if (!c->conn)
                return hwid_fail(HWID_E_STORE, "cannot %s: not connected to PostgreSQL %s", what, c->p->label);
        res = PQexec(c->conn, sql);
        if (!res || PQresultStatus(res) != PGRES_COMMAND_OK)
                r = result_fail(c, res, what);
        PQclear(res);
        return r;
}

int64_t pg_changes(PGresult *res) {
        const char *n = PQcmdTuples(res);

        return n && n[0] ? strtoll(n, NULL, 10) : 0;
}

/* ---- transactions ---- */

int pg_begin_write(pg_slot *c, const char *what) {
        int r = pg_exec(c, NULL, what, "BEGIN ISOLATION LEVEL READ COMMITTED", NULL);

        if (r >= 0)
                r = pg_exec(c, NULL, what, "SELECT pg_advisory_xact_lock(" PG_WRITE_LOCK ")", NULL);
        return r;
}

static void rollback(pg_slot *c) {
        if (c->conn && PQtransactionStatus(c->conn) != PQTRANS_IDLE)
                PQclear(PQexec(c->conn, "ROLLBACK"));
        pg_sink_drop(c);
}

/* A connection that broke before COMMIT was sent changed nothing: the
 * transaction runs again on a new one (the database may be back, or the
 * connection was one from before it restarted).  One that broke during
 * COMMIT may or may not have committed: that is the caller's 503. */
static int tx_once(pg_slot *c, pg_tx_fn fn, void *userdata, const char *what) {
        int r = pg_begin_write(c, what);

        if (r >= 0)
                r = fn(c, userdata);
        if (r >= 0) {
                r = pg_exec(c, NULL, what, "COMMIT", NULL);
                c->lost = false;
        }
        if (r < 0)
                rollback(c);
        if (c->lost)
                c->retry = true;
        return r;
}

int pg_tx(store_pg *p, pg_tx_fn fn, void *userdata, const char *what) {
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
                nanosleep(&(struct timespec) { .tv_nsec = (long) (1 + rand() % 20) * 1000000L }, NULL);
        }
        return r;
}

/* A read on a connection that turns out broken runs once more on a new one. */
int pg_read(store_pg *p, pg_tx_fn fn, void *userdata) {
        _cleanup_(pg_leavep) pg_slot *c = NULL;
        int r = pg_enter(p, &c);

        if (r >= 0 && (r = fn(c, userdata)) < 0 && c->lost) {
                pg_leavep(&c);
                if ((r = pg_enter(p, &c)) >= 0)
                        r = fn(c, userdata);
        }
        return r;
}

/* ---- columns ---- */

const char *pg_val(PGresult *res, int row, int col) {
        return PQgetisnull(res, row, col) ? NULL : PQgetvalue(res, row, col);
}

char *pg_strdup(PGresult *res, int row, int col, bool *oom) {
        const char *v = pg_val(res, row, col);
        char *d;

        if (!v)
                return NULL;
        if (!(d = strdup(v)))
                *oom = true;
        return d;
}

uint8_t *pg_blobdup(PGresult *res, int row, int col, size_t *ret_len, bool *oom) {
        const char *v = pg_val(res, row, col);
        unsigned char *raw;
        uint8_t *d;
        size_t n = 0;

        *ret_len = 0;
        if (!v)
                return NULL;
        if (!(raw = PQunescapeBytea((const unsigned char *) v, &n)) || !(d = malloc(n ? n : 1))) {
                PQfreemem(raw);
                *oom = true;
                return NULL;
        }
        memcpy(d, raw, n);
        PQfreemem(raw);
        *ret_len = n;
        return d;
}

bool pg_blob_copy(PGresult *res, int row, int col, uint8_t *dst, size_t len) {
        bool oom = false;
        size_t n = 0;
        uint8_t *b = pg_blobdup(res, row, col, &n, &oom);
        bool ok = b && n == len;

        if (ok)
                memcpy(dst, b, len);
        free(b);
        return ok;
}

void pg_copy(PGresult *res, int row, int col, char *dst, size_t size) {
        const char *v = pg_val(res, row, col);

        snprintf(dst, size, "%s", v ? v : "");
}

int64_t pg_i64(PGresult *res, int row, int col) {
        const char *v = pg_val(res, row, col);

        return v ? strtoll(v, NULL, 10) : 0;
}

bool pg_bool(PGresult *res, int row, int col) {
        const char *v = pg_val(res, row, col);

        return v && v[0] == 't';
}
