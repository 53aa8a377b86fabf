/* Revocation that reaches further than one serial: every unexpired
 * certificate of an identity (live and superseded generations alike), and
 * the keys of certificates revoked for keyCompromise, which are never
 * certified again.
 *
 * Keys are compared by the SPKI SHA-256 recorded with each certificate
 * (the fingerprint csr-check takes of the request). */
#include <string.h>

#include "error.h"
#include "store-sqlite.h"

#define CRL_KEY_COMPROMISE 1

/* Within a write transaction: the revocation sequence moves, so hwidd
 * regenerates its CRL on the next request. */
int sqlite_revocation_bump(sqlite_store *s) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sqlite_stmt(s, ST_SEQ_BUMP, "UPDATE meta SET value = value + 1 WHERE key = 'revocation_seq'", &st);

        if (r >= 0)
                r = sqlite_step(s, st, "bump the revocation sequence");
        return r < 0 ? r : 0;
}

/* Within the revocation's transaction: the keys of the certificates
 * revoked for keyCompromise with this serial or of this identity are
 * blocked, and every unexpired certificate bearing a blocked key is
 * revoked too (the key is what was compromised, whatever it certifies). */
int sqlite_keys_block(sqlite_store *s, const char *serial, const char *identity, int64_t now) {
        _cleanup_stmt_ sqlite3_stmt *ins = NULL, *rev = NULL;
        int r;

        r = sqlite_stmt(s, ST_KEY_BLOCK,
                        "INSERT OR IGNORE INTO blocked_keys (spki_sha256, serial, blocked_at) "
                        "SELECT spki_sha256, serial, ?3 FROM certificates "
                        "WHERE status = 'revoked' AND revocation_reason = 1 AND (serial = ?1 OR identity = ?2)", &ins);
        if (r >= 0)
                r = sqlite_bind(s, ins, "ttI", serial, identity, now);
        if (r >= 0)
                r = sqlite_step(s, ins, "block a compromised key");
        if (r >= 0)
                r = sqlite_stmt(s, ST_CERT_REVOKE_BLOCKED,
                                "UPDATE certificates SET status = 'revoked', revoked_at = ?1, revocation_reason = 1 "
                                "WHERE status != 'revoked' AND not_after > ?1 "
                                "AND spki_sha256 IN (SELECT spki_sha256 FROM blocked_keys)", &rev);
        if (r >= 0)
                r = sqlite_bind(s, rev, "I", now);
        if (r >= 0)
                r = sqlite_step(s, rev, "revoke the certificates of a compromised key");
        return r < 0 ? r : 0;
}

/* Within a transaction (or a read): -HWID_E_KEY_BLOCKED if spki is blocked. */
int sqlite_key_check(sqlite_store *s, const char *spki_sha256) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        char serial[130];
        int r;

        r = sqlite_stmt(s, ST_KEY_BLOCKED, "SELECT serial FROM blocked_keys WHERE spki_sha256 = ?1", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "t", spki_sha256 ? spki_sha256 : "");
        if (r >= 0)
                r = sqlite_step(s, st, "look up blocked keys");
        if (r <= 0)
                return r;
        sqlite_col_copy(st, 0, serial, sizeof(serial));
        return hwid_fail(HWID_E_KEY_BLOCKED,
                         "this key (SPKI SHA-256 %s) was revoked as compromised with certificate %s and is never "
                         "certified again: make a new key", spki_sha256, serial);
}

int sqlite_key_blocked(store *base, const char *spki_sha256) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        int r = sqlite_read_enter(&s, &g);

        return r < 0 ? r : sqlite_key_check(s, spki_sha256);
}

int sqlite_cert_revoke_identity(store *base, const char *identity, int reason, int64_t now, const store_audit *audit,
                               size_t *ret_n) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        size_t n = 0;
        int r;

        if (!store_str_ok(identity, 1024))
                return hwid_fail(HWID_E_INVALID, "no identity given");
        if (reason < 0 || reason > 10 || reason == 7)
                return hwid_fail(HWID_E_INVALID, "%d is not an RFC 5280 revocation reason", reason);
        r = sqlite_enter(s, true, &g);
        if (r >= 0)
                r = sqlite_stmt(s, ST_CERT_REVOKE_IDENTITY,
                                "UPDATE certificates SET status = 'revoked', revoked_at = ?2, revocation_reason = ?3 "
                                "WHERE identity = ?1 AND status != 'revoked' AND not_after > ?2", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "tIi", identity, now, reason);
        if (r >= 0)
                r = sqlite_step(s, st, "revoke an identity's certificates");
        if (r >= 0 && (n = (size_t) sqlite3_changes(s->db)) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "%s has no unexpired certificate that is not already revoked",
                                 identity);
        if (r >= 0 && reason == CRL_KEY_COMPROMISE)
                r = sqlite_keys_block(s, NULL, identity, now);
        if (r >= 0)
                r = sqlite_revocation_bump(s);
        if (r >= 0 && audit)
                r = sqlite_audit_insert(s, audit, now);
        if (r >= 0)
                r = sqlite_commit(s, "commit the revocation");
        if (r < 0)
                return r;
        *ret_n = n;
        return 0;
}

/* One statement moves the number and gives it back; the commit follows. */
int sqlite_crl_number_next(store *base, int64_t now, int64_t *ret) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        int64_t n;
        int r = sqlite_enter(s, true, &g);

        if (r < 0)
                return r;
        if (sqlite3_prepare_v2(s->db,
                               "INSERT INTO meta (key, value) VALUES ('crl_number', ?1) "
                               "ON CONFLICT (key) DO UPDATE SET value = max(value + 1, excluded.value) RETURNING value",
                               -1, &st, NULL) != SQLITE_OK)
                return sqlite_sql_fail(s, "take a CRL number");
        if ((r = sqlite_bind(s, st, "I", now)) < 0 || (r = sqlite_step(s, st, "take a CRL number")) < 0)
                return r;
        if (r == 0)
                return sqlite_sql_fail(s, "take a CRL number");
        n = sqlite3_column_int64(st, 0);
        if ((r = sqlite_step(s, st, "take a CRL number")) < 0 || (r = sqlite_commit(s, "commit the CRL number")) < 0)
                return r;
        *ret = n;
        return 0;
}
