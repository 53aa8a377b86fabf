/* The SQLite store against real database files in a temporary directory,
 * beyond what every store promises (test-store-contract.c, run on SQLite
 * as store-contract-sqlite): the schema and the file itself (its mode,
 * unwritable paths, a full disk, other writers holding the lock), read
 * connections beside a commit, and what the schema refuses on its own.  Where the store's own API
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

/* ---- tokens (store-contract-*.c has what store.h promises of them) ---- */

/* A derived token keeps its nonce and no hash, a legacy one its hash and
 * no nonce: the schema holds exactly one of the two, 32 bytes long. */
static void derived_tokens(void) {
        _cleanup_free_ char *path = db_path("derived.db");
        _cleanup_(store_freep) store *s = open_fresh(path);

        CHECK(add_derived_token(s, "der001", 0x5a, NOW + 3600) == 0);
        CHECK(add_token(s, "leg001", 1, NOW + 3600) == 0);
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
}

/* ---- audit ---- */

typedef struct seen {
        store *s;
        int inner;
} seen;

/* A callback that calls back into the store (a lookup) is served, not hung. */
static int reenter(const store_audit *a, void *userdata) {
        seen *x = userdata;

        x->inner = store_ping(x->s);
        return 0;
}

static void audit(void) {
        _cleanup_free_ char *path = db_path("audit.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        seen x = { .s = s, .inner = 1 };

        CHECK(store_audit_append(s, &(store_audit) { .at = NOW, .actor = "admin:root", .action = "a0",
                                                       .outcome = "allow" }) == 0);
        /* A lookup inside a callback runs on another read connection. */
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

/* The file: WAL mode is a property of it, and it is owner-only. */
static void file_mode(void) {
        _cleanup_free_ char *path = db_path("durable.db"), *wal = NULL;
        _cleanup_(store_freep) store *s = open_fresh(path);
        struct stat st;

        CHECK(add_token(s, "tok111", 3, NOW + 3600) == 0);
        CHECK(raw_int(path, "SELECT count(*) FROM pragma_journal_mode WHERE journal_mode = 'wal'") == 1);
        CHECK(stat(path, &st) == 0 && (st.st_mode & 0777) == 0600);
        CHECK(asprintf(&wal, "%s-wal", path) > 0 && access(wal, F_OK) == 0);
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
        derived_tokens();
        audit();
        schema_versions();
        file_mode();
        unwritable_path();
        disk_full();
        busy_writers();
        reads_beside_a_commit();
        return fixture_end("test-store");
}
