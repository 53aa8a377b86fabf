/* The SQLite store's certificates beyond what every store promises
 * (test-store-contract.c, run on SQLite as store-contract-sqlite): many
 * openers of a brand-new file, and the CRL walk through its covering
 * index.  The file itself is in test-store.c. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <sqlite3.h>

#include "check.h"
#include "error.h"
#include "store-fixture.h"
#include "store-sqlite.h"

#define RACERS 32

char dir[] = "/tmp/hwid-test-store-certs-XXXXXX";

/* ---- the first opening of a file ---- */

typedef struct racer {
        const char *path;
        pthread_barrier_t *go;
        int index;
        int result;
} racer;

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
        CHECK(raw_int(path, "SELECT value FROM meta WHERE key = 'schema_version'") == sqlite_schema_version());
        CHECK(raw_int(path, "SELECT count(*) FROM meta") == 6);
}

/* ---- the CRL walk ---- */

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
        CHECK(store_cert_foreach_revoked(s, 0, NOW, check_order, &o) == 0);
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

int main(void) {
        if (!fixture_begin())
                return 1;
        race_first_open();
        crl_walk_many();
        return fixture_end("test-store-certs");
}
