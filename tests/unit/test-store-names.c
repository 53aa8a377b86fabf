/* Names compared canonically in the SQLite store, as the file holds them:
 * one live certificate per identity however it is spelt, a DNS name (lower
 * case, no trailing dot) held by one live certificate at most -- enforced
 * by the database itself, not only by the store's code -- and a store from
 * before these rules brought up to them (migration of the identity column,
 * DNS names of its live certificates recorded).  What the store answers of
 * them, every backend alike, is in store-contract-certs.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/x509v3.h>

#include <sqlite3.h>

#include "check.h"
#include "error.h"
#include "fsutil.h"
#include "ossl-util.h"
#include "store-fixture.h"
#include "store-sqlite.h"
#include "x509-util.h"

char dir[] = "/tmp/hwid-test-store-names-XXXXXX";

static int commit_dns(store *s, const char *serial, const char *identity, int64_t not_after, int64_t now,
                      const char *const *names, size_t n, const store_issue *extra) {
        store_issue in = extra ? *extra : (store_issue) { 0 };

        in.dns_names = names;
        in.n_dns_names = n;
        return commit(s, serial, identity, not_after, now, &in);
}

/* Whether the live holder of name at now is `expect` (NULL: nobody). */
static bool held_by(store *s, const char *name, int64_t now, const char *expect) {
        _cleanup_free_ char *id = NULL;
        int r = store_dns_owner(s, name, now, &id);

        if (!expect)
                return r == -HWID_E_NOT_FOUND;
        return r == 0 && strcmp(id, expect) == 0;
}

/* ---- identities ---- */

/* The database itself holds one live certificate per identity, however
 * spelt (store-contract-certs.c holds the store's own answers). */
static void identity_case(void) {
        _cleanup_free_ char *path = db_path("case.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        _cleanup_free_ char *plan = NULL;

        CHECK(commit(s, "0A", "edge-cam1", NOW + 100, NOW, NULL) == 0);
        /* A raw insert of another spelling is refused too. */
        CHECK(raw_exec(path, "INSERT INTO certificates (serial, identity, subject, profile, spki_sha256, der, "
                             "not_before, not_after, status, created_at) "
                             "VALUES ('0C', 'EDGE-CAM1', 'CN=x', 'edge', 'x', x'00', 0, 9999999999, 'valid', 0)") ==
              SQLITE_CONSTRAINT);
        /* Lookups by identity use the case-insensitive index. */
        plan = raw_plan(path, "SELECT * FROM certificates WHERE identity = 'X' AND status = 'valid' AND not_after > 0");
        CHECK_CONTAINS(plan, "USING INDEX");
}

/* ---- DNS names ---- */

/* Kept canonical, once per name; the database refuses a second live
 * holder, and a live row for a certificate that is not valid, whoever
 * writes. */
static void dns_one_live(void) {
        _cleanup_free_ char *path = db_path("dns.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        const char *a[] = { "Door.Shared.Example.", "door.shared.example", "a.shared.example" };
        const char *b[] = { "DOOR.shared.example" };

        CHECK(commit_dns(s, "0A", "cam-a", NOW + 100, NOW, a, 3, NULL) == 0);
        /* SQLite names the holder. */
        CHECK(commit_dns(s, "0B", "cam-b", NOW + 100, NOW, b, 1, NULL) == -HWID_E_CONFLICT);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_CONFLICT),
                       "door.shared.example already belongs to the live certificate of cam-a");
        CHECK(raw_int(path, "SELECT count(*) FROM certificate_dns WHERE serial = '0A'") == 2);
        CHECK(raw_int(path, "SELECT count(*) FROM certificate_dns WHERE name = 'door.shared.example' AND live = 1") == 1);
        CHECK(raw_exec(path, "INSERT INTO certificate_dns (serial, name, live) VALUES ('0A', 'A.shared.example', 1)") ==
              SQLITE_CONSTRAINT);
        CHECK(commit(s, "0D", "cam-d", NOW + 100, NOW, NULL) == 0);
        CHECK(raw_exec(path, "INSERT INTO certificate_dns (serial, name, live) VALUES ('0D', 'door.shared.example', 1)") ==
              SQLITE_CONSTRAINT);
        CHECK(store_cert_revoke(s, "0D", 1, NOW + 1, NULL) == 0);
        CHECK(raw_exec(path, "INSERT INTO certificate_dns (serial, name, live) VALUES ('0D', 'd.example', 1)") ==
              SQLITE_CONSTRAINT);
        /* Revoked: its rows are no longer live. */
        CHECK(store_cert_revoke(s, "0A", 1, NOW + 2, NULL) == 0);
        CHECK(raw_int(path, "SELECT count(*) FROM certificate_dns WHERE serial = '0A' AND live = 1") == 0);
        CHECK(commit_dns(s, "0B", "cam-b", NOW + 100, NOW + 3, b, 1, NULL) == 0);
        /* Bringing the revoked one back to life cannot make two holders. */
        CHECK(raw_exec(path, "UPDATE certificates SET status = 'valid' WHERE serial = '0A'") == SQLITE_CONSTRAINT);
}

/* A renewal and a replacing re-enrollment each record the name again; one
 * row of it is live. */
static void dns_renew_and_expiry(void) {
        _cleanup_free_ char *path = db_path("dns-renew.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        const char *n1[] = { "gw.example" };
        store_issue renew = { .supersedes_serial = "0A" }, replace = { .replace_live = true };

        CHECK(commit_dns(s, "0A", "gw", NOW + 100, NOW, n1, 1, NULL) == 0);
        CHECK(commit_dns(s, "0B", "gw", NOW + 200, NOW + 10, n1, 1, &renew) == 0);
        CHECK(commit_dns(s, "0C", "gw", NOW + 300, NOW + 20, n1, 1, &replace) == 0);
        CHECK(raw_int(path, "SELECT count(*) FROM certificate_dns WHERE name = 'gw.example' AND live = 1") == 1);
        CHECK(raw_int(path, "SELECT count(*) FROM certificate_dns WHERE name = 'gw.example'") == 3);
}

/* ---- a store from before: schema 1 ---- */

/* What the migration from schema 1 leaves in the file (the store's
 * answers after it: store-contract-audit.c, contract_migration). */
static void upgrade_from_v1(void) {
        _cleanup_free_ char *path = db_path("v1.db");
        _cleanup_(store_freep) store *s = NULL;
        size_t recorded = 9, skipped = 9;

        create_v1_store(path);
        insert_v1_cert(path, "0A", "edge-1", NOW - 20, "DNS:edge-1.example,DNS:shared.example");
        insert_v1_cert(path, "0B", "EDGE-1", NOW - 10, "DNS:other.example");
        insert_v1_cert(path, "0C", "edge-2", NOW - 5, "DNS:Shared.Example,DNS:edge-2.example");
        s = open_fresh(path);
        CHECK(raw_int(path, "SELECT value FROM meta WHERE key = 'schema_version'") == sqlite_schema_version());
        CHECK(raw_int(path, "SELECT value FROM meta WHERE key = 'dns_backfilled'") == 0);
        CHECK(raw_int(path, "SELECT count(*) FROM certificates") == 3);
        /* hwidd records the names of the live certificates, once. */
        CHECK(store_cert_dns_backfill(s, NOW, der_dns_names, &recorded, &skipped) == 0);
        CHECK(recorded == 3 && skipped == 0);
        CHECK(raw_int(path, "SELECT value FROM meta WHERE key = 'dns_backfilled'") == 1);
        CHECK(store_cert_dns_backfill(s, NOW, der_dns_names, &recorded, &skipped) == 0);
        CHECK(recorded == 0 && skipped == 0);
        CHECK(raw_int(path, "SELECT count(*) FROM certificate_dns") == 3);
        CHECK(raw_int(path, "SELECT count(*) FROM pragma_foreign_key_check") == 0);
}

/* A name two live certificates held before the rule stays with the older. */
static void backfill_conflict(void) {
        _cleanup_free_ char *path = db_path("v1-conflict.db");
        _cleanup_(store_freep) store *s = NULL;
        size_t recorded = 0, skipped = 0;

        create_v1_store(path);
        insert_v1_cert(path, "0A", "cam-a", NOW - 20, "DNS:door.example");
        insert_v1_cert(path, "0B", "cam-b", NOW - 10, "DNS:DOOR.example.");
        s = open_fresh(path);
        CHECK(store_cert_dns_backfill(s, NOW, der_dns_names, &recorded, &skipped) == 0);
        CHECK(recorded == 1 && skipped == 1);
        CHECK(held_by(s, "door.example", NOW, "cam-a"));
        /* A fresh store has nothing to record and says so from the start. */
        {
                _cleanup_free_ char *fresh = db_path("fresh.db");
                _cleanup_(store_freep) store *f = open_fresh(fresh);
                CHECK(f && raw_int(fresh, "SELECT value FROM meta WHERE key = 'dns_backfilled'") == 1);
        }
}

int main(void) {
        if (!fixture_begin())
                return 1;
        identity_case();
        dns_one_live();
        dns_renew_and_expiry();
        upgrade_from_v1();
        backfill_conflict();
        return fixture_end("test-store-names");
}
