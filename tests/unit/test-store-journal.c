/* The group commit's savepoints stay in memory.
 *
 * Each issuance of a batch runs in its own savepoint (sqlite_group_commit()),
 * and SQLite keeps what a savepoint would undo in a sub-journal, held in
 * memory only up to SQLITE_CONFIG_STMTJRNL_SPILL bytes (64 KiB by
 * default): past that, every page is written to a temporary file as well,
 * which cost hwidd ~30 write calls per issuance under load, and would make
 * every batch fail where no temporary directory is writable.  A VFS that
 * counts what SQLite opens (and hands everything on to the real one)
 * shows that no temporary file is opened, for one large issuance and for
 * many at once. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "check.h"
#include "error.h"
#include "store-fixture.h"

#define RACERS 32
#define NAMES 64
#define RACE_NAMES 24

char dir[] = "/tmp/hwid-test-store-journal-XXXXXX";

/* ---- a VFS that counts the temporary files SQLite opens ---- */

static sqlite3_vfs *real_vfs;
static sqlite3_vfs spy_vfs;
static atomic_int temp_opens;

static int spy_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags, int *out) {
        (void) vfs;
        if (flags & (SQLITE_OPEN_SUBJOURNAL | SQLITE_OPEN_TEMP_JOURNAL | SQLITE_OPEN_TEMP_DB |
                     SQLITE_OPEN_TRANSIENT_DB))
                atomic_fetch_add(&temp_opens, 1);
        return real_vfs->xOpen(real_vfs, name, f, flags, out);
}

/* Everything but xOpen is the real VFS's: the files it opens are its own.
 * Installed after a store has been opened, as in hwidd: the store sets
 * SQLite up before anything else initializes it. */
static void spy_install(void) {
        _cleanup_free_ char *path = db_path("first.db");
        store *s = open_fresh(path);

        store_free(s);
        real_vfs = sqlite3_vfs_find(NULL);
        CHECK(real_vfs != NULL);
        spy_vfs = *real_vfs;
        spy_vfs.zName = "hwid-test-spy";
        spy_vfs.pAppData = real_vfs->pAppData;
        spy_vfs.xOpen = spy_open;
        CHECK(sqlite3_vfs_register(&spy_vfs, 1) == SQLITE_OK);
}

/* ---- issuances ---- */

/* Rows enough that an issuance changes pages that were there before (a
 * savepoint journals only those): certificates, and DNS names spread over
 * the whole name index, made in one transaction of the test's own. */
static void fill(const char *path) {
        CHECK(raw_exec(path, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 20000) "
                             "INSERT INTO certificates (serial, identity, subject, profile, spki_sha256, der, "
                             "not_before, not_after, status, created_at) "
                             "SELECT printf('F%07X', i), 'fill-' || i, 'CN=fill', 'edge', "
                             "lower(hex(randomblob(32))), randomblob(600), 1699999000, 1800000000, 'valid', "
                             "1699999000 FROM n") == 0);
        CHECK(raw_exec(path, "INSERT INTO certificate_dns (serial, name, live) "
                             "SELECT serial, printf('h%05d.example', (rowid * 7919) % 100000), 1 "
                             "FROM certificates WHERE serial LIKE 'F%'") == 0);
}

/* One issuance (token, certificate, DNS names, audit record) whose names
 * fall all over the name index: one savepoint larger than 64 KiB. */
static void one_large(void) {
        _cleanup_free_ char *path = db_path("large.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        char *names[NAMES];
        store_audit a = { .at = NOW, .actor = "token:tok111", .action = "enroll", .target = "large-1",
                          .outcome = "allow", .token_id = "tok111" };
        store_issue in = { .consume_token_id = "tok111", .audit = &a };
        int before;

        fill(path);
        CHECK(add_token(s, "tok111", 3, NOW + 3600) == 0);
        for (int i = 0; i < NAMES; i++)
                CHECK(asprintf(&names[i], "h%05d.large.example", (i * 7919) % 100000) > 0);
        in.dns_names = (const char *const *) names;
        in.n_dns_names = NAMES;
        before = atomic_load(&temp_opens);
        CHECK(commit(s, "0A11", "large-1", NOW + 3600, NOW, &in) == 0);
        CHECK(atomic_load(&temp_opens) == before);
        CHECK(raw_int(path, "SELECT count(*) FROM certificate_dns WHERE serial = '0A11'") == NAMES);
        for (int i = 0; i < NAMES; i++)
                free(names[i]);
}

typedef struct racer {
        store *shared;
        pthread_barrier_t *go;
        int index;
        int result;
} racer;

/* An issuance like one_large()'s with fewer names, each racer its own. */
static void *race_one(void *arg) {
        racer *x = arg;
        char serial[8], identity[16], *names[RACE_NAMES];
        store_audit a = { .at = NOW, .actor = "token:tok222", .action = "enroll", .outcome = "allow",
                          .token_id = "tok222" };
        store_issue in = { .consume_token_id = "tok222", .audit = &a, .dns_names = (const char *const *) names,
                           .n_dns_names = RACE_NAMES };

        snprintf(serial, sizeof(serial), "%04X", 0x500 + x->index);
        snprintf(identity, sizeof(identity), "race-%d", x->index);
        a.target = identity;
        for (int i = 0; i < RACE_NAMES; i++)
                CHECK(asprintf(&names[i], "h%05d.race-%d.example", (i * 7919) % 100000, x->index) > 0);
        pthread_barrier_wait(x->go);
        x->result = commit(x->shared, serial, identity, NOW + 3600, NOW, &in);
        for (int i = 0; i < RACE_NAMES; i++)
                free(names[i]);
        return NULL;
}

/* Many issuances at once: they share transactions, one savepoint each. */
static void many_at_once(void) {
        _cleanup_free_ char *path = db_path("many.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        pthread_barrier_t go;
        pthread_t th[RACERS];
        racer x[RACERS];
        int before;

        fill(path);
        CHECK(add_token(s, "tok222", RACERS, NOW + 3600) == 0);
        before = atomic_load(&temp_opens);
        pthread_barrier_init(&go, NULL, RACERS);
        for (int i = 0; i < RACERS; i++) {
                x[i] = (racer) { .shared = s, .go = &go, .index = i };
                CHECK(pthread_create(&th[i], NULL, race_one, &x[i]) == 0);
        }
        for (int i = 0; i < RACERS; i++) {
                pthread_join(th[i], NULL);
                CHECK(x[i].result == 0);
        }
        pthread_barrier_destroy(&go);
        CHECK(atomic_load(&temp_opens) == before);
        CHECK(raw_int(path, "SELECT count(*) FROM certificates WHERE identity LIKE 'race-%'") == RACERS);
        CHECK(raw_int(path, "SELECT count(*) FROM certificate_dns WHERE name LIKE '%.race-%'") == RACERS * RACE_NAMES);
        CHECK(uses_left(s, "tok222") == 0);
}

int main(void) {
        if (!fixture_begin())
                return 1;
        spy_install();
        one_large();
        many_at_once();
        return fixture_end("test-store-journal");
}
