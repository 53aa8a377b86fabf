/* Bootstrap tokens and requests waiting for approval, in PostgreSQL.
 *
 * A token use is taken by one statement, UPDATE ... WHERE uses_left > 0
 * RETURNING, whose row lock makes concurrent replicas queue: an N-use
 * token pays for exactly N enrollments.  A decision is applied by
 * UPDATE ... WHERE status = 'pending': once, whichever replica asks. */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "store-pg.h"
#include "store-rows.h"


/* ---- tokens ---- */

static int token_from_row(PGresult *res, int row, store_token *ret) {
        store_token t = { 0 };
        bool oom = false;

        pg_copy(res, row, 0, t.id, sizeof(t.id));
        (void) pg_blob_copy(res, row, 1, t.secret_hash, sizeof(t.secret_hash));
        /* The schema holds one of the two (its CHECK), 32 bytes long. */
        t.derived = pg_blob_copy(res, row, 10, t.nonce, sizeof(t.nonce));
        t.profile = pg_strdup(res, row, 2, &oom);
        t.name_pattern = pg_strdup(res, row, 3, &oom);
        t.description = pg_strdup(res, row, 4, &oom);
        t.created_at = pg_i64(res, row, 5);
        t.expires_at = pg_i64(res, row, 6);
        t.uses_total = (int) pg_i64(res, row, 7);
        t.uses_left = (int) pg_i64(res, row, 8);
        t.revoked = pg_bool(res, row, 9);
        if (oom) {
                store_token_clear(&t);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *ret = t;
        return 0;
}

int pg_token_query(const char *id, pg_query *q) {
        if (!store_token_id_ok(id))
                return hwid_fail(HWID_E_NOT_FOUND, "no such token (a token id is 6 characters of [a-z0-9])");
        return pg_named(q, PG_STMT_TOKEN, pg_bind(q, "read a token", "SELECT " TOKEN_COLS " FROM tokens WHERE id = $1",
                                                  "t", id));
}

int pg_token_answer(PGresult *res, const char *id, store_token *ret) {
        if (PQntuples(res) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "no token %s", id);
        return token_from_row(res, 0, ret);
}

static int token_read(pg_slot *c, const char *id, store_token *ret) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        pg_query q;
        int r = pg_token_query(id, &q);

        if (r < 0 || (r = pg_run(c, &q, &res)) < 0)
                return r;
        return pg_token_answer(res, id, ret);
}

typedef struct token_batch {
        const store_token *t;
        size_t n;
} token_batch;

static int token_insert_run(pg_slot *c, void *userdata) {
        const token_batch *b = userdata;
        int r = 0;

        for (size_t i = 0; r >= 0 && i < b->n; i++) {
                const store_token *t = &b->t[i];
                /* A derived token keeps its nonce and no hash; a legacy one its hash. */
                r = pg_exec(c, NULL, "insert a token",
                            "INSERT INTO tokens (" TOKEN_COLS ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
                            "tbtttIIiiBb", t->id, t->derived ? NULL : t->secret_hash, sizeof(t->secret_hash),
                            t->profile, t->name_pattern, t->description, t->created_at, t->expires_at,
                            t->uses_total, t->uses_left, (int) t->revoked, t->derived ? t->nonce : NULL,
                            sizeof(t->nonce));
                if (r == -HWID_E_INVALID && strcmp(c->sqlstate, "23505") == 0)
                        r = hwid_fail(HWID_E_EXISTS, "token %s already exists", t->id);
        }
        return r;
}

int pg_token_insert(store *s, const store_token *t, size_t n) {
        int r = store_tokens_check(t, n);

        if (r < 0)
                return r;
        return pg_tx(pg_of(s), token_insert_run, &(token_batch) { .t = t, .n = n }, "commit the new tokens");
}

typedef struct token_q {
        const char *id;
        store_token *one;
        store_token **all;
        size_t *n;
} token_q;

static int token_get_run(pg_slot *c, void *userdata) {
        token_q *q = userdata;

        return token_read(c, q->id, q->one);
}

int pg_token_get(store *s, const char *id, store_token *ret) {
        return pg_read(pg_of(s), token_get_run, &(token_q) { .id = id, .one = ret });
}

static int token_row(PGresult *res, int row, void *ret) {
        return token_from_row(res, row, ret);
}

static void token_list_free(void *all, size_t n) {
        store_token_list_free(all, n);
}

static int token_list_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        token_q *q = userdata;
        int r = pg_exec(c, &res, "list tokens", "SELECT " TOKEN_COLS " FROM tokens ORDER BY created_at, id", NULL);

        return r < 0 ? r : pg_rows(res, sizeof(store_token), token_row, token_list_free, (void **) q->all, q->n);
}

int pg_token_list(store *s, store_token **ret, size_t *ret_n) {
        return pg_read(pg_of(s), token_list_run, &(token_q) { .all = ret, .n = ret_n });
}

static int token_revoke_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        const char *id = userdata;
        int r = pg_exec(c, &res, "revoke a token", "UPDATE tokens SET revoked = true WHERE id = $1", "t", id);

        if (r >= 0 && pg_changes(res) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "no token %s", id);
        return r;
}

int pg_token_revoke(store *s, const char *id) {
        if (!store_token_id_ok(id))
                return hwid_fail(HWID_E_NOT_FOUND, "no such token (a token id is 6 characters of [a-z0-9])");
        return pg_tx(pg_of(s), token_revoke_run, (void *) id, "commit the token revocation");
}

/* Not taken, so not active: whatever made it so, said as at login.
 * t: the token as it was then, NULL if there was none. */
static int refusal(const char *id, const store_token *t, int64_t now) {
        int r;

        if (!t)
                return hwid_fail(HWID_E_TOKEN_INVALID, "bootstrap token is unknown");
        r = store_token_refusal(store_token_state_at(t, now), id);
        return r < 0 ? r : hwid_fail(HWID_E_TOKEN_INVALID, "bootstrap token %s has been used up", id);
}

int pg_token_refusal(const char *id, const char *state, int64_t now) {
        store_token t = { 0 };
        long long expires = 0;
        int revoked = 0;

        if (!state || sscanf(state, "%d %lld %d", &revoked, &expires, &t.uses_left) != 3)
                return refusal(id, NULL, now);
        t.revoked = revoked != 0;
        t.expires_at = (int64_t) expires;
        return refusal(id, &t, now);
}

/* One statement takes the use: of concurrent takers of the last use, the
 * one that waited on the row lock re-reads uses_left = 0 and gets nothing. */
int pg_token_consume(pg_slot *c, const char *id, int64_t now) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        _cleanup_(store_token_clear) store_token t = { 0 };
        int r;

        if (!store_token_id_ok(id))
                return refusal(id, NULL, now);
        r = pg_exec(c, &res, "consume a token use",
                    "UPDATE tokens SET uses_left = uses_left - 1 "
                    "WHERE id = $1 AND NOT revoked AND expires_at > $2 AND uses_left > 0 RETURNING id",
                    "tI", id, now);
        if (r < 0 || PQntuples(res) == 1)
                return r < 0 ? r : 0;
        r = token_read(c, id, &t);
        if (r == -HWID_E_NOT_FOUND)
                return refusal(id, NULL, now);
        return r < 0 ? r : refusal(id, &t, now);
}

/* ---- requests ---- */

static int request_from_row(PGresult *res, int row, store_request *ret) {
        store_request q = { 0 };
        bool oom = false;

        pg_copy(res, row, 0, q.id, sizeof(q.id));
        q.identity = pg_strdup(res, row, 1, &oom);
        q.profile = pg_strdup(res, row, 2, &oom);
        pg_copy(res, row, 3, q.token_id, sizeof(q.token_id));
        pg_copy(res, row, 4, q.spki_sha256, sizeof(q.spki_sha256));
        q.csr_der = pg_blobdup(res, row, 5, &q.csr_der_len, &oom);
        q.status = store_request_status_parse(pg_val(res, row, 6));
        q.reason = pg_strdup(res, row, 7, &oom);
        q.serial = pg_strdup(res, row, 8, &oom);
        q.created_at = pg_i64(res, row, 9);
        q.updated_at = pg_i64(res, row, 10);
        pg_copy(res, row, 11, q.attestation.ek_cert_sha256, sizeof(q.attestation.ek_cert_sha256));
        pg_copy(res, row, 12, q.attestation.ek_pub_sha256, sizeof(q.attestation.ek_pub_sha256));
        pg_copy(res, row, 13, q.attestation.ak_name, sizeof(q.attestation.ak_name));
        if (oom) {
                store_request_clear(&q);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *ret = q;
        return 0;
}

static int request_read(pg_slot *c, const char *id, store_request *ret) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r;

        if (!store_request_id_ok(id))
                return hwid_fail(HWID_E_NOT_FOUND, "no such request");
        r = pg_exec(c, &res, "read a request", "SELECT " REQUEST_COLS " FROM requests WHERE id = $1", "t", id);
        if (r < 0)
                return r;
        if (PQntuples(res) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "no request " REQUEST_ID_FMT, id);
        return request_from_row(res, 0, ret);
}

typedef struct request_q {
        const store_request *in;
        const char *id;
        const char *token_id, *spki_sha256;
        bool approve, pending_only;
        const char *reason;
        int64_t now;
        store_request *one;
        store_request **all;
        size_t *n;
} request_q;

static int request_create_run(pg_slot *c, void *userdata) {
        request_q *rq = userdata;
        const store_request *q = rq->in;
        int r = pg_token_consume(c, q->token_id, rq->now);

        if (r >= 0)
                r = pg_exec(c, NULL, "insert a request",
                            "INSERT INTO requests (" REQUEST_COLS ") "
                            "VALUES ($1, $2, $3, $4, $5, $6, 'pending', NULL, NULL, $7, $7, $8, $9, $10)",
                            "tttttbIttt", q->id, q->identity, q->profile, q->token_id, q->spki_sha256, q->csr_der,
                            q->csr_der_len, rq->now, store_opt(q->attestation.ek_cert_sha256),
                            store_opt(q->attestation.ek_pub_sha256), store_opt(q->attestation.ak_name));
        if (r == -HWID_E_INVALID && strcmp(c->sqlstate, "23505") == 0)
                return hwid_fail(HWID_E_EXISTS, "request " REQUEST_ID_FMT " already exists", q->id);
        return r;
}

int pg_request_create(store *s, const store_request *q, int64_t now) {
        if (!q || !store_request_id_ok(q->id) || !store_str_ok(q->identity, 1024) || !store_str_ok(q->profile, 256) ||
            strnlen(q->spki_sha256, sizeof(q->spki_sha256)) != 64 || !q->csr_der || q->csr_der_len == 0 ||
            !store_attestation_ok(&q->attestation))
                return hwid_fail(HWID_E_INVALID, "request to store lacks an id, identity, profile, key hash or CSR, "
                                 "or has a malformed attestation record");
        return pg_tx(pg_of(s), request_create_run, &(request_q) { .in = q, .now = now }, "commit the new request");
}

static int request_get_run(pg_slot *c, void *userdata) {
        request_q *q = userdata;

        return request_read(c, q->id, q->one);
}

int pg_request_get(store *s, const char *id, store_request *ret) {
        return pg_read(pg_of(s), request_get_run, &(request_q) { .id = id, .one = ret });
}

/* The newest request of a token for a key (EST asking again, RFC 7030 §4.2.3). */
static int request_find_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        request_q *q = userdata;
        int r = pg_exec(c, &res, "find a request",
                        "SELECT " REQUEST_COLS " FROM requests WHERE token_id = $1 AND spki_sha256 = $2 "
                        "ORDER BY created_at DESC, id DESC LIMIT 1",
                        "tt", q->token_id, q->spki_sha256);

        if (r < 0)
                return r;
        if (PQntuples(res) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "no request for this token and key");
        return request_from_row(res, 0, q->one);
}

int pg_request_find(store *s, const char *token_id, const char *spki_sha256, store_request *ret) {
        if (!store_str_ok(token_id, 6) || strnlen(spki_sha256, 65) != 64)
                return hwid_fail(HWID_E_NOT_FOUND, "no request for this token and key");
        return pg_read(pg_of(s), request_find_run,
                       &(request_q) { .token_id = token_id, .spki_sha256 = spki_sha256, .one = ret });
}

static int request_row(PGresult *res, int row, void *ret) {
        return request_from_row(res, row, ret);
}

static void request_list_free(void *all, size_t n) {
        store_request_list_free(all, n);
}

static int request_list_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        request_q *q = userdata;
        int r = pg_exec(c, &res, "list requests",
                        q->pending_only ? "SELECT " REQUEST_COLS " FROM requests WHERE status = 'pending' "
                                          "ORDER BY created_at, id"
                                        : "SELECT " REQUEST_COLS " FROM requests ORDER BY created_at, id",
                        NULL);

        return r < 0 ? r : pg_rows(res, sizeof(store_request), request_row, request_list_free, (void **) q->all,
                                   q->n);
}

int pg_request_list(store *s, bool pending_only, store_request **ret, size_t *ret_n) {
        return pg_read(pg_of(s), request_list_run,
                       &(request_q) { .pending_only = pending_only, .all = ret, .n = ret_n });
}

/* Why a request could not move on: unknown, or already past `want`. */
static int request_not(pg_slot *c, const char *id, store_request_status want) {
        _cleanup_(store_request_clear) store_request q = { 0 };
        int r = request_read(c, id, &q);

        if (r < 0)
                return r;
        return hwid_fail(HWID_E_CONFLICT, "request " REQUEST_ID_FMT " is %s, not %s", id,
                         store_request_status_name(q.status), store_request_status_name(want));
}

static int request_decide_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        request_q *q = userdata;
        int r = pg_exec(c, &res, "decide a request",
                        "UPDATE requests SET status = $2, reason = $3, updated_at = $4 "
                        "WHERE id = $1 AND status = 'pending'",
                        "tttI", q->id, q->approve ? "approved" : "denied", q->approve ? NULL : q->reason, q->now);

        if (r >= 0 && pg_changes(res) == 0)
                return request_not(c, q->id, REQUEST_PENDING);
        return r;
}

int pg_request_decide(store *s, const char *id, bool approve, const char *reason, int64_t now) {
        if (!store_request_id_ok(id))
                return hwid_fail(HWID_E_NOT_FOUND, "no such request");
        return pg_tx(pg_of(s), request_decide_run,
                     &(request_q) { .id = id, .approve = approve, .reason = reason, .now = now },
                     "commit the decision");
}
