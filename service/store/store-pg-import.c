/* hwid store migrate: a SQLite store copied into PostgreSQL.
 *
 * The SQLite file is first opened as a store (which brings its schema to
 * the current version and chains old audit records) and the DNS names of
 * its live certificates recorded, then read table by table; every row goes into PostgreSQL within one transaction, which
 * commits only when each table holds as many rows on both sides.  Rows
 * are copied as stored -- serials, audit ids and hashes included -- so
 * the audit chain verifies in PostgreSQL as it did in SQLite. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <sqlite3.h>

#include "error.h"
#include "store-pg.h"
#include "store-sqlite.h"
#include "x509-util.h"

#define COPY_COLS_MAX 20

typedef struct copy_table {
        const char *name;
        const char *cols;
        int n_cols;
} copy_table;

/* In the order foreign keys need. */
static const copy_table tables[] = {
        { "tokens", "id, secret_hash, profile, name_pattern, description, created_at, expires_at, uses_total, "
                    "uses_left, revoked, nonce", 11 },
        { "requests", "id, identity, profile, token_id, spki_sha256, csr_der, status, reason, serial, created_at, "
                      "updated_at, ek_cert_sha256, ek_pub_sha256, ak_name", 14 },
        { "certificates", "serial, identity, subject, profile, spki_sha256, der, not_before, not_after, status, "
                          "revoked_at, revocation_reason, request_id, created_at, role, token_id, scope, "
                          "ek_cert_sha256, ek_pub_sha256, ak_name, generation", 20 },
        { "certificate_dns", "serial, name, live", 3 },
        { "blocked_keys", "spki_sha256, serial, blocked_at", 3 },
        { "audit", "id, at, actor, action, target, outcome, reason, token_id, prev_hash, hash", 10 },
        { "audit_chain", "role, id, at, hash", 4 },
        { "audit_checkpoints", "kind, id, record_at, hash, at, sig", 6 },
        { "attest_challenges", "id, secret_sha256, nonce, ak_public, ek_cert, expires_at, created_at, requester", 8 },
        { "ek_allowlist", "ek_cert_sha256, ek_pub_sha256, identity, profile, added_at", 5 },
        { "identity_bindings", "identity, ek_pub_sha256, ek_cert_sha256, serial, bound_at", 5 },
        { "ca_generations", "generation, state, subject, cert, chain, key_uri, new_with_old, old_with_new, "
                            "prepared_at, activated_at, retired_at", 11 },
};

static int sq_fail(sqlite3 *db, const char *what, const char *path) {
        return hwid_fail(HWID_E_STORE, "cannot %s in %s: %s", what, path, db ? sqlite3_errmsg(db) : "out of memory");
}

/* One SQLite row as PostgreSQL parameters: text as text, blobs binary. */
static int copy_row(pg_slot *c, sqlite3_stmt *st, const char *sql, int n) {
        const char *v[COPY_COLS_MAX];
        int len[COPY_COLS_MAX], fmt[COPY_COLS_MAX];

        for (int i = 0; i < n; i++) {
                int type = sqlite3_column_type(st, i);
                fmt[i] = type == SQLITE_BLOB;
                v[i] = type == SQLITE_NULL ? NULL
                       : fmt[i]            ? (const char *) sqlite3_column_blob(st, i)
                                           : (const char *) sqlite3_column_text(st, i);
                len[i] = sqlite3_column_bytes(st, i);
                if (fmt[i] && !v[i])
                        v[i] = ""; /* an empty blob */
        }
        return pg_exec_params(c, "copy a row", sql, n, v, len, fmt);
}

static int sq_count(sqlite3 *db, const char *table, int64_t *ret) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        char sql[128];

        snprintf(sql, sizeof(sql), "SELECT count(*) FROM %s", table);
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK || sqlite3_step(st) != SQLITE_ROW)
                return -HWID_E_STORE;
        *ret = sqlite3_column_int64(st, 0);
        return 0;
}

static int copy_table_rows(pg_slot *c, sqlite3 *db, const char *path, const copy_table *t, int64_t *ret_n) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        _cleanup_(PQclearp) PGresult *res = NULL;
        char sel[512], ins[640], vals[160] = "";
        int64_t n = 0, want = 0;
        int r = 0, rc;

        for (int i = 1; i <= t->n_cols; i++)
                snprintf(vals + strlen(vals), sizeof(vals) - strlen(vals), "%s$%d", i > 1 ? ", " : "", i);
        snprintf(sel, sizeof(sel), "SELECT %s FROM %s", t->cols, t->name);
        snprintf(ins, sizeof(ins), "INSERT INTO %s (%s) VALUES (%s)", t->name, t->cols, vals);
        if (sqlite3_prepare_v2(db, sel, -1, &st, NULL) != SQLITE_OK)
                return sq_fail(db, "read a table", path);
        while (r >= 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
                r = copy_row(c, st, ins, t->n_cols);
                n++;
        }
        if (r >= 0 && rc != SQLITE_DONE)
                r = sq_fail(db, "read a table", path);
        if (r < 0)
                return r;
        snprintf(sel, sizeof(sel), "SELECT count(*) FROM %s", t->name);
        if ((r = pg_exec(c, &res, "count the rows copied", sel, NULL)) < 0 || (r = sq_count(db, t->name, &want)) < 0)
                return r < 0 ? r : sq_fail(db, "count rows", path);
        if (pg_i64(res, 0, 0) != want || n != want)
                return hwid_fail(HWID_E_STORE, "%s: %lld rows in SQLite, %lld in PostgreSQL after the copy: "
                                 "nothing committed", t->name, (long long) want, (long long) pg_i64(res, 0, 0));
        *ret_n = n;
        return 0;
}

static int target_empty(pg_slot *c) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = pg_exec(c, &res, "look at the target database",
                        "SELECT (SELECT count(*) FROM tokens) + (SELECT count(*) FROM certificates) + "
                        "(SELECT count(*) FROM audit) + (SELECT count(*) FROM ek_allowlist)", NULL);

        if (r >= 0 && pg_i64(res, 0, 0) != 0)
                return hwid_fail(HWID_E_CONFLICT, "PostgreSQL %s already holds hwid data: a migration goes into an "
                                 "empty database", c->p->label);
        return r;
}

static int sequences(pg_slot *c, sqlite3 *db) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        int64_t seq = 0;
        int r;

        if (sqlite3_prepare_v2(db, "SELECT value FROM meta WHERE key = 'revocation_seq'", -1, &st, NULL) ==
                    SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
                seq = sqlite3_column_int64(st, 0);
        if ((r = pg_exec(c, NULL, "copy the revocation sequence",
                         "UPDATE meta SET value = $1 WHERE key = 'revocation_seq'", "I", seq)) < 0)
                return r;
        return pg_exec(c, NULL, "move the audit id sequence",
                       "SELECT setval(pg_get_serial_sequence('audit', 'id'), coalesce(max(id), 1), max(id) IS NOT NULL) "
                       "FROM audit", NULL);
}

typedef struct copy_q {
        sqlite3 *db;
        const char *path;
        char *summary;
        size_t size;
} copy_q;

static int copy_run(pg_slot *c, void *userdata) {
        copy_q *q = userdata;
        int64_t n;
        int r = target_empty(c);

        q->summary[0] = '\0';
        for (size_t i = 0; r >= 0 && i < ELEMENTSOF(tables); i++)
                if ((r = copy_table_rows(c, q->db, q->path, &tables[i], &n)) >= 0)
                        snprintf(q->summary + strlen(q->summary), q->size - strlen(q->summary), "%s%s %lld",
                                 i ? ", " : "", tables[i].name, (long long) n);
        return r < 0 ? r : sequences(c, q->db);
}

int store_copy_sqlite_to_pg(const char *path, const char *uri, char *summary, size_t size) {
        _cleanup_(store_freep) store *src = NULL;
        _cleanup_(store_freep) store *dst = NULL;
        store_audit_report rep;
        size_t recorded, skipped;
        sqlite3 *db = NULL;
        int r;

        if (!pg_is_uri(uri) || pg_is_uri(path))
                return hwid_fail(HWID_E_INVALID, "a migration goes from a SQLite file to a postgresql:// URI");
        /* Brings the file to the current schema first (and checks it is
         * hwid's), with the DNS names of its live certificates recorded as
         * hwidd records them at start: a PostgreSQL store records names from
         * its first certificate on and has none of its own to backfill. */
        if ((r = store_open(path, &src)) < 0 || (r = store_integrity_check(src)) < 0 ||
            (r = store_cert_dns_backfill(src, (int64_t) time(NULL), der_dns_names, &recorded, &skipped)) < 0)
                return r;
        store_free(TAKE_PTR(src));
        /* One read transaction: the copy is one snapshot of the file. */
        if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
            sqlite3_exec(db, "BEGIN", NULL, NULL, NULL) != SQLITE_OK) {
                r = sq_fail(db, "open the database", path);
                sqlite3_close(db);
                return r;
        }
        if ((r = pg_open(uri, 0, &dst)) >= 0)
                r = pg_tx(pg_of(dst), copy_run, &(copy_q) { .db = db, .path = path, .summary = summary, .size = size },
                          "commit the migration");
        sqlite3_close(db);
        if (r >= 0 && (r = store_audit_verify(dst, NULL, 0, &rep)) >= 0 && rep.problem != AUDIT_OK)
                r = hwid_fail(HWID_E_STORE, "the audit chain copied into PostgreSQL does not verify: %s", rep.detail);
        return r;
}
