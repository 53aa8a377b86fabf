/* TPM attestation in the SQLite store beyond what every store promises
 * (store-contract-attest.c, run on SQLite as store-contract-sqlite): the
 * attest_fresh table hwidd uses on top of the challenges; what the
 * database itself refuses of challenges, the EK allowlist, attestation
 * records and bindings; the attestation through the admin API's JSON; and
 * bindings derived from the certificates of a store from before them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "admin-json.h"
#include "attest-verify.h"
#include "check.h"
#include "error.h"
#include "store-fixture.h"

char dir[] = "/tmp/hwid-test-store-attest-XXXXXX";


/* The database itself refuses a secret of the wrong size. */
static void challenges(void) {
        _cleanup_free_ char *path = db_path("challenges.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_challenge a = fixture_challenge('a', NOW + 60);

        CHECK(store_challenge_put(s, &a, NOW, 2, 0, NULL) == 0);
        CHECK(raw_int(path, "SELECT count(*) FROM attest_challenges") == 1);
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

static store_ek entry(const char *cert, const char *pub, const char *name, const char *profile) {
        store_ek e = { .identity = (char *) name, .profile = (char *) profile };

        snprintf(e.ek_cert_sha256, sizeof(e.ek_cert_sha256), "%s", cert);
        snprintf(e.ek_pub_sha256, sizeof(e.ek_pub_sha256), "%s", pub);
        return e;
}

/* The database refuses an entry without a hash, and upper-case hex. */
static void allowlist(void) {
        _cleanup_free_ char *path = db_path("ek.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_ek two[] = { entry(HEX_A, HEX_B, "edge-1", "edge"), entry("", HEX_C, "edge-2", "edge") };

        CHECK(store_ek_add(s, two, 2, NULL, NOW) == 0);
        CHECK(raw_int(path, "SELECT count(*) FROM ek_allowlist") == 2);
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

/* What the key's attestation proved, through the admin API's JSON too
 * (hwid cert show --server), and as the database holds it. */
static void records(void) {
        _cleanup_free_ char *path = db_path("records.db");
        _cleanup_(store_freep) store *s = open_fresh(path);
        store_cert c = make_cert("0A", "edge-1", NOW + 3600), got = { 0 };

        c.attestation = attestation();
        CHECK(store_cert_commit(s, &(store_issue) { .cert = &c }, NOW) == 0);
        CHECK(commit(s, "0B", "edge-2", NOW + 3600, NOW, NULL) == 0);
        for (int i = 0; i < 2; i++) {
                json_object *j;
                store_cert back = { 0 };

                CHECK(store_cert_get(s, i ? "0B" : "0A", &got) == 0);
                j = admin_json_cert(&got, false);
                CHECK(j && admin_json_to_cert(j, &back) == 0);
                CHECK(memcmp(&back.attestation, &got.attestation, sizeof(got.attestation)) == 0);
                CHECK(store_attested(&back.attestation) == !i);
                store_cert_clear(&back);
                store_cert_clear(&got);
                json_object_put(j);
        }
        /* Not attested: NULL in the database; and it refuses malformed hex. */
        CHECK(raw_int(path, "SELECT count(*) FROM certificates WHERE ek_pub_sha256 IS NULL") == 1);
        CHECK(raw_exec(path, "UPDATE certificates SET ek_pub_sha256 = 'XYZ' WHERE serial = '0B'") != 0);
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

/* The database holds one binding per identity, however spelt. */
static void bindings(void) {
        _cleanup_free_ char *path = db_path("bindings.db");
        _cleanup_(store_freep) store *s = open_fresh(path);

        CHECK(commit_by(s, "1A", "edge-b", HEX_A, NULL) == 0);
        CHECK(bound_to(s, "EDGE-B", HEX_A, "1A"));
        CHECK(raw_int(path, "SELECT count(*) FROM identity_bindings") == 1);
        CHECK(raw_exec(path, "INSERT INTO identity_bindings VALUES ('EDGE-B', '" HEX_A "', NULL, '1A', 0)") != 0);
}

/* A store from before bindings: each identity with attested certificates
 * is bound to the TPM of its newest one when the store is opened. */
#define SCHEMA_BEFORE_BINDINGS 11

static void bindings_derived(void) {
        _cleanup_free_ char *path = db_path("derived.db");
        store *s = open_fresh(path);
        char sql[512];

        CHECK(commit_by(s, "3A", "mig-1", HEX_A, NULL) == 0);
        CHECK(commit_by(s, "3B", "mig-2", NULL, NULL) == 0);
        CHECK(commit_by(s, "3C", "mig-3", HEX_A, NULL) == 0);
        CHECK(store_cert_revoke(s, "3C", 0, NOW, NULL) == 0);
        CHECK(commit_by(s, "3D", "MIG-3", NULL, NULL) == -HWID_E_FORBIDDEN);
        store_free(s);
        /* What those versions held: no bindings, and an identity whose
         * TPM changed (possible then); its newest attested one is 3E. */
        snprintf(sql, sizeof(sql), "DROP TABLE identity_bindings; DROP TABLE ca_generations; "
                 "DROP INDEX certificates_generation; DROP INDEX certificates_revoked_generation; "
                 "ALTER TABLE certificates DROP COLUMN generation; DELETE FROM meta WHERE key = 'ca_generation_seq'; "
                 "UPDATE meta SET value = %d WHERE key = 'schema_version'", SCHEMA_BEFORE_BINDINGS);
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
        fresh_store();
        allowlist();
        records();
        bindings();
        bindings_derived();
        return fixture_end("test-store-attest");
}
