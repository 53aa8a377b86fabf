/* Certificates: commit (with everything that pays for or follows from
 * an issuance, in one transaction), lookups, revocation and the CRL walk.
 *
 * "Live" means status 'valid' and now < not_after, the same reading of
 * expiry as tokens (expired once now >= expires_at) and hwidd's peer
 * check.  The partial unique index certificates_one_live allows one
 * 'valid' row per identity; a commit first retires the identity's
 * 'valid' rows that have expired, so an expired certificate never
 * blocks a new one, and a live one always does. */
#include <string.h>

#include "error.h"
#include "store-sqlite.h"


static int cert_from_row(sqlite3_stmt *st, store_cert *ret) {
        store_cert c = { 0 };
        bool oom = false;

        c.serial = sqlite_col_strdup(st, 0, &oom);
        c.identity = sqlite_col_strdup(st, 1, &oom);
        c.subject = sqlite_col_strdup(st, 2, &oom);
        c.profile = sqlite_col_strdup(st, 3, &oom);
        sqlite_col_copy(st, 4, c.spki_sha256, sizeof(c.spki_sha256));
        c.der = sqlite_col_blobdup(st, 5, &c.der_len, &oom);
        c.not_before = sqlite3_column_int64(st, 6);
        c.not_after = sqlite3_column_int64(st, 7);
        c.status = store_cert_status_parse((const char *) sqlite3_column_text(st, 8));
        c.revoked_at = sqlite3_column_int64(st, 9);
        c.revocation_reason = sqlite3_column_int(st, 10);
        c.request_id = sqlite_col_strdup(st, 11, &oom);
        c.created_at = sqlite3_column_int64(st, 12);
        sqlite_col_copy(st, 13, c.role, sizeof(c.role));
        sqlite_col_copy(st, 14, c.token_id, sizeof(c.token_id));
        c.scope = sqlite_col_strdup(st, 15, &oom);
        sqlite_col_attestation(st, 16, &c.attestation);
        c.generation = sqlite3_column_int(st, 19);
        if (oom) {
                store_cert_clear(&c);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *ret = c;
        return 0;
}

/* Steps st (bound by the caller) for one row of CERT_COLS. */
static int cert_row(sqlite_store *s, sqlite3_stmt *st, store_cert *ret) {
        int r = sqlite_step(s, st, "read a certificate");

        if (r == 0)
                return -HWID_E_NOT_FOUND; /* the caller says what was not found */
        if (r < 0)
                return r;
        return cert_from_row(st, ret);
}

static int cert_read_serial(sqlite_store *s, const char *serial, store_cert *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        if (!store_serial_ok(serial))
                return hwid_fail(HWID_E_NOT_FOUND, "no such certificate (a serial is upper-case hex)");
        r = sqlite_stmt(s, ST_CERT_GET, "SELECT " CERT_COLS " FROM certificates WHERE serial = ?1", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "t", serial);
        if (r >= 0)
                r = cert_row(s, st, ret);
        if (r == -HWID_E_NOT_FOUND)
                return hwid_fail(HWID_E_NOT_FOUND, "no certificate with serial %s", serial);
        return r;
}

/* ---- commit ---- */

/* Renewal: the certificate renewed must still be the identity's live one. */
static int supersede(sqlite_store *s, const char *serial, const char *identity, int64_t now) {
        _cleanup_(store_cert_clear) store_cert old = { 0 };
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = cert_read_serial(s, serial, &old);

        if (r < 0)
                return r;
        if (sqlite3_stricmp(old.identity, identity) != 0) /* as the column compares */
                return hwid_fail(HWID_E_FORBIDDEN, "certificate %s belongs to %s, not %s", serial, old.identity,
                                 identity);
        if (old.status == CERT_REVOKED)
                return hwid_fail(HWID_E_REVOKED, "certificate %s is revoked and cannot be renewed", serial);
        if (old.status == CERT_SUPERSEDED)
                return hwid_fail(HWID_E_CONFLICT, "certificate %s has already been renewed", serial);
        if (now >= old.not_after)
                return hwid_fail(HWID_E_EXPIRED, "certificate %s has expired and cannot be renewed", serial);
        r = sqlite_stmt(s, ST_CERT_SUPERSEDE,
                        "UPDATE certificates SET status = 'superseded' WHERE serial = ?1 AND status = 'valid'", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "t", serial);
        if (r >= 0)
                r = sqlite_step(s, st, "supersede a certificate");
        return r < 0 ? r : 0;
}

/* Retires the identity's 'valid' rows that expired (or all of them, when
 * policy lets a new enrollment replace the live one). */
static int retire(sqlite_store *s, const char *identity, int64_t now, bool replace_live) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        if (replace_live)
                r = sqlite_stmt(s, ST_CERT_RETIRE_LIVE,
                                "UPDATE certificates SET status = 'superseded' "
                                "WHERE identity = ?1 AND status = 'valid'", &st);
        else
                r = sqlite_stmt(s, ST_CERT_RETIRE_EXPIRED,
                                "UPDATE certificates SET status = 'superseded' "
                                "WHERE identity = ?1 AND status = 'valid' AND not_after <= ?2", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, replace_live ? "t" : "tI", identity, now);
        if (r >= 0)
                r = sqlite_step(s, st, "retire old certificates");
        return r < 0 ? r : 0;
}

static int cert_insert(sqlite_store *s, const store_cert *c, const char *request_id, const char *token_id,
                       int64_t now) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sqlite_stmt(s, ST_CERT_INSERT,
                            "INSERT INTO certificates (" CERT_COLS ") "
                            "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, 'valid', 0, 0, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)",
                            &st);

        if (r >= 0)
                r = sqlite_bind(s, st, "tttttbIItItttttti", c->serial, c->identity, c->subject, c->profile,
                                c->spki_sha256, c->der, c->der_len, c->not_before, c->not_after, request_id, now,
                                c->role[0] ? c->role : "node", token_id, c->scope,
                                store_opt(c->attestation.ek_cert_sha256), store_opt(c->attestation.ek_pub_sha256),
                                store_opt(c->attestation.ak_name), c->generation > 0 ? c->generation : 1);
        if (r >= 0)
                r = sqlite_step(s, st, "insert a certificate");
        /* Never an overwrite: a serial is issued once. */
        if (r == -HWID_E_INVALID && sqlite_last_code(s) == SQLITE_CONSTRAINT_PRIMARYKEY)
                return hwid_fail(HWID_E_EXISTS, "a certificate with serial %s is already stored", c->serial);
        if (r == -HWID_E_INVALID && sqlite_last_code(s) == SQLITE_CONSTRAINT_UNIQUE)
                return hwid_fail(HWID_E_CONFLICT, "%s already has a live certificate (identities ignore case); "
                                 "revoke it first", c->identity);
        return r < 0 ? r : 0;
}

typedef struct cert_commit {
        const store_issue *in;
        int64_t now;
} cert_commit;

/* Everything an issuance changes; its savepoint undoes all of it on failure. */
static int cert_commit_run(sqlite_store *s, void *userdata) {
        const cert_commit *cc = userdata;
        const store_issue *in = cc->in;
        const store_cert *c = in->cert;
        /* A compromised key is refused here, in the transaction that would
         * record it: no race with its revocation. */
        int r = sqlite_key_check(s, c->spki_sha256);

        if (r >= 0 && in->consume_token_id)
                r = sqlite_token_consume(s, in->consume_token_id, cc->now);
        if (r >= 0 && in->request_id)
                r = sqlite_request_mark_issued(s, in->request_id, c->identity, c->serial, cc->now);
        if (r >= 0 && in->supersedes_serial)
                r = supersede(s, in->supersedes_serial, c->identity, cc->now);
        if (r >= 0)
                r = retire(s, c->identity, cc->now, in->replace_live);
        if (r >= 0)
                r = sqlite_binding_commit(s, in, cc->now);
        if (r >= 0)
                r = cert_insert(s, c, c->request_id ? c->request_id : in->request_id, in->consume_token_id, cc->now);
        if (r >= 0)
                r = sqlite_dns_record(s, c->serial, c->identity, in->dns_names, in->n_dns_names, cc->now);
        if (r >= 0 && in->audit)
                r = sqlite_audit_insert(s, in->audit, cc->now);
        return r < 0 ? r : 0;
}

/* Concurrent issuances share one transaction and one fsync (group
 * commit); each returns only once its own row is durable. */
int sqlite_cert_commit(store *base, const store_issue *in, int64_t now) {
        sqlite_store *s = sqlite_of(base);
        cert_commit cc = { .in = in, .now = now };
        sqlite_job job = { .run = cert_commit_run, .userdata = &cc };
        int r = store_cert_check(in ? in->cert : NULL);

        if (r < 0)
                return r;
        return sqlite_group_commit(s, &job, "commit the certificate");
}

/* ---- lookups ---- */

int sqlite_cert_get(store *base, const char *serial, store_cert *ret) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        int r = sqlite_read_enter(&s, &g);

        if (r < 0)
                return r;
        return cert_read_serial(s, serial, ret);
}

int sqlite_cert_live_for(store *base, const char *identity, int64_t now, store_cert *ret) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        if (!identity)
                return hwid_fail(HWID_E_INVALID, "no identity given");
        r = sqlite_read_enter(&s, &g);
        /* status = 'valid' literally, so the partial unique index serves it. */
        if (r >= 0)
                r = sqlite_stmt(s, ST_CERT_LIVE,
                                "SELECT " CERT_COLS " FROM certificates "
                                "WHERE identity = ?1 AND status = 'valid' AND not_after > ?2", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "tI", identity, now);
        if (r >= 0)
                r = cert_row(s, st, ret);
        if (r == -HWID_E_NOT_FOUND)
                return hwid_fail(HWID_E_NOT_FOUND, "%s has no live certificate", identity);
        return r;
}

int sqlite_cert_list(store *base, const char *identity, store_cert **ret, size_t *ret_n) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        store_cert *all = NULL, *p;
        size_t n = 0, alloc = 0;
        int r;

        r = sqlite_read_enter(&s, &g);
        if (r >= 0 && identity)
                r = sqlite_stmt(s, ST_CERT_LIST_IDENTITY,
                                "SELECT " CERT_COLS " FROM certificates WHERE identity = ?1 "
                                "ORDER BY created_at, serial",
                                &st);
        else if (r >= 0)
                r = sqlite_stmt(s, ST_CERT_LIST, "SELECT " CERT_COLS " FROM certificates ORDER BY created_at, serial",
                                &st);
        if (r >= 0 && identity)
                r = sqlite_bind(s, st, "t", identity);
        while (r >= 0 && (r = sqlite_step(s, st, "list certificates")) == 1) {
                p = sqlite_array_grow(all, &alloc, n, sizeof(*all));
                if (!p) {
                        r = hwid_fail(HWID_E_NOMEM, NULL);
                        break;
                }
                all = p;
                r = cert_from_row(st, &all[n]);
                if (r >= 0)
                        n++;
        }
        if (r < 0) {
                store_cert_list_free(all, n);
                return r;
        }
        *ret = all;
        *ret_n = n;
        return 0;
}

/* ---- revocation ---- */

static bool crl_reason_ok(int reason) {
        /* RFC 5280 CRLReason: 0..10, 7 unused. */
        return reason >= 0 && reason <= 10 && reason != 7;
}

/* A superseded certificate is still valid to relying parties until it
 * expires, so it can be revoked too; only a second revocation conflicts. */
int sqlite_cert_revoke(store *base, const char *serial, int reason, int64_t now, const store_audit *audit) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_(store_cert_clear) store_cert c = { 0 };
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        if (!crl_reason_ok(reason))
                return hwid_fail(HWID_E_INVALID, "%d is not an RFC 5280 revocation reason", reason);
        r = sqlite_enter(s, true, &g);
        if (r >= 0)
                r = cert_read_serial(s, serial, &c);
        if (r >= 0 && c.status == CERT_REVOKED)
                return hwid_fail(HWID_E_CONFLICT, "certificate %s is already revoked", serial);
        if (r >= 0)
                r = sqlite_stmt(s, ST_CERT_REVOKE,
                                "UPDATE certificates SET status = 'revoked', revoked_at = ?2, revocation_reason = ?3 "
                                "WHERE serial = ?1", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "tIi", serial, now, reason);
        if (r >= 0)
                r = sqlite_step(s, st, "revoke a certificate");
        if (r >= 0 && reason == 1) /* keyCompromise */
                r = sqlite_keys_block(s, serial, NULL, now);
        /* Same transaction: hwidd never sees the new status with an old seq. */
        if (r >= 0)
                r = sqlite_revocation_bump(s);
        if (r >= 0 && audit)
                r = sqlite_audit_insert(s, audit, now);
        if (r < 0)
                return r;
        return sqlite_commit(s, "commit the revocation");
}

/* Streams row by row from the covering index certificates_revoked: no
 * sort, nothing accumulated.  fn runs with the store locked (it must not
 * call the store); non-zero from fn stops the walk and is returned. */
int sqlite_cert_foreach_revoked(store *base, int generation, int64_t now, store_revoked_fn fn, void *userdata) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = sqlite_read_enter(&s, &g);
        if (r >= 0 && generation > 0)
                r = sqlite_stmt(s, ST_CERT_REVOKED_GEN,
                                "SELECT serial, revoked_at, revocation_reason FROM certificates "
                                "INDEXED BY certificates_revoked_generation "
                                "WHERE generation = ?2 AND status = 'revoked' AND not_after > ?1 ORDER BY serial", &st);
        else if (r >= 0)
                r = sqlite_stmt(s, ST_CERT_REVOKED,
                                "SELECT serial, revoked_at, revocation_reason FROM certificates "
                                "INDEXED BY certificates_revoked "
                                "WHERE status = 'revoked' AND not_after > ?1 ORDER BY serial", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, generation > 0 ? "Ii" : "I", now, generation);
        while (r >= 0 && (r = sqlite_step(s, st, "read revoked certificates")) == 1) {
                r = fn((const char *) sqlite3_column_text(st, 0), sqlite3_column_int64(st, 1),
                       sqlite3_column_int(st, 2), userdata);
                if (r != 0)
                        return r;
        }
        return r < 0 ? r : 0;
}

int sqlite_revocation_seq(store *base, int64_t *ret) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = sqlite_read_enter(&s, &g);
        if (r >= 0)
                r = sqlite_stmt(s, ST_META_GET, "SELECT value FROM meta WHERE key = ?1", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "t", "revocation_seq");
        if (r >= 0)
                r = sqlite_step(s, st, "read the revocation sequence");
        if (r == 0)
                return hwid_fail(HWID_E_STORE, "database %s has no revocation sequence", s->path);
        if (r < 0)
                return r;
        *ret = sqlite3_column_int64(st, 0);
        return 0;
}
