/* DNS names of certificates: at most one live certificate holds a name.
 *
 * A name is kept in its canonical form -- ASCII lower case, without the
 * trailing dot of an absolute name -- so "Edge-1.Example." and
 * "edge-1.example" are one name.  The database enforces the rule (the
 * partial unique index certificate_dns_one_live, with `live` kept by
 * triggers; see store-sqlite-schema.c); this file writes the rows inside
 * a certificate's commit, first retiring expired certificates that still
 * hold a name (an expired certificate never blocks a new one, as for
 * identities), and answers who holds a name. */
#include <string.h>

#include "error.h"
#include "store-sqlite.h"


/* Inside a transaction: the identity holding name (canonical) in a
 * certificate that is 'valid', expired or not; NULL if none. */
static int holder(sqlite_store *s, const char *name, char **ret_identity) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        bool oom = false;
        int r = sqlite_stmt(s, ST_DNS_HOLDER,
                            "SELECT c.identity, c.not_after FROM certificate_dns AS d "
                            "JOIN certificates AS c ON c.serial = d.serial WHERE d.name = ?1 AND d.live = 1", &st);

        if (r >= 0)
                r = sqlite_bind(s, st, "t", name);
        if (r >= 0)
                r = sqlite_step(s, st, "look up a DNS name");
        if (r <= 0) {
                *ret_identity = NULL;
                return r;
        }
        *ret_identity = sqlite_col_strdup(st, 0, &oom);
        return oom ? hwid_fail(HWID_E_NOMEM, NULL) : 0;
}

/* An expired certificate holding name gives it up (it becomes superseded,
 * as store-sqlite-cert.c's retire() does for an identity). */
static int retire_expired_holder(sqlite_store *s, const char *name, int64_t now) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sqlite_stmt(s, ST_DNS_RETIRE,
                            "UPDATE certificates SET status = 'superseded' WHERE status = 'valid' AND not_after <= ?2 "
                            "AND serial = (SELECT serial FROM certificate_dns WHERE name = ?1 AND live = 1)", &st);

        if (r >= 0)
                r = sqlite_bind(s, st, "tI", name, now);
        if (r >= 0)
                r = sqlite_step(s, st, "retire an expired holder of a DNS name");
        return r < 0 ? r : 0;
}

static int insert_name(sqlite_store *s, const char *serial, const char *identity, const char *name) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        _cleanup_free_ char *other = NULL;
        int r = sqlite_stmt(s, ST_DNS_INSERT,
                            "INSERT INTO certificate_dns (serial, name, live) VALUES (?1, ?2, 1) "
                            "ON CONFLICT (serial, name) DO NOTHING", &st);

        if (r >= 0)
                r = sqlite_bind(s, st, "tt", serial, name);
        if (r >= 0)
                r = sqlite_step(s, st, "record a DNS name");
        if (r != -HWID_E_INVALID || sqlite_last_code(s) != SQLITE_CONSTRAINT_UNIQUE)
                return r < 0 ? r : 0;
        stmt_resetp(&st);
        if ((r = holder(s, name, &other)) < 0)
                return r;
        return hwid_fail(HWID_E_CONFLICT, "DNS name %s already belongs to the live certificate of %s; %s cannot have it",
                         name, other ? other : "another identity", identity);
}

int sqlite_dns_record(sqlite_store *s, const char *serial, const char *identity, const char *const *names, size_t n,
                      int64_t now) {
        char name[STORE_DNS_NAME_MAX + 1];
        int r;

        for (size_t i = 0; i < n; i++) {
                if ((r = store_dns_canonical(names[i], name, sizeof(name))) < 0 ||
                    (r = retire_expired_holder(s, name, now)) < 0 ||
                    (r = insert_name(s, serial, identity, name)) < 0)
                        return r;
        }
        return 0;
}

int sqlite_dns_owner(store *base, const char *name, int64_t now, char **ret_identity) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        char canon[STORE_DNS_NAME_MAX + 1];
        char *id;
        bool oom = false;
        int r = store_dns_canonical(name, canon, sizeof(canon));

        if (r >= 0)
                r = sqlite_read_enter(&s, &g);
        if (r >= 0)
                r = sqlite_stmt(s, ST_DNS_OWNER,
                                "SELECT c.identity FROM certificate_dns AS d JOIN certificates AS c ON c.serial = d.serial "
                                "WHERE d.name = ?1 AND d.live = 1 AND c.not_after > ?2", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "tI", canon, now);
        if (r >= 0)
                r = sqlite_step(s, st, "look up a DNS name");
        if (r == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "no live certificate holds DNS name %s", canon);
        if (r < 0)
                return r;
        id = sqlite_col_strdup(st, 0, &oom);
        if (!id)
                return hwid_fail(HWID_E_NOMEM, NULL);
        *ret_identity = id;
        return 0;
}

/* ---- certificates stored before names were recorded ---- */

static int backfill_done(sqlite_store *s, bool *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sqlite_stmt(s, ST_META_GET, "SELECT value FROM meta WHERE key = ?1", &st);

        if (r >= 0)
                r = sqlite_bind(s, st, "t", "dns_backfilled");
        if (r >= 0)
                r = sqlite_step(s, st, "read whether DNS names were recorded");
        if (r < 0)
                return r;
        *ret = r == 0 || sqlite3_column_int64(st, 0) != 0;
        return 0;
}

/* One name of an older certificate: a name two live certificates held
 * before the rule existed stays with the older one (*skipped). */
static int backfill_name(sqlite_store *s, sqlite3_stmt *ins, const char *serial, const char *raw, size_t *recorded,
                         size_t *skipped) {
        char name[STORE_DNS_NAME_MAX + 1];
        int r, rc;

        if (store_dns_canonical(raw, name, sizeof(name)) < 0) {
                (*skipped)++;
                return 0;
        }
        sqlite3_reset(ins);
        if ((r = sqlite_bind(s, ins, "tt", serial, name)) < 0)
                return r;
        rc = sqlite3_step(ins);
        if (rc == SQLITE_DONE)
                (*recorded)++;
        else if (rc == SQLITE_CONSTRAINT_UNIQUE)
                (*skipped)++;
        else if (rc != SQLITE_CONSTRAINT_PRIMARYKEY) /* the same name twice in one certificate */
                return sqlite_sql_fail(s, "record the DNS names of a stored certificate");
        return 0;
}

static int backfill_cert(sqlite_store *s, sqlite3_stmt *row, sqlite3_stmt *ins, store_dns_names_fn names_of,
                         size_t *recorded, size_t *skipped) {
        const char *serial = (const char *) sqlite3_column_text(row, 0);
        const void *der = sqlite3_column_blob(row, 1);
        char **names = NULL;
        size_t n = 0;
        int r = 0;

        if (!serial || !der || names_of(der, (size_t) sqlite3_column_bytes(row, 1), &names, &n) < 0) {
                (*skipped)++;
                return 0;
        }
        for (size_t i = 0; i < n; i++) {
                if (r >= 0)
                        r = backfill_name(s, ins, serial, names[i], recorded, skipped);
                free(names[i]);
        }
        free(names);
        return r;
}

int sqlite_cert_dns_backfill(store *base, int64_t now, store_dns_names_fn names_of, size_t *ret_recorded,
                            size_t *ret_skipped) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *rows = NULL, *ins = NULL;
        size_t recorded = 0, skipped = 0;
        bool done = false;
        int r = sqlite_enter(s, true, &g);

        if (r >= 0)
                r = backfill_done(s, &done);
        if (r < 0 || done) {
                *ret_recorded = *ret_skipped = 0;
                return r < 0 ? r : 0;
        }
        /* Oldest first: a name two certificates held stays with the first. */
        if (sqlite3_prepare_v2(s->db, "SELECT serial, der FROM certificates WHERE status = 'valid' AND not_after > ?1 "
                               "ORDER BY created_at, serial", -1, &rows, NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(s->db, "INSERT INTO certificate_dns (serial, name, live) VALUES (?1, ?2, 1)", -1, &ins,
                               NULL) != SQLITE_OK)
                return sqlite_sql_fail(s, "prepare recording DNS names");
        if ((r = sqlite_bind(s, rows, "I", now)) < 0)
                return r;
        while (r >= 0 && (r = sqlite_step(s, rows, "read stored certificates")) == 1)
                r = backfill_cert(s, rows, ins, names_of, &recorded, &skipped);
        if (r >= 0 && sqlite3_exec(s->db, "UPDATE meta SET value = 1 WHERE key = 'dns_backfilled'", NULL, NULL, NULL) !=
                              SQLITE_OK)
                r = sqlite_sql_fail(s, "note that DNS names were recorded");
        if (r >= 0)
                r = sqlite_commit(s, "commit the DNS names of stored certificates");
        if (r < 0)
                return r;
        *ret_recorded = recorded;
        *ret_skipped = skipped;
        return 0;
}
