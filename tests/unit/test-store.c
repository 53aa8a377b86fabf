/* The SQLite store against real database files in a temporary directory:
 * tokens, requests, audit, the schema and the file itself (reopening,
 * unwritable paths, a full disk, other writers holding the lock).
 * Certificates are in test-store-certs.c.  Where the store's own API
 * cannot show something (row counts, the journal mode, query plans), a
 * second raw connection looks at the file, as an admin with the sqlite3
 * shell would. */
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
#include "store-fixture.h"
#include "store-sqlite.h"

char dir[] = "/tmp/hwid-test-store-XXXXXX";

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

/* A derived token keeps its nonce and no hash, a legacy one its hash and
 * no nonce: the schema holds exactly one of the two, 32 bytes long. */
static void derived_tokens(void) {
        _cleanup_free_ char *path = db_path("derived.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        static const uint8_t zeros[32];
        store_token t = { 0 };

        CHECK(add_derived_token(s, "der001", 0x5a, NOW + 3600) == 0);
        CHECK(add_token(s, "leg001", 1, NOW + 3600) == 0);
        CHECK(store_token_get(s, "der001", &t) == 0);
        CHECK(t.derived && t.nonce[0] == 0x5a && t.nonce[31] == 0x5a);
        CHECK(memcmp(t.secret_hash, zeros, sizeof(zeros)) == 0);
        store_token_clear(&t);
        CHECK(store_token_get(s, "leg001", &t) == 0);
        CHECK(!t.derived && memcmp(t.nonce, zeros, sizeof(zeros)) == 0 && t.secret_hash[0] == 0xab);
        store_token_clear(&t);
        CHECK(raw_int(path, "SELECT count(*) FROM tokens WHERE id = 'der001' AND secret_hash IS NULL "
                            "AND length(nonce) = 32") == 1);
        CHECK(raw_int(path, "SELECT count(*) FROM tokens WHERE id = 'leg001' AND nonce IS NULL "
                            "AND length(secret_hash) = 32") == 1);
        /* Both, neither, or a short nonce: refused by the schema itself. */
        CHECK(raw_exec(path, "INSERT INTO tokens (id, secret_hash, nonce, profile, created_at, expires_at, uses_total, "
                             "uses_left) VALUES ('bad001', zeroblob(32), zeroblob(32), 'p', 0, 1, 1, 1)") != SQLITE_OK);
        CHECK(raw_exec(path, "INSERT INTO tokens (id, profile, created_at, expires_at, uses_total, uses_left) "
                             "VALUES ('bad002', 'p', 0, 1, 1, 1)") != SQLITE_OK);
        CHECK(raw_exec(path, "INSERT INTO tokens (id, nonce, profile, created_at, expires_at, uses_total, uses_left) "
                             "VALUES ('bad003', zeroblob(16), 'p', 0, 1, 1, 1)") != SQLITE_OK);
        /* A derived token is spent like any other. */
        CHECK(add_request(s, REQ1, "d-1", "der001", NOW) == 0);
        CHECK(uses_left(s, "der001") == 0);
}

/* ---- requests ---- */

/* Tokens are stored a batch at a time, whole or not at all: an id taken,
 * or one malformed, and none of the batch is there. */
static void token_batches(void) {
        _cleanup_free_ char *path = db_path("token-batches.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        static const char *const ok[] = { "bat001", "bat002", "bat003" };
        static const char *const clash[] = { "bat004", "bat002", "bat005" };
        static const char *const bad[] = { "bat006", "BAD!!!" };
        store_token *all = NULL;
        size_t n = 0;

        CHECK(add_tokens(s, ok, ELEMENTSOF(ok), 1, NOW + 3600) == 0);
        CHECK(add_tokens(s, clash, ELEMENTSOF(clash), 1, NOW + 3600) == -HWID_E_EXISTS);
        CHECK(uses_left(s, "bat004") == -1 && uses_left(s, "bat005") == -1);
        CHECK(add_tokens(s, bad, ELEMENTSOF(bad), 1, NOW + 3600) == -HWID_E_INVALID);
        CHECK(uses_left(s, "bat006") == -1);
        CHECK(store_token_insert(s, NULL, 0) == -HWID_E_INVALID);
        CHECK(store_token_list(s, &all, &n) == 0 && n == ELEMENTSOF(ok));
        store_token_list_free(all, n);
        CHECK(raw_int(path, "SELECT count(*) FROM tokens") == (int64_t) ELEMENTSOF(ok));
}

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

/* A callback that calls back into the store (a lookup) is served, not hung. */
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
        /* A lookup inside a callback runs on another read connection. */
        x = (seen) { .s = s, .inner = 1 };
        CHECK(store_audit_foreach(s, 1, reenter, &x) == 0);
        CHECK(x.inner == 0);
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
        CHECK(raw_int(path, "SELECT value FROM meta WHERE key = 'schema_version'") == sqlite_schema_version());
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

/* A commit in flight: the writer connection is held, its change not yet
 * committed, while lookups go on. */
typedef struct slow_commit {
        store *s;
        pthread_barrier_t *in_job;
        int r;
} slow_commit;

static int slow_job(sqlite_store *s, void *userdata) {
        slow_commit *sc = userdata;
        struct timespec ts = { 1, 0 };

        if (sqlite3_exec(s->db, "UPDATE tokens SET uses_left = 0 WHERE id = 'read01'", NULL, NULL, NULL) != SQLITE_OK)
                return -HWID_E_STORE;
        pthread_barrier_wait(sc->in_job);
        nanosleep(&ts, NULL);
        return 0;
}

static void *run_slow_commit(void *arg) {
        slow_commit *sc = arg;
        sqlite_job job = { .run = slow_job, .userdata = sc };

        sc->r = sqlite_group_commit(sqlite_of(sc->s), &job, "commit the slow job");
        return NULL;
}

static void reads_beside_a_commit(void) {
        _cleanup_free_ char *path = db_path("readers.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        pthread_barrier_t in_job;
        slow_commit sc = { .s = s, .in_job = &in_job, .r = 1 };
        struct timespec t0, t1;
        pthread_t th;

        CHECK(add_token(s, "read01", 5, NOW + 3600) == 0);
        pthread_barrier_init(&in_job, NULL, 2);
        pthread_create(&th, NULL, run_slow_commit, &sc);
        pthread_barrier_wait(&in_job);
        /* Not behind the commit, and not seeing what it has not committed. */
        clock_gettime(CLOCK_MONOTONIC, &t0);
        CHECK(uses_left(s, "read01") == 5);
        CHECK(store_ping(s) == 0);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        CHECK((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 < 500);
        pthread_join(th, NULL);
        pthread_barrier_destroy(&in_job);
        CHECK(sc.r == 0);
        /* Once committed, every lookup sees it. */
        for (int i = 0; i < 2 * SQLITE_STORE_READERS; i++)
                CHECK(uses_left(s, "read01") == 0);
        /* In-process, a read costs no round trip: nothing to read ahead,
         * so a request's CSR is not parsed before it is authenticated. */
        CHECK(!store_reads_ahead(s));
}

int main(void) {
        if (!fixture_begin())
                return 1;
        tokens();
        derived_tokens();
        token_batches();
        requests();
        audit();
        schema_versions();
        reopen_keeps_everything();
        unwritable_path();
        disk_full();
        busy_writers();
        reads_beside_a_commit();
        return fixture_end("test-store");
}
