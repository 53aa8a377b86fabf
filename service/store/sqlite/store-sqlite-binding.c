/* Identities bound to the TPM that attested them (store.h), in SQLite:
 * the table identity_bindings (one row per identity, compared without
 * ASCII case), written by an issuance in its own transaction
 * (sqlite_binding_commit(), from store-sqlite-cert.c) and read, listed and
 * released here. */
#include <string.h>

#include "error.h"
#include "store-sqlite.h"

static int binding_from_row(sqlite3_stmt *st, store_binding *ret) {
        store_binding b = { .bound_at = sqlite3_column_int64(st, 4) };
        bool oom = false;

        b.identity = sqlite_col_strdup(st, 0, &oom);
        sqlite_col_copy(st, 1, b.ek_pub_sha256, sizeof(b.ek_pub_sha256));
        sqlite_col_copy(st, 2, b.ek_cert_sha256, sizeof(b.ek_cert_sha256));
        b.serial = sqlite_col_strdup(st, 3, &oom);
        if (oom) {
                store_binding_clear(&b);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *ret = b;
        return 0;
}

/* On s's connection as it is (the writer inside a commit, or a reader). */
static int binding_read(sqlite_store *s, const char *identity, store_binding *ret) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sqlite_stmt(s, ST_BIND_GET, "SELECT " BINDING_COLS " FROM identity_bindings WHERE identity = ?1", &st);

        if (r >= 0)
                r = sqlite_bind(s, st, "t", identity);
        if (r >= 0)
                r = sqlite_step(s, st, "read an identity's binding");
        if (r == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "%s is not bound to a TPM", identity);
        return r < 0 ? r : binding_from_row(st, ret);
}

static int binding_insert(sqlite_store *s, const store_cert *c, int64_t now) {
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sqlite_stmt(s, ST_BIND_INSERT,
                            "INSERT INTO identity_bindings (" BINDING_COLS ") VALUES (?1, ?2, ?3, ?4, ?5)", &st);

        if (r >= 0)
                r = sqlite_bind(s, st, "ttttI", c->identity, c->attestation.ek_pub_sha256,
                                store_opt(c->attestation.ek_cert_sha256), c->serial, now);
        if (r >= 0)
                r = sqlite_step(s, st, "bind an identity to its TPM");
        return r < 0 ? r : 0;
}

int sqlite_binding_commit(sqlite_store *s, const store_issue *in, int64_t now) {
        _cleanup_(store_binding_clear) store_binding b = { 0 };
        const store_cert *c = in->cert;
        int r = binding_read(s, c->identity, &b);

        if (r == -HWID_E_NOT_FOUND) {
                hwid_error_clear();
                return store_attested(&c->attestation) ? binding_insert(s, c, now) : 0;
        }
        if (r < 0)
                return r;
        return store_binding_check(&b, c->attestation.ek_pub_sha256, in->supersedes_serial != NULL);
}

int sqlite_binding_get(store *base, const char *identity, store_binding *ret) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        int r;

        if (!store_str_ok(identity, STORE_BINDING_NAME_MAX))
                return hwid_fail(HWID_E_INVALID, "an identity is 1 to %d bytes", STORE_BINDING_NAME_MAX);
        r = sqlite_read_enter(&s, &g);
        return r < 0 ? r : binding_read(s, identity, ret);
}

int sqlite_binding_list(store *base, store_binding **ret, size_t *ret_n) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        store_binding *all = NULL, *p;
        size_t n = 0, alloc = 0;
        int r = sqlite_read_enter(&s, &g);

        if (r >= 0)
                r = sqlite_stmt(s, ST_BIND_LIST, "SELECT " BINDING_COLS " FROM identity_bindings ORDER BY identity",
                                &st);
        while (r >= 0 && (r = sqlite_step(s, st, "list the identities bound to a TPM")) == 1) {
                if (!(p = sqlite_array_grow(all, &alloc, n, sizeof(*all)))) {
                        r = hwid_fail(HWID_E_NOMEM, NULL);
                        break;
                }
                all = p;
                if ((r = binding_from_row(st, &all[n])) >= 0)
                        n++;
        }
        if (r < 0) {
                store_binding_list_free(all, n);
                return r;
        }
        *ret = all;
        *ret_n = n;
        return 0;
}

int sqlite_binding_release(store *base, const store_binding *b, const store_audit *audit, int64_t now) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        if (!store_binding_ok(b))
                return hwid_fail(HWID_E_INVALID, "no identity binding to release");
        r = sqlite_enter(s, true, &g);
        if (r >= 0)
                r = sqlite_stmt(s, ST_BIND_RELEASE,
                                "DELETE FROM identity_bindings WHERE identity = ?1 AND ek_pub_sha256 = ?2", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "tt", b->identity, b->ek_pub_sha256);
        if (r >= 0)
                r = sqlite_step(s, st, "release an identity's binding");
        if (r < 0)
                return r;
        if (sqlite3_changes(s->db) == 0)
                return hwid_fail(HWID_E_NOT_FOUND, "%s is no longer bound to the TPM with EK sha256:%s", b->identity,
                                 b->ek_pub_sha256);
        if (audit && (r = sqlite_audit_insert(s, audit, now)) < 0)
                return r;
        return sqlite_commit(s, "commit the identity's release");
}
