/* The store's certificates against real database files in a temporary
 * directory: the commit that issues one (all or nothing), one live
 * certificate per identity, renewal, approved requests, concurrent
 * commits, revocation and the CRL walk.  Tokens, requests, audit and the
 * file itself are in test-store.c. */
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
        CHECK_STREQ(c.spki_sha256, spki_of("01AB"));
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
        CHECK(raw_int(path, "SELECT value FROM meta WHERE key = 'schema_version'") == sqlite_schema_version());
        CHECK(raw_int(path, "SELECT count(*) FROM meta") == 5);
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

/* ---- revocation that reaches further ---- */

static int commit_key(store *s, const char *serial, const char *identity, const char *key_of, int64_t not_after,
                      int64_t now, const char *supersedes) {
        store_cert c = make_cert(serial, identity, not_after);

        memcpy(c.spki_sha256, spki_of(key_of), sizeof(spki));
        return store_cert_commit(s, &(store_issue) { .cert = &c, .supersedes_serial = supersedes }, now);
}

/* keyCompromise blocks the key: its unexpired certificates are revoked
 * with it, whatever identity, and it is never committed again. */
static void key_compromise_blocks(void) {
        _cleanup_free_ char *path = db_path("blocked.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        int64_t seq = 0;
        int r;

        CHECK(commit_key(s, "0A", "edge-1", "0A", NOW + 1000, NOW, NULL) == 0);
        CHECK(commit_key(s, "0B", "edge-2", "0A", NOW + 1000, NOW, NULL) == 0);
        CHECK(commit_key(s, "0C", "edge-3", "0C", NOW + 1000, NOW, NULL) == 0);
        CHECK(commit_key(s, "0D", "edge-4", "0A", NOW + 10, NOW, NULL) == 0);
        CHECK(store_key_blocked(s, spki_of("0A")) == 0);
        CHECK(store_cert_revoke(s, "0A", 1, NOW + 20, NULL) == 0);
        CHECK(cert_status(s, "0A") == CERT_REVOKED && cert_status(s, "0B") == CERT_REVOKED);
        CHECK(cert_status(s, "0C") == CERT_VALID);
        CHECK(cert_status(s, "0D") == CERT_VALID); /* expired: no CRL entry needed */
        CHECK(store_revocation_seq(s, &seq) == 0 && seq == 1);
        r = store_key_blocked(s, spki_of("0A"));
        CHECK(r == -HWID_E_KEY_BLOCKED);
        CHECK_CONTAINS(hwid_strerror(r), "certificate 0A");
        CHECK(store_key_blocked(s, spki_of("0C")) == 0);
        CHECK(commit_key(s, "0E", "edge-5", "0A", NOW + 1000, NOW + 30, NULL) == -HWID_E_KEY_BLOCKED);
        CHECK(cert_status(s, "0E") == -1);
        /* Another reason blocks nothing. */
        CHECK(store_cert_revoke(s, "0C", 4, NOW + 40, NULL) == 0);
        CHECK(store_key_blocked(s, spki_of("0C")) == 0);
        CHECK(raw_int(path, "SELECT count(*) FROM blocked_keys") == 1);
}

/* --identity: the live certificate and superseded generations not yet
 * expired, one transaction; an expired generation is left alone. */
static void revoke_identity(void) {
        _cleanup_free_ char *path = db_path("identity.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_audit a = { .at = NOW, .actor = "admin:root", .action = "cert.revoke", .target = "edge-9",
                          .outcome = "allow" };
        size_t n = 0;

        CHECK(commit_key(s, "1F", "edge-9", "1A", NOW + 5, NOW, NULL) == 0);
        CHECK(commit_key(s, "1A", "edge-9", "1A", NOW + 1000, NOW + 10, NULL) == 0);
        CHECK(commit_key(s, "1B", "edge-9", "1A", NOW + 1000, NOW + 11, "1A") == 0);
        CHECK(commit_key(s, "2A", "edge-8", "2A", NOW + 1000, NOW + 11, NULL) == 0);
        CHECK(cert_status(s, "1F") == CERT_SUPERSEDED && cert_status(s, "1A") == CERT_SUPERSEDED);
        CHECK(store_cert_revoke_identity(s, "edge-9", 5, NOW + 20, &a, &n) == 0 && n == 2);
        CHECK(cert_status(s, "1A") == CERT_REVOKED && cert_status(s, "1B") == CERT_REVOKED);
        CHECK(cert_status(s, "1F") == CERT_SUPERSEDED && cert_status(s, "2A") == CERT_VALID);
        CHECK(audit_rows(s) == 1);
        CHECK(store_cert_revoke_identity(s, "edge-9", 5, NOW + 21, &a, &n) == -HWID_E_NOT_FOUND);
        CHECK(store_cert_revoke_identity(s, "nobody", 5, NOW + 21, NULL, &n) == -HWID_E_NOT_FOUND);
        CHECK(store_cert_revoke_identity(s, "edge-8", 7, NOW + 21, NULL, &n) == -HWID_E_INVALID);
        CHECK(cert_status(s, "2A") == CERT_VALID && store_key_blocked(s, spki_of("1A")) == 0);
        /* With key-compromise, the key of the identity's certificates is blocked. */
        CHECK(store_cert_revoke_identity(s, "edge-8", 1, NOW + 22, NULL, &n) == 0 && n == 1);
        CHECK(store_key_blocked(s, spki_of("2A")) == -HWID_E_KEY_BLOCKED);
}

int main(void) {
        if (!fixture_begin())
                return 1;
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
        key_compromise_blocks();
        revoke_identity();
        return fixture_end("test-store-certs");
}
