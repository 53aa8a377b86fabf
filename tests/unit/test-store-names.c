/* Names compared canonically in the store: identities without regard to
 * ASCII case (one live certificate per identity however it is spelt), a
 * DNS name (lower case, no trailing dot) held by one live certificate at
 * most -- enforced by the database itself, not only by the store's code --
 * and a store from before these rules brought up to them (migration of
 * the identity column, DNS names of its live certificates recorded). */
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

static void identity_case(void) {
        _cleanup_free_ char *path = db_path("case.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_issue renew = { .supersedes_serial = "0A" };
        store_cert c = { 0 }, *all = NULL;
        size_t n = 0;
        int r;

        CHECK(commit(s, "0A", "edge-cam1", NOW + 100, NOW, NULL) == 0);
        /* The reproduction: another spelling of a live identity. */
        r = commit(s, "0B", "edge-CAM1", NOW + 100, NOW, NULL);
        CHECK(r == -HWID_E_CONFLICT);
        CHECK_CONTAINS(hwid_strerror(r), "edge-CAM1 already has a live certificate");
        CHECK(cert_status(s, "0B") == -1);
        /* Enforced by the database: a raw insert is refused too. */
        CHECK(raw_exec(path, "INSERT INTO certificates (serial, identity, subject, profile, spki_sha256, der, "
                             "not_before, not_after, status, created_at) "
                             "VALUES ('0C', 'EDGE-CAM1', 'CN=x', 'edge', 'x', x'00', 0, 9999999999, 'valid', 0)") ==
              SQLITE_CONSTRAINT);
        /* Lookups find it however it is spelt; the CN is kept as issued. */
        CHECK(store_cert_live_for(s, "Edge-Cam1", NOW, &c) == 0);
        CHECK_STREQ(c.serial, "0A");
        CHECK_STREQ(c.identity, "edge-cam1");
        store_cert_clear(&c);
        CHECK(store_cert_list(s, "EDGE-CAM1", &all, &n) == 0 && n == 1);
        store_cert_list_free(all, n);
        /* Renewing under another spelling renews the same identity. */
        CHECK(commit(s, "0D", "Edge-Cam1", NOW + 200, NOW + 10, &renew) == 0);
        CHECK(cert_status(s, "0A") == CERT_SUPERSEDED && cert_status(s, "0D") == CERT_VALID);
        /* Only ASCII letters fold: these are two identities. */
        CHECK(commit(s, "0E", "k\xc3\xa4se", NOW + 100, NOW, NULL) == 0);
        CHECK(commit(s, "0F", "K\xc3\x84SE", NOW + 100, NOW, NULL) == 0);
        /* Lookups by identity use the case-insensitive index. */
        {
                _cleanup_free_ char *plan = raw_plan(path, "SELECT * FROM certificates "
                                                           "WHERE identity = 'X' AND status = 'valid' AND not_after > 0");
                CHECK_CONTAINS(plan, "USING INDEX");
        }
}

/* ---- DNS names ---- */

static void dns_one_live(void) {
        _cleanup_free_ char *path = db_path("dns.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        const char *a[] = { "Door.Shared.Example.", "door.shared.example", "a.shared.example" };
        const char *b[] = { "DOOR.shared.example" };
        const char *bad[] = { "x.example.." };
        int r;

        CHECK(commit_dns(s, "0A", "cam-a", NOW + 100, NOW, a, 3, NULL) == 0);
        /* Kept canonical, once per name. */
        CHECK(raw_int(path, "SELECT count(*) FROM certificate_dns WHERE serial = '0A'") == 2);
        CHECK(raw_int(path, "SELECT count(*) FROM certificate_dns WHERE name = 'door.shared.example' AND live = 1") == 1);
        r = commit_dns(s, "0B", "cam-b", NOW + 100, NOW, b, 1, NULL);
        CHECK(r == -HWID_E_CONFLICT);
        CHECK_CONTAINS(hwid_strerror(r), "door.shared.example already belongs to the live certificate of cam-a");
        CHECK(cert_status(s, "0B") == -1);
        CHECK(held_by(s, "DOOR.SHARED.EXAMPLE.", NOW, "cam-a"));
        CHECK(held_by(s, "other.example", NOW, NULL));
        CHECK(commit_dns(s, "0C", "cam-c", NOW + 100, NOW, bad, 1, NULL) == -HWID_E_INVALID);
        /* The database refuses a second live holder, and a live row for a
         * certificate that is not valid, whoever writes. */
        CHECK(raw_exec(path, "INSERT INTO certificate_dns (serial, name, live) VALUES ('0A', 'A.shared.example', 1)") ==
              SQLITE_CONSTRAINT);
        CHECK(commit(s, "0D", "cam-d", NOW + 100, NOW, NULL) == 0);
        CHECK(raw_exec(path, "INSERT INTO certificate_dns (serial, name, live) VALUES ('0D', 'door.shared.example', 1)") ==
              SQLITE_CONSTRAINT);
        CHECK(store_cert_revoke(s, "0D", 1, NOW + 1, NULL) == 0);
        CHECK(raw_exec(path, "INSERT INTO certificate_dns (serial, name, live) VALUES ('0D', 'd.example', 1)") ==
              SQLITE_CONSTRAINT);
        /* Revoked: the name is free again. */
        CHECK(store_cert_revoke(s, "0A", 1, NOW + 2, NULL) == 0);
        CHECK(raw_int(path, "SELECT count(*) FROM certificate_dns WHERE serial = '0A' AND live = 1") == 0);
        CHECK(commit_dns(s, "0B", "cam-b", NOW + 100, NOW + 3, b, 1, NULL) == 0);
        /* Bringing the revoked one back to life cannot make two holders. */
        CHECK(raw_exec(path, "UPDATE certificates SET status = 'valid' WHERE serial = '0A'") == SQLITE_CONSTRAINT);
}

static void dns_renew_and_expiry(void) {
        _cleanup_free_ char *path = db_path("dns-renew.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        const char *n1[] = { "gw.example" };
        store_issue renew = { .supersedes_serial = "0A" }, replace = { .replace_live = true };

        CHECK(commit_dns(s, "0A", "gw", NOW + 100, NOW, n1, 1, NULL) == 0);
        /* A renewal keeps its names; so does a re-enrollment allowed by policy. */
        CHECK(commit_dns(s, "0B", "gw", NOW + 200, NOW + 10, n1, 1, &renew) == 0);
        CHECK(commit_dns(s, "0C", "gw", NOW + 300, NOW + 20, n1, 1, &replace) == 0);
        CHECK(raw_int(path, "SELECT count(*) FROM certificate_dns WHERE name = 'gw.example' AND live = 1") == 1);
        CHECK(raw_int(path, "SELECT count(*) FROM certificate_dns WHERE name = 'gw.example'") == 3);
        /* An expired holder does not block another identity: it is retired. */
        CHECK(held_by(s, "gw.example", NOW + 299, "gw"));
        CHECK(held_by(s, "gw.example", NOW + 300, NULL));
        CHECK(commit_dns(s, "0D", "gw-2", NOW + 900, NOW + 300, n1, 1, NULL) == 0);
        CHECK(cert_status(s, "0C") == CERT_SUPERSEDED);
        CHECK(held_by(s, "gw.example", NOW + 300, "gw-2"));
}

/* ---- a store from before: schema 1 ---- */

/* A certificate with DNS names, signed by its own key (the store only
 * keeps the DER; nothing checks the signature). */
static X509 *cert_with_dns(const char *dns) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *k = EVP_EC_gen("P-256");
        _cleanup_(X509_EXTENSION_freep) X509_EXTENSION *ext = NULL;
        X509 *x = X509_new();

        if (!k || !x || !X509_set_pubkey(x, k) || !ASN1_INTEGER_set(X509_get_serialNumber(x), 1) ||
            !X509_gmtime_adj(X509_getm_notBefore(x), 0) || !X509_gmtime_adj(X509_getm_notAfter(x), 3600) ||
            !(ext = X509V3_EXT_conf_nid(NULL, NULL, NID_subject_alt_name, dns)) || !X509_add_ext(x, ext, -1) ||
            !X509_sign(x, k, EVP_sha256()))
                abort();
        return x;
}

static void insert_v1_cert(const char *path, const char *serial, const char *identity, int64_t created,
                           const char *dns) {
        _cleanup_(X509_freep) X509 *x = cert_with_dns(dns);
        _cleanup_(OPENSSL_freep) unsigned char *enc = NULL;
        _cleanup_free_ char *sql = NULL, *hex = NULL;
        int len = i2d_X509(x, &enc);

        if (len <= 0 || !(hex = malloc((size_t) len * 2 + 1)))
                abort();
        for (int i = 0; i < len; i++)
                sprintf(hex + 2 * i, "%02x", enc[i]);
        if (asprintf(&sql, "INSERT INTO certificates (serial, identity, subject, profile, spki_sha256, der, "
                           "not_before, not_after, status, created_at) VALUES ('%s', '%s', 'CN=x', 'edge', '%s', "
                           "x'%s', 0, 9999999999, 'valid', %lld)",
                     serial, identity, spki, hex, (long long) created) < 0 ||
            raw_exec(path, sql) != SQLITE_OK)
                abort();
}

/* The first schema as hwid 1 created it (the parts the test touches). */
static const char v1_schema[] =
        "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value INTEGER NOT NULL) STRICT;"
        "INSERT INTO meta (key, value) VALUES ('schema_version', 1), ('revocation_seq', 0);"
        "CREATE TABLE tokens (id TEXT PRIMARY KEY NOT NULL CHECK (length(id) = 6),"
        "  secret_hash BLOB NOT NULL CHECK (length(secret_hash) = 32), profile TEXT NOT NULL, name_pattern TEXT,"
        "  description TEXT, created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,"
        "  uses_total INTEGER NOT NULL CHECK (uses_total >= 0), uses_left INTEGER NOT NULL CHECK (uses_left >= 0),"
        "  revoked INTEGER NOT NULL DEFAULT 0 CHECK (revoked IN (0, 1))) STRICT;"
        "CREATE TABLE requests (id TEXT PRIMARY KEY NOT NULL, identity TEXT NOT NULL, profile TEXT NOT NULL,"
        "  token_id TEXT NOT NULL REFERENCES tokens(id), spki_sha256 TEXT NOT NULL, csr_der BLOB NOT NULL,"
        "  status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'issued')), reason TEXT,"
        "  serial TEXT, created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL) STRICT;"
        "CREATE INDEX requests_status ON requests(status);"
        "CREATE TABLE certificates (serial TEXT PRIMARY KEY NOT NULL"
        "    CHECK (length(serial) > 0 AND serial NOT GLOB '*[^0-9A-F]*'),"
        "  identity TEXT NOT NULL, subject TEXT NOT NULL, profile TEXT NOT NULL, spki_sha256 TEXT NOT NULL,"
        "  der BLOB NOT NULL, not_before INTEGER NOT NULL, not_after INTEGER NOT NULL,"
        "  status TEXT NOT NULL CHECK (status IN ('valid', 'revoked', 'superseded')),"
        "  revoked_at INTEGER NOT NULL DEFAULT 0, revocation_reason INTEGER NOT NULL DEFAULT 0,"
        "  request_id TEXT REFERENCES requests(id), created_at INTEGER NOT NULL) STRICT;"
        "CREATE UNIQUE INDEX certificates_one_live ON certificates(identity) WHERE status = 'valid';"
        "CREATE INDEX certificates_identity ON certificates(identity, status);"
        "CREATE INDEX certificates_status_not_after ON certificates(status, not_after);"
        "CREATE INDEX certificates_revoked"
        "  ON certificates(serial, not_after, revoked_at, revocation_reason) WHERE status = 'revoked';"
        "CREATE TABLE audit (id INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER NOT NULL, actor TEXT NOT NULL,"
        "  action TEXT NOT NULL, target TEXT, outcome TEXT NOT NULL, reason TEXT, token_id TEXT) STRICT;"
        "CREATE INDEX audit_at ON audit(at);"
        "PRAGMA journal_mode=WAL;";

static void upgrade_from_v1(void) {
        _cleanup_free_ char *path = db_path("v1.db");
        _cleanup_(store_freep) store *s = NULL;
        size_t recorded = 9, skipped = 9;
        store_cert c = { 0 };

        CHECK(raw_exec(path, v1_schema) == SQLITE_OK);
        /* Two live spellings of one identity, and two live certificates
         * holding one DNS name: possible under schema 1. */
        insert_v1_cert(path, "0A", "edge-1", NOW - 20, "DNS:edge-1.example,DNS:shared.example");
        insert_v1_cert(path, "0B", "EDGE-1", NOW - 10, "DNS:other.example");
        insert_v1_cert(path, "0C", "edge-2", NOW - 5, "DNS:Shared.Example,DNS:edge-2.example");
        s = open_fresh(path);
        CHECK(raw_int(path, "SELECT value FROM meta WHERE key = 'schema_version'") == sqlite_schema_version());
        /* The newest spelling stays live; the older one is superseded. */
        CHECK(cert_status(s, "0A") == CERT_SUPERSEDED);
        CHECK(cert_status(s, "0B") == CERT_VALID);
        CHECK(store_cert_live_for(s, "edge-1", NOW, &c) == 0);
        CHECK_STREQ(c.serial, "0B");
        store_cert_clear(&c);
        CHECK(raw_int(path, "SELECT value FROM meta WHERE key = 'dns_backfilled'") == 0);
        CHECK(raw_int(path, "SELECT count(*) FROM certificates") == 3);
        /* hwidd records the names of the live certificates, once. */
        CHECK(store_cert_dns_backfill(s, NOW, der_dns_names, &recorded, &skipped) == 0);
        CHECK(recorded == 3 && skipped == 0);
        CHECK(held_by(s, "shared.example", NOW, "edge-2"));
        CHECK(held_by(s, "edge-1.example", NOW, NULL)); /* 0A is no longer live */
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

        CHECK(raw_exec(path, v1_schema) == SQLITE_OK);
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
