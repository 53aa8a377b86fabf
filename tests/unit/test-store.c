/* The SQLite store against real database files in a temporary directory.
 * Where the store's own API cannot show something (row counts, the
 * journal mode, query plans), a second raw connection looks at the file,
 * as an admin with the sqlite3 shell would. */
#include <errno.h>
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "check.h"
#include "error.h"
#include "fsutil.h"
#include "store.h"

#define NOW ((int64_t) 1700000000)
#define RACERS 32

static char dir[] = "/tmp/hwid-test-store-XXXXXX";
static const uint8_t der[] = { 0x30, 0x03, 0x02, 0x01, 0x01 };
static const char spki[] = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/* ---- helpers ---- */

static char *db_path(const char *name) {
        char *p = path_join(dir, name);

        if (!p)
                abort();
        unlink(p);
        return p;
}

static store *open_fresh(const char *path) {
        store *s = NULL;
        int r = store_open(path, &s);

        if (r < 0) {
                fprintf(stderr, "store_open(%s): %s\n", path, hwid_strerror(r));
                abort();
        }
        return s;
}

/* First column of the first row of sql on a separate connection; -1 on error. */
static int64_t raw_int(const char *path, const char *sql) {
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        int64_t v = -1;

        if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) == SQLITE_OK &&
            sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
                v = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        sqlite3_close(db);
        return v;
}

/* Concatenated "detail" column of EXPLAIN QUERY PLAN for sql. */
static char *raw_plan(const char *path, const char *sql) {
        _cleanup_free_ char *q = NULL;
        sqlite3 *db = NULL;
        sqlite3_stmt *st = NULL;
        char *out = calloc(1, 1024);

        if (!out || asprintf(&q, "EXPLAIN QUERY PLAN %s", sql) < 0)
                abort();
        if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
            sqlite3_prepare_v2(db, q, -1, &st, NULL) == SQLITE_OK)
                while (sqlite3_step(st) == SQLITE_ROW)
                        snprintf(out + strlen(out), 1024 - strlen(out), "%s; ", sqlite3_column_text(st, 3));
        sqlite3_finalize(st);
        sqlite3_close(db);
        return out;
}

static int raw_exec(const char *path, const char *sql) {
        sqlite3 *db = NULL;
        int rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL);

        if (rc == SQLITE_OK)
                rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        sqlite3_close(db);
        return rc;
}

static int add_token(store *s, const char *id, int uses, int64_t expires_at) {
        store_token t = {
                .profile = (char *) "edge",
                .created_at = NOW - 60,
                .expires_at = expires_at,
                .uses_total = uses,
                .uses_left = uses,
        };

        snprintf(t.id, sizeof(t.id), "%s", id);
        memset(t.secret_hash, 0xab, sizeof(t.secret_hash));
        return store_token_insert(s, &t);
}

static int uses_left(store *s, const char *id) {
        store_token t = { 0 };
        int n;

        if (store_token_get(s, id, &t) < 0)
                return -1;
        n = t.uses_left;
        store_token_clear(&t);
        return n;
}

static store_cert make_cert(const char *serial, const char *identity, int64_t not_after) {
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

        memcpy(c.spki_sha256, spki, sizeof(spki));
        return c;
}

/* A commit with the usual parts; NULL/false leave a part out. */
static int commit(store *s, const char *serial, const char *identity, int64_t not_after, int64_t now,
                  const store_issue *extra) {
        store_cert c = make_cert(serial, identity, not_after);
        store_issue in = extra ? *extra : (store_issue) { 0 };

        in.cert = &c;
        return store_cert_commit(s, &in, now);
}

static int cert_status(store *s, const char *serial) {
        store_cert c = { 0 };
        int st;

        if (store_cert_get(s, serial, &c) < 0)
                return -1;
        st = (int) c.status;
        store_cert_clear(&c);
        return st;
}

static int request_status(store *s, const char *id) {
        store_request q = { 0 };
        int st;

        if (store_request_get(s, id, &q) < 0)
                return -1;
        st = (int) q.status;
        store_request_clear(&q);
        return st;
}

static int add_request(store *s, const char *id, const char *identity, const char *token, int64_t now) {
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

static int audit_rows(store *s) {
        int n = 0;

        return store_audit_foreach(s, 0, count_audit, &n) < 0 ? -1 : n;
}

#define REQ1 "00000000000000000000000000000001"
#define REQ2 "00000000000000000000000000000002"
#define REQ3 "00000000000000000000000000000003"

/* ---- tokens ---- */

static void tokens(void) {
        _cleanup_free_ char *path = db_path("tokens.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_token t = { 0 }, *all = NULL;
        size_t n = 0;

        CHECK(store_ping(s) == 0);
        CHECK(add_token(s, "abc123", 2, NOW + 3600) == 0);
        CHECK(add_token(s, "abc123", 2, NOW + 3600) == -HWID_E_EXISTS);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_EXISTS), "abc123");
        CHECK(add_token(s, "ABC123", 1, NOW) == -HWID_E_INVALID);
        CHECK(add_token(s, "zz9zz9", 1, NOW + 10) == 0);
        CHECK(store_token_get(s, "abc123", &t) == 0);
        CHECK_STREQ(t.id, "abc123");
        CHECK_STREQ(t.profile, "edge");
        CHECK(t.name_pattern == NULL && t.description == NULL);
        CHECK(t.secret_hash[0] == 0xab && t.secret_hash[31] == 0xab);
        CHECK(t.expires_at == NOW + 3600 && t.created_at == NOW - 60);
        CHECK(t.uses_total == 2 && t.uses_left == 2 && !t.revoked);
        CHECK(store_token_state_at(&t, NOW) == TOKEN_ACTIVE);
        CHECK(store_token_state_at(&t, NOW + 3599) == TOKEN_ACTIVE);
        CHECK(store_token_state_at(&t, NOW + 3600) == TOKEN_EXPIRED);
        t.uses_left = 0;
        CHECK(store_token_state_at(&t, NOW) == TOKEN_USED_UP);
        CHECK(store_token_state_at(&t, NOW + 3600) == TOKEN_EXPIRED);
        t.revoked = true;
        CHECK(store_token_state_at(&t, NOW + 3600) == TOKEN_REVOKED);
        store_token_clear(&t);
        CHECK(store_token_get(s, "nope00", &t) == -HWID_E_NOT_FOUND);
        CHECK(store_token_list(s, &all, &n) == 0 && n == 2);
        CHECK(n == 2 && strcmp(all[0].id, "abc123") == 0 && strcmp(all[1].id, "zz9zz9") == 0);
        store_token_list_free(all, n);
        CHECK(store_token_revoke(s, "abc123") == 0);
        CHECK(store_token_revoke(s, "abc123") == 0); /* idempotent */
        CHECK(store_token_revoke(s, "nope00") == -HWID_E_NOT_FOUND);
        CHECK(store_token_get(s, "abc123", &t) == 0 && t.revoked);
        CHECK(store_token_state_at(&t, NOW) == TOKEN_REVOKED);
        store_token_clear(&t);
        /* Only the hash is stored: the column is 32 bytes. */
        CHECK(raw_int(path, "SELECT length(secret_hash) FROM tokens WHERE id = 'abc123'") == 32);
}

/* ---- requests ---- */

static void requests(void) {
        _cleanup_free_ char *path = db_path("requests.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_request q = { 0 }, *all = NULL;
        size_t n = 0;
        int r;

        CHECK(add_token(s, "two222", 2, NOW + 3600) == 0);
        CHECK(add_request(s, REQ1, "edge-1", "two222", NOW) == 0);
        CHECK(uses_left(s, "two222") == 1);
        CHECK(store_request_get(s, REQ1, &q) == 0);
        CHECK(q.status == REQUEST_PENDING && q.created_at == NOW && q.updated_at == NOW);
        CHECK_STREQ(q.identity, "edge-1");
        CHECK_STREQ(q.token_id, "two222");
        CHECK_STREQ(q.spki_sha256, spki);
        CHECK(q.csr_der_len == sizeof(der) && memcmp(q.csr_der, der, sizeof(der)) == 0);
        CHECK(q.reason == NULL && q.serial == NULL);
        store_request_clear(&q);
        /* A duplicate id is refused and does not cost a use. */
        CHECK(add_request(s, REQ1, "edge-1", "two222", NOW) == -HWID_E_EXISTS);
        CHECK(uses_left(s, "two222") == 1);
        CHECK(add_request(s, REQ2, "edge-2", "two222", NOW) == 0);
        r = add_request(s, REQ3, "edge-3", "two222", NOW);
        CHECK(r == -HWID_E_TOKEN_INVALID);
        CHECK_CONTAINS(hwid_strerror(r), "used up");
        CHECK(store_request_get(s, REQ3, &q) == -HWID_E_NOT_FOUND);

        CHECK(add_token(s, "rev333", 5, NOW + 3600) == 0 && store_token_revoke(s, "rev333") == 0);
        r = add_request(s, REQ3, "edge-3", "rev333", NOW);
        CHECK(r == -HWID_E_TOKEN_INVALID);
        CHECK_CONTAINS(hwid_strerror(r), "revoked");
        CHECK(add_token(s, "exp444", 5, NOW) == 0);
        r = add_request(s, REQ3, "edge-3", "exp444", NOW);
        CHECK(r == -HWID_E_TOKEN_INVALID);
        CHECK_CONTAINS(hwid_strerror(r), "expired");
        CHECK(uses_left(s, "exp444") == 5);
        r = add_request(s, REQ3, "edge-3", "nope00", NOW);
        CHECK(r == -HWID_E_TOKEN_INVALID);
        CHECK_CONTAINS(hwid_strerror(r), "unknown");
        CHECK(raw_int(path, "SELECT count(*) FROM requests") == 2);

        CHECK(store_request_list(s, true, &all, &n) == 0 && n == 2);
        store_request_list_free(all, n);
        CHECK(store_request_decide(s, REQ1, true, "fingerprints match", NOW + 5) == 0);
        r = store_request_decide(s, REQ1, false, "changed my mind", NOW + 6);
        CHECK(r == -HWID_E_CONFLICT);
        CHECK_CONTAINS(hwid_strerror(r), "approved");
        CHECK(store_request_decide(s, REQ2, false, "unknown device", NOW + 7) == 0);
        CHECK(store_request_decide(s, REQ2, true, NULL, NOW + 8) == -HWID_E_CONFLICT);
        CHECK(store_request_decide(s, REQ3, true, NULL, NOW) == -HWID_E_NOT_FOUND);
        CHECK(store_request_get(s, REQ1, &q) == 0 && q.status == REQUEST_APPROVED && q.updated_at == NOW + 5);
        store_request_clear(&q);
        CHECK(store_request_get(s, REQ2, &q) == 0 && q.status == REQUEST_DENIED);
        CHECK_STREQ(q.reason, "unknown device");
        store_request_clear(&q);
        CHECK(store_request_list(s, true, &all, &n) == 0 && n == 0);
        store_request_list_free(all, n);
        CHECK(store_request_list(s, false, &all, &n) == 0 && n == 2);
        store_request_list_free(all, n);
}

/* ---- certificates ---- */

static void commit_happy_path(void) {
        _cleanup_free_ char *path = db_path("commit.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_audit a = { .at = NOW, .actor = "token:tok111", .action = "enroll", .target = "edge-1",
                          .outcome = "allow", .token_id = "tok111" };
        store_issue in = { .consume_token_id = "tok111", .audit = &a };
        store_cert c = { 0 }, *all = NULL;
        size_t n = 0;

        CHECK(add_token(s, "tok111", 3, NOW + 3600) == 0);
        CHECK(commit(s, "01AB", "edge-1", NOW + 86400, NOW, &in) == 0);
        CHECK(uses_left(s, "tok111") == 2);
        CHECK(audit_rows(s) == 1);
        CHECK(store_cert_get(s, "01AB", &c) == 0);
        CHECK_STREQ(c.serial, "01AB");
        CHECK_STREQ(c.identity, "edge-1");
        CHECK_STREQ(c.subject, "CN=x,O=acme");
        CHECK_STREQ(c.profile, "edge");
        CHECK_STREQ(c.spki_sha256, spki);
        CHECK(c.der_len == sizeof(der) && memcmp(c.der, der, sizeof(der)) == 0);
        CHECK(c.not_before == NOW - 60 && c.not_after == NOW + 86400 && c.created_at == NOW);
        CHECK(c.status == CERT_VALID && c.revoked_at == 0 && c.request_id == NULL);
        store_cert_clear(&c);
        CHECK(store_cert_live_for(s, "edge-1", NOW, &c) == 0);
        CHECK_STREQ(c.serial, "01AB");
        store_cert_clear(&c);
        CHECK(store_cert_live_for(s, "edge-2", NOW, &c) == -HWID_E_NOT_FOUND);
        CHECK(store_cert_get(s, "FFFF", &c) == -HWID_E_NOT_FOUND);
        CHECK(store_cert_get(s, "01ab", &c) == -HWID_E_NOT_FOUND);
        CHECK(commit(s, "02CD", "edge-2", NOW + 86400, NOW, NULL) == 0);
        CHECK(store_cert_list(s, "edge-1", &all, &n) == 0 && n == 1);
        store_cert_list_free(all, n);
        CHECK(store_cert_list(s, NULL, &all, &n) == 0 && n == 2);
        store_cert_list_free(all, n);
        /* Bad input never reaches the table. */
        CHECK(commit(s, "0x12", "edge-3", NOW + 10, NOW, NULL) == -HWID_E_INVALID);
        CHECK(commit(s, "03", "", NOW + 10, NOW, NULL) == -HWID_E_INVALID);
        CHECK(commit(s, "03", "edge-3", NOW - 3600, NOW, NULL) == -HWID_E_INVALID);
}

static void one_live_per_identity(void) {
        _cleanup_free_ char *path = db_path("live.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_issue replace = { .replace_live = true };
        store_cert c = { 0 };
        int r;

        CHECK(commit(s, "0A", "edge-1", NOW + 100, NOW, NULL) == 0);
        r = commit(s, "0B", "edge-1", NOW + 200, NOW + 50, NULL);
        CHECK(r == -HWID_E_CONFLICT);
        CHECK_CONTAINS(hwid_strerror(r), "edge-1");
        CHECK(cert_status(s, "0B") == -1);
        /* Expired exactly at not_after: no longer live, does not block. */
        CHECK(store_cert_live_for(s, "edge-1", NOW + 99, &c) == 0);
        store_cert_clear(&c);
        CHECK(store_cert_live_for(s, "edge-1", NOW + 100, &c) == -HWID_E_NOT_FOUND);
        CHECK(commit(s, "0B", "edge-1", NOW + 300, NOW + 100, NULL) == 0);
        CHECK(cert_status(s, "0A") == CERT_SUPERSEDED);
        CHECK(store_cert_live_for(s, "edge-1", NOW + 100, &c) == 0);
        CHECK_STREQ(c.serial, "0B");
        store_cert_clear(&c);
        /* Policy allows re-enrollment: the live one is superseded. */
        CHECK(commit(s, "0C", "edge-1", NOW + 400, NOW + 150, &replace) == 0);
        CHECK(cert_status(s, "0B") == CERT_SUPERSEDED);
        CHECK(cert_status(s, "0C") == CERT_VALID);
        CHECK(raw_int(path, "SELECT count(*) FROM certificates WHERE identity = 'edge-1' AND status = 'valid'") == 1);
        /* A revoked certificate does not block either. */
        CHECK(store_cert_revoke(s, "0C", 1, NOW + 160, NULL) == 0);
        CHECK(commit(s, "0D", "edge-1", NOW + 500, NOW + 170, NULL) == 0);
        /* Duplicate serial: refused, the stored one untouched. */
        CHECK(commit(s, "0D", "edge-2", NOW + 900, NOW + 170, NULL) == -HWID_E_EXISTS);
        CHECK(store_cert_get(s, "0D", &c) == 0);
        CHECK_STREQ(c.identity, "edge-1");
        CHECK(c.not_after == NOW + 500);
        store_cert_clear(&c);
}

static void renewal(void) {
        _cleanup_free_ char *path = db_path("renew.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_issue in = { .supersedes_serial = "0A" };
        int r;

        CHECK(commit(s, "0A", "edge-1", NOW + 100, NOW, NULL) == 0);
        CHECK(commit(s, "0B", "edge-1", NOW + 200, NOW + 50, &in) == 0);
        CHECK(cert_status(s, "0A") == CERT_SUPERSEDED && cert_status(s, "0B") == CERT_VALID);
        /* Two renewals of one certificate: the second one loses. */
        r = commit(s, "0C", "edge-1", NOW + 200, NOW + 51, &in);
        CHECK(r == -HWID_E_CONFLICT);
        CHECK(cert_status(s, "0C") == -1);
        in.supersedes_serial = "0B";
        CHECK(commit(s, "0C", "edge-2", NOW + 200, NOW + 51, &in) == -HWID_E_FORBIDDEN);
        in.supersedes_serial = "EE";
        CHECK(commit(s, "0C", "edge-1", NOW + 200, NOW + 51, &in) == -HWID_E_NOT_FOUND);
        CHECK(commit(s, "1A", "edge-9", NOW + 100, NOW, NULL) == 0);
        CHECK(store_cert_revoke(s, "1A", 1, NOW, NULL) == 0);
        in.supersedes_serial = "1A";
        CHECK(commit(s, "1B", "edge-9", NOW + 200, NOW + 1, &in) == -HWID_E_REVOKED);
        in.supersedes_serial = "0B";
        CHECK(commit(s, "0C", "edge-1", NOW + 400, NOW + 200, &in) == -HWID_E_EXPIRED);
        CHECK(cert_status(s, "0B") == CERT_VALID);
        CHECK(raw_int(path, "SELECT count(*) FROM certificates") == 3);
}

static void approved_request(void) {
        _cleanup_free_ char *path = db_path("approved.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_issue in = { .request_id = REQ1 };
        store_request q = { 0 };
        store_cert c = { 0 };

        CHECK(add_token(s, "tok111", 2, NOW + 3600) == 0);
        CHECK(add_request(s, REQ1, "edge-1", "tok111", NOW) == 0);
        CHECK(commit(s, "0A", "edge-1", NOW + 100, NOW, &in) == -HWID_E_CONFLICT);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_CONFLICT), "pending");
        CHECK(cert_status(s, "0A") == -1 && request_status(s, REQ1) == REQUEST_PENDING);
        CHECK(store_request_decide(s, REQ1, true, NULL, NOW + 1) == 0);
        CHECK(commit(s, "0A", "edge-2", NOW + 100, NOW + 2, &in) == -HWID_E_FORBIDDEN);
        CHECK(commit(s, "0A", "edge-1", NOW + 100, NOW + 2, &in) == 0);
        CHECK(store_request_get(s, REQ1, &q) == 0 && q.status == REQUEST_ISSUED && q.updated_at == NOW + 2);
        CHECK_STREQ(q.serial, "0A");
        store_request_clear(&q);
        CHECK(store_cert_get(s, "0A", &c) == 0);
        CHECK_STREQ(c.request_id, REQ1);
        store_cert_clear(&c);
        /* Issued once: a second poll racing the first gets a conflict. */
        in.replace_live = true;
        CHECK(commit(s, "0B", "edge-1", NOW + 100, NOW + 3, &in) == -HWID_E_CONFLICT);
        CHECK(cert_status(s, "0A") == CERT_VALID && cert_status(s, "0B") == -1);
        in.request_id = REQ2;
        CHECK(commit(s, "0B", "edge-1", NOW + 100, NOW + 3, &in) == -HWID_E_NOT_FOUND);
        /* Only the use taken by the request. */
        CHECK(uses_left(s, "tok111") == 1);
}

/* ---- all or nothing ---- */

typedef struct snapshot {
        int uses;
        int64_t certs, audits, valid_x;
        int request;
} snapshot;

static snapshot take(store *s, const char *path) {
        return (snapshot) {
                .uses = uses_left(s, "tok111"),
                .certs = raw_int(path, "SELECT count(*) FROM certificates"),
                .audits = raw_int(path, "SELECT count(*) FROM audit"),
                .valid_x = raw_int(path, "SELECT count(*) FROM certificates "
                                         "WHERE serial = '0D' AND status = 'valid'"),
                .request = request_status(s, REQ1),
        };
}

static bool same(snapshot a, snapshot b) {
        return a.uses == b.uses && a.certs == b.certs && a.audits == b.audits && a.valid_x == b.valid_x &&
               a.request == b.request;
}

/* Each failing commit (the failure in a different part each time)
 * leaves token uses, certificates, audit, request and the live
 * certificate exactly as they were. */
static void atomicity(void) {
        _cleanup_free_ char *path = db_path("atomic.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_audit a = { .at = NOW, .actor = "token:tok111", .action = "enroll", .target = "x", .outcome = "allow" };
        store_audit bad = { .at = NOW, .actor = NULL, .action = "enroll", .outcome = "allow" };
        store_issue in = { .consume_token_id = "tok111", .audit = &a };
        snapshot before;

        CHECK(add_token(s, "tok111", 5, NOW + 3600) == 0);
        CHECK(add_token(s, "used00", 1, NOW + 3600) == 0);
        CHECK(add_request(s, REQ1, "edge-r", "used00", NOW) == 0);
        CHECK(commit(s, "0D", "edge-x", NOW + 1000, NOW, NULL) == 0);
        before = take(s, path);
        CHECK(before.uses == 5 && before.certs == 1 && before.audits == 0 && before.valid_x == 1);

        /* The insert fails: identity has a live certificate. */
        CHECK(commit(s, "01", "edge-x", NOW + 1000, NOW, &in) == -HWID_E_CONFLICT);
        CHECK(same(before, take(s, path)));
        /* The insert fails after the live one was superseded (replace_live). */
        in.replace_live = true;
        CHECK(commit(s, "0D", "edge-x", NOW + 1000, NOW, &in) == -HWID_E_EXISTS);
        CHECK(same(before, take(s, path)));
        in.replace_live = false;
        /* The token fails. */
        in.consume_token_id = "used00";
        CHECK(commit(s, "01", "edge-1", NOW + 1000, NOW, &in) == -HWID_E_TOKEN_INVALID);
        CHECK(same(before, take(s, path)));
        in.consume_token_id = "tok111";
        /* The request fails (pending), after the token use was taken. */
        in.request_id = REQ1;
        CHECK(commit(s, "01", "edge-r", NOW + 1000, NOW, &in) == -HWID_E_CONFLICT);
        CHECK(same(before, take(s, path)));
        /* The supersede fails. */
        in.request_id = NULL;
        in.supersedes_serial = "EE";
        CHECK(commit(s, "01", "edge-x", NOW + 1000, NOW, &in) == -HWID_E_NOT_FOUND);
        CHECK(same(before, take(s, path)));
        /* The very last part (audit) fails after everything else went in:
         * token used, request issued, live one superseded, cert inserted. */
        CHECK(store_request_decide(s, REQ1, true, NULL, NOW) == 0);
        before = take(s, path);
        in = (store_issue) { .consume_token_id = "tok111", .request_id = REQ1, .audit = &bad };
        CHECK(commit(s, "01", "edge-r", NOW + 1000, NOW, &in) == -HWID_E_INVALID);
        CHECK(same(before, take(s, path)));
        in = (store_issue) { .consume_token_id = "tok111", .supersedes_serial = "0D", .audit = &bad };
        CHECK(commit(s, "01", "edge-x", NOW + 1000, NOW, &in) == -HWID_E_INVALID);
        CHECK(same(before, take(s, path)));
        /* And the same commit with a good audit record goes through whole. */
        in.audit = &a;
        CHECK(commit(s, "01", "edge-x", NOW + 1000, NOW, &in) == 0);
        CHECK(uses_left(s, "tok111") == 4 && cert_status(s, "0D") == CERT_SUPERSEDED && audit_rows(s) == 1);
}

/* ---- 32 concurrent commits for one identity ---- */

typedef struct racer {
        const char *path;
        store *shared; /* NULL: open a store of its own */
        pthread_barrier_t *go;
        int index;
        int result;
} racer;

static void *race(void *arg) {
        racer *x = arg;
        store_issue in = { .consume_token_id = "many99" };
        store *own = NULL;
        char serial[8];

        snprintf(serial, sizeof(serial), "%04X", 0x100 + x->index);
        x->result = x->shared ? 0 : store_open(x->path, &own);
        pthread_barrier_wait(x->go);
        if (x->result == 0)
                x->result = commit(x->shared ? x->shared : own, serial, "race", NOW + 1000, NOW, &in);
        store_free(own);
        return NULL;
}

static void race_one_identity(const char *name, bool shared) {
        _cleanup_free_ char *path = db_path(name);
        _cleanup_(store_freep) store *s = open_fresh(path);
        pthread_barrier_t go;
        pthread_t th[RACERS];
        racer x[RACERS];
        int ok = 0, conflict = 0;

        CHECK(add_token(s, "many99", 100, NOW + 3600) == 0);
        pthread_barrier_init(&go, NULL, RACERS);
        for (int i = 0; i < RACERS; i++) {
                x[i] = (racer) { .path = path, .shared = shared ? s : NULL, .go = &go, .index = i };
                CHECK(pthread_create(&th[i], NULL, race, &x[i]) == 0);
        }
        for (int i = 0; i < RACERS; i++) {
                pthread_join(th[i], NULL);
                ok += x[i].result == 0;
                conflict += x[i].result == -HWID_E_CONFLICT;
                if (x[i].result != 0 && x[i].result != -HWID_E_CONFLICT)
                        fprintf(stderr, "racer %d: %s\n", i, hwid_strerror(x[i].result));
        }
        pthread_barrier_destroy(&go);
        CHECK(ok == 1);
        CHECK(conflict == RACERS - 1);
        CHECK(raw_int(path, "SELECT count(*) FROM certificates WHERE identity = 'race'") == 1);
        /* Only the winner's token use was taken. */
        CHECK(uses_left(s, "many99") == 99);
}

/* ---- 32 concurrent commits sharing transactions (group commit) ---- */

/* Commits that land in one batch fail alone: each keeps its own error
 * and detail, the others are all durable, and only theirs spent a token
 * use.  Odd racers find their identity taken, racer 2 brings an audit
 * record the store refuses. */
static void *race_mixed(void *arg) {
        racer *x = arg;
        store_audit bad = { .at = NOW, .actor = NULL, .action = "enroll", .outcome = "allow" };
        store_issue in = { .consume_token_id = "mixed1", .audit = x->index == 2 ? &bad : NULL };
        char serial[8], identity[16];

        snprintf(serial, sizeof(serial), "%04X", 0x200 + x->index);
        snprintf(identity, sizeof(identity), "mix-%d", x->index);
        pthread_barrier_wait(x->go);
        x->result = commit(x->shared, serial, identity, NOW + 1000, NOW, &in);
        if (x->result == -HWID_E_CONFLICT && !strstr(hwid_strerror(x->result), identity))
                x->result = -HWID_E_INTERNAL; /* the detail must be this racer's own */
        return NULL;
}

static void race_mixed_batch(void) {
        _cleanup_free_ char *path = db_path("race-mixed.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        pthread_barrier_t go;
        pthread_t th[RACERS];
        racer x[RACERS];
        char serial[8], identity[16];
        int ok = 0, conflict = 0, invalid = 0;

        CHECK(add_token(s, "mixed1", RACERS, NOW + 3600) == 0);
        for (int i = 1; i < RACERS; i += 2) {
                snprintf(serial, sizeof(serial), "%04X", 0x300 + i);
                snprintf(identity, sizeof(identity), "mix-%d", i);
                CHECK(commit(s, serial, identity, NOW + 1000, NOW, NULL) == 0);
        }
        pthread_barrier_init(&go, NULL, RACERS);
        for (int i = 0; i < RACERS; i++) {
                x[i] = (racer) { .shared = s, .go = &go, .index = i };
                CHECK(pthread_create(&th[i], NULL, race_mixed, &x[i]) == 0);
        }
        for (int i = 0; i < RACERS; i++) {
                pthread_join(th[i], NULL);
                ok += x[i].result == 0;
                conflict += x[i].result == -HWID_E_CONFLICT;
                invalid += x[i].result == -HWID_E_INVALID;
                CHECK(x[i].result == (i % 2 ? -HWID_E_CONFLICT : i == 2 ? -HWID_E_INVALID : 0));
        }
        pthread_barrier_destroy(&go);
        CHECK(ok == RACERS / 2 - 1 && conflict == RACERS / 2 && invalid == 1);
        for (int i = 0; i < RACERS; i++) {
                snprintf(serial, sizeof(serial), "%04X", 0x200 + i);
                CHECK(cert_status(s, serial) == (i % 2 == 0 && i != 2 ? CERT_VALID : -1));
        }
        CHECK(raw_int(path, "SELECT count(*) FROM certificates") == RACERS / 2 + RACERS / 2 - 1);
        CHECK(uses_left(s, "mixed1") == RACERS - (RACERS / 2 - 1));
        CHECK(raw_int(path, "SELECT count(*) FROM audit") == 0);
}

/* Many openers of a brand-new file at once (hwidd and the admin CLI at
 * first start): one creates the schema, none fails. */
static void *open_one(void *arg) {
        racer *x = arg;
        store *s = NULL;

        pthread_barrier_wait(x->go);
        x->result = store_open(x->path, &s);
        if (x->result == 0)
                x->result = store_ping(s);
        if (x->result < 0)
                fprintf(stderr, "opener %d: %s\n", x->index, hwid_strerror(x->result));
        store_free(s);
        return NULL;
}

static void race_first_open(void) {
        _cleanup_free_ char *path = db_path("first-open.db");
        pthread_barrier_t go;
        pthread_t th[RACERS / 2];
        racer x[RACERS / 2];
        int ok = 0;

        pthread_barrier_init(&go, NULL, RACERS / 2);
        for (int i = 0; i < RACERS / 2; i++) {
                x[i] = (racer) { .path = path, .go = &go, .index = i };
                CHECK(pthread_create(&th[i], NULL, open_one, &x[i]) == 0);
        }
        for (int i = 0; i < RACERS / 2; i++) {
                pthread_join(th[i], NULL);
                ok += x[i].result == 0;
        }
        pthread_barrier_destroy(&go);
        CHECK(ok == RACERS / 2);
        CHECK(raw_int(path, "SELECT value FROM meta WHERE key = 'schema_version'") == 1);
        CHECK(raw_int(path, "SELECT count(*) FROM meta") == 2);
}

/* ---- revocation and the CRL walk ---- */

typedef struct walk {
        char serials[8][16];
        int n, stop_after;
        int64_t at;
        int reason;
} walk;

static int collect(const char *serial, int64_t revoked_at, int reason, void *userdata) {
        walk *w = userdata;

        if (w->n < 8)
                snprintf(w->serials[w->n], sizeof(w->serials[0]), "%s", serial);
        if (strcmp(serial, "0B") == 0) {
                w->at = revoked_at;
                w->reason = reason;
        }
        w->n++;
        return w->stop_after && w->n == w->stop_after ? 42 : 0;
}

static void revocation(void) {
        _cleanup_free_ char *path = db_path("revoke.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_audit a = { .at = NOW, .actor = "admin:root", .action = "revoke", .target = "0B", .outcome = "allow",
                          .reason = "key compromise" };
        walk w = { 0 };
        int64_t seq = -1;

        CHECK(commit(s, "1C", "edge-1", NOW + 1000, NOW, NULL) == 0);
        CHECK(commit(s, "0B", "edge-2", NOW + 1000, NOW, NULL) == 0);
        CHECK(commit(s, "0A", "edge-3", NOW + 1000, NOW, NULL) == 0);
        CHECK(commit(s, "05", "edge-4", NOW + 10, NOW, NULL) == 0);
        CHECK(commit(s, "07", "edge-5", NOW + 1000, NOW, NULL) == 0);
        CHECK(store_revocation_seq(s, &seq) == 0 && seq == 0);
        CHECK(store_cert_revoke(s, "0B", 1, NOW + 5, &a) == 0);
        CHECK(store_revocation_seq(s, &seq) == 0 && seq == 1);
        CHECK(audit_rows(s) == 1);
        CHECK(cert_status(s, "0B") == CERT_REVOKED);
        CHECK(store_cert_revoke(s, "0B", 1, NOW + 6, &a) == -HWID_E_CONFLICT);
        CHECK(store_cert_revoke(s, "FF", 1, NOW, NULL) == -HWID_E_NOT_FOUND);
        CHECK(store_cert_revoke(s, "0A", 7, NOW, NULL) == -HWID_E_INVALID);
        CHECK(store_revocation_seq(s, &seq) == 0 && seq == 1 && audit_rows(s) == 1);
        CHECK(store_cert_revoke(s, "0A", 0, NOW + 5, NULL) == 0);
        CHECK(store_cert_revoke(s, "05", 4, NOW + 5, NULL) == 0);
        /* Superseded but unexpired: relying parties still accept it. */
        CHECK(commit(s, "08", "edge-5", NOW + 1000, NOW, &(store_issue) { .replace_live = true }) == 0);
        CHECK(store_cert_revoke(s, "07", 1, NOW + 5, NULL) == 0);
        CHECK(store_revocation_seq(s, &seq) == 0 && seq == 4);
        CHECK(store_cert_foreach_revoked(s, NOW + 5, collect, &w) == 0);
        CHECK(w.n == 4);
        CHECK_STREQ(w.serials[0], "05");
        CHECK_STREQ(w.serials[1], "07");
        CHECK_STREQ(w.serials[2], "0A");
        CHECK_STREQ(w.serials[3], "0B");
        CHECK(w.at == NOW + 5 && w.reason == 1);
        /* 05 has expired: it leaves the CRL. */
        w = (walk) { 0 };
        CHECK(store_cert_foreach_revoked(s, NOW + 10, collect, &w) == 0 && w.n == 3);
        CHECK_STREQ(w.serials[0], "07");
        w = (walk) { .stop_after = 2 };
        CHECK(store_cert_foreach_revoked(s, NOW, collect, &w) == 42 && w.n == 2);
        CHECK(store_cert_live_for(s, "edge-2", NOW + 6, &(store_cert) { 0 }) == -HWID_E_NOT_FOUND);
}

typedef struct order {
        char last[64];
        int n, unordered;
} order;

static int check_order(const char *serial, int64_t revoked_at, int reason, void *userdata) {
        order *o = userdata;

        if (o->n > 0 && strcmp(o->last, serial) >= 0)
                o->unordered++;
        snprintf(o->last, sizeof(o->last), "%s", serial);
        o->n++;
        return 0;
}

/* Many revoked rows, inserted out of order, walked in serial order
 * through the covering index (no sort step in the plan). */
static void crl_walk_many(void) {
        _cleanup_free_ char *path = db_path("crl.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        _cleanup_free_ char *plan = NULL;
        order o = { 0 };
        char sql[512];

        snprintf(sql, sizeof(sql),
                 "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000) "
                 "INSERT INTO certificates (serial, identity, subject, profile, spki_sha256, der, not_before, "
                 "not_after, status, revoked_at, revocation_reason, created_at) "
                 "SELECT printf('%%08X', (i * 7919) %% 100003), 'id-' || i, 'CN=x', 'edge', '%s', x'00', 0, "
                 "%lld + (i %% 2), 'revoked', i, 1, 0 FROM n",
                 spki, (long long) NOW);
        CHECK(raw_exec(path, sql) == SQLITE_OK);
        CHECK(store_cert_foreach_revoked(s, NOW, check_order, &o) == 0);
        CHECK(o.n == 2500 && o.unordered == 0);
        plan = raw_plan(path, "SELECT serial, revoked_at, revocation_reason FROM certificates "
                              "INDEXED BY certificates_revoked "
                              "WHERE status = 'revoked' AND not_after > 0 ORDER BY serial");
        CHECK_CONTAINS(plan, "certificates_revoked");
        CHECK(!strstr(plan, "TEMP B-TREE"));
        free(plan);
        /* The hot-path lookups go through an index, never a table scan. */
        plan = raw_plan(path, "SELECT * FROM certificates "
                              "WHERE identity = 'x' AND status = 'valid' AND not_after > 0");
        CHECK_CONTAINS(plan, "USING INDEX");
}

/* ---- audit ---- */

typedef struct seen {
        char actions[8][16];
        int n;
        bool null_ok;
        store *s;
        int inner;
} seen;

static int see(const store_audit *a, void *userdata) {
        seen *x = userdata;

        if (x->n < 8)
                snprintf(x->actions[x->n], sizeof(x->actions[0]), "%s", a->action);
        if (strcmp(a->action, "a1") == 0)
                x->null_ok = a->reason == NULL && a->token_id == NULL && a->target == NULL && a->at == NOW + 1;
        x->n++;
        return 0;
}

/* A callback that calls back into the store gets an error, not a hang. */
static int reenter(const store_audit *a, void *userdata) {
        seen *x = userdata;

        x->inner = store_ping(x->s);
        return 0;
}

static void audit(void) {
        _cleanup_free_ char *path = db_path("audit.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        seen x = { 0 };

        for (int i = 0; i < 5; i++) {
                char action[8];
                store_audit a = { .at = NOW + i, .actor = "admin:root", .action = action, .target = "t",
                                  .outcome = "allow", .reason = "why", .token_id = "abc123" };

                snprintf(action, sizeof(action), "a%d", i);
                if (i == 1)
                        a.reason = a.token_id = a.target = NULL;
                CHECK(store_audit_append(s, &a) == 0);
        }
        CHECK(store_audit_append(s, &(store_audit) { .actor = "x", .action = "y" }) == -HWID_E_INVALID);
        CHECK(store_audit_foreach(s, 0, see, &x) == 0 && x.n == 5);
        CHECK_STREQ(x.actions[0], "a0");
        CHECK_STREQ(x.actions[4], "a4");
        CHECK(x.null_ok);
        x = (seen) { 0 };
        CHECK(store_audit_foreach(s, 2, see, &x) == 0 && x.n == 2);
        CHECK_STREQ(x.actions[0], "a3");
        CHECK_STREQ(x.actions[1], "a4");
        x = (seen) { .s = s };
        CHECK(store_audit_foreach(s, 1, reenter, &x) == 0);
        CHECK(x.inner == -HWID_E_INTERNAL);
        CHECK(store_ping(s) == 0);
        /* Time-ordered queries have their index. */
        CHECK(raw_int(path, "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = 'audit_at'") == 1);
}

/* ---- schema, files, durability ---- */

static void schema_versions(void) {
        _cleanup_free_ char *path = db_path("schema.db"), *other = db_path("other.db"), *junk = db_path("junk.db");
        static char big[8192];
        store *s = NULL;
        int r;

        s = open_fresh(path);
        store_free(s);
        s = NULL;
        CHECK(raw_int(path, "SELECT value FROM meta WHERE key = 'schema_version'") == 1);
        /* Reopening an up-to-date database changes nothing. */
        s = open_fresh(path);
        store_free(s);
        s = NULL;
        CHECK(raw_exec(path, "UPDATE meta SET value = 99 WHERE key = 'schema_version'") == SQLITE_OK);
        r = store_open(path, &s);
        CHECK(r == -HWID_E_STORE && s == NULL);
        CHECK_CONTAINS(hwid_strerror(r), "schema version 99");
        CHECK_CONTAINS(hwid_strerror(r), "newer");
        CHECK(raw_int(path, "SELECT value FROM meta WHERE key = 'schema_version'") == 99);

        CHECK(raw_exec(other, "CREATE TABLE photos (id INTEGER PRIMARY KEY)") == SQLITE_OK);
        r = store_open(other, &s);
        CHECK(r == -HWID_E_STORE && s == NULL);
        store_free(TAKE_PTR(s));
        CHECK_CONTAINS(hwid_strerror(r), "not an hwid database");
        CHECK(raw_int(other, "SELECT count(*) FROM sqlite_schema") == 1);

        /* Not SQLite at all, short or long: refused, not overwritten. */
        CHECK(write_file_atomic(junk, "listen: 127.0.0.1:8443\n", 23, 0600) == 0);
        r = store_open(junk, &s);
        CHECK(r == -HWID_E_STORE && s == NULL);
        CHECK_CONTAINS(hwid_strerror(r), "junk.db");
        CHECK_CONTAINS(hwid_strerror(r), "not an SQLite database");
        memset(big, 'x', sizeof(big));
        CHECK(write_file_atomic(junk, big, sizeof(big), 0600) == 0);
        r = store_open(junk, &s);
        CHECK(r == -HWID_E_STORE && s == NULL);
        CHECK_CONTAINS(hwid_strerror(r), "junk.db");
        store_free(s); /* in case a check above failed */
}

static void reopen_keeps_everything(void) {
        _cleanup_free_ char *path = db_path("durable.db"), *wal = NULL;
        store_audit a = { .at = NOW, .actor = "admin:root", .action = "revoke", .target = "0A", .outcome = "allow" };
        store_cert c = { 0 };
        store *s = open_fresh(path);
        struct stat st;
        int64_t seq = 0;

        CHECK(add_token(s, "tok111", 3, NOW + 3600) == 0);
        CHECK(add_request(s, REQ1, "edge-9", "tok111", NOW) == 0);
        CHECK(commit(s, "0A", "edge-1", NOW + 1000, NOW, &(store_issue) { .consume_token_id = "tok111" }) == 0);
        CHECK(commit(s, "0B", "edge-2", NOW + 1000, NOW, NULL) == 0);
        CHECK(store_cert_revoke(s, "0A", 1, NOW, &a) == 0);
        /* WAL mode is a property of the file; the store's file is owner-only. */
        CHECK(raw_int(path, "SELECT count(*) FROM pragma_journal_mode WHERE journal_mode = 'wal'") == 1);
        CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
        CHECK(asprintf(&wal, "%s-wal", path) > 0 && access(wal, F_OK) == 0);
        store_free(s);

        s = open_fresh(path);
        CHECK(uses_left(s, "tok111") == 1);
        CHECK(request_status(s, REQ1) == REQUEST_PENDING);
        CHECK(cert_status(s, "0A") == CERT_REVOKED && cert_status(s, "0B") == CERT_VALID);
        CHECK(store_cert_live_for(s, "edge-2", NOW, &c) == 0 && c.der_len == sizeof(der));
        store_cert_clear(&c);
        CHECK(store_revocation_seq(s, &seq) == 0 && seq == 1);
        CHECK(audit_rows(s) == 1);
        store_free(s);
}

static void unwritable_path(void) {
        _cleanup_free_ char *ro = path_join(dir, "ro"), *inside = NULL;
        store *s = NULL;
        int r;

        r = store_open("/nonexistent-hwid-dir/hwid.db", &s);
        CHECK(r == -HWID_E_STORE && s == NULL);
        CHECK_CONTAINS(hwid_strerror(r), "/nonexistent-hwid-dir/hwid.db");
        CHECK_CONTAINS(hwid_strerror(r), "No such file or directory");
        r = store_open(dir, &s);
        CHECK(r == -HWID_E_STORE && s == NULL);
        CHECK_CONTAINS(hwid_strerror(r), dir);
        CHECK(store_open("", &s) == -HWID_E_INVALID);
        /* Permissions do not stop root; /proc does. */
        r = store_open("/proc/hwid.db", &s);
        CHECK(r == -HWID_E_STORE && s == NULL);
        CHECK_CONTAINS(hwid_strerror(r), "cannot open database /proc/hwid.db");
        if (geteuid() != 0 && mkdir(ro, 0500) == 0) {
                inside = path_join(ro, "hwid.db");
                r = store_open(inside, &s);
                CHECK(r == -HWID_E_STORE && s == NULL);
                CHECK_CONTAINS(hwid_strerror(r), "Permission denied");
                rmdir(ro);
        }
}

/* A write the disk refuses (here: a file size limit, as a full disk
 * would) is a store error, leaves nothing behind, and the store works
 * again once there is room. */
static void disk_full(void) {
        _cleanup_free_ char *path = db_path("full.db"), *wal = NULL;
        _cleanup_(store_freep) store *s = open_fresh(path);
        _cleanup_free_ uint8_t *huge = calloc(1, 1 << 20);
        struct rlimit old, lim;
        struct stat st;
        store_cert c;
        int r;

        CHECK(huge && asprintf(&wal, "%s-wal", path) > 0);
        CHECK(add_token(s, "tok111", 2, NOW + 3600) == 0);
        CHECK(stat(wal, &st) == 0 && getrlimit(RLIMIT_FSIZE, &old) == 0);
        c = make_cert("0A", "edge-1", NOW + 100);
        c.der = huge;
        c.der_len = 1 << 20;
        signal(SIGXFSZ, SIG_IGN);
        lim = (struct rlimit) { .rlim_cur = (rlim_t) st.st_size + 4096, .rlim_max = old.rlim_max };
        CHECK(setrlimit(RLIMIT_FSIZE, &lim) == 0);
        r = store_cert_commit(s, &(store_issue) { .cert = &c, .consume_token_id = "tok111" }, NOW);
        CHECK(setrlimit(RLIMIT_FSIZE, &old) == 0);
        signal(SIGXFSZ, SIG_DFL);
        CHECK(r == -HWID_E_STORE);
        CHECK_CONTAINS(hwid_strerror(r), "full.db");
        CHECK(uses_left(s, "tok111") == 2 && cert_status(s, "0A") == -1);
        CHECK(store_cert_commit(s, &(store_issue) { .cert = &c, .consume_token_id = "tok111" }, NOW) == 0);
        CHECK(uses_left(s, "tok111") == 1 && cert_status(s, "0A") == CERT_VALID);
}

/* ---- waiting for other writers ---- */

typedef struct holder {
        const char *path;
        int hold_ms;
        pthread_barrier_t *locked;
} holder;

/* Another process's writer, as the admin CLI would be: holds the write lock a while. */
static void *hold_lock(void *arg) {
        holder *h = arg;
        struct timespec ts = { h->hold_ms / 1000, (long) (h->hold_ms % 1000) * 1000000L };
        sqlite3 *db = NULL;

        sqlite3_open_v2(h->path, &db, SQLITE_OPEN_READWRITE, NULL);
        sqlite3_exec(db, "BEGIN IMMEDIATE; UPDATE meta SET value = value WHERE key = 'schema_version'", NULL, NULL,
                     NULL);
        pthread_barrier_wait(h->locked);
        nanosleep(&ts, NULL);
        sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
        sqlite3_close(db);
        return NULL;
}

static int with_lock_held(store *s, const char *path, int hold_ms, const char *token) {
        pthread_barrier_t locked;
        holder h = { .path = path, .hold_ms = hold_ms, .locked = &locked };
        pthread_t th;
        int r;

        pthread_barrier_init(&locked, NULL, 2);
        pthread_create(&th, NULL, hold_lock, &h);
        pthread_barrier_wait(&locked);
        r = add_token(s, token, 1, NOW + 3600);
        pthread_join(th, NULL);
        pthread_barrier_destroy(&locked);
        return r;
}

static void busy_writers(void) {
        _cleanup_free_ char *path = db_path("busy.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        struct timespec t0, t1;
        int r;

        /* A short hold: the store waits, then succeeds. */
        CHECK(with_lock_held(s, path, 300, "wait01") == 0);
        CHECK(uses_left(s, "wait01") == 1);
        /* Held past the busy timeout: a clear store error, in bounded time. */
        clock_gettime(CLOCK_MONOTONIC, &t0);
        r = with_lock_held(s, path, 7000, "wait02");
        clock_gettime(CLOCK_MONOTONIC, &t1);
        CHECK(r == -HWID_E_STORE);
        CHECK_CONTAINS(hwid_strerror(r), "locked");
        CHECK(t1.tv_sec - t0.tv_sec >= 4 && t1.tv_sec - t0.tv_sec <= 8);
        CHECK(uses_left(s, "wait02") == -1);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        return remove(path);
}

int main(void) {
        if (!mkdtemp(dir)) {
                perror("mkdtemp");
                return 1;
        }
        tokens();
        requests();
        commit_happy_path();
        one_live_per_identity();
        renewal();
        approved_request();
        atomicity();
        race_one_identity("race-shared.db", true);
        race_one_identity("race-separate.db", false);
        race_mixed_batch();
        race_first_open();
        revocation();
        crl_walk_many();
        audit();
        schema_versions();
        reopen_keeps_everything();
        unwritable_path();
        disk_full();
        busy_writers();
        /* Kept on failure, for a look with the sqlite3 shell. */
        if (!check_failures && nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS) != 0)
                fprintf(stderr, "could not remove %s\n", dir);
        else if (check_failures)
                fprintf(stderr, "databases kept in %s\n", dir);
        return check_done("test-store");
}
