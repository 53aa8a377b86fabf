/* Revocation in PostgreSQL: one serial, every unexpired certificate of an
 * identity, the keys of certificates revoked for keyCompromise, and what
 * the CRL is built from.  The revocation sequence (meta.revocation_seq)
 * moves in the revocation's own transaction -- in the pipeline that
 * commits it, so that its row is held for no round trip -- and every
 * replica regenerates its CRL once it sees the new value (service/crl.c). */
#include <string.h>

#include "error.h"
#include "store-pg.h"
#include "store-rows.h"

#define CRL_KEY_COMPROMISE 1

static bool crl_reason_ok(int reason) {
        return reason >= 0 && reason <= 10 && reason != 7;
}

/* The keys of the certificates revoked for keyCompromise (serial, or
 * identity's) are blocked, and every unexpired certificate of them
 * revoked.  Each key's lock is taken exclusive first (in one order, so
 * that two revocations do not deadlock): an issuance of the key that
 * committed before is then seen by the revoking UPDATE, one that comes
 * after sees the block (hwid_issue_one() holds the lock shared). */
int pg_keys_block(pg_slot *c, const char *serial, const char *identity, int64_t now) {
        static const char *const scope = "FROM certificates WHERE status = 'revoked' AND revocation_reason = 1 "
                                         "AND (serial = $1 OR hwid_fold(identity) = hwid_fold($2))";
        char sql[512];
        int r;

        snprintf(sql, sizeof(sql),
                 "SELECT pg_advisory_xact_lock(" PG_KEY_LOCK_CLASS ", hwid_key_lock_id(k)) "
                 "FROM (SELECT DISTINCT hwid_key_lock_id(spki_sha256) AS id, spki_sha256 AS k %s) AS keys "
                 "ORDER BY id", scope);
        if ((r = pg_exec(c, NULL, "lock a compromised key", sql, "tt", serial, identity)) < 0)
                return r;
        snprintf(sql, sizeof(sql),
                 "INSERT INTO blocked_keys (spki_sha256, serial, blocked_at) "
                 "SELECT DISTINCT ON (spki_sha256) spki_sha256, serial, $3 %s ON CONFLICT DO NOTHING", scope);
        if ((r = pg_exec(c, NULL, "block a compromised key", sql, "ttI", serial, identity, now)) < 0)
                return r;
        return pg_exec(c, NULL, "revoke the certificates of a compromised key",
                       "UPDATE certificates SET status = 'revoked', revoked_at = $1, revocation_reason = 1 "
                       "WHERE status <> 'revoked' AND not_after > $1 "
                       "AND spki_sha256 IN (SELECT spki_sha256 FROM blocked_keys)", "I", now);
}

int pg_key_query(const char *spki_sha256, pg_query *q) {
        return pg_named(q, PG_STMT_KEY,
                        pg_bind(q, "look up blocked keys", "SELECT serial FROM blocked_keys WHERE spki_sha256 = $1",
                                "t", spki_sha256 ? spki_sha256 : ""));
}

int pg_key_answer(PGresult *res, const char *spki_sha256) {
        if (PQntuples(res) == 0)
                return 0;
        return hwid_fail(HWID_E_KEY_BLOCKED,
                         "this key (SPKI SHA-256 %s) was revoked as compromised with certificate %s and is never "
                         "certified again: make a new key", spki_sha256, pg_val(res, 0, 0));
}

static int key_blocked_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        const char *spki = userdata;
        pg_query q;
        int r = pg_key_query(spki, &q);

        if (r < 0 || (r = pg_run(c, &q, &res)) < 0)
                return r;
        return pg_key_answer(res, spki);
}

int pg_key_blocked(store *s, const char *spki_sha256) {
        return pg_read(pg_of(s), key_blocked_run, (void *) spki_sha256);
}

typedef struct revoke_q {
        const char *key;
        int reason;
        int64_t now;
        const store_audit *audit;
        size_t n;
} revoke_q;

static int revoke_run(pg_slot *c, void *userdata) {
        _cleanup_(store_cert_clear) store_cert x = { 0 };
        revoke_q *q = userdata;
        int r = pg_cert_read_serial(c, q->key, true, &x);

        if (r >= 0 && x.status == CERT_REVOKED)
                return hwid_fail(HWID_E_CONFLICT, "certificate %s is already revoked", q->key);
        if (r >= 0)
                r = pg_exec(c, NULL, "revoke a certificate",
                            "UPDATE certificates SET status = 'revoked', revoked_at = $2, revocation_reason = $3 "
                            "WHERE serial = $1", "tIi", q->key, q->now, q->reason);
        if (r >= 0 && q->reason == CRL_KEY_COMPROMISE)
                r = pg_keys_block(c, q->key, NULL, q->now);
        c->bump_revocations = true;
        if (r >= 0 && q->audit)
                r = pg_audit_insert(c, q->audit, q->now);
        return r;
}

int pg_cert_revoke(store *s, const char *serial, int reason, int64_t now, const store_audit *audit) {
        if (!crl_reason_ok(reason))
                return hwid_fail(HWID_E_INVALID, "%d is not an RFC 5280 revocation reason", reason);
        return pg_tx(pg_of(s), revoke_run, &(revoke_q) { .key = serial, .reason = reason, .now = now, .audit = audit },
                     "commit the revocation");
}

static int revoke_identity_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        revoke_q *q = userdata;
        int r = pg_exec(c, &res, "revoke an identity's certificates",
                        "UPDATE certificates SET status = 'revoked', revoked_at = $2, revocation_reason = $3 "
                        "WHERE hwid_fold(identity) = hwid_fold($1) AND status <> 'revoked' AND not_after > $2",
                        "tIi", q->key, q->now, q->reason);

        if (r >= 0 && (q->n = (size_t) pg_changes(res)) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "%s has no unexpired certificate that is not already revoked",
                                 q->key);
        if (r >= 0 && q->reason == CRL_KEY_COMPROMISE)
                r = pg_keys_block(c, NULL, q->key, q->now);
        c->bump_revocations = true;
        if (r >= 0 && q->audit)
                r = pg_audit_insert(c, q->audit, q->now);
        return r;
}

int pg_cert_revoke_identity(store *s, const char *identity, int reason, int64_t now,
                            const store_audit *audit, size_t *ret_n) {
        revoke_q q = { .key = identity, .reason = reason, .now = now, .audit = audit };
        int r;

        if (!store_str_ok(identity, 1024))
                return hwid_fail(HWID_E_INVALID, "no identity given");
        if (!crl_reason_ok(reason))
                return hwid_fail(HWID_E_INVALID, "%d is not an RFC 5280 revocation reason", reason);
        if ((r = pg_tx(pg_of(s), revoke_identity_run, &q, "commit the revocation")) < 0)
                return r;
        *ret_n = q.n;
        return 0;
}

typedef struct revoked_q {
        int generation;
        int64_t now;
        store_revoked_fn fn;
        void *userdata;
        int64_t *seq;
} revoked_q;

static int revoked_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        revoked_q *q = userdata;
        int r = q->generation > 0
                        ? pg_exec(c, &res, "read revoked certificates",
                                  "SELECT serial, revoked_at, revocation_reason FROM certificates "
                                  "WHERE generation = $2 AND status = 'revoked' AND not_after > $1 ORDER BY serial",
                                  "Ii", q->now, q->generation)
                        : pg_exec(c, &res, "read revoked certificates",
                                  "SELECT serial, revoked_at, revocation_reason FROM certificates "
                                  "WHERE status = 'revoked' AND not_after > $1 ORDER BY serial", "I", q->now);

        for (int i = 0; r >= 0 && i < PQntuples(res); i++)
                if ((r = q->fn(pg_val(res, i, 0), pg_i64(res, i, 1), (int) pg_i64(res, i, 2), q->userdata)) != 0)
                        return r;
        return r;
}

int pg_cert_foreach_revoked(store *s, int generation, int64_t now, store_revoked_fn fn, void *userdata) {
        return pg_read(pg_of(s), revoked_run,
                       &(revoked_q) { .generation = generation, .now = now, .fn = fn, .userdata = userdata });
}

static int seq_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        revoked_q *q = userdata;
        int r = pg_exec(c, &res, "read the revocation sequence",
                        "SELECT value FROM meta WHERE key = 'revocation_seq'", NULL);

        if (r >= 0 && PQntuples(res) != 1)
                return hwid_fail(HWID_E_STORE, "PostgreSQL %s has no revocation sequence", c->p->label);
        if (r >= 0)
                *q->seq = pg_i64(res, 0, 0);
        return r;
}

int pg_revocation_seq(store *s, int64_t *ret) {
        return pg_read(pg_of(s), seq_run, &(revoked_q) { .seq = ret });
}

/* One statement: the row lock of the upsert orders replicas, so numbers
 * never repeat. */
int pg_crl_number_next(store *s, int64_t now, int64_t *ret) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        _cleanup_(pg_leavep) pg_slot *c = NULL;
        pg_query q;
        int r = pg_bind(&q, "take a CRL number",
                        "INSERT INTO meta (key, value) VALUES ('crl_number', $1) "
                        "ON CONFLICT (key) DO UPDATE SET value = greatest(meta.value + 1, excluded.value) RETURNING value",
                        "I", now);

        if (r < 0 || (r = pg_statement(pg_of(s), &q, &c, &res)) < 0)
                return r;
        *ret = pg_i64(res, 0, 0);
        return 0;
}
