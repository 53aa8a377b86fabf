/* The store contract (test-store-contract.c): races -- many commits at
 * once, through two store objects on one database (two replicas) or a
 * store each, for what the database must decide alone: one live
 * certificate per identity, a token's N uses, replacing re-enrollments,
 * the members of one group commit, a key blocked amid its issuances, and
 * the first opening of a database. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "error.h"
#include "store-contract.h"

#define RACERS 32

typedef struct racer {
        const char *name;     /* the case, whose database a racer of its own opens */
        store *a, *b;         /* two replicas, taking turns; NULL: a store of the racer's own */
        pthread_barrier_t *go;
        int round, i;         /* round: serials of their own in each race of a case */
        const char *identity; /* NULL: a name of its own */
        const char *token;
        const char *dns;      /* a DNS name every racer's certificate carries */
        bool replace, request; /* request: spend the token on a request held for approval */
        int r;
} racer;

static int race_one(racer *x, store *s) {
        char serial[16], name[32], id[33];

        snprintf(serial, sizeof(serial), "F%X%s%02X", x->round, x->replace ? "C" : x->token ? "A" : "B", x->i);
        snprintf(name, sizeof(name), "race-%s-%d", x->token ? "t" : "i", x->i);
        if (x->request) {
                snprintf(id, sizeof(id), "%032x", 0x100 + x->i);
                return add_request(s, id, name, x->token, NOW);
        }
        return commit(s, serial, x->identity ? x->identity : name, NOW + 3600, NOW,
                      &(store_issue) { .consume_token_id = x->token, .replace_live = x->replace,
                                       .dns_names = &x->dns, .n_dns_names = x->dns ? 1 : 0 });
}

static void *race_commit(void *userdata) {
        racer *x = userdata;
        store *own = NULL, *s = x->i % 2 ? x->a : x->b;

        x->r = s ? 0 : store_open(case_database(x->name), &own);
        pthread_barrier_wait(x->go);
        if (x->r == 0)
                x->r = race_one(x, s ? s : own);
        store_free(own);
        return NULL;
}

/* RACERS at once, as template says (i set for each); returns how many
 * succeeded, *ret_lost how many lost the race as they should. */
static int run_race(const racer *template, int *ret_lost) {
        pthread_barrier_t go;
        pthread_t th[RACERS];
        racer x[RACERS];
        int ok = 0;

        *ret_lost = 0;
        pthread_barrier_init(&go, NULL, RACERS);
        for (int i = 0; i < RACERS; i++) {
                x[i] = *template;
                x[i].i = i;
                x[i].go = &go;
                CHECK(pthread_create(&th[i], NULL, race_commit, &x[i]) == 0);
        }
        for (int i = 0; i < RACERS; i++) {
                pthread_join(th[i], NULL);
                ok += x[i].r == 0;
                *ret_lost += x[i].r == -HWID_E_CONFLICT || x[i].r == -HWID_E_TOKEN_INVALID;
                if (x[i].r != 0 && x[i].r != -HWID_E_CONFLICT && x[i].r != -HWID_E_TOKEN_INVALID)
                        fprintf(stderr, "racer %d: %s\n", i, hwid_strerror(x[i].r));
        }
        pthread_barrier_destroy(&go);
        return ok;
}

/* One live certificate per identity: of many commits at once, through two
 * replicas or a store each, one wins; only the winner's token use is spent. */
void contract_race_one_identity(void) {
        _cleanup_(store_freep) store *a = case_open("race-one"), *b = case_again("race-one");
        int lost = 0;

        CHECK(add_token(a, "many99", 100, NOW + 3600) == 0);
        CHECK(run_race(&(racer) { .a = a, .b = b, .identity = "race-one", .token = "many99" }, &lost) == 1);
        CHECK(lost == RACERS - 1);
        CHECK(cert_count(a, "RACE-ONE") == 1);
        CHECK(uses_left(b, "many99") == 99);
        CHECK(run_race(&(racer) { .name = "race-one", .round = 1, .identity = "race-two", .token = "many99" },
                       &lost) == 1);
        CHECK(lost == RACERS - 1);
        CHECK(cert_count(b, "race-two") == 1);
        CHECK(uses_left(a, "many99") == 98);
}

/* One live holder per DNS name: of many identities asking for one name at
 * once (spelt differently), one gets it. */
void contract_race_dns(void) {
        _cleanup_(store_freep) store *a = case_open("race-dns"), *b = case_again("race-dns");
        int lost = 0;

        CHECK(run_race(&(racer) { .a = a, .b = b, .dns = "Door.Race.Example." }, &lost) == 1);
        CHECK(lost == RACERS - 1);
        CHECK(cert_count(b, NULL) == 1);
        /* While it is held, every other asker loses, spending nothing. */
        CHECK(add_token(a, "tokdns", 100, NOW + 3600) == 0);
        CHECK(run_race(&(racer) { .name = "race-dns", .round = 1, .dns = "door.race.example", .token = "tokdns" },
                       &lost) == 0);
        CHECK(lost == RACERS);
        CHECK(uses_left(b, "tokdns") == 100);
}

/* A token's N uses: of many spends at once (enrollments and requests held
 * for approval alike, through both replicas), exactly N succeed. */
void contract_race_tokens(void) {
        _cleanup_(store_freep) store *a = case_open("race-tokens"), *b = case_again("race-tokens");
        store_request *all = NULL;
        size_t n = 0;
        int lost = 0, ok;

        CHECK(add_token(a, "tokrac", 5, NOW + 3600) == 0);
        CHECK(run_race(&(racer) { .a = a, .b = b, .token = "tokrac" }, &lost) == 5);
        CHECK(lost == RACERS - 5);
        CHECK(uses_left(b, "tokrac") == 0);
        CHECK(cert_count(a, NULL) == 5);
        CHECK(add_token(b, "tokreq", 3, NOW + 3600) == 0);
        ok = run_race(&(racer) { .a = a, .b = b, .round = 1, .token = "tokreq", .request = true }, &lost);
        CHECK(ok == 3 && lost == RACERS - 3);
        CHECK(uses_left(a, "tokreq") == 0);
        CHECK(store_request_list(b, false, &all, &n) == 0 && n == 3);
        store_request_list_free(all, n);
}

/* Re-enrollments that replace the live certificate all succeed, one after
 * the other: one certificate is live at the end. */
void contract_race_replace(void) {
        _cleanup_(store_freep) store *a = case_open("race-replace"), *b = case_again("race-replace");
        int lost = 0;

        CHECK(run_race(&(racer) { .a = a, .b = b, .identity = "race-replace", .replace = true }, &lost) == RACERS);
        CHECK(cert_count(b, "race-replace") == RACERS);
        CHECK(cert_count_status(a, "race-replace", CERT_VALID) == 1);
        CHECK(cert_count_status(a, "race-replace", CERT_SUPERSEDED) == RACERS - 1);
}

/* Commits that share one transaction (group commit) fail alone: each gets
 * its own error and detail, the others are durable with their audit
 * records, only theirs spent a token use, and the chain verifies. */
typedef struct mixed {
        store *s;
        pthread_barrier_t *go;
        int i, r;
} mixed;

static void *commit_mixed(void *userdata) {
        mixed *x = userdata;
        char serial[16], name[32];
        store_audit au = { .actor = "token:mixed1", .action = "enroll", .outcome = "allow", .token_id = "mixed1" };
        store_audit bad = { .at = NOW, .actor = NULL, .action = "enroll", .outcome = "allow" };

        snprintf(serial, sizeof(serial), "%04X", 0x200 + x->i);
        snprintf(name, sizeof(name), "mix-%d", x->i);
        au.target = name;
        pthread_barrier_wait(x->go);
        x->r = commit(x->s, serial, name, NOW + 3600, NOW,
                      &(store_issue) { .consume_token_id = "mixed1", .audit = x->i == 2 ? &bad : &au });
        if (x->r == -HWID_E_CONFLICT && !strstr(hwid_strerror(x->r), name))
                x->r = -HWID_E_INTERNAL; /* the detail must be this racer's own */
        return NULL;
}

void contract_race_mixed_batch(void) {
        _cleanup_(store_freep) store *s = case_open("race-mixed"), *b = case_again("race-mixed");
        pthread_barrier_t go;
        pthread_t th[RACERS];
        mixed x[RACERS];
        store_audit_report rep;
        char serial[16], name[32];
        size_t linked = 0;
        int ok = 0;

        CHECK(add_token(s, "mixed1", RACERS, NOW + 3600) == 0);
        for (int i = 1; i < RACERS; i += 2) {
                snprintf(serial, sizeof(serial), "%04X", 0x300 + i);
                snprintf(name, sizeof(name), "mix-%d", i);
                CHECK(commit(s, serial, name, NOW + 3600, NOW, NULL) == 0);
        }
        pthread_barrier_init(&go, NULL, RACERS);
        for (int i = 0; i < RACERS; i++) {
                x[i] = (mixed) { .s = s, .go = &go, .i = i };
                CHECK(pthread_create(&th[i], NULL, commit_mixed, &x[i]) == 0);
        }
        for (int i = 0; i < RACERS; i++) {
                pthread_join(th[i], NULL);
                ok += x[i].r == 0;
                CHECK(x[i].r == (i % 2 ? -HWID_E_CONFLICT : i == 2 ? -HWID_E_INVALID : 0));
        }
        pthread_barrier_destroy(&go);
        CHECK(ok == RACERS / 2 - 1);
        for (int i = 0; i < RACERS; i++) {
                snprintf(serial, sizeof(serial), "%04X", 0x200 + i);
                CHECK(cert_status(b, serial) == (i % 2 == 0 && i != 2 ? CERT_VALID : -1));
        }
        CHECK(cert_count(b, NULL) == RACERS / 2 + ok);
        CHECK(uses_left(b, "mixed1") == RACERS - ok);
        CHECK(audit_rows(b) == ok);
        /* Chained (by hwidd's linker where the store defers it), it verifies. */
        CHECK(store_audit_chain_pending(b, &linked) == 0);
        CHECK(store_audit_pending(s, &linked) == 0 && linked == 0);
        CHECK(store_audit_verify(s, NULL, 0, &rep) == 0 && rep.problem == AUDIT_OK);
        CHECK(rep.n_records == (size_t) ok && rep.n_unchained == 0);
}

/* A keyCompromise revocation racing issuances of the same key on the
 * other replica: once it committed, no certificate of the key is live,
 * whichever way their commits fell. */
typedef struct key_racer {
        store *s;
        int i, ok, blocked, tries;
        int other;      /* an attempt's answer that was neither (0: none) */
        const char *key;
} key_racer;

static atomic_int key_issued;   /* by all racers: the revocation starts amid them */
static atomic_bool key_revoked; /* the revocation returned: racers stop after it */

static void key_attempt(key_racer *x, int j) {
        char serial[16], name[32];
        store_cert c;
        int r;

        snprintf(serial, sizeof(serial), "BB%02X%04X", x->i, j);
        snprintf(name, sizeof(name), "key-race-%d-%d", x->i, j);
        c = make_cert(serial, name, NOW + 3600);
        memcpy(c.spki_sha256, x->key, sizeof(c.spki_sha256));
        /* SQLite's busy handler is no queue: two connections taking the
         * write lock back to back can starve a third past its 5 s (seen
         * with other tests loading the machine).  That is a 503 a client
         * retries, not an answer of the race: so is it here. */
        for (int again = 0; again < 5; again++) {
                r = store_cert_commit(x->s, &(store_issue) { .cert = &c }, NOW);
                if (!(r == -HWID_E_STORE && strstr(hwid_strerror(r), "database is locked")))
                        break;
        }
        x->ok += r == 0;
        x->blocked += r == -HWID_E_KEY_BLOCKED;
        if (r < 0 && r != -HWID_E_KEY_BLOCKED && !x->other) {
                x->other = r;
                fprintf(stderr, "key race: racer %d's attempt %d: %s\n", x->i, j, hwid_strerror(r));
        }
        if (r == 0)
                atomic_fetch_add(&key_issued, 1);
}

/* 40 each at least, and on until the revocation returned (however late
 * a loaded machine runs it), then one more, which it must refuse. */
static void *issue_key(void *userdata) {
        key_racer *x = userdata;
        int j = 0;

        for (; j < 40 || (j < 4000 && !atomic_load(&key_revoked)); j++)
                key_attempt(x, j);
        key_attempt(x, j++);
        x->tries = j;
        return NULL;
}

void contract_race_key(void) {
        _cleanup_(store_freep) store *a = case_open("race-key"), *b = case_again("race-key");
        char key[65];
        pthread_t th[4];
        key_racer x[4];
        store_cert *all = NULL;
        size_t n = 0, live = 0;
        int ok = 0, tries = 0;

        snprintf(key, sizeof(key), "%s", spki_of("BB"));
        CHECK(commit(a, "BB", "key-race", NOW + 3600, NOW, NULL) == 0);
        for (int i = 0; i < 4; i++) {
                x[i] = (key_racer) { .s = i % 2 ? a : b, .i = i, .key = key };
                CHECK(pthread_create(&th[i], NULL, issue_key, &x[i]) == 0);
        }
        while (atomic_load(&key_issued) < 8)
                nanosleep(&(struct timespec) { .tv_nsec = 1000000 }, NULL);
        CHECK(store_cert_revoke(b, "BB", 1, NOW, NULL) == 0);
        atomic_store(&key_revoked, true);
        for (int i = 0; i < 4; i++) {
                pthread_join(th[i], NULL);
                ok += x[i].ok;
                tries += x[i].tries;
                CHECK(x[i].ok + x[i].blocked == x[i].tries);
                CHECK(x[i].blocked >= 1);
        }
        CHECK(store_cert_list(a, NULL, &all, &n) == 0);
        for (size_t i = 0; i < n; i++)
                live += strcmp(all[i].spki_sha256, key) == 0 && all[i].status == CERT_VALID;
        store_cert_list_free(all, n);
        CHECK(live == 0);
        CHECK(store_key_blocked(a, key) == -HWID_E_KEY_BLOCKED);
        CHECK(ok < tries); /* the revocation came amid the issuances */
        fprintf(stderr, "key race: %d of %d issued around the revocation\n", ok, tries);
}

/* Many openers of a new, empty database at once (hwidd replicas, the admin
 * CLI at first start): one creates the schema, none fails. */
typedef struct opener {
        pthread_barrier_t *go;
        const char *database;
        int r;
} opener;

static void *open_one(void *userdata) {
        opener *x = userdata;
        store *s = NULL;

        pthread_barrier_wait(x->go);
        x->r = store_open(x->database, &s);
        if (x->r == 0)
                x->r = store_ping(s);
        if (x->r < 0)
                fprintf(stderr, "opener: %s\n", hwid_strerror(x->r));
        store_free(s);
        return NULL;
}

void contract_race_first_open(void) {
        const char *database = case_database("first-open");
        pthread_barrier_t go;
        pthread_t th[RACERS / 2];
        opener x[RACERS / 2];
        store *s;
        int ok = 0;

        pthread_barrier_init(&go, NULL, RACERS / 2);
        for (int i = 0; i < RACERS / 2; i++) {
                x[i] = (opener) { .go = &go, .database = database };
                CHECK(pthread_create(&th[i], NULL, open_one, &x[i]) == 0);
        }
        for (int i = 0; i < RACERS / 2; i++) {
                pthread_join(th[i], NULL);
                ok += x[i].r == 0;
        }
        pthread_barrier_destroy(&go);
        CHECK(ok == RACERS / 2);
        s = case_again("first-open");
        CHECK(add_token(s, "tokope", 1, NOW + 3600) == 0 && uses_left(s, "tokope") == 1);
        store_free(s);
}
