/* CA generations in SQLite (store.h): the rows of a rollover, each write
 * one transaction with its audit record and a move of the sequence hwidd
 * watches (meta.ca_generation_seq).  The partial unique indexes of
 * migration 13 hold "one active, one prepared" against any writer.  These
 * statements run a few times in a CA's life: prepared when used, not
 * cached. */
#include <string.h>

#include "error.h"
#include "store-sqlite.h"

static int prep(sqlite_store *s, const char *sql, sqlite3_stmt **ret) {
        if (sqlite3_prepare_v2(s->db, sql, -1, ret, NULL) != SQLITE_OK)
                return sqlite_sql_fail(s, "prepare a statement on the CA generations");
        return 0;
}

static int gen_from_row(sqlite3_stmt *st, store_ca_gen *ret) {
        store_ca_gen g = { 0 };
        bool oom = false;

        g.generation = sqlite3_column_int(st, 0);
        g.state = store_ca_state_parse((const char *) sqlite3_column_text(st, 1));
        g.subject = sqlite_col_strdup(st, 2, &oom);
        g.cert = sqlite_col_blobdup(st, 3, &g.cert_len, &oom);
        g.chain = sqlite_col_strdup(st, 4, &oom);
        g.key_uri = sqlite_col_strdup(st, 5, &oom);
        g.new_with_old = sqlite_col_blobdup(st, 6, &g.new_with_old_len, &oom);
        g.old_with_new = sqlite_col_blobdup(st, 7, &g.old_with_new_len, &oom);
        g.prepared_at = sqlite3_column_int64(st, 8);
        g.activated_at = sqlite3_column_int64(st, 9);
        g.retired_at = sqlite3_column_int64(st, 10);
        if (oom) {
                store_ca_gen_clear(&g);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *ret = g;
        return 0;
}

/* Generation n's row; -HWID_E_NOT_FOUND (without a detail) if none. */
static int gen_read(sqlite_store *s, int n, store_ca_gen *ret) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        int r = prep(s, "SELECT " CA_GEN_COLS " FROM ca_generations WHERE generation = ?1", &st);

        if (r >= 0)
                r = sqlite_bind(s, st, "i", n);
        if (r >= 0)
                r = sqlite_step(s, st, "read a CA generation");
        if (r == 0)
                return -HWID_E_NOT_FOUND;
        return r < 0 ? r : gen_from_row(st, ret);
}

int sqlite_ca_gen_list(store *base, store_ca_gen **ret, size_t *ret_n) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        store_ca_gen *all = NULL, *p;
        size_t n = 0, alloc = 0;
        int r = sqlite_read_enter(&s, &g);

        if (r >= 0)
                r = prep(s, "SELECT " CA_GEN_COLS " FROM ca_generations ORDER BY generation", &st);
        while (r >= 0 && (r = sqlite_step(s, st, "list the CA generations")) == 1) {
                if (!(p = sqlite_array_grow(all, &alloc, n, sizeof(*all)))) {
                        r = hwid_fail(HWID_E_NOMEM, NULL);
                        break;
                }
                all = p;
                if ((r = gen_from_row(st, &all[n])) >= 0)
                        n++;
        }
        if (r < 0) {
                store_ca_gen_list_free(all, n);
                return r;
        }
        *ret = all;
        *ret_n = n;
        return 0;
}

int sqlite_ca_gen_seq(store *base, int64_t *ret) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sqlite_read_enter(&s, &g);

        if (r >= 0)
                r = sqlite_stmt(s, ST_META_GET, "SELECT value FROM meta WHERE key = ?1", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "t", "ca_generation_seq");
        if (r >= 0)
                r = sqlite_step(s, st, "read the CA generations' sequence");
        if (r == 0)
                return hwid_fail(HWID_E_STORE, "database %s has no CA generations' sequence", s->path);
        if (r < 0)
                return r;
        *ret = sqlite3_column_int64(st, 0);
        return 0;
}

/* The end of every write: the sequence moves, the record, the commit. */
static int gen_write_end(sqlite_store *s, const store_audit *audit, int64_t now) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        int r = prep(s, "UPDATE meta SET value = value + 1 WHERE key = 'ca_generation_seq'", &st);

        if (r >= 0)
                r = sqlite_step(s, st, "move the CA generations' sequence");
        if (r >= 0 && audit)
                r = sqlite_audit_insert(s, audit, now);
        if (r < 0)
                return r;
        return sqlite_commit(s, "commit the CA generations");
}

static int gen_insert(sqlite_store *s, const store_ca_gen *g, int64_t now) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        int r = prep(s, "INSERT INTO ca_generations (" CA_GEN_COLS ") "
                        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, nullif(?10, 0), NULL)", &st);

        if (r >= 0)
                r = sqlite_bind(s, st, "ittBttBBII", g->generation, store_ca_state_name(g->state), g->subject, g->cert,
                                g->cert_len, g->chain, g->key_uri, g->new_with_old, g->new_with_old_len,
                                g->old_with_new, g->old_with_new_len, g->prepared_at ? g->prepared_at : now,
                                g->state == CA_GEN_ACTIVE ? (g->activated_at ? g->activated_at : now) : 0);
        if (r >= 0)
                r = sqlite_step(s, st, "record a CA generation");
        if (r == -HWID_E_INVALID)
                return hwid_fail(HWID_E_CONFLICT, "cannot record CA generation %d: %s", g->generation,
                                 sqlite3_errmsg(s->db));
        return r < 0 ? r : 0;
}

/* The highest generation recorded (0: none) and the prepared one (0: none). */
static int gen_summary(sqlite_store *s, int *ret_max, int *ret_prepared) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        int r = prep(s, "SELECT coalesce(max(generation), 0), "
                        "coalesce(max(CASE WHEN state = 'prepared' THEN generation END), 0) FROM ca_generations", &st);

        if (r >= 0)
                r = sqlite_step(s, st, "read the CA generations");
        if (r == 0)
                r = sqlite_sql_fail(s, "read the CA generations");
        if (r < 0)
                return r;
        *ret_max = sqlite3_column_int(st, 0);
        *ret_prepared = sqlite3_column_int(st, 1);
        return 0;
}

static int drop_prepared(sqlite_store *s) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        int r = prep(s, "DELETE FROM ca_generations WHERE state = 'prepared'", &st);

        if (r >= 0)
                r = sqlite_step(s, st, "replace the prepared CA generation");
        return r < 0 ? r : 0;
}

/* Inside the transaction: what store_ca_gen_prepare() records. */
static int prepare_rows(sqlite_store *s, const store_ca_gen *first, const store_ca_gen *next, bool replace,
                        int64_t now) {
        int max, prepared, r = gen_summary(s, &max, &prepared);

        if (r >= 0 && max == 0 && !first)
                return hwid_fail(HWID_E_INVALID, "the first rollover records generation 1 with the next");
        if (r >= 0 && max == 0 && (r = store_ca_gen_check(first, CA_GEN_ACTIVE)) >= 0)
                r = first->generation == 1 ? gen_insert(s, first, now)
                                           : hwid_fail(HWID_E_INVALID, "the first generation recorded is 1");
        if (r >= 0 && prepared && replace && (r = drop_prepared(s)) >= 0)
                r = gen_summary(s, &max, &prepared);
        if (r < 0)
                return r;
        if (prepared)
                return hwid_fail(HWID_E_CONFLICT, "CA generation %d is prepared already: activate it, or prepare "
                                 "again replacing it", prepared);
        if (next->generation != (max ? max : 1) + 1)
                return hwid_fail(HWID_E_CONFLICT, "the next CA generation is %d, not %d", (max ? max : 1) + 1,
                                 next->generation);
        return gen_insert(s, next, now);
}

int sqlite_ca_gen_prepare(store *base, const store_ca_gen *first, const store_ca_gen *next, bool replace,
                          const store_audit *audit, int64_t now) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        int r = store_ca_gen_check(next, CA_GEN_PREPARED);

        if (r >= 0)
                r = sqlite_enter(s, true, &g);
        if (r >= 0)
                r = prepare_rows(s, first, next, replace, now);
        return r < 0 ? r : gen_write_end(s, audit, now);
}

/* Generation n must be prepared (-HWID_E_NOT_FOUND); with_cert: and
 * have its certificate (else -HWID_E_CONFLICT), without: not yet. */
static int must_be_prepared(sqlite_store *s, int n, bool with_cert) {
        _cleanup_(store_ca_gen_clear) store_ca_gen row = { 0 };
        int r = gen_read(s, n, &row);

        if (r == -HWID_E_NOT_FOUND || (r >= 0 && row.state != CA_GEN_PREPARED))
                return hwid_fail(HWID_E_NOT_FOUND, "CA generation %d is not prepared%s", n,
                                 r >= 0 ? " (it is not a rollover in the making)" : "");
        if (r >= 0 && with_cert && !row.cert)
                return hwid_fail(HWID_E_CONFLICT, "CA generation %d has no certificate yet: import the one the "
                                 "offline root signed first", n);
        if (r >= 0 && !with_cert && row.cert)
                return hwid_fail(HWID_E_CONFLICT, "CA generation %d has its certificate already", n);
        return r;
}

int sqlite_ca_gen_import(store *base, int generation, const store_ca_gen *in, const store_audit *audit,
                         int64_t now) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        int r = store_ca_gen_check(in, CA_GEN_PREPARED);

        if (r >= 0 && (in->generation != generation || !in->cert))
                r = hwid_fail(HWID_E_INVALID, "an import gives CA generation %d its certificate", generation);
        if (r >= 0)
                r = sqlite_enter(s, true, &g);
        if (r >= 0)
                r = must_be_prepared(s, generation, false);
        if (r >= 0)
                r = prep(s, "UPDATE ca_generations SET subject = ?2, cert = ?3, chain = ?4, new_with_old = ?5, "
                            "old_with_new = ?6 WHERE generation = ?1", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "itbtbb", generation, in->subject, in->cert, in->cert_len, in->chain,
                                in->new_with_old, in->new_with_old_len, in->old_with_new, in->old_with_new_len);
        if (r >= 0)
                r = sqlite_step(s, st, "import a CA generation's certificate");
        return r < 0 ? r : gen_write_end(s, audit, now);
}

/* Runs sql inside the transaction: its parameters, if it has any, are
 * the generation and now. */
static int gen_update(sqlite_store *s, const char *sql, int generation, int64_t now, const char *what) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        int r = prep(s, sql, &st);

        if (r >= 0)
                r = sqlite_bind(s, st, sqlite3_bind_parameter_count(st) ? "iI" : "", generation, now);
        if (r >= 0)
                r = sqlite_step(s, st, what);
        return r < 0 ? r : 0;
}

int sqlite_ca_gen_activate(store *base, int generation, const store_audit *audit, int64_t now) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        int r = sqlite_enter(s, true, &g);

        if (r >= 0)
                r = must_be_prepared(s, generation, true);
        if (r >= 0)
                r = gen_update(s, "UPDATE ca_generations SET state = 'previous' WHERE state = 'active'", generation, now, "activate a CA generation");
        if (r >= 0)
                r = gen_update(s, "UPDATE ca_generations SET state = 'active', activated_at = ?2 WHERE generation = ?1",
                               generation, now, "activate a CA generation");
        return r < 0 ? r : gen_write_end(s, audit, now);
}

int sqlite_ca_gen_retire(store *base, int generation, const store_audit *audit, int64_t now) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_(store_ca_gen_clear) store_ca_gen row = { 0 };
        int r = sqlite_enter(s, true, &g);

        if (r >= 0 && (r = gen_read(s, generation, &row)) == -HWID_E_NOT_FOUND)
                return hwid_fail(HWID_E_NOT_FOUND, "there is no CA generation %d", generation);
        if (r >= 0 && row.state == CA_GEN_RETIRED)
                return hwid_fail(HWID_E_NOT_FOUND, "CA generation %d is retired already", generation);
        if (r >= 0 && row.state != CA_GEN_PREVIOUS)
                return hwid_fail(HWID_E_CONFLICT, "CA generation %d is %s: only a generation a newer one replaced "
                                 "is retired", generation, store_ca_state_name(row.state));
        if (r >= 0)
                r = gen_update(s, "UPDATE ca_generations SET state = 'retired', retired_at = ?2 WHERE generation = ?1",
                               generation, now, "retire a CA generation");
        return r < 0 ? r : gen_write_end(s, audit, now);
}

int sqlite_ca_gen_unexpired(store *base, int generation, int64_t now, uint64_t *ret_n, int64_t *ret_last) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        int r = sqlite_read_enter(&s, &g);

        if (r >= 0)
                r = prep(s, "SELECT count(*), coalesce(max(not_after), 0) FROM certificates "
                            "WHERE generation = ?1 AND not_after > ?2", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "iI", generation, now);
        if (r >= 0)
                r = sqlite_step(s, st, "count a CA generation's certificates");
        if (r == 0)
                r = sqlite_sql_fail(s, "count a CA generation's certificates");
        if (r < 0)
                return r;
        *ret_n = (uint64_t) sqlite3_column_int64(st, 0);
        *ret_last = sqlite3_column_int64(st, 1);
        return 0;
}
