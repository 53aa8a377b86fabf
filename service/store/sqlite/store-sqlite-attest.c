/* TPM attestation in the store: the challenges waiting for an answer and
 * the EK allowlist (store.h), and the attestation columns certificates
 * and requests carry.
 *
 * A challenge is taken with DELETE ... RETURNING: one statement, so two
 * hwidd answering the same challenge at once cannot both get it. */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "store-sqlite.h"

#define CHALLENGE_AK_MAX 1024
#define CHALLENGE_EK_MAX 4096

void sqlite_col_attestation(sqlite3_stmt *st, int i, store_attestation *ret) {
        sqlite_col_copy(st, i, ret->ek_cert_sha256, sizeof(ret->ek_cert_sha256));
        sqlite_col_copy(st, i + 1, ret->ek_pub_sha256, sizeof(ret->ek_pub_sha256));
        sqlite_col_copy(st, i + 2, ret->ak_name, sizeof(ret->ak_name));
}

/* ---- challenges ---- */

static bool challenge_ok(const store_challenge *c) {
        return c && store_hex_ok(c->id, 32, 32) && c->ak_public && c->ak_public_len > 0 &&
               c->ak_public_len <= CHALLENGE_AK_MAX && c->ek_cert && c->ek_cert_len > 0 &&
               c->ek_cert_len <= CHALLENGE_EK_MAX;
}

/* The requester's oldest challenges go while it has max or more waiting. */
static int requester_room(sqlite_store *s, const store_challenge *c, size_t max, size_t *ret_replaced) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *count = NULL, *drop = NULL;
        int64_t n;
        int r;

        *ret_replaced = 0;
        if (!c->requester || !c->requester[0] || max == 0)
                return 0;
        if (sqlite3_prepare_v2(s->db, "SELECT count(*) FROM attest_challenges WHERE requester = ?1", -1, &count,
                               NULL) != SQLITE_OK ||
            sqlite3_prepare_v2(s->db, "DELETE FROM attest_challenges WHERE rowid IN (SELECT rowid FROM "
                               "attest_challenges WHERE requester = ?1 ORDER BY created_at, rowid LIMIT ?2)", -1,
                               &drop, NULL) != SQLITE_OK)
                return sqlite_sql_fail(s, "bound a requester's attestation challenges");
        if ((r = sqlite_bind(s, count, "t", c->requester)) < 0 ||
            (r = sqlite_step(s, count, "count a requester's attestation challenges")) < 0)
                return r;
        n = sqlite3_column_int64(count, 0);
        if (n < (int64_t) max)
                return 0;
        if ((r = sqlite_bind(s, drop, "tI", c->requester, n - (int64_t) max + 1)) < 0 ||
            (r = sqlite_step(s, drop, "replace a requester's oldest attestation challenge")) < 0)
                return r;
        *ret_replaced = (size_t) sqlite3_changes(s->db);
        return 0;
}

static int challenge_purge(sqlite_store *s, int64_t now) {
        _cleanup_stmt_ sqlite3_stmt *purge = NULL;
        int r = sqlite_stmt(s, ST_CHAL_PURGE, "DELETE FROM attest_challenges WHERE expires_at <= ?1", &purge);

        if (r >= 0)
                r = sqlite_bind(s, purge, "I", now);
        if (r >= 0)
                r = sqlite_step(s, purge, "delete expired attestation challenges");
        return r < 0 ? r : 0;
}

/* Whether all requesters together leave room for one more. */
static int challenge_room(sqlite_store *s, size_t max_pending) {
        _cleanup_stmt_ sqlite3_stmt *count = NULL;
        int r = sqlite_stmt(s, ST_CHAL_COUNT, "SELECT count(*) FROM attest_challenges", &count);

        if (r >= 0)
                r = sqlite_step(s, count, "count attestation challenges");
        if (r < 0)
                return r;
        if (r == 1 && (uint64_t) sqlite3_column_int64(count, 0) >= max_pending)
                return hwid_fail(HWID_E_RATE_LIMITED, "%zu attestation challenges are already waiting for an answer",
                                 max_pending);
        return 0;
}

int sqlite_challenge_put(store *base, const store_challenge *c, int64_t now, size_t max_pending,
                         size_t max_per_requester, size_t *ret_replaced) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        size_t replaced = 0;
        int r;

        if (!challenge_ok(c))
                return hwid_fail(HWID_E_INVALID, "attestation challenge to store has a bad id, AK or EK certificate");
        r = sqlite_enter(s, true, &g);
        if (r >= 0)
                r = challenge_purge(s, now);
        if (r >= 0)
                r = requester_room(s, c, max_per_requester, &replaced);
        if (r >= 0)
                r = challenge_room(s, max_pending);
        if (r >= 0)
                r = sqlite_stmt(s, ST_CHAL_INSERT,
                                "INSERT INTO attest_challenges (id, secret_sha256, nonce, ak_public, ek_cert, "
                                "expires_at, created_at, requester) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "tbbbbIIt", c->id, c->secret_sha256, sizeof(c->secret_sha256), c->nonce,
                                sizeof(c->nonce), c->ak_public, c->ak_public_len, c->ek_cert, c->ek_cert_len,
                                c->expires_at, now, c->requester ? c->requester : "");
        if (r >= 0)
                r = sqlite_step(s, st, "record an attestation challenge");
        if (r == -HWID_E_INVALID && sqlite_last_code(s) == SQLITE_CONSTRAINT_PRIMARYKEY)
                return hwid_fail(HWID_E_EXISTS, "attestation challenge %.8s... exists already", c->id);
        if (r < 0 || (r = sqlite_commit(s, "commit the attestation challenge")) < 0)
                return r;
        if (ret_replaced)
                *ret_replaced = replaced;
        return 0;
}

static int challenge_from_row(sqlite3_stmt *st, const char *id, store_challenge *ret) {
        store_challenge c = { .expires_at = sqlite3_column_int64(st, 4) };
        bool oom = false;

        if (sqlite3_column_bytes(st, 0) != (int) sizeof(c.secret_sha256) ||
            sqlite3_column_bytes(st, 1) != (int) sizeof(c.nonce))
                return hwid_fail(HWID_E_STORE, "attestation challenge %.8s... is damaged", id);
        snprintf(c.id, sizeof(c.id), "%s", id);
        memcpy(c.secret_sha256, sqlite3_column_blob(st, 0), sizeof(c.secret_sha256));
        memcpy(c.nonce, sqlite3_column_blob(st, 1), sizeof(c.nonce));
        c.ak_public = sqlite_col_blobdup(st, 2, &c.ak_public_len, &oom);
        c.ek_cert = sqlite_col_blobdup(st, 3, &c.ek_cert_len, &oom);
        if (oom || !c.ak_public || !c.ek_cert) {
                store_challenge_clear(&c);
                return oom ? hwid_fail(HWID_E_NOMEM, NULL)
                           : hwid_fail(HWID_E_STORE, "attestation challenge %.8s... is damaged", id);
        }
        *ret = c;
        return 0;
}

int sqlite_challenge_take(store *base, const char *id, store_challenge *ret) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        store_challenge c = { 0 };
        int r;

        if (!id || !store_hex_ok(id, 32, 32))
                return hwid_fail(HWID_E_NOT_FOUND, "no such attestation challenge");
        r = sqlite_enter(s, true, &g);
        if (r >= 0)
                r = sqlite_stmt(s, ST_CHAL_TAKE,
                                "DELETE FROM attest_challenges WHERE id = ?1 "
                                "RETURNING secret_sha256, nonce, ak_public, ek_cert, expires_at", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "t", id);
        if (r >= 0)
                r = sqlite_step(s, st, "take an attestation challenge");
        if (r == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "no attestation challenge %.8s...", id);
        if (r >= 0)
                r = challenge_from_row(st, id, &c);
        /* The statement must be finished before the commit. */
        if (r >= 0 && (r = sqlite_step(s, st, "take an attestation challenge")) == 0)
                r = sqlite_commit(s, "commit the taken attestation challenge");
        if (r < 0) {
                store_challenge_clear(&c);
                return r;
        }
        *ret = c;
        return 0;
}

/* ---- the EK allowlist ---- */

static int ek_from_row(sqlite3_stmt *st, store_ek *ret) {
        store_ek e = { .added_at = sqlite3_column_int64(st, 4) };
        bool oom = false;

        sqlite_col_copy(st, 0, e.ek_cert_sha256, sizeof(e.ek_cert_sha256));
        sqlite_col_copy(st, 1, e.ek_pub_sha256, sizeof(e.ek_pub_sha256));
        e.identity = sqlite_col_strdup(st, 2, &oom);
        e.profile = sqlite_col_strdup(st, 3, &oom);
        if (oom) {
                store_ek_clear(&e);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *ret = e;
        return 0;
}

/* Which of the entry's unique columns is taken, from SQLite's message. */
static int ek_exists(sqlite_store *s, const store_ek *e) {
        const char *msg = sqlite3_errmsg(s->db);

        if (strstr(msg, "ek_allowlist.identity"))
                return hwid_fail(HWID_E_EXISTS, "%s is already on the EK allowlist (identities ignore case)",
                                 e->identity);
        return hwid_fail(HWID_E_EXISTS, "the EK of %s (%s) is already on the EK allowlist", e->identity,
                         e->ek_pub_sha256[0] ? e->ek_pub_sha256 : e->ek_cert_sha256);
}

static int ek_insert(sqlite_store *s, const store_ek *e, int64_t now) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        if (!store_ek_ok(e))
                return hwid_fail(HWID_E_INVALID, "EK allowlist entry %s lacks a valid name (1-%d bytes), profile, "
                                 "or EK hash (64 lower-case hex digits)", e->identity ? e->identity : "(none)",
                                 STORE_EK_NAME_MAX);
        r = sqlite_stmt(s, ST_EK_INSERT, "INSERT INTO ek_allowlist (" EK_COLS ") VALUES (?1, ?2, ?3, ?4, ?5)", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "ttttI", store_opt(e->ek_cert_sha256), store_opt(e->ek_pub_sha256),
                                e->identity, e->profile, now);
        if (r >= 0)
                r = sqlite_step(s, st, "add to the EK allowlist");
        if (r == -HWID_E_INVALID && sqlite_last_code(s) == SQLITE_CONSTRAINT_UNIQUE)
                return ek_exists(s, e);
        return r < 0 ? r : 0;
}

int sqlite_ek_add(store *base, const store_ek *v, size_t n, const store_audit *audit, int64_t now) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        int r;

        if (!v || n == 0)
                return hwid_fail(HWID_E_INVALID, "no EK allowlist entry to add");
        r = sqlite_enter(s, true, &g);
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = ek_insert(s, &v[i], now);
        if (r >= 0 && audit)
                r = sqlite_audit_insert(s, audit, now);
        if (r < 0)
                return r;
        return sqlite_commit(s, "commit the EK allowlist entries");
}

int sqlite_ek_find(store *base, const char *ek_cert_sha256, const char *ek_pub_sha256, store_ek *ret) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        store_ek e = { 0 };
        int r;

        r = sqlite_read_enter(&s, &g);
        if (r >= 0)
                r = sqlite_stmt(s, ST_EK_FIND,
                                "SELECT " EK_COLS " FROM ek_allowlist WHERE ek_cert_sha256 = ?1 OR ek_pub_sha256 = ?2 "
                                "LIMIT 2", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "tt", store_opt(ek_cert_sha256), store_opt(ek_pub_sha256));
        if (r >= 0)
                r = sqlite_step(s, st, "look up the EK allowlist");
        if (r == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "the EK is not on the EK allowlist");
        if (r >= 0)
                r = ek_from_row(st, &e);
        if (r >= 0 && (r = sqlite_step(s, st, "look up the EK allowlist")) == 1)
                r = hwid_fail(HWID_E_CONFLICT, "the EK certificate and the EK key are listed under two names (%s "
                              "and %s)", e.identity, (const char *) sqlite3_column_text(st, 2));
        if (r < 0) {
                store_ek_clear(&e);
                return r;
        }
        *ret = e;
        return 0;
}

int sqlite_ek_list(store *base, store_ek **ret, size_t *ret_n) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        store_ek *all = NULL, *p;
        size_t n = 0, alloc = 0;
        int r;

        r = sqlite_read_enter(&s, &g);
        if (r >= 0)
                r = sqlite_stmt(s, ST_EK_LIST, "SELECT " EK_COLS " FROM ek_allowlist ORDER BY identity", &st);
        while (r >= 0 && (r = sqlite_step(s, st, "list the EK allowlist")) == 1) {
                if (!(p = sqlite_array_grow(all, &alloc, n, sizeof(*all)))) {
                        r = hwid_fail(HWID_E_NOMEM, NULL);
                        break;
                }
                all = p;
                if ((r = ek_from_row(st, &all[n])) >= 0)
                        n++;
        }
        if (r < 0) {
                store_ek_list_free(all, n);
                return r;
        }
        *ret = all;
        *ret_n = n;
        return 0;
}

int sqlite_ek_remove(store *base, const char *key, const store_audit *audit, int64_t now) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        if (!store_str_ok(key, 128))
                return hwid_fail(HWID_E_INVALID, "no name or EK hash to remove from the EK allowlist");
        r = sqlite_enter(s, true, &g);
        if (r >= 0)
                r = sqlite_stmt(s, ST_EK_REMOVE,
                                "DELETE FROM ek_allowlist WHERE identity = ?1 OR ek_cert_sha256 = lower(?1) "
                                "OR ek_pub_sha256 = lower(?1)", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "t", key);
        if (r >= 0)
                r = sqlite_step(s, st, "remove from the EK allowlist");
        if (r < 0)
                return r;
        if (sqlite3_changes(s->db) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "%s is not on the EK allowlist", key);
        if (audit && (r = sqlite_audit_insert(s, audit, now)) < 0)
                return r;
        return sqlite_commit(s, "commit the EK allowlist removal");
}
