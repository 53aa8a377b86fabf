/* The store contract (test-store-contract.c): TPM attestation --
 * challenges taken once across replicas, bounded in all and per
 * requester; the EK allowlist; the attestation recorded with certificates
 * and requests; identities bound to the TPM that attested them. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "error.h"
#include "store-contract.h"

#define RACERS 16


/* ---- challenges ---- */

void contract_challenges(void) {
        _cleanup_(store_freep) store *s = case_open("challenges"), *s2 = case_again("challenges");
        store_challenge a = fixture_challenge('a', NOW + 60), b = fixture_challenge('b', NOW + 10),
                        c = fixture_challenge('c', NOW + 60);
        store_challenge got = { 0 }, bad;

        CHECK(store_challenge_put(s, &a, NOW, 2, 0, NULL) == 0);
        CHECK_REFUSED(store_challenge_put(s2, &a, NOW, 3, 0, NULL), HWID_E_EXISTS, "exists already");
        CHECK(store_challenge_put(s, &b, NOW, 2, 0, NULL) == 0);
        CHECK_REFUSED(store_challenge_put(s2, &c, NOW, 2, 0, NULL), HWID_E_RATE_LIMITED, "already waiting");
        /* Once b has expired, it makes room (and is gone). */
        CHECK(store_challenge_put(s2, &c, NOW + 10, 2, 0, NULL) == 0);
        /* Taken through the other replica, whole, and only once. */
        CHECK(store_challenge_take(s2, a.id, &got) == 0);
        CHECK(memcmp(got.id, a.id, 33) == 0 && got.expires_at == a.expires_at);
        CHECK(memcmp(got.secret_sha256, a.secret_sha256, 32) == 0 && memcmp(got.nonce, a.nonce, 32) == 0);
        CHECK(got.ak_public_len == sizeof(fixture_ak_bytes) &&
              memcmp(got.ak_public, fixture_ak_bytes, sizeof(fixture_ak_bytes)) == 0);
        CHECK(got.ek_cert_len == sizeof(fixture_ek_bytes) &&
              memcmp(got.ek_cert, fixture_ek_bytes, sizeof(fixture_ek_bytes)) == 0);
        store_challenge_clear(&got);
        CHECK_REFUSED(store_challenge_take(s, a.id, &got), HWID_E_NOT_FOUND, "no attestation challenge");
        CHECK_REFUSED(store_challenge_take(s, b.id, &got), HWID_E_NOT_FOUND, "no attestation challenge");
        /* Malformed: refused before the database. */
        CHECK_REFUSED(store_challenge_take(s, "ABC", &got), HWID_E_NOT_FOUND, "no such");
        bad = fixture_challenge('A', NOW + 60);
        CHECK_REFUSED(store_challenge_put(s, &bad, NOW, 9, 0, NULL), HWID_E_INVALID, "bad id");
        bad = fixture_challenge('d', NOW + 60);
        bad.ak_public_len = 0;
        CHECK_REFUSED(store_challenge_put(s, &bad, NOW, 9, 0, NULL), HWID_E_INVALID, "AK");
        /* Expired or not, a challenge is taken once; the caller checks the time. */
        CHECK(store_challenge_take(s, c.id, &got) == 0);
        store_challenge_clear(&got);
}

/* Per requester: past its bound a requester's oldest challenges make room
 * for its new one, whatever others hold; the bound of all requesters
 * together still refuses. */
void contract_requester_bound(void) {
        _cleanup_(store_freep) store *s = case_open("requester-bound"), *s2 = case_again("requester-bound");
        store_challenge x1 = fixture_challenge('1', NOW + 60), x2 = fixture_challenge('2', NOW + 60),
                        x3 = fixture_challenge('3', NOW + 60), y = fixture_challenge('4', NOW + 60),
                        z = fixture_challenge('5', NOW + 60), got = { 0 };
        size_t replaced = 9;

        x1.requester = x2.requester = x3.requester = "token:aaaaaa";
        y.requester = "ek:0123";
        z.requester = "cert:0A1B";
        CHECK(store_challenge_put(s, &x1, NOW, 3, 2, &replaced) == 0 && replaced == 0);
        CHECK(store_challenge_put(s2, &y, NOW + 1, 3, 2, &replaced) == 0 && replaced == 0);
        CHECK(store_challenge_put(s2, &x2, NOW + 2, 3, 2, &replaced) == 0 && replaced == 0);
        /* The table is full; token:aaaaaa is at its bound: its oldest goes. */
        CHECK(store_challenge_put(s, &x3, NOW + 3, 3, 2, &replaced) == 0 && replaced == 1);
        CHECK_REFUSED(store_challenge_take(s, x1.id, &got), HWID_E_NOT_FOUND, "no attestation challenge");
        CHECK(store_challenge_take(s2, y.id, &got) == 0);
        store_challenge_clear(&got);
        CHECK(store_challenge_put(s, &y, NOW + 4, 3, 2, &replaced) == 0 && replaced == 0);
        /* Another requester, below its bound, meets the table full. */
        CHECK_REFUSED(store_challenge_put(s2, &z, NOW + 5, 3, 2, &replaced), HWID_E_RATE_LIMITED, "already waiting");
        /* token:aaaaaa kept its two newest. */
        CHECK(store_challenge_take(s2, x2.id, &got) == 0);
        store_challenge_clear(&got);
        CHECK(store_challenge_take(s, x3.id, &got) == 0);
        store_challenge_clear(&got);
}

/* ---- the EK allowlist ---- */

static store_ek entry(const char *cert, const char *pub, const char *name, const char *profile) {
        store_ek e = { .identity = (char *) name, .profile = (char *) profile };

        snprintf(e.ek_cert_sha256, sizeof(e.ek_cert_sha256), "%s", cert);
        snprintf(e.ek_pub_sha256, sizeof(e.ek_pub_sha256), "%s", pub);
        return e;
}

static int ek_count(store *s) {
        store_ek *all = NULL;
        size_t n = 0;

        if (store_ek_list(s, &all, &n) < 0)
                return -1;
        store_ek_list_free(all, n);
        return (int) n;
}

void contract_allowlist(void) {
        _cleanup_(store_freep) store *s = case_open("allowlist"), *b = case_again("allowlist");
        store_audit audit = { .actor = "admin:test", .action = "ek.add", .outcome = "allow" };
        store_ek two[] = { entry(HEX_A, HEX_B, "edge-1", "edge"), entry("", HEX_C, "edge-2", "edge") };
        store_ek dup[] = { entry("", HEX_D, "edge-3", "edge"), entry("", HEX_C, "edge-4", "edge") };
        store_ek got = { 0 }, *all = NULL, same, none, upper;
        size_t n = 0;
        int audits = audit_rows(s);

        CHECK(store_ek_add(s, two, 2, &audit, NOW) == 0);
        CHECK(audit_rows(b) == audits + 1);
        /* All or nothing: edge-3 is not added because edge-4's key is edge-2's. */
        CHECK_REFUSED(store_ek_add(b, dup, 2, NULL, NOW), HWID_E_EXISTS, "is already on the EK allowlist");
        CHECK(ek_count(s) == 2);
        /* One entry per name, whatever its case; the same entry again names it. */
        same = entry("", HEX_D, "EDGE-1", "edge");
        CHECK_REFUSED(store_ek_add(b, &same, 1, NULL, NOW), HWID_E_EXISTS, "EDGE-1 is already on the EK allowlist");
        CHECK_REFUSED(store_ek_add(b, &two[1], 1, NULL, NOW), HWID_E_EXISTS, "edge-2 is already on the EK allowlist");
        none = entry("", "", "edge-9", "edge");
        CHECK_REFUSED(store_ek_add(s, &none, 1, NULL, NOW), HWID_E_INVALID, "EK hash");
        upper = entry("", "ABCDEF", "edge-9", "edge");
        CHECK_REFUSED(store_ek_add(s, &upper, 1, NULL, NOW), HWID_E_INVALID, "EK hash");
        CHECK(store_ek_add(s, NULL, 0, NULL, NOW) == -HWID_E_INVALID);
        /* Found by either hash, on either replica. */
        CHECK(store_ek_find(b, HEX_A, NULL, &got) == 0);
        CHECK_STREQ(got.identity, "edge-1");
        CHECK_STREQ(got.profile, "edge");
        store_ek_clear(&got);
        CHECK(store_ek_find(b, HEX_D, HEX_C, &got) == 0);
        CHECK_STREQ(got.identity, "edge-2");
        CHECK(got.ek_cert_sha256[0] == '\0' && got.added_at == NOW);
        store_ek_clear(&got);
        CHECK_REFUSED(store_ek_find(s, HEX_D, NULL, &got), HWID_E_NOT_FOUND, "not on the EK allowlist");
        /* The certificate of one entry and the key of another: which is it? */
        CHECK_REFUSED(store_ek_find(s, HEX_A, HEX_C, &got), HWID_E_CONFLICT, "two names");
        CHECK(store_ek_list(s, &all, &n) == 0 && n == 2);
        CHECK(n == 2 && strcmp(all[0].identity, "edge-1") == 0 && strcmp(all[1].identity, "edge-2") == 0);
        store_ek_list_free(all, n);
        /* Removed by name (any case) or by either hash, with an audit record. */
        audits = audit_rows(s);
        CHECK(store_ek_remove(b, "EDGE-1", &audit, NOW) == 0);
        CHECK(audit_rows(s) == audits + 1);
        CHECK_REFUSED(store_ek_remove(s, "edge-1", NULL, NOW), HWID_E_NOT_FOUND, "not on the EK allowlist");
        CHECK(store_ek_remove(s, HEX_C, NULL, NOW) == 0);
        CHECK(ek_count(b) == 0);
}

/* ---- the attestation recorded ---- */

static store_attestation attestation(void) {
        store_attestation a = { 0 };

        snprintf(a.ek_cert_sha256, sizeof(a.ek_cert_sha256), "%s", HEX_A);
        snprintf(a.ek_pub_sha256, sizeof(a.ek_pub_sha256), "%s", HEX_B);
        snprintf(a.ak_name, sizeof(a.ak_name), "000b%s", HEX_C);
        return a;
}

/* Certificates and requests carry what the key's attestation proved. */
void contract_attestation_records(void) {
        _cleanup_(store_freep) store *s = case_open("attestation"), *b = case_again("attestation");
        store_cert c = make_cert("0A", "edge-1", NOW + 3600), d = make_cert("0C", "edge-3", NOW + 3600), got = { 0 };
        store_issue in = { .cert = &c };
        store_request rq = { 0 }, back = { 0 };

        c.attestation = attestation();
        CHECK(store_cert_commit(s, &in, NOW) == 0);
        CHECK(store_cert_get(b, "0A", &got) == 0);
        CHECK(memcmp(&got.attestation, &c.attestation, sizeof(c.attestation)) == 0);
        store_cert_clear(&got);
        /* Not attested: all empty. */
        CHECK(commit(s, "0B", "edge-2", NOW + 3600, NOW, NULL) == 0);
        CHECK(store_cert_get(b, "0B", &got) == 0);
        CHECK(!store_attested(&got.attestation) && !got.attestation.ak_name[0] && !got.attestation.ek_cert_sha256[0]);
        store_cert_clear(&got);
        /* Malformed: an AK name without the EK, upper-case hex. */
        snprintf(d.attestation.ak_name, sizeof(d.attestation.ak_name), "000b");
        in.cert = &d;
        CHECK_REFUSED(store_cert_commit(s, &in, NOW), HWID_E_INVALID, "malformed attestation");
        d.attestation = attestation();
        d.attestation.ek_pub_sha256[0] = 'B';
        CHECK_REFUSED(store_cert_commit(s, &in, NOW), HWID_E_INVALID, "malformed attestation");
        CHECK(cert_status(b, "0C") == -1);
        /* A request waiting for approval keeps it until issuance. */
        CHECK(add_token(s, "tok001", 1, NOW + 3600) == 0);
        memset(rq.id, '7', 32);
        rq.identity = (char *) "edge-4";
        rq.profile = (char *) "edge";
        snprintf(rq.token_id, sizeof(rq.token_id), "tok001");
        snprintf(rq.spki_sha256, sizeof(rq.spki_sha256), "%s", spki);
        rq.csr_der = (uint8_t *) der;
        rq.csr_der_len = sizeof(der);
        rq.attestation = attestation();
        CHECK(store_request_create(s, &rq, NOW) == 0);
        CHECK(store_request_get(b, rq.id, &back) == 0);
        CHECK(memcmp(&back.attestation, &rq.attestation, sizeof(rq.attestation)) == 0);
        store_request_clear(&back);
}

/* ---- identities bound to the TPM that attested them ---- */

/* An attested certificate of identity by the TPM ek_pub (NULL: none). */
static int commit_by(store *s, const char *serial, const char *identity, const char *ek_pub, const char *supersedes,
                     bool replace) {
        store_cert c = make_cert(serial, identity, NOW + 3600);
        store_issue in = { .cert = &c, .supersedes_serial = supersedes, .replace_live = replace };

        if (ek_pub) {
                c.attestation = attestation();
                snprintf(c.attestation.ek_pub_sha256, sizeof(c.attestation.ek_pub_sha256), "%s", ek_pub);
        }
        return store_cert_commit(s, &in, NOW);
}

static bool bound_to(store *s, const char *identity, const char *ek_pub, const char *serial) {
        store_binding b = { 0 };
        bool ok = store_binding_get(s, identity, &b) == 0 && strcmp(b.ek_pub_sha256, ek_pub) == 0 &&
                  strcmp(b.serial, serial) == 0;

        store_binding_clear(&b);
        return ok;
}

/* The first attested certificate binds its identity, in its commit;
 * nothing but an admin's release of that same binding ends it. */
void contract_bindings(void) {
        _cleanup_(store_freep) store *s = case_open("bindings"), *r2 = case_again("bindings");
        store_audit audit = { .actor = "admin:root", .action = "identity.release", .target = "edge-b",
                              .outcome = "allow" };
        store_reads_keys k = { .identity = "EDGE-B", .now = NOW };
        store_binding b = { 0 }, *all = NULL;
        store_reads *rd = NULL;
        size_t n = 0;
        int rows;

        CHECK(commit_by(s, "1A", "edge-b", HEX_A, NULL, false) == 0);
        CHECK(bound_to(r2, "EDGE-B", HEX_A, "1A"));
        CHECK(commit_by(s, "2A", "plain-1", NULL, NULL, false) == 0);
        CHECK_REFUSED(store_binding_get(s, "plain-1", &b), HWID_E_NOT_FOUND, "plain-1 is not bound to a TPM");
        /* Another TPM, revoked or not, on either replica: refused, nothing stored. */
        CHECK(store_cert_revoke(s, "1A", 0, NOW, NULL) == 0);
        CHECK_REFUSED(commit_by(r2, "1B", "Edge-B", HEX_D, NULL, false), HWID_E_FORBIDDEN,
                      "edge-b is bound to the TPM that attested it (EK sha256:" HEX_A ", since certificate 1A), not "
                      "to this one (EK sha256:" HEX_D "): only that TPM enrolls it until an admin releases it (a "
                      "replaced TPM or board): hwid identity release edge-b");
        CHECK_REFUSED(commit_by(r2, "1B", "edge-b", NULL, NULL, false), HWID_E_FORBIDDEN,
                      "and this enrollment records no attestation by it");
        CHECK(cert_status(s, "1B") == -1);
        /* Read ahead with the identity's live certificate, the same answer. */
        CHECK(store_reads_fetch(r2, &k, &rd) == 0);
        CHECK(store_reads_binding_get(r2, rd, "edge-B", &b) == 0 && strcmp(b.ek_pub_sha256, HEX_A) == 0);
        CHECK_STREQ(b.serial, "1A");
        store_binding_clear(&b);
        store_reads_free(rd);
        /* Its own TPM enrolls it again; a renewal need not attest, but
         * never by another TPM. */
        CHECK(commit_by(s, "1C", "edge-b", HEX_A, NULL, false) == 0);
        CHECK(commit_by(r2, "1D", "edge-b", NULL, "1C", false) == 0);
        CHECK_REFUSED(commit_by(s, "1E", "edge-b", HEX_D, "1D", false), HWID_E_FORBIDDEN, "not to this one");
        CHECK(bound_to(s, "edge-b", HEX_A, "1A"));
        CHECK(store_binding_list(r2, &all, &n) == 0 && n == 1 && strcmp(all[0].identity, "edge-b") == 0);
        store_binding_list_free(all, n);
        /* Released only as it is: another TPM's binding is not this one. */
        CHECK(store_binding_get(s, "edge-b", &b) == 0);
        rows = audit_rows(s);
        b.ek_pub_sha256[0] = 'd';
        CHECK_REFUSED(store_binding_release(s, &b, &audit, NOW), HWID_E_NOT_FOUND, "no longer bound to the TPM");
        b.ek_pub_sha256[0] = 'a';
        CHECK(audit_rows(s) == rows && bound_to(s, "edge-b", HEX_A, "1A"));
        CHECK(store_binding_release(r2, &b, &audit, NOW) == 0);
        CHECK(audit_rows(s) == rows + 1);
        CHECK_REFUSED(store_binding_release(s, &b, &audit, NOW), HWID_E_NOT_FOUND, "no longer bound");
        store_binding_clear(&b);
        CHECK(store_binding_get(s, "edge-b", &b) == -HWID_E_NOT_FOUND);
        /* Released: the replaced TPM enrolls it, and binds it. */
        CHECK(store_cert_revoke(s, "1D", 0, NOW, NULL) == 0);
        CHECK(commit_by(r2, "1F", "edge-b", HEX_D, NULL, false) == 0);
        CHECK(bound_to(s, "edge-b", HEX_D, "1F"));
}

/* Two TPMs enrolling one identity on both replicas at once, each
 * replacing the live certificate: the first to commit binds it, and
 * every enrollment of the other TPM is refused, whatever the timing. */
typedef struct bind_racer {
        store *s;
        int round, i, r;
        pthread_barrier_t *go;
} bind_racer;

static void *race_bind(void *userdata) {
        bind_racer *x = userdata;
        char serial[16], name[32];

        snprintf(serial, sizeof(serial), "AC%X%02X", x->round, x->i);
        snprintf(name, sizeof(name), "bind-race-%d", x->round);
        pthread_barrier_wait(x->go);
        x->r = commit_by(x->s, serial, name, x->i % 4 < 2 ? HEX_A : HEX_B, NULL, true);
        return NULL;
}

static void binding_race(store *a, store *b, int round) {
        pthread_barrier_t go;
        pthread_t th[RACERS];
        bind_racer x[RACERS];
        store_binding got = { 0 };
        int won[2] = { 0 }, refused[2] = { 0 };
        char name[32];

        snprintf(name, sizeof(name), "bind-race-%d", round);
        pthread_barrier_init(&go, NULL, RACERS);
        for (int i = 0; i < RACERS; i++) {
                x[i] = (bind_racer) { .s = i % 2 ? a : b, .round = round, .i = i, .go = &go };
                CHECK(pthread_create(&th[i], NULL, race_bind, &x[i]) == 0);
        }
        for (int i = 0; i < RACERS; i++) {
                pthread_join(th[i], NULL);
                won[i % 4 >= 2] += x[i].r == 0;
                refused[i % 4 >= 2] += x[i].r == -HWID_E_FORBIDDEN;
        }
        pthread_barrier_destroy(&go);
        CHECK(store_binding_get(a, name, &got) == 0);
        if (strcmp(got.ek_pub_sha256, HEX_A) == 0)
                CHECK(won[0] == RACERS / 2 && refused[1] == RACERS / 2);
        else
                CHECK(won[1] == RACERS / 2 && refused[0] == RACERS / 2 && strcmp(got.ek_pub_sha256, HEX_B) == 0);
        store_binding_clear(&got);
}

/* A few rounds: the commits of both replicas overlap in some of them. */
void contract_binding_race(void) {
        _cleanup_(store_freep) store *a = case_open("binding-race"), *b = case_again("binding-race");

        for (int round = 0; round < 4; round++)
                binding_race(a, b, round);
}
