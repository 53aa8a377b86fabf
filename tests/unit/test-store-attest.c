/* TPM attestation in the store: challenges answered once (across two
 * store objects on one file, as two hwidd on one database), expired ones
 * purged and the table bounded; the attest_fresh table hwidd uses on top
 * of it; the EK allowlist (one entry per name, EK certificate and EK key,
 * added all or nothing, found by either hash); the attestation recorded
 * with certificates and requests, checked by the database too; and
 * identities bound to the TPM that attested them (held at every commit,
 * released by an admin alone, derived from the certificates of a store
 * from before bindings). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin-json.h"
#include "attest-verify.h"
#include "check.h"
#include "error.h"
#include "store-fixture.h"

char dir[] = "/tmp/hwid-test-store-attest-XXXXXX";

#define HEX_A "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
#define HEX_B "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
#define HEX_C "cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc"
#define HEX_D "dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd"

#define CHECK_REFUSED(expr, code, part)                                                        \
        do {                                                                                  \
                int _r = (expr);                                                              \
                CHECK(_r == -(code));                                                         \
                if (_r == -(code))                                                            \
                        CHECK_CONTAINS(hwid_strerror(_r), part);                              \
        } while (0)

static uint8_t ak_bytes[] = { 1, 2, 3 }, ek_bytes[] = { 0x30, 0x01, 0x00 };

static store_challenge challenge(char c, int64_t expires_at) {
        store_challenge ch = { .ak_public = ak_bytes, .ak_public_len = sizeof(ak_bytes), .ek_cert = ek_bytes,
                               .ek_cert_len = sizeof(ek_bytes), .expires_at = expires_at };

        memset(ch.id, c, 32);
        memset(ch.secret_sha256, c, sizeof(ch.secret_sha256));
        memset(ch.nonce, c + 1, sizeof(ch.nonce));
        return ch;
}

static void challenges(void) {
        _cleanup_free_ char *path = db_path("challenges.db");
        _cleanup_(store_freep) store *s = open_fresh(path), *s2 = open_fresh(path);
        store_challenge a = challenge('a', NOW + 60), b = challenge('b', NOW + 10), c = challenge('c', NOW + 60);
        store_challenge got = { 0 };

        CHECK(store_challenge_put(s, &a, NOW, 2, 0, NULL) == 0);
        CHECK_REFUSED(store_challenge_put(s, &a, NOW, 3, 0, NULL), HWID_E_EXISTS, "exists already");
        CHECK(store_challenge_put(s, &b, NOW, 2, 0, NULL) == 0);
        CHECK_REFUSED(store_challenge_put(s, &c, NOW, 2, 0, NULL), HWID_E_RATE_LIMITED, "already waiting");
        /* Once b has expired, it makes room. */
        CHECK(store_challenge_put(s, &c, NOW + 10, 2, 0, NULL) == 0);
        CHECK(raw_int(path, "SELECT count(*) FROM attest_challenges") == 2);
        /* Taken through the other connection, whole, and only once. */
        CHECK(store_challenge_take(s2, a.id, &got) == 0);
        CHECK(memcmp(got.id, a.id, 33) == 0 && got.expires_at == a.expires_at);
        CHECK(memcmp(got.secret_sha256, a.secret_sha256, 32) == 0 && memcmp(got.nonce, a.nonce, 32) == 0);
        CHECK(got.ak_public_len == sizeof(ak_bytes) && memcmp(got.ak_public, ak_bytes, sizeof(ak_bytes)) == 0);
        CHECK(got.ek_cert_len == sizeof(ek_bytes) && memcmp(got.ek_cert, ek_bytes, sizeof(ek_bytes)) == 0);
        store_challenge_clear(&got);
        CHECK_REFUSED(store_challenge_take(s, a.id, &got), HWID_E_NOT_FOUND, "no attestation challenge");
        /* Malformed: refused before the database. */
        CHECK_REFUSED(store_challenge_take(s, "ABC", &got), HWID_E_NOT_FOUND, "no such");
        store_challenge bad = challenge('A', NOW + 60);
        CHECK_REFUSED(store_challenge_put(s, &bad, NOW, 9, 0, NULL), HWID_E_INVALID, "bad id");
        bad = challenge('d', NOW + 60);
        bad.ak_public_len = 0;
        CHECK_REFUSED(store_challenge_put(s, &bad, NOW, 9, 0, NULL), HWID_E_INVALID, "AK");
        /* The database itself refuses a secret of the wrong size. */
        CHECK(raw_exec(path, "INSERT INTO attest_challenges VALUES ('" HEX_A "', x'00', zeroblob(32), x'01', x'01', "
                             "1, 1, '')") != 0);
}

/* An attest_pending with a real AK public area (a software P-256 key). */
static attest_pending pending(uint8_t id, uint64_t expires) {
        attest_pending p = { .expires = expires, .ek_cert_len = 3 + id };
        EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "EC", "prime256v1");

        CHECK(k && tpm_ek_public_from_key(TPM_EK_ECC_P256, k, &p.ak) == 0);
        EVP_PKEY_free(k);
        memset(p.id, id, sizeof(p.id));
        memset(p.secret_sha256, id ^ 0x5a, sizeof(p.secret_sha256));
        memset(p.nonce, id ^ 0xa5, sizeof(p.nonce));
        memset(p.ek_cert, id, p.ek_cert_len);
        return p;
}

static bool pending_eq(const attest_pending *a, const attest_pending *b) {
        uint8_t wa[TPM_PUBLIC_MAX], wb[TPM_PUBLIC_MAX];
        size_t la = 0, lb = 0;

        CHECK(tpm_public_marshal(&a->ak, wa, &la) == 0 && tpm_public_marshal(&b->ak, wb, &lb) == 0);
        return memcmp(a->id, b->id, sizeof(a->id)) == 0 && a->expires == b->expires &&
               memcmp(a->secret_sha256, b->secret_sha256, sizeof(a->secret_sha256)) == 0 &&
               memcmp(a->nonce, b->nonce, sizeof(a->nonce)) == 0 && la == lb && memcmp(wa, wb, la) == 0 &&
               a->ek_cert_len == b->ek_cert_len && memcmp(a->ek_cert, b->ek_cert, a->ek_cert_len) == 0;
}

/* hwidd's table: the rules of the in-memory one, and a challenge outlives
 * the store object that made it (a restart, or another hwidd). */
static void fresh_store(void) {
        _cleanup_free_ char *path = db_path("fresh.db");
        _cleanup_(store_freep) store *s = open_fresh(path), *s2 = open_fresh(path);
        _cleanup_(attest_fresh_freep) attest_fresh *f = NULL, *f2 = NULL;
        attest_pending a = pending(1, 100), b = pending(2, 200), c = pending(3, 300), got;

        CHECK(attest_fresh_new_store(s, &(attest_bounds) { .max = 2 }, &f) == 0);
        CHECK(attest_fresh_new_store(s2, &(attest_bounds) { .max = 2 }, &f2) == 0);
        CHECK(attest_fresh_put(f, &a, 50) == 0);
        CHECK(attest_fresh_put(f, &b, 50) == 0);
        CHECK_REFUSED(attest_fresh_put(f, &c, 50), HWID_E_RATE_LIMITED, "already waiting");
        CHECK(attest_fresh_take(f2, b.id, 60, &got) == 0);
        CHECK(pending_eq(&got, &b));
        CHECK_REFUSED(attest_fresh_take(f, b.id, 60, &got), HWID_E_ATTESTATION, "unknown attestation challenge");
        CHECK_REFUSED(attest_fresh_take(f, a.id, 100, &got), HWID_E_ATTESTATION, "expired");
        CHECK_REFUSED(attest_fresh_take(f2, a.id, 60, &got), HWID_E_ATTESTATION, "unknown attestation challenge");
        CHECK(attest_fresh_put(f, &a, 50) == 0);
        CHECK(attest_fresh_put(f, &c, 150) == 0); /* a (expires 100) is purged */
        CHECK(attest_fresh_put(f2, &b, 150) == 0);
        CHECK_REFUSED(attest_fresh_take(f, a.id, 150, &got), HWID_E_ATTESTATION, "unknown");
        CHECK_REFUSED(attest_fresh_new_store(s, &(attest_bounds) { .max = 0 }, &f2), HWID_E_INVALID, "room");
}

/* Per requester: past its bound a requester's oldest challenges make room
 * for its new one, whatever others hold; the bound of all requesters
 * together still refuses. */
static void requester_bound(void) {
        _cleanup_free_ char *path = db_path("bound.db");
        _cleanup_(store_freep) store *s = open_fresh(path), *s2 = open_fresh(path);
        store_challenge x1 = challenge('1', NOW + 60), x2 = challenge('2', NOW + 60), x3 = challenge('3', NOW + 60),
                        y = challenge('4', NOW + 60), z = challenge('5', NOW + 60), got = { 0 };
        size_t replaced = 9;

        x1.requester = x2.requester = x3.requester = "token:aaaaaa";
        y.requester = "ek:0123";
        z.requester = "cert:0A1B";
        CHECK(store_challenge_put(s, &x1, NOW, 3, 2, &replaced) == 0 && replaced == 0);
        CHECK(store_challenge_put(s, &y, NOW + 1, 3, 2, &replaced) == 0 && replaced == 0);
        CHECK(store_challenge_put(s2, &x2, NOW + 2, 3, 2, &replaced) == 0 && replaced == 0);
        /* The table is full; token:aaaaaa is at its bound: its oldest goes. */
        CHECK(store_challenge_put(s, &x3, NOW + 3, 3, 2, &replaced) == 0 && replaced == 1);
        CHECK_REFUSED(store_challenge_take(s, x1.id, &got), HWID_E_NOT_FOUND, "no attestation challenge");
        CHECK(store_challenge_take(s2, y.id, &got) == 0);
        store_challenge_clear(&got);
        CHECK(store_challenge_put(s, &y, NOW + 4, 3, 2, &replaced) == 0 && replaced == 0);
        /* Another requester, below its bound, meets the table full. */
        CHECK_REFUSED(store_challenge_put(s, &z, NOW + 5, 3, 2, &replaced), HWID_E_RATE_LIMITED, "already waiting");
        CHECK(raw_int(path, "SELECT count(*) FROM attest_challenges WHERE requester = 'token:aaaaaa'") == 2);
}

static store_ek entry(const char *cert, const char *pub, const char *name, const char *profile) {
        store_ek e = { .identity = (char *) name, .profile = (char *) profile };

        snprintf(e.ek_cert_sha256, sizeof(e.ek_cert_sha256), "%s", cert);
        snprintf(e.ek_pub_sha256, sizeof(e.ek_pub_sha256), "%s", pub);
        return e;
}

static void allowlist(void) {
        _cleanup_free_ char *path = db_path("ek.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_audit audit = { .actor = "admin:test", .action = "ek.add", .outcome = "allow" };
        store_ek two[] = { entry(HEX_A, HEX_B, "edge-1", "edge"), entry("", HEX_C, "edge-2", "edge") };
        store_ek dup[] = { entry("", HEX_D, "edge-3", "edge"), entry("", HEX_C, "edge-4", "edge") };
        store_ek got = { 0 }, *all = NULL;
        size_t n = 0;
        int audits = audit_rows(s);

        CHECK(store_ek_add(s, two, 2, &audit, NOW) == 0);
        CHECK(audit_rows(s) == audits + 1);
        /* All or nothing: edge-3 is not added because edge-4's key is edge-2's. */
        CHECK_REFUSED(store_ek_add(s, dup, 2, NULL, NOW), HWID_E_EXISTS, "is already on the EK allowlist");
        CHECK(raw_int(path, "SELECT count(*) FROM ek_allowlist") == 2);
        /* One entry per name, whatever its case. */
        store_ek same = entry("", HEX_D, "EDGE-1", "edge");
        CHECK_REFUSED(store_ek_add(s, &same, 1, NULL, NOW), HWID_E_EXISTS, "EDGE-1 is already on the EK allowlist");
        store_ek none = entry("", "", "edge-9", "edge");
        CHECK_REFUSED(store_ek_add(s, &none, 1, NULL, NOW), HWID_E_INVALID, "EK hash");
        store_ek upper = entry("", "ABCDEF", "edge-9", "edge");
        CHECK_REFUSED(store_ek_add(s, &upper, 1, NULL, NOW), HWID_E_INVALID, "EK hash");
        /* Found by either hash. */
        CHECK(store_ek_find(s, HEX_A, NULL, &got) == 0);
        CHECK_STREQ(got.identity, "edge-1");
        CHECK_STREQ(got.profile, "edge");
        store_ek_clear(&got);
        CHECK(store_ek_find(s, HEX_D, HEX_C, &got) == 0);
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
        CHECK(store_ek_remove(s, "EDGE-1", &audit, NOW) == 0);
        CHECK(audit_rows(s) == audits + 1);
        CHECK_REFUSED(store_ek_remove(s, "edge-1", NULL, NOW), HWID_E_NOT_FOUND, "not on the EK allowlist");
        CHECK(store_ek_remove(s, HEX_C, NULL, NOW) == 0);
        CHECK(raw_int(path, "SELECT count(*) FROM ek_allowlist") == 0);
        /* The database refuses an entry without a hash, and upper-case hex. */
        CHECK(raw_exec(path, "INSERT INTO ek_allowlist VALUES (NULL, NULL, 'x', 'edge', 1)") != 0);
        CHECK(raw_exec(path, "INSERT INTO ek_allowlist VALUES (NULL, upper('" HEX_A "'), 'x', 'edge', 1)") != 0);
}

static store_attestation attestation(void) {
        store_attestation a = { 0 };

        snprintf(a.ek_cert_sha256, sizeof(a.ek_cert_sha256), "%s", HEX_A);
        snprintf(a.ek_pub_sha256, sizeof(a.ek_pub_sha256), "%s", HEX_B);
        snprintf(a.ak_name, sizeof(a.ak_name), "000b%s", HEX_C);
        return a;
}

/* Certificates and requests carry what the key's attestation proved. */
static void records(void) {
        _cleanup_free_ char *path = db_path("records.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_cert c = make_cert("0A", "edge-1", NOW + 3600), got = { 0 };
        store_issue in = { .cert = &c };
        store_request rq = { 0 };

        c.attestation = attestation();
        CHECK(store_cert_commit(s, &in, NOW) == 0);
        CHECK(store_cert_get(s, "0A", &got) == 0);
        CHECK(memcmp(&got.attestation, &c.attestation, sizeof(c.attestation)) == 0);
        /* The admin API carries it too (hwid cert show --server). */
        {
                json_object *j = admin_json_cert(&got, false);
                store_cert back = { 0 };

                CHECK(j && admin_json_to_cert(j, &back) == 0);
                CHECK(memcmp(&back.attestation, &c.attestation, sizeof(c.attestation)) == 0);
                store_cert_clear(&back);
                json_object_put(j);
        }
        store_cert_clear(&got);
        /* Not attested: all empty, NULL in the database. */
        CHECK(commit(s, "0B", "edge-2", NOW + 3600, NOW, NULL) == 0);
        CHECK(store_cert_get(s, "0B", &got) == 0);
        CHECK(!store_attested(&got.attestation) && !got.attestation.ak_name[0]);
        {
                json_object *j = admin_json_cert(&got, false);
                store_cert back = { 0 };

                CHECK(j && admin_json_to_cert(j, &back) == 0 && !store_attested(&back.attestation));
                store_cert_clear(&back);
                json_object_put(j);
        }
        store_cert_clear(&got);
        CHECK(raw_int(path, "SELECT count(*) FROM certificates WHERE ek_pub_sha256 IS NULL") == 1);
        /* Malformed: an AK name without the EK, upper-case hex. */
        store_cert d = make_cert("0C", "edge-3", NOW + 3600);
        snprintf(d.attestation.ak_name, sizeof(d.attestation.ak_name), "000b");
        in.cert = &d;
        CHECK_REFUSED(store_cert_commit(s, &in, NOW), HWID_E_INVALID, "malformed attestation");
        d.attestation = attestation();
        d.attestation.ek_pub_sha256[0] = 'B';
        CHECK_REFUSED(store_cert_commit(s, &in, NOW), HWID_E_INVALID, "malformed attestation");
        CHECK(raw_exec(path, "UPDATE certificates SET ek_pub_sha256 = 'XYZ' WHERE serial = '0B'") != 0);
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
        store_request back = { 0 };
        CHECK(store_request_get(s, rq.id, &back) == 0);
        CHECK(memcmp(&back.attestation, &rq.attestation, sizeof(rq.attestation)) == 0);
        store_request_clear(&back);
}

/* An attested certificate of identity by the TPM ek_pub (NULL: none). */
static int commit_by(store *s, const char *serial, const char *identity, const char *ek_pub, const char *supersedes) {
        store_cert c = make_cert(serial, identity, NOW + 3600);
        store_issue in = { .cert = &c, .supersedes_serial = supersedes };

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
static void bindings(void) {
        _cleanup_free_ char *path = db_path("bindings.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_audit audit = { .actor = "admin:root", .action = "identity.release", .target = "edge-b",
                              .outcome = "allow" };
        store_binding b = { 0 }, *all = NULL;
        size_t n = 0;
        int rows;

        CHECK(commit_by(s, "1A", "edge-b", HEX_A, NULL) == 0);
        CHECK(bound_to(s, "EDGE-B", HEX_A, "1A"));
        CHECK(commit_by(s, "2A", "plain-1", NULL, NULL) == 0);
        CHECK_REFUSED(store_binding_get(s, "plain-1", &b), HWID_E_NOT_FOUND, "plain-1 is not bound to a TPM");
        /* Another TPM, revoked or not, expired or not: refused, nothing stored. */
        CHECK(store_cert_revoke(s, "1A", 0, NOW, NULL) == 0);
        CHECK_REFUSED(commit_by(s, "1B", "Edge-B", HEX_D, NULL), HWID_E_FORBIDDEN,
                      "edge-b is bound to the TPM that attested it (EK sha256:" HEX_A ", since certificate 1A), not "
                      "to this one (EK sha256:" HEX_D "): only that TPM enrolls it until an admin releases it (a "
                      "replaced TPM or board): hwid identity release edge-b");
        CHECK_REFUSED(commit_by(s, "1B", "edge-b", NULL, NULL), HWID_E_FORBIDDEN,
                      "and this enrollment records no attestation by it");
        CHECK(raw_int(path, "SELECT count(*) FROM certificates WHERE serial = '1B'") == 0);
        /* Its own TPM enrolls it again; a renewal need not attest, but
         * never by another TPM. */
        CHECK(commit_by(s, "1C", "edge-b", HEX_A, NULL) == 0);
        CHECK(commit_by(s, "1D", "edge-b", NULL, "1C") == 0);
        CHECK_REFUSED(commit_by(s, "1E", "edge-b", HEX_D, "1D"), HWID_E_FORBIDDEN, "not to this one");
        CHECK(bound_to(s, "edge-b", HEX_A, "1A"));
        CHECK(store_binding_list(s, &all, &n) == 0 && n == 1 && strcmp(all[0].identity, "edge-b") == 0);
        store_binding_list_free(all, n);
        /* Released only as it is: another TPM's binding is not this one. */
        CHECK(store_binding_get(s, "edge-b", &b) == 0);
        rows = audit_rows(s);
        b.ek_pub_sha256[0] = 'd';
        CHECK_REFUSED(store_binding_release(s, &b, &audit, NOW), HWID_E_NOT_FOUND, "no longer bound to the TPM");
        b.ek_pub_sha256[0] = 'a';
        CHECK(audit_rows(s) == rows && bound_to(s, "edge-b", HEX_A, "1A"));
        CHECK(store_binding_release(s, &b, &audit, NOW) == 0);
        CHECK(audit_rows(s) == rows + 1);
        CHECK_REFUSED(store_binding_release(s, &b, &audit, NOW), HWID_E_NOT_FOUND, "no longer bound");
        store_binding_clear(&b);
        /* Released: the replaced TPM enrolls it, and binds it. */
        CHECK(store_cert_revoke(s, "1D", 0, NOW, NULL) == 0);
        CHECK(commit_by(s, "1F", "edge-b", HEX_D, NULL) == 0);
        CHECK(bound_to(s, "edge-b", HEX_D, "1F"));
        CHECK(raw_exec(path, "INSERT INTO identity_bindings VALUES ('EDGE-B', '" HEX_A "', NULL, '1A', 0)") != 0);
}

/* A store from before bindings: each identity with attested certificates
 * is bound to the TPM of its newest one when the store is opened. */
#define SCHEMA_BEFORE_BINDINGS 11

static void bindings_derived(void) {
        _cleanup_free_ char *path = db_path("derived.db");
        store *s = open_fresh(path);
        char sql[256];

        CHECK(commit_by(s, "3A", "mig-1", HEX_A, NULL) == 0);
        CHECK(commit_by(s, "3B", "mig-2", NULL, NULL) == 0);
        CHECK(commit_by(s, "3C", "mig-3", HEX_A, NULL) == 0);
        CHECK(store_cert_revoke(s, "3C", 0, NOW, NULL) == 0);
        CHECK(commit_by(s, "3D", "MIG-3", NULL, NULL) == -HWID_E_FORBIDDEN);
        store_free(s);
        /* What those versions held: no bindings, and an identity whose
         * TPM changed (possible then); its newest attested one is 3E. */
        snprintf(sql, sizeof(sql), "DROP TABLE identity_bindings; UPDATE meta SET value = %d "
                 "WHERE key = 'schema_version'", SCHEMA_BEFORE_BINDINGS);
        CHECK(raw_exec(path, sql) == 0);
        CHECK(raw_exec(path, "INSERT INTO certificates (serial, identity, subject, profile, spki_sha256, der, "
                             "not_before, not_after, status, created_at, ek_pub_sha256) VALUES ('3E', 'MIG-3', "
                             "'CN=x', 'edge', '" HEX_C "', x'00', 0, 1, 'valid', 1800000000, '" HEX_D "')") == 0);
        s = open_fresh(path);
        CHECK(bound_to(s, "mig-1", HEX_A, "3A"));
        CHECK(bound_to(s, "mig-3", HEX_D, "3E"));
        CHECK(raw_int(path, "SELECT count(*) FROM identity_bindings") == 2);
        CHECK(commit_by(s, "3F", "mig-3", HEX_A, NULL) == -HWID_E_FORBIDDEN);
        CHECK(commit_by(s, "3F1", "mig-3", HEX_D, NULL) == 0);
        store_free(s);
}

int main(void) {
        if (!fixture_begin())
                return 1;
        challenges();
        requester_bound();
        fresh_store();
        allowlist();
        records();
        bindings();
        bindings_derived();
        return fixture_end("test-store-attest");
}
