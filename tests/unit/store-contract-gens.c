/* The store contract (test-store-contract.c): CA generations -- a
 * rollover's rows, written by one store object and read by another (two
 * hwidd replicas, or the CA host's command and a running hwidd) -- and
 * each certificate's generation, its CRL and its count. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "error.h"
#include "store-contract.h"

static const uint8_t cert1[] = { 0x30, 0x01, 0x01 };
static const uint8_t cert2[] = { 0x30, 0x01, 0x02 };
static const uint8_t link_nwo[] = { 0x30, 0x01, 0x03 };
static const uint8_t link_own[] = { 0x30, 0x01, 0x04 };

static store_ca_gen gen_one(void) {
        return (store_ca_gen) { .generation = 1, .state = CA_GEN_ACTIVE, .subject = "CN=acme CA",
                                .cert = (uint8_t *) cert1, .cert_len = sizeof(cert1), .prepared_at = NOW - 100,
                                .activated_at = NOW - 100 };
}

/* Generation n, prepared, with its certificate and links (or, offline,
 * without: its certificate comes from the root later). */
static store_ca_gen gen_next(int n, bool offline) {
        store_ca_gen g = { .generation = n, .state = CA_GEN_PREPARED, .subject = "CN=acme CA G2",
                           .key_uri = "pkcs11:token=ca;object=ca-g2?pin-source=file:/etc/hwid/pin" };

        if (!offline) {
                g.cert = (uint8_t *) cert2;
                g.cert_len = sizeof(cert2);
                g.new_with_old = (uint8_t *) link_nwo;
                g.new_with_old_len = sizeof(link_nwo);
                g.old_with_new = (uint8_t *) link_own;
                g.old_with_new_len = sizeof(link_own);
        }
        return g;
}

static store_audit audit_of(const char *action) {
        return (store_audit) { .at = NOW, .actor = "admin:root", .action = action, .target = "generation 2",
                               .outcome = "allow" };
}

/* The states of the generations, as "active,prepared". */
static void states(store *s, char *out, size_t size) {
        store_ca_gen *v = NULL;
        size_t n = 0;

        out[0] = '\0';
        if (store_ca_gen_list(s, &v, &n) < 0) {
                snprintf(out, size, "error");
                return;
        }
        for (size_t i = 0; i < n; i++)
                snprintf(out + strlen(out), size - strlen(out), "%s%d:%s", i ? "," : "", v[i].generation,
                         store_ca_state_name(v[i].state));
        store_ca_gen_list_free(v, n);
}

static int64_t seq_of(store *s) {
        int64_t seq = -1;

        return store_ca_gen_seq(s, &seq) == 0 ? seq : -1;
}

/* What prepare refuses, and what it records: generation 1 with the first,
 * the next as prepared, one transaction with its audit record. */
static void prepare_cases(store *s, store *b) {
        store_ca_gen one = gen_one(), two = gen_next(2, false), bad;
        store_audit a = audit_of("ca.rollover.prepare");
        char st[128];

        CHECK(seq_of(b) == 0);
        states(b, st, sizeof(st));
        CHECK_STREQ(st, "");
        CHECK(store_ca_gen_prepare(s, NULL, &two, false, &a, NOW) == -HWID_E_INVALID);
        bad = two;
        bad.key_uri = "pkcs11:token=ca;object=ca-g2?pin-value=1234";
        CHECK(store_ca_gen_prepare(s, &one, &bad, false, &a, NOW) == -HWID_E_INVALID);
        bad = two;
        bad.new_with_old = NULL;
        CHECK(store_ca_gen_prepare(s, &one, &bad, false, &a, NOW) == -HWID_E_INVALID);
        bad = two;
        bad.generation = 3;
        CHECK(store_ca_gen_prepare(s, &one, &bad, false, &a, NOW) == -HWID_E_CONFLICT);
        CHECK(seq_of(b) == 0 && audit_rows(b) == 0);
        states(b, st, sizeof(st));
        CHECK_STREQ(st, ""); /* nothing of a refused prepare, generation 1 neither */
        CHECK(store_ca_gen_prepare(s, &one, &two, false, &a, NOW) == 0);
        CHECK(seq_of(b) == 1 && audit_rows(b) == 1);
        states(b, st, sizeof(st));
        CHECK_STREQ(st, "1:active,2:prepared");
        CHECK(store_ca_gen_prepare(b, &one, &two, false, &a, NOW) == -HWID_E_CONFLICT);
        CHECK(seq_of(s) == 1 && audit_rows(s) == 1);
        /* Replacing the prepared one (a rollover started again). */
        CHECK(store_ca_gen_prepare(b, NULL, &two, true, &a, NOW + 1) == 0);
        CHECK(seq_of(s) == 2 && audit_rows(s) == 2);
}

static void read_back(store *b) {
        store_ca_gen *v = NULL;
        size_t n = 0;

        CHECK(store_ca_gen_list(b, &v, &n) == 0 && n == 2);
        if (n != 2) {
                store_ca_gen_list_free(v, n);
                return;
        }
        CHECK(v[0].generation == 1 && v[0].state == CA_GEN_ACTIVE && !v[0].key_uri);
        CHECK(v[0].cert_len == sizeof(cert1) && memcmp(v[0].cert, cert1, sizeof(cert1)) == 0);
        CHECK(v[0].prepared_at == NOW - 100 && v[0].activated_at == NOW - 100 && !v[0].new_with_old);
        CHECK(v[1].generation == 2 && v[1].state == CA_GEN_PREPARED && v[1].prepared_at == NOW + 1);
        CHECK_STREQ(v[1].subject, "CN=acme CA G2");
        CHECK_STREQ(v[1].key_uri, "pkcs11:token=ca;object=ca-g2?pin-source=file:/etc/hwid/pin");
        CHECK(v[1].new_with_old_len == sizeof(link_nwo) && memcmp(v[1].new_with_old, link_nwo, sizeof(link_nwo)) == 0);
        CHECK(v[1].old_with_new_len == sizeof(link_own) && memcmp(v[1].old_with_new, link_own, sizeof(link_own)) == 0);
        CHECK(v[1].activated_at == 0 && v[1].retired_at == 0 && !v[1].chain);
        store_ca_gen_list_free(v, n);
}

/* Activation and retirement: the prepared one becomes the active one,
 * the active one the previous, which alone is retired. */
static void switch_cases(store *s, store *b) {
        store_audit a = audit_of("ca.rollover.activate");
        char st[128];

        CHECK(store_ca_gen_import(s, 2, &(store_ca_gen) { 0 }, NULL, NOW) == -HWID_E_INVALID);
        CHECK(store_ca_gen_activate(s, 3, &a, NOW) == -HWID_E_NOT_FOUND);
        CHECK(store_ca_gen_activate(s, 1, &a, NOW) == -HWID_E_NOT_FOUND);
        CHECK(store_ca_gen_retire(s, 1, &a, NOW) == -HWID_E_CONFLICT);
        CHECK(store_ca_gen_retire(s, 2, &a, NOW) == -HWID_E_CONFLICT);
        CHECK(seq_of(b) == 2 && audit_rows(b) == 2);
        CHECK(store_ca_gen_activate(s, 2, &a, NOW + 10) == 0);
        CHECK(seq_of(b) == 3 && audit_rows(b) == 3);
        states(b, st, sizeof(st));
        CHECK_STREQ(st, "1:previous,2:active");
        CHECK(store_ca_gen_activate(b, 2, &a, NOW + 11) == -HWID_E_NOT_FOUND);
        CHECK(store_ca_gen_retire(b, 2, &a, NOW + 20) == -HWID_E_CONFLICT);
        CHECK(store_ca_gen_retire(b, 1, &a, NOW + 20) == 0);
        CHECK(store_ca_gen_retire(s, 1, &a, NOW + 21) == -HWID_E_NOT_FOUND);
        CHECK(store_ca_gen_retire(s, 7, &a, NOW + 21) == -HWID_E_NOT_FOUND);
        states(s, st, sizeof(st));
        CHECK_STREQ(st, "1:retired,2:active");
        CHECK(seq_of(s) == 4 && audit_rows(s) == 4);
}

void contract_ca_generations(void) {
        _cleanup_(store_freep) store *s = case_open("ca-generations"), *b = case_again("ca-generations");

        prepare_cases(s, b);
        read_back(b);
        switch_cases(s, b);
}

/* Under an offline root: prepared without a certificate, which an import
 * gives it (with its links), once; activated only then. */
void contract_ca_generation_import(void) {
        _cleanup_(store_freep) store *s = case_open("ca-gen-import"), *b = case_again("ca-gen-import");
        store_ca_gen one = gen_one(), two = gen_next(2, true), full = gen_next(2, false), *v = NULL;
        size_t n = 0;

        one.chain = "-----BEGIN CERTIFICATE-----\nroot\n-----END CERTIFICATE-----\n";
        CHECK(store_ca_gen_prepare(s, &one, &two, false, NULL, NOW) == 0);
        CHECK(store_ca_gen_activate(b, 2, NULL, NOW) == -HWID_E_CONFLICT);
        CHECK(store_ca_gen_import(b, 3, &full, NULL, NOW) == -HWID_E_INVALID);
        full.chain = one.chain;
        full.subject = "CN=acme CA G2 (as the root signed it)";
        CHECK(store_ca_gen_import(b, 2, &full, NULL, NOW + 5) == 0);
        CHECK(store_ca_gen_import(s, 2, &full, NULL, NOW + 6) == -HWID_E_CONFLICT);
        CHECK(seq_of(s) == 2);
        CHECK(store_ca_gen_list(s, &v, &n) == 0 && n == 2);
        if (n == 2) {
                CHECK_STREQ(v[0].chain, one.chain);
                CHECK_STREQ(v[1].chain, one.chain);
                CHECK_STREQ(v[1].subject, "CN=acme CA G2 (as the root signed it)");
                CHECK(v[1].cert_len == sizeof(cert2) && v[1].new_with_old_len == sizeof(link_nwo));
        }
        store_ca_gen_list_free(v, n);
        CHECK(store_ca_gen_activate(s, 2, NULL, NOW + 7) == 0);
}

typedef struct racer {
        store *s;
        int r;
} racer;

static void *race_prepare(void *userdata) {
        racer *x = userdata;
        store_ca_gen one = gen_one(), two = gen_next(2, false);

        x->r = store_ca_gen_prepare(x->s, &one, &two, false, NULL, NOW);
        return NULL;
}

/* Two CA hosts preparing at once: one of them, never both. */
void contract_ca_generation_race(void) {
        _cleanup_(store_freep) store *s = case_open("ca-gen-race"), *b = case_again("ca-gen-race");
        racer x[2] = { { .s = s }, { .s = b } };
        pthread_t t[2];
        char st[64];

        for (int i = 0; i < 2; i++)
                pthread_create(&t[i], NULL, race_prepare, &x[i]);
        for (int i = 0; i < 2; i++)
                pthread_join(t[i], NULL);
        CHECK((x[0].r == 0) != (x[1].r == 0));
        CHECK(x[0].r == -HWID_E_CONFLICT || x[1].r == -HWID_E_CONFLICT);
        states(s, st, sizeof(st));
        CHECK_STREQ(st, "1:active,2:prepared");
        CHECK(seq_of(b) == 1);
}

typedef struct revoked_walk {
        char serials[256];
} revoked_walk;

static int collect_serial(const char *serial, int64_t revoked_at, int reason, void *userdata) {
        revoked_walk *w = userdata;

        snprintf(w->serials + strlen(w->serials), sizeof(w->serials) - strlen(w->serials), "%s%s",
                 w->serials[0] ? "," : "", serial);
        return 0;
}

static int commit_gen(store *s, const char *serial, const char *identity, int generation, int64_t not_after) {
        store_cert c = make_cert(serial, identity, not_after);

        c.generation = generation;
        return store_cert_commit(s, &(store_issue) { .cert = &c, .replace_live = true }, NOW);
}

/* Each certificate keeps the generation that issued it: its CRL lists its
 * generation's revocations only, and a generation's unexpired
 * certificates (of any status) are counted. */
void contract_cert_generations(void) {
        _cleanup_(store_freep) store *s = case_open("cert-generations"), *b = case_again("cert-generations");
        store_cert c = { 0 };
        revoked_walk w = { 0 };
        uint64_t n = 99;
        int64_t last = -1;

        CHECK(commit(s, "0A", "edge-1", NOW + 1000, NOW, NULL) == 0); /* no generation given: 1 */
        CHECK(commit_gen(s, "0B", "edge-2", 1, NOW + 2000) == 0);
        CHECK(commit_gen(s, "0C", "edge-3", 1, NOW + 10) == 0);
        CHECK(commit_gen(s, "1A", "edge-1", 2, NOW + 3000) == 0); /* a renewal by the new CA */
        CHECK(commit_gen(s, "1B", "edge-4", 2, NOW + 3000) == 0);
        CHECK(store_cert_get(b, "0A", &c) == 0 && c.generation == 1);
        store_cert_clear(&c);
        CHECK(store_cert_get(b, "1A", &c) == 0 && c.generation == 2);
        store_cert_clear(&c);
        CHECK(store_cert_revoke(s, "0A", 4, NOW + 5, NULL) == 0); /* superseded, revoked after the switch */
        CHECK(store_cert_revoke(s, "1B", 0, NOW + 5, NULL) == 0);
        CHECK(store_cert_foreach_revoked(b, 1, NOW + 6, collect_serial, &w) == 0);
        CHECK_STREQ(w.serials, "0A");
        w = (revoked_walk) { 0 };
        CHECK(store_cert_foreach_revoked(b, 2, NOW + 6, collect_serial, &w) == 0);
        CHECK_STREQ(w.serials, "1B");
        w = (revoked_walk) { 0 };
        CHECK(store_cert_foreach_revoked(b, 0, NOW + 6, collect_serial, &w) == 0);
        CHECK_STREQ(w.serials, "0A,1B");
        CHECK(store_ca_gen_unexpired(b, 1, NOW + 6, &n, &last) == 0 && n == 3 && last == NOW + 2000);
        CHECK(store_ca_gen_unexpired(b, 1, NOW + 20, &n, &last) == 0 && n == 2 && last == NOW + 2000);
        CHECK(store_ca_gen_unexpired(b, 2, NOW + 6, &n, &last) == 0 && n == 2 && last == NOW + 3000);
        CHECK(store_ca_gen_unexpired(b, 1, NOW + 2000, &n, &last) == 0 && n == 0 && last == 0);
        CHECK(store_ca_gen_unexpired(b, 3, NOW, &n, &last) == 0 && n == 0);
}
