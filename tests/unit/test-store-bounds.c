/* The store never grows without bound: WAL checkpoints really copy frames
 * back (their counts, not their return codes, say so), the WAL file stays
 * bounded while commits keep coming and shrinks to nothing once they
 * stop, and audit retention removes old records in small batches, oldest
 * first, and nothing else. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "check.h"
#include "error.h"
#include "fsutil.h"
#include "store-fixture.h"
#include "store-sqlite.h"

char dir[] = "/tmp/hwid-test-store-bounds-XXXXXX";

static int64_t file_size(const char *path) {
        struct stat st;

        return stat(path, &st) == 0 ? (int64_t) st.st_size : 0;
}

static void sleep_ms(long ms) {
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

        nanosleep(&ts, NULL);
}

static int append(store *s, int64_t at, int i) {
        char target[32];
        store_audit a = { .at = at, .actor = "token:abc123", .action = "enroll", .target = target,
                          .outcome = "deny", .reason = "a reason long enough to take some room in a page" };

        snprintf(target, sizeof(target), "edge-%06d", i);
        return store_audit_append(s, &a);
}

/* ---- checkpoints copy frames ---- */

static void checkpoint_moves_frames(void) {
        _cleanup_free_ char *path = db_path("ckpt.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        int log = -1, ckpt = -1, r;

        for (int i = 0; i < 200; i++)
                CHECK(append(s, NOW, i) == 0);
        /* The checkpointer's own connection: it must know the file is in
         * WAL mode, or it "checkpoints" nothing and says OK (-1 frames). */
        r = sqlite_checkpoint_run(sqlite_of(s), SQLITE_CHECKPOINT_PASSIVE, &log, &ckpt);
        CHECK(r == 0);
        CHECK(log > 0);
        CHECK(ckpt == log);
        /* TRUNCATE copies what is left and empties the file. */
        for (int i = 0; i < 50; i++)
                CHECK(append(s, NOW, i) == 0);
        r = sqlite_checkpoint_run(sqlite_of(s), SQLITE_CHECKPOINT_TRUNCATE, &log, &ckpt);
        CHECK(r == 0 && log == 0 && ckpt == 0);
        {
                _cleanup_free_ char *wal = NULL;
                CHECK(asprintf(&wal, "%s-wal", path) > 0 && file_size(wal) == 0);
        }
        /* Nothing was lost on the way. */
        CHECK(raw_int(path, "SELECT count(*) FROM audit") == 250);
        CHECK(audit_rows(s) == 250);
}

/* ---- the WAL stays bounded ---- */

typedef struct load {
        store *s;
        atomic_bool stop;
        atomic_long commits;
        int failures;
} load;

static void *writer(void *arg) {
        load *l = arg;

        for (int i = 0; !atomic_load(&l->stop); i++) {
                if (append(l->s, NOW, i) < 0)
                        l->failures++;
                atomic_fetch_add(&l->commits, 1);
        }
        return NULL;
}

/* A reader that keeps its snapshot (a backup, a long listing) pins the
 * WAL: commits go on all the same, none waiting for it, and once it is
 * done the WAL starts over within a few commits.  (When the checkpointer
 * waited for such a reader with the store's lock held, each commit here
 * took ~45 ms: these 4,000 ran past the test's time limit.) */
static void wal_pinned_by_reader(void) {
        _cleanup_free_ char *path = db_path("pinned.db"), *wal = NULL;
        _cleanup_(store_freep) store *s = open_fresh(path);
        sqlite3 *reader = NULL;
        int64_t pinned = 0, after = -1;

        CHECK(asprintf(&wal, "%s-wal", path) > 0);
        CHECK(append(s, NOW, 0) == 0);
        CHECK(sqlite3_open_v2(path, &reader, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK);
        CHECK(sqlite3_exec(reader, "BEGIN; SELECT count(*) FROM audit", NULL, NULL, NULL) == SQLITE_OK);
        /* Three pages a commit: the WAL passes its bound six times over. */
        for (int i = 1; i <= 4000; i++)
                CHECK(append(s, NOW, i) == 0);
        pinned = file_size(wal);
        CHECK(pinned > 2 * (int64_t) SQLITE_STORE_WAL_LIMIT_BYTES);
        sqlite3_exec(reader, "COMMIT", NULL, NULL, NULL);
        sqlite3_close(reader);
        for (int i = 0; i < 50; i++)
                CHECK(append(s, NOW, 5000 + i) == 0);
        after = file_size(wal);
        fprintf(stderr, "wal_pinned_by_reader: WAL %lld bytes while pinned, %lld after\n", (long long) pinned,
                (long long) after);
        CHECK(after <= (int64_t) SQLITE_STORE_WAL_LIMIT_BYTES);
        CHECK(audit_rows(s) == 4051);
}

static void wal_bounded(void) {
        _cleanup_free_ char *path = db_path("bounded.db"), *wal = NULL;
        _cleanup_(store_freep) store *s = open_fresh(path);
        load l = { .s = s };
        pthread_t th[2];
        int64_t max = 0, size = -1;

        CHECK(asprintf(&wal, "%s-wal", path) > 0);
        for (size_t i = 0; i < ELEMENTSOF(th); i++)
                CHECK(pthread_create(&th[i], NULL, writer, &l) == 0);
        /* Commits without a pause -- at least 2 s and until they have
         * written the WAL's bound six times over (3 pages a commit) --
         * the WAL's size looked at every 10 ms. */
        for (int i = 0; i < 3000 && (i < 200 || atomic_load(&l.commits) < 2000); i++) {
                int64_t now = file_size(wal);
                if (now > max)
                        max = now;
                sleep_ms(10);
        }
        atomic_store(&l.stop, true);
        for (size_t i = 0; i < ELEMENTSOF(th); i++)
                pthread_join(th[i], NULL);
        CHECK(l.failures == 0);
        fprintf(stderr, "wal_bounded: %ld commits, WAL at most %lld bytes\n", atomic_load(&l.commits),
                (long long) max);
        /* Enough was written to grow the WAL far beyond the bound ... */
        CHECK(atomic_load(&l.commits) * 3 * 4096 > 4 * (int64_t) SQLITE_STORE_WAL_LIMIT_BYTES);
        /* ... and it stayed within it (a round of commits on top). */
        CHECK(max <= 2 * (int64_t) SQLITE_STORE_WAL_LIMIT_BYTES);
        /* Idle: within a few rounds the file is emptied. */
        for (int i = 0; i < 50 && (size = file_size(wal)) > 0; i++)
                sleep_ms(100);
        CHECK(size == 0);
        CHECK(audit_rows(s) == (int) atomic_load(&l.commits));
}

/* ---- audit retention ---- */

/* Pruning deletes the oldest records in the order they were appended (a
 * chain can only lose its beginning), stopping at the first that is not
 * older than the cut, and leaves a chain that verifies from its anchor. */
static void audit_prune(void) {
        _cleanup_free_ char *path = db_path("prune.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_audit_report rep;
        size_t n = 99;

        /* 7 old records (in an order that is not their age), then a recent
         * one, an old one appended after it, and one at the cut. */
        const int64_t ats[] = { NOW - 500, NOW - 900, NOW - 700, NOW - 100, NOW - 800, NOW - 600, NOW - 400,
                                NOW + 10, NOW - 50, NOW };
        for (size_t i = 0; i < ELEMENTSOF(ats); i++)
                CHECK(append(s, ats[i], (int) i) == 0);
        CHECK(store_audit_prune(s, NOW, 0, NULL, NULL, &n) == -HWID_E_INVALID && n == 99);
        CHECK(store_audit_prune(s, NOW, 10001, NULL, NULL, &n) == -HWID_E_INVALID);
        /* Oldest first in append order, at most a batch. */
        CHECK(store_audit_prune(s, NOW, 3, NULL, NULL, &n) == 0 && n == 3);
        CHECK(raw_int(path, "SELECT min(id) FROM audit") == 4);
        CHECK(raw_int(path, "SELECT id FROM audit_chain WHERE role = 'anchor'") == 3);
        CHECK(raw_int(path, "SELECT count(*) FROM audit") == 7);
        CHECK(store_audit_prune(s, NOW, 3, NULL, NULL, &n) == 0 && n == 3);
        CHECK(store_audit_prune(s, NOW, 3, NULL, NULL, &n) == 0 && n == 1);
        CHECK(store_audit_prune(s, NOW, 3, NULL, NULL, &n) == 0 && n == 0);
        /* The recent record stops the pruning: the old one after it waits
         * for it (kept longer, never shorter, than the retention). */
        CHECK(raw_int(path, "SELECT count(*) FROM audit") == 3);
        CHECK(raw_int(path, "SELECT min(id) FROM audit") == 8);
        CHECK(raw_int(path, "SELECT count(*) FROM audit WHERE at = 1699999950") == 1);
        CHECK(append(s, NOW + 30, 99) == 0);
        CHECK(audit_rows(s) == 4);
        CHECK(store_audit_verify(s, NULL, 0, &rep) == 0 && rep.problem == AUDIT_OK);
        CHECK(rep.anchored && rep.anchor_id == 7 && rep.n_records == 4 && rep.first_id == 8 && rep.last_id == 11);
        /* The batch is read in id order from the table itself: no sort. */
        {
                _cleanup_free_ char *plan = raw_plan(path, "SELECT id, at FROM audit ORDER BY id LIMIT 3");
                CHECK(!strstr(plan, "TEMP B-TREE"));
        }
}

/* A record changed in the database is never pruned away: pruning stops
 * at it, and the evidence stays for hwid audit verify. */
static void audit_prune_refuses_tampered(void) {
        _cleanup_free_ char *path = db_path("prune-tampered.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_audit_report rep;
        size_t n = 99;

        for (int i = 0; i < 5; i++)
                CHECK(append(s, NOW - 100 + i, i) == 0);
        CHECK(raw_int(path, "UPDATE audit SET reason = 'nothing to see' WHERE id = 2 RETURNING 0") == 0);
        CHECK(store_audit_prune(s, NOW, 10, NULL, NULL, &n) == -HWID_E_STORE && n == 99);
        CHECK(raw_int(path, "SELECT count(*) FROM audit") == 5);
        CHECK(store_audit_verify(s, NULL, 0, &rep) == 0 && rep.problem == AUDIT_MODIFIED && rep.id == 2);
}

int main(void) {
        if (!fixture_begin())
                return 1;
        checkpoint_moves_frames();
        wal_bounded();
        wal_pinned_by_reader();
        audit_prune();
        audit_prune_refuses_tampered();
        return fixture_end("test-store-bounds");
}
