/* The store tests' helpers: see store-fixture.h. */
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/x509v3.h>

#include <sqlite3.h>

#include "check.h"
#include "error.h"
#include "fsutil.h"
#include "ossl-util.h"
#include "store-fixture.h"

char *db_path(const char *name) {
        char *p = path_join(dir, name);

        if (!p)
                abort();
        unlink(p);
        return p;
}

store *open_fresh(const char *path) {
        store *s = NULL;
        int r = store_open(path, &s);

        if (r < 0) {
                fprintf(stderr, "store_open(%s): %s\n", path, hwid_strerror(r));
                abort();
        }
        return s;
}

/* A connection of the test's own.  The store's checkpointer (a thread
 * with its connection) may hold the WAL's lock for a moment, as another
 * process would: wait for it rather than fail with SQLITE_BUSY. */
static int raw_open(const char *path, int flags, sqlite3 **db) {
        int rc = sqlite3_open_v2(path, db, flags, NULL);

        if (rc == SQLITE_OK)
                rc = sqlite3_busy_timeout(*db, 10000);
        return rc;
}

/* First column of the first row of sql on a separate connection; -1 on error. */
int64_t raw_int(const char *path, const char *sql) {
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        int64_t v = -1;

        if (raw_open(path, SQLITE_OPEN_READWRITE, &db) == SQLITE_OK &&
            sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
                v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        sqlite3_close(db);
        return v;
}

/* Concatenated "detail" column of EXPLAIN QUERY PLAN for sql. */
char *raw_plan(const char *path, const char *sql) {
        _cleanup_free_ char *q = NULL;
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        char *out = calloc(1, 1024);

        if (!out || asprintf(&q, "EXPLAIN QUERY PLAN %s", sql) < 0)
                abort();
        if (raw_open(path, SQLITE_OPEN_READONLY, &db) == SQLITE_OK &&
            sqlite3_prepare_v2(db, q, -1, &st, NULL) == SQLITE_OK)
                while (sqlite3_step(st) == SQLITE_ROW)
                        snprintf(out + strlen(out), 1024 - strlen(out), "%s; ", sqlite3_column_text(st, 3));
        sqlite3_finalize(st);
        sqlite3_close(db);
        return out;
}

int raw_exec(const char *path, const char *sql) {
        sqlite3 *db = NULL;
        int rc = raw_open(path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &db);

        if (rc == SQLITE_OK)
                rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        sqlite3_close(db);
        return rc;
}

int add_tokens(store *s, const char *const *ids, size_t n, int uses, int64_t expires_at) {
        store_token t[8];

        if (n > ELEMENTSOF(t))
                abort();
        for (size_t i = 0; i < n; i++) {
                t[i] = (store_token) {
                        .profile = (char *) "edge",
                        .created_at = NOW - 60,
                        .expires_at = expires_at,
                        .uses_total = uses,
                        .uses_left = uses,
                };
                snprintf(t[i].id, sizeof(t[i].id), "%s", ids[i]);
                memset(t[i].secret_hash, 0xab, sizeof(t[i].secret_hash));
        }
        return store_token_insert(s, t, n);
}

int add_token(store *s, const char *id, int uses, int64_t expires_at) {
        return add_tokens(s, &id, 1, uses, expires_at);
}

int add_derived_token(store *s, const char *id, uint8_t fill, int64_t expires_at) {
        store_token t = { .derived = true, .profile = (char *) "edge", .created_at = NOW - 60,
                          .expires_at = expires_at, .uses_total = 1, .uses_left = 1 };

        snprintf(t.id, sizeof(t.id), "%s", id);
        memset(t.nonce, fill, sizeof(t.nonce));
        return store_token_insert(s, &t, 1);
}

int uses_left(store *s, const char *id) {
        store_token t = { 0 };
        int n;

        if (store_token_get(s, id, &t) < 0)
                return -1;
        n = t.uses_left;
        store_token_clear(&t);
        return n;
}

const char *spki_of(const char *serial) {
        static _Thread_local char out[sizeof(spki)];
        size_t n = strlen(serial) < 32 ? strlen(serial) : 32;

        memcpy(out, spki, sizeof(spki));
        memcpy(out + 64 - n, serial, n);
        return out;
}

store_cert make_cert(const char *serial, const char *identity, int64_t not_after) {
        store_cert c = {
                .serial = (char *) serial,
                .identity = (char *) identity,
                .subject = (char *) "CN=x,O=acme",
                .profile = (char *) "edge",
                .der = (uint8_t *) der,
                .der_len = sizeof(der),
                .not_before = NOW - 60,
                .not_after = not_after,
                .status = CERT_VALID,
        };

        memcpy(c.spki_sha256, spki_of(serial), sizeof(spki));
        return c;
}

/* A commit with the usual parts; NULL/false leave a part out. */
int commit(store *s, const char *serial, const char *identity, int64_t not_after, int64_t now,
           const store_issue *extra) {
        store_cert c = make_cert(serial, identity, not_after);
        store_issue in = extra ? *extra : (store_issue) { 0 };

        in.cert = &c;
        return store_cert_commit(s, &in, now);
}

int cert_status(store *s, const char *serial) {
        store_cert c = { 0 };
        int st;

        if (store_cert_get(s, serial, &c) < 0)
                return -1;
        st = (int) c.status;
        store_cert_clear(&c);
        return st;
}

int request_status(store *s, const char *id) {
        store_request q = { 0 };
        int st;

        if (store_request_get(s, id, &q) < 0)
                return -1;
        st = (int) q.status;
        store_request_clear(&q);
        return st;
}

int add_request(store *s, const char *id, const char *identity, const char *token, int64_t now) {
        store_request q = {
                .identity = (char *) identity,
                .profile = (char *) "edge",
                .csr_der = (uint8_t *) der,
                .csr_der_len = sizeof(der),
        };

        snprintf(q.id, sizeof(q.id), "%s", id);
        snprintf(q.token_id, sizeof(q.token_id), "%s", token);
        memcpy(q.spki_sha256, spki, sizeof(spki));
        return store_request_create(s, &q, now);
}

static int count_audit(const store_audit *a, void *userdata) {
        (*(int *) userdata)++;
        return 0;
}

int audit_rows(store *s) {
        int n = 0;

        return store_audit_foreach(s, 0, count_audit, &n) < 0 ? -1 : n;
}

/* ---- a store of the first schema ---- */

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

void insert_v1_cert(const char *path, const char *serial, const char *identity, int64_t created, const char *dns) {
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

/* The first schema as hwid 1 created it (the parts the tests touch). */
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

void create_v1_store(const char *path) {
        if (raw_exec(path, v1_schema) != SQLITE_OK)
                abort();
}

bool fixture_begin(void) {
        if (mkdtemp(dir))
                return true;
        perror("mkdtemp");
        return false;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path);
}

int fixture_end(const char *name) {
        if (!check_failures && nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
                fprintf(stderr, "could not remove %s\n", dir);
        else if (check_failures)
                fprintf(stderr, "databases kept in %s\n", dir);
        return check_done(name);
}

uint8_t fixture_ak_bytes[3] = { 1, 2, 3 }, fixture_ek_bytes[3] = { 0x30, 0x01, 0x00 };

store_challenge fixture_challenge(char c, int64_t expires_at) {
        store_challenge ch = { .ak_public = fixture_ak_bytes, .ak_public_len = sizeof(fixture_ak_bytes),
                               .ek_cert = fixture_ek_bytes, .ek_cert_len = sizeof(fixture_ek_bytes),
                               .expires_at = expires_at };

        memset(ch.id, c, 32);
        memset(ch.secret_sha256, c, sizeof(ch.secret_sha256));
        memset(ch.nonce, c + 1, sizeof(ch.nonce));
        return ch;
}
