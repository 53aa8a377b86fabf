/* The PostgreSQL store against store.h's semantics, on the database named
 * by $HWID_TEST_PG_URI (tests/integration/pg-store.sh starts a cluster and
 * runs this).  Two store objects on one database stand for two hwidd
 * replicas; threads race on them for what the database must decide alone:
 * one live certificate per identity, a token's N uses, one decision per
 * request, one taker per challenge, one TPM per bound identity. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "error.h"
#include "store-fixture.h"

char dir[] = "/tmp/hwid-test-store-pg.XXXXXX";

#define RACERS 16

static store *a, *b; /* two "replicas" */

static void test_tokens(void) {
        store_token t = { 0 };

        CHECK(add_token(a, "tok001", 2, NOW + 3600) == 0);
        CHECK(add_token(b, "tok001", 2, NOW + 3600) == -HWID_E_EXISTS);
        CHECK(store_token_get(b, "tok001", &t) == 0);
        CHECK(t.uses_left == 2 && t.secret_hash[0] == 0xab && !t.revoked);
        store_token_clear(&t);
        CHECK(store_token_revoke(b, "tok001") == 0);
        CHECK(add_request(a, REQ1, "r-1", "tok001", NOW) == -HWID_E_TOKEN_INVALID);
        CHECK(store_token_revoke(a, "nosuch") == -HWID_E_NOT_FOUND);
        CHECK(add_token(a, "tokexp", 1, NOW - 1) == 0);
        CHECK(add_request(a, REQ1, "r-1", "tokexp", NOW) == -HWID_E_TOKEN_INVALID);
}

/* A derived token keeps its nonce and no hash, a legacy one its hash
 * (the schema holds exactly one); either is spent the same way. */
static void test_derived_tokens(void) {
        static const uint8_t zeros[32];
        store_token t = { 0 };

        CHECK(add_derived_token(a, "der001", 0x5a, NOW + 3600) == 0);
        CHECK(store_token_get(b, "der001", &t) == 0);
        CHECK(t.derived && t.nonce[0] == 0x5a && t.nonce[31] == 0x5a);
        CHECK(memcmp(t.secret_hash, zeros, sizeof(zeros)) == 0);
        store_token_clear(&t);
        CHECK(add_token(a, "leg001", 1, NOW + 3600) == 0);
        CHECK(store_token_get(b, "leg001", &t) == 0);
        CHECK(!t.derived && memcmp(t.nonce, zeros, sizeof(zeros)) == 0 && t.secret_hash[0] == 0xab);
        store_token_clear(&t);
        CHECK(add_request(b, REQ3, "d-1", "der001", NOW) == 0);
        CHECK(uses_left(a, "der001") == 0);
}

/* A batch of tokens, whole or not at all (store_token_insert()). */
static void test_token_batches(void) {
        static const char *const ok[] = { "bat001", "bat002", "bat003" };
        static const char *const clash[] = { "bat004", "bat002", "bat005" };

        CHECK(add_tokens(a, ok, ELEMENTSOF(ok), 1, NOW + 3600) == 0);
        CHECK(uses_left(b, "bat003") == 1);
        CHECK(add_tokens(b, clash, ELEMENTSOF(clash), 1, NOW + 3600) == -HWID_E_EXISTS);
        CHECK(uses_left(a, "bat004") == -1 && uses_left(a, "bat005") == -1);
}

static void test_requests(void) {
        store_issue in = { .request_id = REQ2 };

        CHECK(add_token(a, "tok002", 3, NOW + 3600) == 0);
        CHECK(add_request(a, REQ2, "Req-2", "tok002", NOW) == 0);
        CHECK(uses_left(b, "tok002") == 2);
        CHECK(add_request(b, REQ2, "req-2", "tok002", NOW) == -HWID_E_EXISTS);
        CHECK(uses_left(b, "tok002") == 2); /* the failed request spent nothing */
        CHECK(commit(a, "A2", "req-2", NOW + 3600, NOW, &in) == -HWID_E_CONFLICT); /* pending, not approved */
        CHECK(store_request_decide(b, REQ2, true, NULL, NOW) == 0);
        CHECK(store_request_decide(a, REQ2, false, "late", NOW) == -HWID_E_CONFLICT);
        CHECK(commit(b, "A3", "other", NOW + 3600, NOW, &in) == -HWID_E_FORBIDDEN);
        CHECK(commit(a, "A2", "REQ-2", NOW + 3600, NOW, &in) == 0); /* identities ignore case */
        CHECK(request_status(b, REQ2) == REQUEST_ISSUED);
}

static void test_certs(void) {
        store_cert c = { 0 };
        store_issue renew = { .supersedes_serial = "C1" }, replace = { .replace_live = true };

        CHECK(commit(a, "C1", "Node-C", NOW + 3600, NOW, NULL) == 0);
        CHECK(commit(b, "C2", "node-c", NOW + 3600, NOW, NULL) == -HWID_E_CONFLICT);
        CHECK(commit(b, "C1", "node-other", NOW + 3600, NOW, NULL) == -HWID_E_EXISTS);
        CHECK(commit(b, "C3", "node-c", NOW + 7200, NOW, &renew) == 0);
        CHECK(cert_status(a, "C1") == CERT_SUPERSEDED);
        CHECK(commit(b, "C4", "node-c", NOW + 7200, NOW, &renew) == -HWID_E_CONFLICT); /* renewed already */
        CHECK(commit(a, "C5", "NODE-C", NOW + 7200, NOW, &replace) == 0);
        CHECK(cert_status(b, "C3") == CERT_SUPERSEDED);
        CHECK(store_cert_live_for(b, "node-C", NOW, &c) == 0);
        CHECK_STREQ(c.serial, "C5");
        store_cert_clear(&c);
        /* An expired live certificate does not block the next one. */
        CHECK(commit(a, "C6", "node-exp", NOW + 10, NOW, NULL) == 0);
        CHECK(commit(b, "C7", "node-exp", NOW + 3600, NOW + 20, NULL) == 0);
        CHECK(cert_status(a, "C6") == CERT_SUPERSEDED);
        CHECK(commit(a, "c8", "lower", NOW + 10, NOW, NULL) == -HWID_E_INVALID);
}

static void test_dns(void) {
        const char *n1[] = { "Web.Example." }, *n2[] = { "web.example" };
        store_issue i1 = { .dns_names = n1, .n_dns_names = 1 }, i2 = { .dns_names = n2, .n_dns_names = 1 };
        char *owner = NULL;

        CHECK(commit(a, "D1", "dns-1", NOW + 3600, NOW, &i1) == 0);
        CHECK(commit(b, "D2", "dns-2", NOW + 3600, NOW, &i2) == -HWID_E_CONFLICT);
        CHECK(store_dns_owner(b, "WEB.example", NOW, &owner) == 0);
        CHECK_STREQ(owner, "dns-1");
        free(owner);
        CHECK(store_cert_revoke(a, "D1", 4, NOW, NULL) == 0);
        CHECK(commit(b, "D2", "dns-2", NOW + 3600, NOW, &i2) == 0); /* a revoked holder lets go */
}

typedef struct seen {
        const char *serial;
        bool found;
} seen;

static int find_revoked(const char *serial, int64_t at, int reason, void *userdata) {
        seen *s = userdata;

        if (strcmp(serial, s->serial) == 0)
                s->found = true;
        return 0;
}

static void test_revocation(void) {
        int64_t seq0 = 0, seq1 = 0, n0 = 0, n1 = 0, n2 = 0;
        seen s = { .serial = "E1" };
        size_t n = 0;

        CHECK(store_revocation_seq(b, &seq0) == 0);
        CHECK(commit(a, "E1", "rev-1", NOW + 3600, NOW, NULL) == 0);
        CHECK(store_cert_revoke(a, "E1", 1, NOW, NULL) == 0);
        CHECK(store_cert_revoke(b, "E1", 1, NOW, NULL) == -HWID_E_CONFLICT);
        CHECK(store_revocation_seq(b, &seq1) == 0 && seq1 > seq0);
        CHECK(store_cert_foreach_revoked(b, NOW, find_revoked, &s) == 0 && s.found);
        CHECK(store_key_blocked(b, spki_of("E1")) == -HWID_E_KEY_BLOCKED);
        CHECK(commit(b, "E1", "rev-2", NOW + 3600, NOW, NULL) == -HWID_E_KEY_BLOCKED);
        CHECK(commit(a, "E2", "rev-3", NOW + 3600, NOW, NULL) == 0);
        CHECK(commit(a, "E3", "rev-3", NOW + 7200, NOW, &(store_issue) { .supersedes_serial = "E2" }) == 0);
        CHECK(store_cert_revoke_identity(b, "REV-3", 5, NOW, NULL, &n) == 0 && n == 2);
        CHECK(store_cert_revoke_identity(b, "rev-3", 5, NOW, NULL, &n) == -HWID_E_NOT_FOUND);
        CHECK(store_crl_number_next(a, NOW, &n0) == 0 && n0 >= NOW);
        CHECK(store_crl_number_next(b, NOW - 100, &n1) == 0 && n1 > n0);
        CHECK(store_crl_number_next(a, NOW, &n2) == 0 && n2 > n1);
}

/* A signer for the test: a signature of one byte, the kind. */
static int fake_sign(store_audit_checkpoint *cp, void *userdata) {
        (void) userdata;
        cp->sig[0] = (uint8_t) cp->kind;
        cp->sig_len = 1;
        return 0;
}

static int keep_checkpoint(const store_audit_checkpoint *cp, void *userdata) {
        *(store_audit_checkpoint *) userdata = *cp;
        return 0;
}

static int no_record(const store_audit *r, void *userdata) {
        (void) r;
        (void) userdata;
        return 0;
}

static void test_audit(void) {
        store_audit rec = { .actor = "admin:root", .action = "test", .target = "x\n", .outcome = "allow" };
        store_audit old = { .at = NOW - 1000, .actor = "admin:root", .action = "old", .outcome = "allow" };
        store_audit_checkpoint last = { 0 }, head_cp = { .kind = STORE_CHECKPOINT_HEAD, .at = NOW };
        store_audit_link anchor, head;
        store_audit_report rep;
        int before = audit_rows(a);
        size_t n = 0;

        CHECK(store_audit_append(a, &rec) == 0);
        CHECK(store_audit_append(b, &rec) == 0);
        CHECK(audit_rows(b) == before + 2);
        CHECK(store_audit_verify(b, NULL, 0, &rep) == 0 && rep.problem == AUDIT_OK);
        /* Checkpoints: one of the head, then a pruning's, in its transaction. */
        CHECK(store_audit_head(a, &head) == 0 && head.set);
        head_cp.id = head.id;
        head_cp.record_at = head.at;
        memcpy(head_cp.hash, head.hash, sizeof(head_cp.hash));
        head_cp.sig_len = 1;
        CHECK(store_audit_checkpoint_add(b, &head_cp) == 0);
        CHECK(store_audit_chain_read(a, &anchor, &head, keep_checkpoint, no_record, &last) == 0);
        CHECK(last.kind == STORE_CHECKPOINT_HEAD && last.id == head.id && last.sig_len == 1);
        CHECK(store_audit_append(a, &old) == 0);
        CHECK(store_audit_prune(b, (int64_t) time(NULL) + 10, 10000, fake_sign, NULL, &n) == 0 && n > 0);
        CHECK(store_audit_chain_read(a, &anchor, &head, keep_checkpoint, no_record, &last) == 0);
        CHECK(anchor.set && last.kind == STORE_CHECKPOINT_PRUNE && last.id == anchor.id && last.sig[0] == 'P');
        CHECK(memcmp(last.hash, anchor.hash, sizeof(last.hash)) == 0 && last.record_at == anchor.at);
}

static void test_attest(void) {
        store_challenge c = { .id = "0123456789abcdef0123456789abcdef", .ak_public = (uint8_t *) der,
                              .ak_public_len = sizeof(der), .ek_cert = (uint8_t *) der, .ek_cert_len = sizeof(der),
                              .expires_at = NOW + 60 }, got = { 0 };
        store_ek e = { .ek_pub_sha256 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
                       .identity = (char *) "Ek-Node", .profile = (char *) "edge" }, f = { 0 };
        store_ek e2 = e;

        CHECK(store_challenge_put(a, &c, NOW, 10, 0, NULL) == 0);
        CHECK(store_challenge_put(b, &c, NOW, 10, 0, NULL) == -HWID_E_EXISTS);
        CHECK(store_challenge_take(b, c.id, &got) == 0 && got.ak_public_len == sizeof(der));
        store_challenge_clear(&got);
        CHECK(store_challenge_take(a, c.id, &got) == -HWID_E_NOT_FOUND);
        CHECK(store_ek_add(a, &e, 1, NULL, NOW) == 0);
        e2.ek_pub_sha256[0] = 'f';
        e2.identity = (char *) "ek-node";
        CHECK(store_ek_add(b, &e2, 1, NULL, NOW) == -HWID_E_EXISTS);
        /* The same entry again: the name is what is reported, as SQLite does. */
        CHECK(store_ek_add(b, &e, 1, NULL, NOW) == -HWID_E_EXISTS);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_EXISTS), "Ek-Node is already on the EK allowlist");
        CHECK(store_ek_find(b, NULL, e.ek_pub_sha256, &f) == 0);
        CHECK_STREQ(f.identity, "Ek-Node");
        store_ek_clear(&f);
        CHECK(store_ek_remove(b, "EK-NODE", NULL, NOW) == 0);
        CHECK(store_ek_remove(a, "ek-node", NULL, NOW) == -HWID_E_NOT_FOUND);
}

/* ---- identities bound to the TPM that attested them ---- */

#define EK_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define EK_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"

static int commit_by(store *s, const char *serial, const char *identity, const char *ek_pub, bool replace) {
        store_cert c = make_cert(serial, identity, NOW + 3600);

        if (ek_pub)
                snprintf(c.attestation.ek_pub_sha256, sizeof(c.attestation.ek_pub_sha256), "%s", ek_pub);
        return store_cert_commit(s, &(store_issue) { .cert = &c, .replace_live = replace }, NOW);
}

static void test_bindings(void) {
        store_audit au = { .actor = "admin:root", .action = "identity.release", .target = "Bind-1",
                           .outcome = "allow" };
        store_reads_keys k = { .identity = "BIND-1", .now = NOW };
        store_binding got = { 0 }, *all = NULL;
        store_reads *rd = NULL;
        size_t n = 0;
        int rows;

        CHECK(commit_by(a, "AB1", "Bind-1", EK_A, false) == 0);
        CHECK(store_cert_revoke(a, "AB1", 4, NOW, NULL) == 0);
        /* The other replica refuses another TPM, and no TPM at all. */
        CHECK(commit_by(b, "AB2", "bind-1", EK_B, false) == -HWID_E_FORBIDDEN);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_FORBIDDEN), "Bind-1 is bound to the TPM that attested it (EK sha256:" EK_A
                       ", since certificate AB1), not to this one (EK sha256:" EK_B "): only that TPM enrolls it "
                       "until an admin releases it (a replaced TPM or board): hwid identity release Bind-1");
        CHECK(commit_by(b, "AB2", "bind-1", NULL, false) == -HWID_E_FORBIDDEN);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_FORBIDDEN), "this enrollment records no attestation by it");
        /* Read ahead with the identity's live certificate, as SQLite reads it. */
        CHECK(store_reads_fetch(b, &k, &rd) == 0);
        CHECK(store_reads_binding_get(b, rd, "BIND-1", &got) == 0 && strcmp(got.ek_pub_sha256, EK_A) == 0);
        CHECK_STREQ(got.serial, "AB1");
        store_binding_clear(&got);
        store_reads_free(rd);
        CHECK(store_binding_list(b, &all, &n) == 0 && n == 1 && strcmp(all[0].identity, "Bind-1") == 0);
        store_binding_list_free(all, n);
        CHECK(store_binding_get(b, "bind-1", &got) == 0);
        rows = audit_rows(a);
        CHECK(store_binding_release(b, &got, &au, NOW) == 0);
        CHECK(store_binding_release(a, &got, &au, NOW) == -HWID_E_NOT_FOUND);
        store_binding_clear(&got);
        CHECK(audit_rows(a) == rows + 1);
        CHECK(store_binding_get(a, "bind-1", &got) == -HWID_E_NOT_FOUND);
        CHECK(commit_by(b, "AB2", "bind-1", EK_B, false) == 0);
        CHECK(store_binding_get(a, "BIND-1", &got) == 0 && strcmp(got.ek_pub_sha256, EK_B) == 0);
        store_binding_clear(&got);
}

/* Two TPMs enrolling one identity on both replicas at once, each
 * replacing the live certificate: the first to commit binds it, and
 * every enrollment of the other TPM is refused, whatever the timing. */
typedef struct bind_racer {
        int round, i, r;
} bind_racer;

static pthread_barrier_t bind_start; /* every racer commits at once */

static void *race_bind(void *userdata) {
        bind_racer *x = userdata;
        char serial[16], name[32];

        snprintf(serial, sizeof(serial), "AC%X%02X", x->round, x->i);
        snprintf(name, sizeof(name), "bind-race-%d", x->round);
        pthread_barrier_wait(&bind_start);
        x->r = commit_by(x->i % 2 ? a : b, serial, name, x->i % 4 < 2 ? EK_A : EK_B, true);
        return NULL;
}

static void binding_race(int round) {
        pthread_t th[RACERS];
        bind_racer x[RACERS];
        store_binding got = { 0 };
        int won[2] = { 0 }, refused[2] = { 0 };
        char name[32];

        snprintf(name, sizeof(name), "bind-race-%d", round);
        pthread_barrier_init(&bind_start, NULL, RACERS);
        for (int i = 0; i < RACERS; i++) {
                x[i] = (bind_racer) { .round = round, .i = i };
                pthread_create(&th[i], NULL, race_bind, &x[i]);
        }
        for (int i = 0; i < RACERS; i++) {
                pthread_join(th[i], NULL);
                won[i % 4 >= 2] += x[i].r == 0;
                refused[i % 4 >= 2] += x[i].r == -HWID_E_FORBIDDEN;
        }
        pthread_barrier_destroy(&bind_start);
        CHECK(store_binding_get(a, name, &got) == 0);
        if (strcmp(got.ek_pub_sha256, EK_A) == 0)
                CHECK(won[0] == RACERS / 2 && refused[1] == RACERS / 2);
        else
                CHECK(won[1] == RACERS / 2 && refused[0] == RACERS / 2 && strcmp(got.ek_pub_sha256, EK_B) == 0);
        store_binding_clear(&got);
}

/* A few rounds: the commits of both replicas overlap in some of them. */
static void test_binding_race(void) {
        for (int round = 0; round < 4; round++)
                binding_race(round);
}

/* ---- what an issuance reads ahead: one pipeline, the same answers ---- */

static void test_reads(void) {
        const char *names[] = { "Reads.Example.", "nobody.example" };
        char key0[65], key1[65];
        store_reads_keys k = { .token_id = "tokrea", .serial = "EE1", .spki_sha256 = key0, .identity = "READS-1",
                               .dns_names = names, .n_dns_names = 2, .now = NOW };
        store_reads *rd = NULL;
        store_token t = { 0 };
        store_cert c = { 0 };
        char *owner = NULL;

        snprintf(key0, sizeof(key0), "%s", spki_of("EE0"));
        snprintf(key1, sizeof(key1), "%s", spki_of("EE1"));
        CHECK(add_token(a, "tokrea", 1, NOW + 3600) == 0);
        CHECK(commit(a, "EE0", "reads-0", NOW + 3600, NOW, NULL) == 0);
        CHECK(store_cert_revoke(a, "EE0", 1, NOW, NULL) == 0);
        CHECK(commit(a, "EE1", "reads-1", NOW + 3600, NOW,
                     &(store_issue) { .dns_names = names, .n_dns_names = 1 }) == 0);
        CHECK(store_reads_ahead(b));
        CHECK(store_reads_fetch(b, &k, &rd) == 0);
        /* The state changes after the read: the answers are the read's. */
        CHECK(store_token_revoke(a, "tokrea") == 0);
        CHECK(store_reads_token_get(b, rd, "tokrea", &t) == 0 && !t.revoked && t.uses_left == 1);
        store_token_clear(&t);
        CHECK(store_reads_cert_get(b, rd, "EE1", &c) == 0 && c.status == CERT_VALID);
        store_cert_clear(&c);
        CHECK(store_reads_key_blocked(b, rd, key0) == -HWID_E_KEY_BLOCKED);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_KEY_BLOCKED), "with certificate EE0");
        CHECK(store_reads_key_blocked(b, rd, key1) == 0); /* not read ahead: asked of the store */
        CHECK(store_reads_cert_live_for(b, rd, "READS-1", NOW, &c) == 0);
        CHECK_STREQ(c.serial, "EE1");
        store_cert_clear(&c);
        CHECK(store_reads_dns_owner(b, rd, "READS.example", NOW, &owner) == 0);
        CHECK_STREQ(owner, "reads-1");
        free(owner);
        CHECK(store_reads_dns_owner(b, rd, "nobody.example", NOW, &owner) == -HWID_E_NOT_FOUND);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_NOT_FOUND), "no live certificate holds DNS name nobody.example");
        /* Given once: asked again, the store answers, as it is now. */
        CHECK(store_reads_token_get(b, rd, "tokrea", &t) == 0 && t.revoked);
        store_token_clear(&t);
        store_reads_free(rd);
        /* A malformed key is answered as the store function answers it. */
        k = (store_reads_keys) { .token_id = "BAD!", .serial = "ee1", .now = NOW };
        CHECK(store_reads_fetch(a, &k, &rd) == 0);
        CHECK(store_reads_token_get(a, rd, "BAD!", &t) == -HWID_E_NOT_FOUND);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_NOT_FOUND), "no such token");
        CHECK(store_reads_cert_get(a, rd, "ee1", &c) == -HWID_E_NOT_FOUND);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_NOT_FOUND), "upper-case hex");
        store_reads_free(rd);
}

/* ---- races between the two store objects ---- */

typedef struct racer {
        int i;
        const char *identity; /* NULL: a name of its own */
        const char *token;
        bool replace;
        int r;
} racer;

static void *race_commit(void *userdata) {
        racer *x = userdata;
        char serial[16], name[32];

        snprintf(serial, sizeof(serial), "F%s%02X", x->replace ? "C" : x->token ? "A" : "B", x->i);
        snprintf(name, sizeof(name), "race-%s-%d", x->token ? "t" : "i", x->i);
        x->r = commit(x->i % 2 ? a : b, serial, x->identity ? x->identity : name, NOW + 3600, NOW,
                      &(store_issue) { .consume_token_id = x->token, .replace_live = x->replace });
        return NULL;
}

static int run_race(const char *identity, const char *token, bool replace, int *ret_conflicts) {
        pthread_t th[RACERS];
        racer x[RACERS];
        int ok = 0;

        *ret_conflicts = 0;
        for (int i = 0; i < RACERS; i++) {
                x[i] = (racer) { .i = i, .identity = identity, .token = token, .replace = replace };
                pthread_create(&th[i], NULL, race_commit, &x[i]);
        }
        for (int i = 0; i < RACERS; i++) {
                pthread_join(th[i], NULL);
                ok += x[i].r == 0;
                *ret_conflicts += x[i].r == -HWID_E_CONFLICT || x[i].r == -HWID_E_TOKEN_INVALID;
        }
        return ok;
}

/* A keyCompromise revocation racing issuances of the same key on the
 * other replica: once it committed, no certificate of the key is live,
 * whichever way their commits fell (the key's lock in hwid_issue_one()). */
typedef struct key_racer {
        store *s;
        int i, ok, blocked, tries;
        const char *key;
} key_racer;

static atomic_int key_issued; /* by all racers: the revocation starts amid them */
static atomic_bool key_revoked; /* the revocation returned: racers stop after it */

static void key_attempt(key_racer *x, int j) {
        char serial[16], name[32];
        store_cert c;
        int r;

        snprintf(serial, sizeof(serial), "BB%02X%04X", x->i, j);
        snprintf(name, sizeof(name), "key-race-%d-%d", x->i, j);
        c = make_cert(serial, name, NOW + 3600);
        memcpy(c.spki_sha256, x->key, sizeof(c.spki_sha256));
        r = store_cert_commit(x->s, &(store_issue) { .cert = &c }, NOW);
        x->ok += r == 0;
        x->blocked += r == -HWID_E_KEY_BLOCKED;
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

static void test_key_race(void) {
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
                pthread_create(&th[i], NULL, issue_key, &x[i]);
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

/* One group commit, members that fail and members that succeed: each gets
 * its own answer, a failed one spends no token use and leaves no audit
 * record, and the chain hwid_issue() made verifies. */
typedef struct mixed {
        int i, r;
} mixed;

static void *commit_mixed(void *userdata) {
        mixed *x = userdata;
        char serial[16], name[32];
        store_audit au = { .actor = "token:tokmix", .action = "enroll", .outcome = "allow", .token_id = "tokmix" };

        snprintf(serial, sizeof(serial), "DD%02X", x->i);
        snprintf(name, sizeof(name), x->i % 2 ? "mixed-one" : "mixed-%d", x->i);
        au.target = name;
        x->r = commit(a, serial, name, NOW + 3600, NOW, &(store_issue) { .consume_token_id = "tokmix", .audit = &au });
        return NULL;
}

static void test_mixed_batch(void) {
        pthread_t th[RACERS];
        mixed x[RACERS];
        store_audit_report rep;
        int ok = 0, before = audit_rows(a);

        CHECK(add_token(a, "tokmix", 100, NOW + 3600) == 0);
        for (int i = 0; i < RACERS; i++) {
                x[i] = (mixed) { .i = i };
                pthread_create(&th[i], NULL, commit_mixed, &x[i]);
        }
        for (int i = 0; i < RACERS; i++) {
                pthread_join(th[i], NULL);
                ok += x[i].r == 0;
                CHECK(x[i].r == 0 || (i % 2 && x[i].r == -HWID_E_CONFLICT));
        }
        CHECK(ok == RACERS / 2 + 1);
        CHECK(uses_left(b, "tokmix") == 100 - ok);
        CHECK(audit_rows(b) == before + ok);
        CHECK(store_audit_verify(b, NULL, 0, &rep) == 0 && rep.problem == AUDIT_OK);
}

static void test_races(void) {
        store_cert *all = NULL;
        size_t n = 0;
        int lost = 0;

        CHECK(run_race("race-one", NULL, false, &lost) == 1);
        CHECK(lost == RACERS - 1);
        CHECK(store_cert_list(a, "RACE-ONE", &all, &n) == 0 && n == 1);
        store_cert_list_free(all, n);
        CHECK(add_token(a, "tokrac", 5, NOW + 3600) == 0);
        CHECK(run_race(NULL, "tokrac", false, &lost) == 5);
        CHECK(lost == RACERS - 5);
        CHECK(uses_left(b, "tokrac") == 0);
        /* Re-enrollments that replace the live certificate all succeed, one
         * after the other: one certificate is live at the end. */
        CHECK(run_race("race-replace", NULL, true, &lost) == RACERS);
        CHECK(store_cert_list(b, "race-replace", &all, &n) == 0 && n == RACERS);
        for (size_t i = 0, live = 0; i < n; i++)
                if (all[i].status == CERT_VALID && ++live > 1)
                        CHECK(!"two live certificates after replacing races");
        store_cert_list_free(all, n);
}

int main(void) {
        const char *uri = getenv("HWID_TEST_PG_URI");

        if (!uri) {
                fprintf(stderr, "HWID_TEST_PG_URI is not set (tests/integration/pg-store.sh sets it)\n");
                return 77;
        }
        if (!fixture_begin())
                return 1;
        if (store_open(uri, &a) < 0 || store_open(uri, &b) < 0) {
                fprintf(stderr, "cannot open %s: %s\n", uri, hwid_strerror(-HWID_E_STORE));
                return 1;
        }
        test_tokens();
        test_token_batches();
        test_derived_tokens();
        test_requests();
        test_certs();
        test_dns();
        test_revocation();
        test_audit();
        test_attest();
        test_bindings();
        test_binding_race();
        test_reads();
        test_races();
        test_key_race();
        test_mixed_batch();
        store_free(a);
        store_free(b);
        return fixture_end("test-store-pg");
}
