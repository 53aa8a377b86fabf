/* The store contract (test-store-contract.c): the audit chain -- appended,
 * read, verified, pruned from a signed anchor, its signed checkpoints and
 * hwidd's notes of them, its copy to the sink -- and migration from the
 * first schema (what `hwid store migrate` copies into PostgreSQL). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/evp.h>

#include "check.h"
#include "error.h"
#include "ossl-util.h"
#include "store-contract.h"
#include "x509-util.h"

/* ---- appending and reading ---- */

typedef struct seen {
        char actions[8][16];
        char target[16];
        int n;
        bool null_ok;
} seen;

static int see(const store_audit *a, void *userdata) {
        seen *x = userdata;

        if (x->n < 8)
                snprintf(x->actions[x->n], sizeof(x->actions[0]), "%s", a->action);
        if (strcmp(a->action, "a1") == 0)
                x->null_ok = a->reason == NULL && a->token_id == NULL && a->target == NULL && a->at == NOW + 1;
        if (strcmp(a->action, "ctl") == 0)
                snprintf(x->target, sizeof(x->target), "%s", a->target);
        x->n++;
        return 0;
}

void contract_audit(void) {
        _cleanup_(store_freep) store *s = case_open("audit"), *b = case_again("audit");
        store_audit ctl = { .at = NOW + 9, .actor = "admin:root", .action = "ctl", .target = "x\n",
                            .outcome = "allow" };
        store_audit_link head = { 0 };
        store_audit_report rep;
        seen x = { 0 };

        CHECK(store_audit_head(s, &head) == 0 && !head.set);
        for (int i = 0; i < 5; i++) {
                char action[8];
                store_audit a = { .at = NOW + i, .actor = "admin:root", .action = action, .target = "t",
                                  .outcome = "allow", .reason = "why", .token_id = "abc123" };

                snprintf(action, sizeof(action), "a%d", i);
                if (i == 1)
                        a.reason = a.token_id = a.target = NULL;
                CHECK(store_audit_append(i % 2 ? b : s, &a) == 0);
        }
        CHECK(store_audit_append(s, &(store_audit) { .actor = "x", .action = "y" }) == -HWID_E_INVALID);
        CHECK(store_audit_foreach(b, 0, see, &x) == 0 && x.n == 5);
        CHECK_STREQ(x.actions[0], "a0");
        CHECK_STREQ(x.actions[4], "a4");
        CHECK(x.null_ok);
        x = (seen) { 0 };
        CHECK(store_audit_foreach(s, 2, see, &x) == 0 && x.n == 2);
        CHECK_STREQ(x.actions[0], "a3");
        CHECK_STREQ(x.actions[1], "a4");
        /* A control character is stored escaped: no record forges a line. */
        CHECK(store_audit_append(b, &ctl) == 0);
        x = (seen) { 0 };
        CHECK(store_audit_foreach(s, 1, see, &x) == 0 && x.n == 1);
        CHECK_STREQ(x.target, "x\\x0a");
        /* One chain, whichever replica appended: it verifies to its head. */
        CHECK(store_audit_verify(s, NULL, 0, &rep) == 0 && rep.problem == AUDIT_OK);
        CHECK(rep.n_records == 6 && !rep.anchored && rep.n_checkpoints == 0);
        CHECK(store_audit_head(b, &head) == 0 && head.set && head.id == rep.last_id && head.at == NOW + 9);
}

/* ---- signed checkpoints, and hwidd's notes of them ---- */

static int sign(store_audit_checkpoint *cp, void *userdata) {
        _cleanup_(EVP_MD_CTX_freep) EVP_MD_CTX *md = EVP_MD_CTX_new();
        uint8_t msg[STORE_CHECKPOINT_MSG_LEN];
        size_t len = sizeof(cp->sig);

        store_audit_checkpoint_message(cp, msg);
        if (!md || EVP_DigestSignInit_ex(md, NULL, "SHA256", NULL, NULL, userdata, NULL) <= 0 ||
            EVP_DigestSign(md, cp->sig, &len, msg, sizeof(msg)) <= 0)
                return hwid_fail(HWID_E_INTERNAL, "cannot sign a checkpoint");
        cp->sig_len = len;
        return 0;
}

/* A checkpoint of s's head now, signed with key (or its signature spoilt). */
static int checkpoint_head(store *s, EVP_PKEY *key, bool spoil, int64_t *ret_id) {
        store_audit_checkpoint cp = { .kind = STORE_CHECKPOINT_HEAD, .at = NOW + 100 };
        store_audit_link head;
        int r = store_audit_head(s, &head);

        if (r < 0 || !head.set)
                return r < 0 ? r : -HWID_E_NOT_FOUND;
        cp.id = head.id;
        cp.record_at = head.at;
        memcpy(cp.hash, head.hash, sizeof(cp.hash));
        if ((r = sign(&cp, key)) < 0)
                return r;
        cp.sig[cp.sig_len - 1] ^= spoil;
        *ret_id = head.id;
        return store_audit_checkpoint_add(s, &cp);
}

/* hwidd's note of the checkpoint of record id, in the chain. */
static int note(store *s, int64_t id) {
        char target[32];

        snprintf(target, sizeof(target), "record %lld", (long long) id);
        return store_audit_append(s, &(store_audit) { .at = NOW + 100, .actor = STORE_CHECKPOINT_NOTE_ACTOR,
                                                       .action = STORE_CHECKPOINT_NOTE_ACTION, .target = target,
                                                       .outcome = "allow" });
}

static int append_at(store *s, int64_t at) {
        return store_audit_append(s, &(store_audit) { .at = at, .actor = "admin:root", .action = "old",
                                                       .outcome = "allow" });
}

typedef struct cps {
        store_audit_checkpoint last;
        size_t n;
} cps;

static int keep_checkpoint(const store_audit_checkpoint *cp, void *userdata) {
        cps *x = userdata;

        x->last = *cp;
        x->n++;
        return 0;
}

static int no_record(const store_audit *a, void *userdata) {
        (void) a;
        (void) userdata;
        return 0;
}

void contract_audit_checkpoints(void) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = EVP_EC_gen("P-256"), *other = EVP_EC_gen("P-256");
        _cleanup_(store_freep) store *s = case_open("checkpoints"), *b = case_again("checkpoints");
        store_audit_link anchor, head;
        store_audit_report rep;
        int64_t first = 0, noted = 0;
        size_t n = 0;
        cps x = { 0 };

        CHECK(key && other);
        for (int i = 0; i < 3; i++)
                CHECK(append_at(i % 2 ? b : s, NOW - 3000 + 1000 * i) == 0);
        /* A checkpoint of the head, hwidd's note of it, and one of the note. */
        CHECK(checkpoint_head(s, key, false, &first) == 0);
        CHECK(note(b, first) == 0);
        CHECK(checkpoint_head(b, key, false, &noted) == 0 && noted > first);
        CHECK(store_audit_verify(s, key, 0, &rep) == 0 && rep.problem == AUDIT_OK);
        CHECK(rep.n_checkpoints == 2 && rep.last.kind == STORE_CHECKPOINT_HEAD && rep.last.id == noted);
        /* Not the CA's key: every checkpoint is a forgery. */
        CHECK(store_audit_verify(b, other, 0, &rep) == 0 && rep.problem == AUDIT_CHECKPOINT);
        CHECK_CONTAINS(rep.detail, "does not verify with the CA's key");
        /* Pruning the two oldest leaves an anchor signed in its transaction. */
        CHECK(store_audit_prune(b, NOW - 1500, 100, sign, key, &n) == 0 && n == 2);
        CHECK(store_audit_chain_read(s, &anchor, &head, keep_checkpoint, no_record, &x) == 0);
        CHECK(anchor.set && x.last.kind == STORE_CHECKPOINT_PRUNE && x.last.id == anchor.id);
        CHECK(memcmp(x.last.hash, anchor.hash, sizeof(anchor.hash)) == 0 && x.last.record_at == NOW - 2000);
        CHECK(store_audit_verify(s, key, 3600, &rep) == 0 && rep.problem == AUDIT_OK);
        CHECK(rep.anchored && rep.anchor_id == anchor.id && rep.first_at == NOW - 1000 && rep.n_records == 2);
        /* Nothing more to prune before then; and a retention longer than the
         * pruned record's age says records were pruned too early. */
        CHECK(store_audit_prune(s, NOW - 1500, 100, sign, key, &n) == 0 && n == 0);
        CHECK(store_audit_prune(s, NOW, 0, NULL, NULL, &n) == -HWID_E_INVALID);
        CHECK(store_audit_verify(b, key, (int64_t) time(NULL) - NOW + 2001, &rep) == 0);
        CHECK(rep.problem == AUDIT_CHECKPOINT);
        CHECK_CONTAINS(rep.detail, "within the retention");
        /* A forged checkpoint is found. */
        CHECK(checkpoint_head(s, key, true, &first) == 0);
        CHECK(store_audit_verify(b, key, 0, &rep) == 0 && rep.problem == AUDIT_CHECKPOINT);
        CHECK_CONTAINS(rep.detail, "forged or altered");
        CHECK(store_audit_verify(b, NULL, 0, &rep) == 0 && rep.problem == AUDIT_OK); /* the chain alone holds */
}

/* A note whose checkpoint is not stored: a checkpoint was deleted. */
void contract_audit_notes(void) {
        _cleanup_(EVP_PKEY_freep) EVP_PKEY *key = EVP_EC_gen("P-256");
        _cleanup_(store_freep) store *s = case_open("notes");
        store_audit_report rep;
        int64_t id = 0;

        CHECK(append_at(s, NOW) == 0 && checkpoint_head(s, key, false, &id) == 0 && note(s, id) == 0);
        CHECK(store_audit_verify(s, key, 0, &rep) == 0 && rep.problem == AUDIT_OK);
        CHECK(note(s, id + 1) == 0); /* the note of a record never signed */
        CHECK(store_audit_verify(s, key, 0, &rep) == 0 && rep.problem == AUDIT_CHECKPOINT);
        CHECK_CONTAINS(rep.detail, "is no longer stored");
}

/* ---- the sink: every committed record, once, with its hashes ---- */

typedef struct sink {
        int n, without_hash;
        int64_t ids[8];
        bool *freed;
} sink;

static int sink_record(const store_audit *a, void *userdata) {
        sink *k = userdata;

        if (k->n < 8)
                k->ids[k->n] = a->id;
        k->without_hash += !a->hash || !a->prev_hash || a->id <= 0;
        k->n++;
        return 0;
}

static void sink_free(void *userdata) {
        *((sink *) userdata)->freed = true;
}

void contract_audit_sink(void) {
        _cleanup_(store_freep) store *s = case_open("sink"), *b = case_again("sink");
        store_audit au = { .at = NOW, .actor = "admin:root", .action = "cert.revoke", .target = "0A",
                           .outcome = "allow" };
        store_audit en = { .at = NOW, .actor = "token:tok111", .action = "enroll", .target = "edge-1",
                           .outcome = "allow", .token_id = "tok111" };
        bool freed = false;
        sink k = { .freed = &freed };
        size_t linked = 0;

        store_set_audit_sink(s, sink_record, &k, sink_free);
        CHECK(add_token(s, "tok111", 3, NOW + 3600) == 0);
        CHECK(store_audit_append(s, &au) == 0);
        CHECK(k.n == 1);
        CHECK(commit(s, "0A", "edge-1", NOW + 3600, NOW, &(store_issue) { .consume_token_id = "tok111",
                                                                           .audit = &en }) == 0);
        /* Refused: nothing of it reaches the sink. */
        CHECK(commit(s, "0B", "edge-1", NOW + 3600, NOW, &(store_issue) { .consume_token_id = "tok111",
                                                                           .audit = &en }) == -HWID_E_CONFLICT);
        CHECK(store_cert_revoke(s, "0A", 4, NOW, &au) == 0);
        /* Another replica's records go to its own sink, not this one's. */
        CHECK(store_audit_append(b, &au) == 0);
        /* Once every committed record is chained (hwidd's linker, where a
         * store defers it), each reached the sink once, with its hashes. */
        CHECK(store_audit_chain_pending(s, &linked) == 0);
        CHECK(k.n == 3 && k.without_hash == 0);
        CHECK(k.ids[0] != k.ids[1] && k.ids[1] != k.ids[2] && k.ids[0] != k.ids[2]);
        CHECK(audit_rows(b) == 4);
        CHECK(!freed);
        store_set_audit_sink(s, NULL, NULL, NULL);
        CHECK(freed);
        CHECK(store_audit_append(s, &au) == 0 && k.n == 3);
}

/* ---- migration: a store of the first schema brought up to date ---- */

void contract_migration(void) {
        _cleanup_free_ char *path = db_path("v1.db");
        _cleanup_(store_freep) store *s = NULL;
        store_audit_report rep;
        size_t recorded = 9, skipped = 9;
        store_cert c = { 0 };
        int64_t seq = 0;

        create_v1_store(path);
        /* Two live spellings of one identity, two live certificates holding
         * one DNS name: possible under schema 1. */
        insert_v1_cert(path, "0A", "edge-1", NOW - 20, "DNS:edge-1.example,DNS:shared.example");
        insert_v1_cert(path, "0B", "EDGE-1", NOW - 10, "DNS:other.example");
        insert_v1_cert(path, "0C", "edge-2", NOW - 5, "DNS:Shared.Example,DNS:edge-2.example");
        insert_v1_cert(path, "0D", "cam-a", NOW - 30, "DNS:door.example");
        insert_v1_cert(path, "0E", "cam-b", NOW - 4, "DNS:DOOR.example.");
        CHECK(raw_exec(path, "INSERT INTO tokens VALUES ('tok001', zeroblob(32), 'edge', NULL, NULL, 0, "
                             "9999999999, 3, 2, 0);"
                             "INSERT INTO audit (at, actor, action, target, outcome) VALUES "
                             "(1, 'admin:root', 'token.create', 'tok001', 'allow'), "
                             "(2, 'token:tok001', 'enroll', 'edge-1', 'allow');"
                             "UPDATE meta SET value = 2 WHERE key = 'revocation_seq'") == 0);
        s = case_migrated("migration", path);
        if (!s)
                return;
        /* hwidd records the names of the live certificates, once. */
        CHECK(store_cert_dns_backfill(s, NOW, der_dns_names, &recorded, &skipped) == 0);
        CHECK(store_cert_dns_backfill(s, NOW, der_dns_names, &recorded, &skipped) == 0);
        CHECK(recorded == 0 && skipped == 0);
        /* The newest spelling stays live; the older one is superseded. */
        CHECK(cert_status(s, "0A") == CERT_SUPERSEDED && cert_status(s, "0B") == CERT_VALID);
        CHECK(store_cert_live_for(s, "edge-1", NOW, &c) == 0);
        CHECK_STREQ(c.serial, "0B");
        store_cert_clear(&c);
        CHECK(cert_count(s, NULL) == 5);
        /* Names of live certificates are held; one two held stays with the older. */
        CHECK(held_by(s, "shared.example", NOW, "edge-2"));
        CHECK(held_by(s, "other.example", NOW, "EDGE-1"));
        CHECK(held_by(s, "edge-1.example", NOW, NULL)); /* 0A is no longer live */
        CHECK(held_by(s, "door.example", NOW, "cam-a"));
        CHECK(commit(s, "1A", "cam-c", NOW + 3600, NOW,
                     &(store_issue) { .dns_names = (const char *[]) { "Edge-2.Example" }, .n_dns_names = 1 }) ==
              -HWID_E_CONFLICT);
        /* Tokens, the revocation sequence and the audit log carry on. */
        CHECK(uses_left(s, "tok001") == 2);
        CHECK(add_request(s, REQ1, "edge-7", "tok001", NOW) == 0 && uses_left(s, "tok001") == 1);
        CHECK(store_revocation_seq(s, &seq) == 0 && seq == 2);
        CHECK(store_cert_revoke(s, "0C", 4, NOW, NULL) == 0);
        CHECK(store_revocation_seq(s, &seq) == 0 && seq == 3);
        CHECK(store_audit_append(s, &(store_audit) { .actor = "admin:root", .action = "after", .outcome = "allow" }) ==
              0);
        CHECK(store_audit_verify(s, NULL, 0, &rep) == 0 && rep.problem == AUDIT_OK && rep.n_records == 3);
}
