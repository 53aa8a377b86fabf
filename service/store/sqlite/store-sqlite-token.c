/* Bootstrap tokens and requests waiting for approval (the audit trail:
 * store-sqlite-audit.c).
 *
 * A token use is consumed in the same transaction as what it pays for
 * (a request here, a certificate in store-sqlite-cert.c): a failure
 * leaves the use with the holder, a success cannot be replayed. */
#include <string.h>
#include <time.h>

#include "error.h"
#include "store-sqlite.h"


/* ---- tokens ---- */

static int token_from_row(sqlite3_stmt *st, store_token *ret) {
        store_token t = { 0 };
        const void *hash = sqlite3_column_blob(st, 1), *nonce = sqlite3_column_blob(st, 10);
        bool oom = false;

        sqlite_col_copy(st, 0, t.id, sizeof(t.id));
        if (hash && sqlite3_column_bytes(st, 1) == (int) sizeof(t.secret_hash))
                memcpy(t.secret_hash, hash, sizeof(t.secret_hash));
        /* The schema holds one of the two (its CHECK), 32 bytes long. */
        t.derived = nonce && sqlite3_column_bytes(st, 10) == (int) sizeof(t.nonce);
        if (t.derived)
                memcpy(t.nonce, nonce, sizeof(t.nonce));
        t.profile = sqlite_col_strdup(st, 2, &oom);
        t.name_pattern = sqlite_col_strdup(st, 3, &oom);
        t.description = sqlite_col_strdup(st, 4, &oom);
        t.created_at = sqlite3_column_int64(st, 5);
        t.expires_at = sqlite3_column_int64(st, 6);
        t.uses_total = sqlite3_column_int(st, 7);
        t.uses_left = sqlite3_column_int(st, 8);
        t.revoked = sqlite3_column_int(st, 9) != 0;
        if (oom) {
                store_token_clear(&t);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *ret = t;
        return 0;
}

/* With the lock held. */
static int token_read(sqlite_store *s, const char *id, store_token *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        if (!store_token_id_ok(id))
                return hwid_fail(HWID_E_NOT_FOUND, "no such token (a token id is 6 characters of [a-z0-9])");
        r = sqlite_stmt(s, ST_TOKEN_GET, "SELECT " TOKEN_COLS " FROM tokens WHERE id = ?1", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "t", id);
        if (r >= 0)
                r = sqlite_step(s, st, "read a token");
        if (r == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "no token %s", id);
        if (r < 0)
                return r;
        return token_from_row(st, ret);
}

static int token_insert_one(sqlite_store *s, sqlite3_stmt *st, const store_token *t) {
        int r;

        sqlite3_reset(st);
        r = sqlite_bind(s, st, "tbtttIIiiib", t->id, t->secret_hash, sizeof(t->secret_hash), t->profile,
                        t->name_pattern, t->description, t->created_at, t->expires_at, t->uses_total, t->uses_left,
                        (int) t->revoked, t->nonce, sizeof(t->nonce));
        /* A derived token keeps its nonce and no hash; a legacy one its hash. */
        if (r >= 0 && sqlite3_bind_null(st, t->derived ? 2 : 11) != SQLITE_OK)
                r = sqlite_sql_fail(s, "insert a token");
        if (r >= 0)
                r = sqlite_step(s, st, "insert a token");
        if (r == -HWID_E_INVALID && sqlite_last_code(s) == SQLITE_CONSTRAINT_PRIMARYKEY)
                return hwid_fail(HWID_E_EXISTS, "token %s already exists", t->id);
        return r;
}

int sqlite_token_insert(store *base, const store_token *t, size_t n) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        if ((r = store_tokens_check(t, n)) < 0)
                return r;
        r = sqlite_enter(s, true, &g);
        if (r >= 0)
                r = sqlite_stmt(s, ST_TOKEN_INSERT,
                                "INSERT INTO tokens (" TOKEN_COLS ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
                                &st);
        for (size_t i = 0; r >= 0 && i < n; i++)
                r = token_insert_one(s, st, &t[i]);
        if (r < 0)
                return r; /* sqlite_leavep() rolls all of them back */
        return sqlite_commit(s, "commit the new tokens");
}

int sqlite_token_get(store *base, const char *id, store_token *ret) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        int r = sqlite_read_enter(&s, &g);

        if (r < 0)
                return r;
        return token_read(s, id, ret);
}

int sqlite_token_list(store *base, store_token **ret, size_t *ret_n) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        store_token *all = NULL, *p;
        size_t n = 0, alloc = 0;
        int r;

        r = sqlite_read_enter(&s, &g);
        if (r >= 0)
                r = sqlite_stmt(s, ST_TOKEN_LIST, "SELECT " TOKEN_COLS " FROM tokens ORDER BY created_at, id", &st);
        while (r >= 0 && (r = sqlite_step(s, st, "list tokens")) == 1) {
                p = sqlite_array_grow(all, &alloc, n, sizeof(*all));
                if (!p) {
                        r = hwid_fail(HWID_E_NOMEM, NULL);
                        break;
                }
                all = p;
                r = token_from_row(st, &all[n]);
                if (r >= 0)
                        n++;
        }
        if (r < 0) {
                store_token_list_free(all, n);
                return r;
        }
        *ret = all;
        *ret_n = n;
        return 0;
}

/* Idempotent: revoking a revoked token is what the admin wanted anyway. */
int sqlite_token_revoke(store *base, const char *id) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        if (!store_token_id_ok(id))
                return hwid_fail(HWID_E_NOT_FOUND, "no such token (a token id is 6 characters of [a-z0-9])");
        r = sqlite_enter(s, true, &g);
        if (r >= 0)
                r = sqlite_stmt(s, ST_TOKEN_REVOKE, "UPDATE tokens SET revoked = 1 WHERE id = ?1", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "t", id);
        if (r >= 0)
                r = sqlite_step(s, st, "revoke a token");
        if (r < 0)
                return r;
        if (sqlite3_changes(s->db) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "no token %s", id);
        return sqlite_commit(s, "commit the token revocation");
}

int sqlite_token_consume(sqlite_store *s, const char *id, int64_t now) {
        _cleanup_(store_token_clear) store_token t = { 0 };
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = token_read(s, id, &t);

        if (r == -HWID_E_NOT_FOUND)
                return hwid_fail(HWID_E_TOKEN_INVALID, "bootstrap token is unknown");
        if (r < 0)
                return r;
        if ((r = store_token_refusal(store_token_state_at(&t, now), id)) < 0)
                return r;
        r = sqlite_stmt(s, ST_TOKEN_CONSUME, "UPDATE tokens SET uses_left = uses_left - 1 WHERE id = ?1", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "t", id);
        if (r >= 0)
                r = sqlite_step(s, st, "consume a token use");
        return r < 0 ? r : 0;
}

/* ---- requests ---- */

static int request_from_row(sqlite3_stmt *st, store_request *ret) {
        store_request q = { 0 };
        bool oom = false;

        sqlite_col_copy(st, 0, q.id, sizeof(q.id));
        q.identity = sqlite_col_strdup(st, 1, &oom);
        q.profile = sqlite_col_strdup(st, 2, &oom);
        sqlite_col_copy(st, 3, q.token_id, sizeof(q.token_id));
        sqlite_col_copy(st, 4, q.spki_sha256, sizeof(q.spki_sha256));
        q.csr_der = sqlite_col_blobdup(st, 5, &q.csr_der_len, &oom);
        q.status = store_request_status_parse((const char *) sqlite3_column_text(st, 6));
        q.reason = sqlite_col_strdup(st, 7, &oom);
        q.serial = sqlite_col_strdup(st, 8, &oom);
        q.created_at = sqlite3_column_int64(st, 9);
        q.updated_at = sqlite3_column_int64(st, 10);
        sqlite_col_attestation(st, 11, &q.attestation);
        if (oom) {
                store_request_clear(&q);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *ret = q;
        return 0;
}

/* With the lock held. */
static int request_read(sqlite_store *s, const char *id, store_request *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        if (!store_request_id_ok(id))
                return hwid_fail(HWID_E_NOT_FOUND, "no such request");
        r = sqlite_stmt(s, ST_REQ_GET, "SELECT " REQUEST_COLS " FROM requests WHERE id = ?1", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "t", id);
        if (r >= 0)
                r = sqlite_step(s, st, "read a request");
        if (r == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "no request " REQUEST_ID_FMT, id);
        if (r < 0)
                return r;
        return request_from_row(st, ret);
}

int sqlite_request_create(store *base, const store_request *q, int64_t now) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        if (!q || !store_request_id_ok(q->id) || !store_str_ok(q->identity, 1024) || !store_str_ok(q->profile, 256) ||
            strnlen(q->spki_sha256, sizeof(q->spki_sha256)) != 64 || !q->csr_der || q->csr_der_len == 0 ||
            !store_attestation_ok(&q->attestation))
                return hwid_fail(HWID_E_INVALID, "request to store lacks an id, identity, profile, key hash or CSR, "
                                 "or has a malformed attestation record");
        r = sqlite_enter(s, true, &g);
        if (r >= 0)
                r = sqlite_token_consume(s, q->token_id, now);
        if (r >= 0)
                r = sqlite_stmt(s, ST_REQ_INSERT,
                                "INSERT INTO requests (" REQUEST_COLS ") "
                                "VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'pending', NULL, NULL, ?7, ?7, ?8, ?9, ?10)", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "tttttbIttt", q->id, q->identity, q->profile, q->token_id, q->spki_sha256,
                                q->csr_der, q->csr_der_len, now, store_opt(q->attestation.ek_cert_sha256),
                                store_opt(q->attestation.ek_pub_sha256), store_opt(q->attestation.ak_name));
        if (r >= 0)
                r = sqlite_step(s, st, "insert a request");
        if (r == -HWID_E_INVALID && sqlite_last_code(s) == SQLITE_CONSTRAINT_PRIMARYKEY)
                return hwid_fail(HWID_E_EXISTS, "request " REQUEST_ID_FMT " already exists", q->id);
        if (r < 0)
                return r;
        return sqlite_commit(s, "commit the new request");
}

int sqlite_request_get(store *base, const char *id, store_request *ret) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        int r = sqlite_read_enter(&s, &g);

        if (r < 0)
                return r;
        return request_read(s, id, ret);
}

int sqlite_request_find(store *base, const char *token_id, const char *spki_sha256, store_request *ret) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sqlite_read_enter(&s, &g);

        if (r >= 0)
                r = sqlite_stmt(s, ST_REQ_FIND,
                                "SELECT " REQUEST_COLS " FROM requests WHERE token_id = ?1 AND spki_sha256 = ?2 "
                                "ORDER BY created_at DESC, rowid DESC LIMIT 1",
                                &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "tt", token_id, spki_sha256);
        if (r >= 0)
                r = sqlite_step(s, st, "find a request");
        if (r == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "no request for this token and key");
        if (r < 0)
                return r;
        return request_from_row(st, ret);
}

int sqlite_request_list(store *base, bool pending_only, store_request **ret, size_t *ret_n) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        store_request *all = NULL, *p;
        size_t n = 0, alloc = 0;
        int r;

        r = sqlite_read_enter(&s, &g);
        if (r >= 0 && pending_only)
                r = sqlite_stmt(s, ST_REQ_LIST_PENDING,
                                "SELECT " REQUEST_COLS " FROM requests WHERE status = 'pending' "
                                "ORDER BY created_at, id",
                                &st);
        else if (r >= 0)
                r = sqlite_stmt(s, ST_REQ_LIST, "SELECT " REQUEST_COLS " FROM requests ORDER BY created_at, id", &st);
        while (r >= 0 && (r = sqlite_step(s, st, "list requests")) == 1) {
                p = sqlite_array_grow(all, &alloc, n, sizeof(*all));
                if (!p) {
                        r = hwid_fail(HWID_E_NOMEM, NULL);
                        break;
                }
                all = p;
                r = request_from_row(st, &all[n]);
                if (r >= 0)
                        n++;
        }
        if (r < 0) {
                store_request_list_free(all, n);
                return r;
        }
        *ret = all;
        *ret_n = n;
        return 0;
}

/* Why a request could not move on: unknown, or already past `want`. */
static int request_not(sqlite_store *s, const char *id, store_request_status want) {
        _cleanup_(store_request_clear) store_request q = { 0 };
        int r = request_read(s, id, &q);

        if (r < 0)
                return r;
        return hwid_fail(HWID_E_CONFLICT, "request " REQUEST_ID_FMT " is %s, not %s", id,
                         store_request_status_name(q.status), store_request_status_name(want));
}

int sqlite_request_decide(store *base, const char *id, bool approve, const char *reason, int64_t now) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        if (!store_request_id_ok(id))
                return hwid_fail(HWID_E_NOT_FOUND, "no such request");
        r = sqlite_enter(s, true, &g);
        if (r >= 0)
                r = sqlite_stmt(s, ST_REQ_DECIDE,
                                "UPDATE requests SET status = ?2, reason = ?3, updated_at = ?4 "
                                "WHERE id = ?1 AND status = 'pending'", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "tttI", id, approve ? "approved" : "denied",
                                approve ? (const char *) NULL : reason, now);
        if (r >= 0)
                r = sqlite_step(s, st, "decide a request");
        if (r < 0)
                return r;
        if (sqlite3_changes(s->db) == 0)
                return request_not(s, id, REQUEST_PENDING);
        return sqlite_commit(s, "commit the decision");
}

int sqlite_request_mark_issued(sqlite_store *s, const char *id, const char *identity, const char *serial,
                               int64_t now) {
        _cleanup_(store_request_clear) store_request q = { 0 };
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = request_read(s, id, &q);

        if (r < 0)
                return r;
        if (q.status != REQUEST_APPROVED)
                return request_not(s, id, REQUEST_APPROVED);
        if (sqlite3_stricmp(q.identity, identity) != 0) /* identities ignore ASCII case */
                return hwid_fail(HWID_E_FORBIDDEN, "request " REQUEST_ID_FMT " is for %s, not %s", id, q.identity,
                                 identity);
        r = sqlite_stmt(s, ST_REQ_ISSUE,
                        "UPDATE requests SET status = 'issued', serial = ?2, updated_at = ?3 WHERE id = ?1", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "ttI", id, serial, now);
        if (r >= 0)
                r = sqlite_step(s, st, "mark a request issued");
        return r < 0 ? r : 0;
}
