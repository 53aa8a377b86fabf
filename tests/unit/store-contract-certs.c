/* The store contract (test-store-contract.c): certificates -- the commit
 * that issues one, all or nothing; one live certificate per identity and
 * per DNS name, however spelt; renewal; revocation, key blocking, the
 * revocation sequence and CRL numbers; what an issuance reads ahead -- and
 * the races two replicas run on them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "error.h"
#include "store-contract.h"

/* ---- the commit ---- */

void contract_commit(void) {
        _cleanup_(store_freep) store *s = case_open("commit"), *b = case_again("commit");
        store_audit a = { .at = NOW, .actor = "token:tok111", .action = "enroll", .target = "edge-1",
                          .outcome = "allow", .token_id = "tok111" };
        store_issue in = { .consume_token_id = "tok111", .audit = &a };
        store_cert c = { 0 };

        CHECK(add_token(s, "tok111", 3, NOW + 3600) == 0);
        CHECK(commit(s, "01AB", "edge-1", NOW + 86400, NOW, &in) == 0);
        CHECK(uses_left(b, "tok111") == 2);
        CHECK(audit_rows(b) == 1);
        CHECK(store_cert_get(b, "01AB", &c) == 0);
        CHECK_STREQ(c.serial, "01AB");
        CHECK_STREQ(c.identity, "edge-1");
        CHECK_STREQ(c.subject, "CN=x,O=acme");
        CHECK_STREQ(c.profile, "edge");
        CHECK_STREQ(c.spki_sha256, spki_of("01AB"));
        CHECK(c.der_len == sizeof(der) && memcmp(c.der, der, sizeof(der)) == 0);
        CHECK(c.not_before == NOW - 60 && c.not_after == NOW + 86400 && c.created_at == NOW);
        CHECK(c.status == CERT_VALID && c.revoked_at == 0 && c.request_id == NULL);
        CHECK_STREQ(c.token_id, "tok111");
        CHECK_STREQ(c.role, "node");
        store_cert_clear(&c);
        CHECK(store_cert_live_for(b, "edge-1", NOW, &c) == 0);
        CHECK_STREQ(c.serial, "01AB");
        store_cert_clear(&c);
        CHECK(store_cert_live_for(s, "edge-2", NOW, &c) == -HWID_E_NOT_FOUND);
        CHECK(store_cert_get(s, "FFFF", &c) == -HWID_E_NOT_FOUND);
        CHECK(store_cert_get(s, "01ab", &c) == -HWID_E_NOT_FOUND);
        CHECK(commit(b, "02CD", "edge-2", NOW + 86400, NOW, NULL) == 0);
        CHECK(cert_count(s, "edge-1") == 1 && cert_count(s, NULL) == 2);
        /* What the holder may do, and a provisioner's scope, as decided at issuance. */
        c = make_cert("03EF", "op-1", NOW + 86400);
        snprintf(c.role, sizeof(c.role), "provisioner");
        c.scope = (char *) "{\"profiles\": [\"line\"], \"name_patterns\": [\"line-3-*\"]}";
        CHECK(store_cert_commit(s, &(store_issue) { .cert = &c }, NOW) == 0);
        c = (store_cert) { 0 };
        CHECK(store_cert_get(b, "03EF", &c) == 0);
        CHECK_STREQ(c.role, "provisioner");
        CHECK_STREQ(c.scope, "{\"profiles\": [\"line\"], \"name_patterns\": [\"line-3-*\"]}");
        store_cert_clear(&c);
        CHECK(store_cert_get(b, "02CD", &c) == 0 && c.scope == NULL && c.token_id[0] == '\0');
        store_cert_clear(&c);
        /* Bad input never reaches the table. */
        CHECK(commit(s, "0x12", "edge-3", NOW + 10, NOW, NULL) == -HWID_E_INVALID);
        CHECK(commit(s, "c8", "edge-3", NOW + 10, NOW, NULL) == -HWID_E_INVALID);
        CHECK(commit(s, "03", "", NOW + 10, NOW, NULL) == -HWID_E_INVALID);
        CHECK(commit(s, "03", "edge-3", NOW - 3600, NOW, NULL) == -HWID_E_INVALID);
        CHECK(cert_count(b, NULL) == 3);
}

void contract_one_live(void) {
        _cleanup_(store_freep) store *s = case_open("one-live"), *b = case_again("one-live");
        store_issue replace = { .replace_live = true };
        store_cert c = { 0 };
        int r;

        CHECK(commit(s, "0A", "edge-1", NOW + 100, NOW, NULL) == 0);
        r = commit(b, "0B", "edge-1", NOW + 200, NOW + 50, NULL);
        CHECK(r == -HWID_E_CONFLICT);
        CHECK_CONTAINS(hwid_strerror(r), "edge-1");
        CHECK(cert_status(s, "0B") == -1);
        /* Expired exactly at not_after: no longer live, does not block. */
        CHECK(store_cert_live_for(s, "edge-1", NOW + 99, &c) == 0);
        store_cert_clear(&c);
        CHECK(store_cert_live_for(s, "edge-1", NOW + 100, &c) == -HWID_E_NOT_FOUND);
        CHECK(commit(b, "0B", "edge-1", NOW + 300, NOW + 100, NULL) == 0);
        CHECK(cert_status(s, "0A") == CERT_SUPERSEDED);
        CHECK(store_cert_live_for(s, "edge-1", NOW + 100, &c) == 0);
        CHECK_STREQ(c.serial, "0B");
        store_cert_clear(&c);
        /* Policy allows re-enrollment: the live one is superseded. */
        CHECK(commit(s, "0C", "edge-1", NOW + 400, NOW + 150, &replace) == 0);
        CHECK(cert_status(b, "0B") == CERT_SUPERSEDED && cert_status(b, "0C") == CERT_VALID);
        CHECK(cert_count_status(b, "edge-1", CERT_VALID) == 1);
        /* A revoked certificate does not block either. */
        CHECK(store_cert_revoke(s, "0C", 1, NOW + 160, NULL) == 0);
        CHECK(commit(b, "0D", "edge-1", NOW + 500, NOW + 170, NULL) == 0);
        /* Duplicate serial: refused, the stored one untouched. */
        CHECK(commit(s, "0D", "edge-2", NOW + 900, NOW + 170, NULL) == -HWID_E_EXISTS);
        CHECK(store_cert_get(s, "0D", &c) == 0);
        CHECK_STREQ(c.identity, "edge-1");
        CHECK(c.not_after == NOW + 500);
        store_cert_clear(&c);
}

/* Identities compare without regard to ASCII case; a certificate keeps
 * its CN as issued. */
void contract_identity_case(void) {
        _cleanup_(store_freep) store *s = case_open("identity-case"), *b = case_again("identity-case");
        store_issue renew = { .supersedes_serial = "0A" };
        store_cert c = { 0 };
        int r;

        CHECK(commit(s, "0A", "edge-cam1", NOW + 100, NOW, NULL) == 0);
        r = commit(b, "0B", "edge-CAM1", NOW + 100, NOW, NULL);
        CHECK(r == -HWID_E_CONFLICT);
        CHECK_CONTAINS(hwid_strerror(r), "edge-CAM1 already has a live certificate");
        CHECK(cert_status(s, "0B") == -1);
        CHECK(store_cert_live_for(b, "Edge-Cam1", NOW, &c) == 0);
        CHECK_STREQ(c.serial, "0A");
        CHECK_STREQ(c.identity, "edge-cam1");
        store_cert_clear(&c);
        CHECK(cert_count(b, "EDGE-CAM1") == 1);
        /* Renewing under another spelling renews the same identity. */
        CHECK(commit(b, "0D", "Edge-Cam1", NOW + 200, NOW + 10, &renew) == 0);
        CHECK(cert_status(s, "0A") == CERT_SUPERSEDED && cert_status(s, "0D") == CERT_VALID);
        /* Only ASCII letters fold: these are two identities. */
        CHECK(commit(s, "0E", "k\xc3\xa4se", NOW + 100, NOW, NULL) == 0);
        CHECK(commit(b, "0F", "K\xc3\x84SE", NOW + 100, NOW, NULL) == 0);
}

void contract_renewal(void) {
        _cleanup_(store_freep) store *s = case_open("renewal"), *b = case_again("renewal");
        store_issue in = { .supersedes_serial = "0A" };

        CHECK(commit(s, "0A", "edge-1", NOW + 100, NOW, NULL) == 0);
        CHECK(commit(b, "0B", "edge-1", NOW + 200, NOW + 50, &in) == 0);
        CHECK(cert_status(s, "0A") == CERT_SUPERSEDED && cert_status(s, "0B") == CERT_VALID);
        /* Two renewals of one certificate: the second one loses. */
        CHECK(commit(s, "0C", "edge-1", NOW + 200, NOW + 51, &in) == -HWID_E_CONFLICT);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_CONFLICT), "already been renewed");
        CHECK(cert_status(s, "0C") == -1);
        in.supersedes_serial = "0B";
        CHECK(commit(s, "0C", "edge-2", NOW + 200, NOW + 51, &in) == -HWID_E_FORBIDDEN);
        in.supersedes_serial = "EE";
        CHECK(commit(s, "0C", "edge-1", NOW + 200, NOW + 51, &in) == -HWID_E_NOT_FOUND);
        CHECK(commit(s, "1A", "edge-9", NOW + 100, NOW, NULL) == 0);
        CHECK(store_cert_revoke(b, "1A", 1, NOW, NULL) == 0);
        in.supersedes_serial = "1A";
        CHECK(commit(s, "1B", "edge-9", NOW + 200, NOW + 1, &in) == -HWID_E_REVOKED);
        in.supersedes_serial = "0B";
        CHECK(commit(s, "0C", "edge-1", NOW + 400, NOW + 200, &in) == -HWID_E_EXPIRED);
        CHECK(cert_status(s, "0B") == CERT_VALID);
        CHECK(cert_count(b, NULL) == 3);
}

/* ---- all or nothing ---- */

typedef struct snapshot {
        int uses, certs, audits, valid_x, request;
} snapshot;

static snapshot take(store *s) {
        return (snapshot) {
                .uses = uses_left(s, "tok111"),
                .certs = cert_count(s, NULL),
                .audits = audit_rows(s),
                .valid_x = cert_status(s, "0D") == CERT_VALID,
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
void contract_atomicity(void) {
        _cleanup_(store_freep) store *s = case_open("atomicity");
        store_audit a = { .at = NOW, .actor = "token:tok111", .action = "enroll", .target = "x", .outcome = "allow" };
        store_audit bad = { .at = NOW, .actor = NULL, .action = "enroll", .outcome = "allow" };
        store_issue in = { .consume_token_id = "tok111", .audit = &a };
        snapshot before;

        CHECK(add_token(s, "tok111", 5, NOW + 3600) == 0);
        CHECK(add_token(s, "used00", 1, NOW + 3600) == 0);
        CHECK(add_request(s, REQ1, "edge-r", "used00", NOW) == 0);
        CHECK(commit(s, "0D", "edge-x", NOW + 1000, NOW, NULL) == 0);
        before = take(s);
        CHECK(before.uses == 5 && before.certs == 1 && before.audits == 0 && before.valid_x == 1);
        /* The insert fails: identity has a live certificate. */
        CHECK(commit(s, "01", "edge-x", NOW + 1000, NOW, &in) == -HWID_E_CONFLICT);
        CHECK(same(before, take(s)));
        /* The insert fails after the live one was superseded (replace_live). */
        in.replace_live = true;
        CHECK(commit(s, "0D", "edge-x", NOW + 1000, NOW, &in) == -HWID_E_EXISTS);
        CHECK(same(before, take(s)));
        in.replace_live = false;
        /* The token fails. */
        in.consume_token_id = "used00";
        CHECK(commit(s, "01", "edge-1", NOW + 1000, NOW, &in) == -HWID_E_TOKEN_INVALID);
        CHECK(same(before, take(s)));
        in.consume_token_id = "tok111";
        /* The request fails (pending), after the token use was taken. */
        in.request_id = REQ1;
        CHECK(commit(s, "01", "edge-r", NOW + 1000, NOW, &in) == -HWID_E_CONFLICT);
        CHECK(same(before, take(s)));
        /* The supersede fails. */
        in.request_id = NULL;
        in.supersedes_serial = "EE";
        CHECK(commit(s, "01", "edge-x", NOW + 1000, NOW, &in) == -HWID_E_NOT_FOUND);
        CHECK(same(before, take(s)));
        /* The very last part (audit) fails after everything else went in:
         * token used, request issued, live one superseded, cert inserted. */
        CHECK(store_request_decide(s, REQ1, true, NULL, NOW) == 0);
        before = take(s);
        in = (store_issue) { .consume_token_id = "tok111", .request_id = REQ1, .audit = &bad };
        CHECK(commit(s, "01", "edge-r", NOW + 1000, NOW, &in) == -HWID_E_INVALID);
        CHECK(same(before, take(s)));
        in = (store_issue) { .consume_token_id = "tok111", .supersedes_serial = "0D", .audit = &bad };
        CHECK(commit(s, "01", "edge-x", NOW + 1000, NOW, &in) == -HWID_E_INVALID);
        CHECK(same(before, take(s)));
        /* And the same commit with a good audit record goes through whole. */
        in.audit = &a;
        CHECK(commit(s, "01", "edge-x", NOW + 1000, NOW, &in) == 0);
        CHECK(uses_left(s, "tok111") == 4 && cert_status(s, "0D") == CERT_SUPERSEDED && audit_rows(s) == 1);
}

/* ---- DNS names: one live holder each, compared canonically ---- */

static int commit_dns(store *s, const char *serial, const char *identity, int64_t not_after, int64_t now,
                      const char *const *names, size_t n, const store_issue *extra) {
        store_issue in = extra ? *extra : (store_issue) { 0 };

        in.dns_names = names;
        in.n_dns_names = n;
        return commit(s, serial, identity, not_after, now, &in);
}

void contract_dns(void) {
        _cleanup_(store_freep) store *s = case_open("dns"), *b = case_again("dns");
        const char *a[] = { "Door.Shared.Example.", "door.shared.example", "a.shared.example" };
        const char *n2[] = { "DOOR.shared.example" };
        const char *bad[] = { "x.example.." };
        int r;

        CHECK(commit_dns(s, "0A", "cam-a", NOW + 100, NOW, a, 3, NULL) == 0);
        r = commit_dns(b, "0B", "cam-b", NOW + 100, NOW, n2, 1, NULL);
        CHECK(r == -HWID_E_CONFLICT);
        CHECK_CONTAINS(hwid_strerror(r), "door.shared.example already belongs to");
        CHECK(cert_status(s, "0B") == -1);
        CHECK(held_by(b, "DOOR.SHARED.EXAMPLE.", NOW, "cam-a"));
        CHECK(held_by(b, "a.shared.example", NOW, "cam-a"));
        CHECK(held_by(s, "other.example", NOW, NULL));
        CHECK(commit_dns(s, "0C", "cam-c", NOW + 100, NOW, bad, 1, NULL) == -HWID_E_INVALID);
        CHECK(store_dns_owner(s, "", NOW, &(char *) { NULL }) == -HWID_E_INVALID);
        /* Revoked: the name is free again. */
        CHECK(store_cert_revoke(b, "0A", 4, NOW + 2, NULL) == 0);
        CHECK(held_by(s, "door.shared.example", NOW + 2, NULL));
        CHECK(commit_dns(s, "0B", "cam-b", NOW + 100, NOW + 3, n2, 1, NULL) == 0);
        CHECK(held_by(b, "door.shared.example", NOW + 3, "cam-b"));
}

void contract_dns_renew_and_expiry(void) {
        _cleanup_(store_freep) store *s = case_open("dns-renew"), *b = case_again("dns-renew");
        const char *n1[] = { "gw.example" };
        store_issue renew = { .supersedes_serial = "0A" }, replace = { .replace_live = true };

        CHECK(commit_dns(s, "0A", "gw", NOW + 100, NOW, n1, 1, NULL) == 0);
        /* A renewal keeps its names; so does a re-enrollment allowed by policy. */
        CHECK(commit_dns(b, "0B", "gw", NOW + 200, NOW + 10, n1, 1, &renew) == 0);
        CHECK(commit_dns(s, "0C", "gw", NOW + 300, NOW + 20, n1, 1, &replace) == 0);
        CHECK(held_by(b, "gw.example", NOW + 20, "gw"));
        /* An expired holder does not block another identity: it is retired. */
        CHECK(held_by(s, "gw.example", NOW + 299, "gw"));
        CHECK(held_by(s, "gw.example", NOW + 300, NULL));
        CHECK(commit_dns(b, "0D", "gw-2", NOW + 900, NOW + 300, n1, 1, NULL) == 0);
        CHECK(cert_status(s, "0C") == CERT_SUPERSEDED);
        CHECK(held_by(s, "gw.example", NOW + 300, "gw-2"));
}

/* ---- revocation and the CRL ---- */

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

void contract_revocation(void) {
        _cleanup_(store_freep) store *s = case_open("revocation"), *b = case_again("revocation");
        store_audit a = { .at = NOW, .actor = "admin:root", .action = "revoke", .target = "0B", .outcome = "allow",
                          .reason = "key compromise" };
        store_cert c = { 0 };
        walk w = { 0 };
        int64_t seq = -1;

        CHECK(commit(s, "1C", "edge-1", NOW + 1000, NOW, NULL) == 0);
        CHECK(commit(s, "0B", "edge-2", NOW + 1000, NOW, NULL) == 0);
        CHECK(commit(s, "0A", "edge-3", NOW + 1000, NOW, NULL) == 0);
        CHECK(commit(s, "05", "edge-4", NOW + 10, NOW, NULL) == 0);
        CHECK(commit(s, "07", "edge-5", NOW + 1000, NOW, NULL) == 0);
        CHECK(store_revocation_seq(b, &seq) == 0 && seq == 0);
        CHECK(store_cert_revoke(s, "0B", 1, NOW + 5, &a) == 0);
        /* The sequence moves for every replica: each regenerates its CRL. */
        CHECK(store_revocation_seq(b, &seq) == 0 && seq == 1);
        CHECK(audit_rows(b) == 1);
        CHECK(cert_status(b, "0B") == CERT_REVOKED);
        CHECK(store_cert_get(b, "0B", &c) == 0 && c.revoked_at == NOW + 5 && c.revocation_reason == 1);
        store_cert_clear(&c);
        CHECK(store_cert_revoke(b, "0B", 1, NOW + 6, &a) == -HWID_E_CONFLICT);
        CHECK(store_cert_revoke(s, "FF", 1, NOW, NULL) == -HWID_E_NOT_FOUND);
        CHECK(store_cert_revoke(s, "0A", 7, NOW, NULL) == -HWID_E_INVALID);
        CHECK(store_revocation_seq(s, &seq) == 0 && seq == 1 && audit_rows(s) == 1);
        CHECK(store_cert_revoke(b, "0A", 0, NOW + 5, NULL) == 0);
        CHECK(store_cert_revoke(s, "05", 4, NOW + 5, NULL) == 0);
        /* Superseded but unexpired: relying parties still accept it. */
        CHECK(commit(s, "08", "edge-5", NOW + 1000, NOW, &(store_issue) { .replace_live = true }) == 0);
        CHECK(store_cert_revoke(b, "07", 1, NOW + 5, NULL) == 0);
        CHECK(store_revocation_seq(s, &seq) == 0 && seq == 4);
        /* The CRL's entries, in serial order. */
        CHECK(store_cert_foreach_revoked(b, 0, NOW + 5, collect, &w) == 0);
        CHECK(w.n == 4);
        CHECK_STREQ(w.serials[0], "05");
        CHECK_STREQ(w.serials[1], "07");
        CHECK_STREQ(w.serials[2], "0A");
        CHECK_STREQ(w.serials[3], "0B");
        CHECK(w.at == NOW + 5 && w.reason == 1);
        /* 05 has expired: it leaves the CRL. */
        w = (walk) { 0 };
        CHECK(store_cert_foreach_revoked(s, 0, NOW + 10, collect, &w) == 0 && w.n == 3);
        CHECK_STREQ(w.serials[0], "07");
        w = (walk) { .stop_after = 2 };
        CHECK(store_cert_foreach_revoked(s, 0, NOW, collect, &w) == 42 && w.n == 2);
        CHECK(store_cert_live_for(s, "edge-2", NOW + 6, &c) == -HWID_E_NOT_FOUND);
}

/* CRL numbers: committed before they are given, above every number given
 * before by either replica, and at least now. */
void contract_crl_numbers(void) {
        _cleanup_(store_freep) store *s = case_open("crl-numbers"), *b = case_again("crl-numbers");
        int64_t n0 = 0, n1 = 0, n2 = 0, n3 = 0;

        CHECK(store_crl_number_next(s, NOW, &n0) == 0 && n0 >= NOW);
        CHECK(store_crl_number_next(b, NOW - 100, &n1) == 0 && n1 > n0);
        CHECK(store_crl_number_next(s, NOW, &n2) == 0 && n2 > n1);
        CHECK(store_crl_number_next(b, NOW + 1000, &n3) == 0 && n3 >= NOW + 1000 && n3 > n2);
        store_free(TAKE_PTR(s));
        s = case_again("crl-numbers");
        CHECK(store_crl_number_next(s, NOW, &n0) == 0 && n0 > n3);
}

static int commit_key(store *s, const char *serial, const char *identity, const char *key_of, int64_t not_after,
                      int64_t now, const char *supersedes) {
        store_cert c = make_cert(serial, identity, not_after);

        memcpy(c.spki_sha256, spki_of(key_of), sizeof(spki));
        return store_cert_commit(s, &(store_issue) { .cert = &c, .supersedes_serial = supersedes }, now);
}

/* keyCompromise blocks the key: its unexpired certificates are revoked
 * with it, whatever identity, and it is never committed again. */
void contract_key_compromise(void) {
        _cleanup_(store_freep) store *s = case_open("key-compromise"), *b = case_again("key-compromise");
        int64_t seq = 0;
        int r;

        CHECK(commit_key(s, "0A", "edge-1", "0A", NOW + 1000, NOW, NULL) == 0);
        CHECK(commit_key(s, "0B", "edge-2", "0A", NOW + 1000, NOW, NULL) == 0);
        CHECK(commit_key(s, "0C", "edge-3", "0C", NOW + 1000, NOW, NULL) == 0);
        CHECK(commit_key(s, "0D", "edge-4", "0A", NOW + 10, NOW, NULL) == 0);
        CHECK(store_key_blocked(b, spki_of("0A")) == 0);
        CHECK(store_cert_revoke(s, "0A", 1, NOW + 20, NULL) == 0);
        CHECK(cert_status(b, "0A") == CERT_REVOKED && cert_status(b, "0B") == CERT_REVOKED);
        CHECK(cert_status(b, "0C") == CERT_VALID);
        CHECK(cert_status(b, "0D") == CERT_VALID); /* expired: no CRL entry needed */
        CHECK(store_revocation_seq(b, &seq) == 0 && seq == 1);
        r = store_key_blocked(b, spki_of("0A"));
        CHECK(r == -HWID_E_KEY_BLOCKED);
        CHECK_CONTAINS(hwid_strerror(r), "certificate 0A");
        CHECK(store_key_blocked(b, spki_of("0C")) == 0);
        CHECK(commit_key(b, "0E", "edge-5", "0A", NOW + 1000, NOW + 30, NULL) == -HWID_E_KEY_BLOCKED);
        CHECK(cert_status(s, "0E") == -1);
        /* Another reason blocks nothing. */
        CHECK(store_cert_revoke(b, "0C", 4, NOW + 40, NULL) == 0);
        CHECK(store_key_blocked(s, spki_of("0C")) == 0);
        CHECK(commit_key(s, "0F", "edge-6", "0C", NOW + 1000, NOW + 50, NULL) == 0);
}

/* --identity: the live certificate and superseded generations not yet
 * expired, one transaction; an expired generation is left alone. */
void contract_revoke_identity(void) {
        _cleanup_(store_freep) store *s = case_open("revoke-identity"), *b = case_again("revoke-identity");
        store_audit a = { .at = NOW, .actor = "admin:root", .action = "cert.revoke", .target = "edge-9",
                          .outcome = "allow" };
        size_t n = 0;

        CHECK(commit_key(s, "1F", "edge-9", "1A", NOW + 5, NOW, NULL) == 0);
        CHECK(commit_key(s, "1A", "edge-9", "1A", NOW + 1000, NOW + 10, NULL) == 0);
        CHECK(commit_key(s, "1B", "edge-9", "1A", NOW + 1000, NOW + 11, "1A") == 0);
        CHECK(commit_key(s, "2A", "edge-8", "2A", NOW + 1000, NOW + 11, NULL) == 0);
        CHECK(cert_status(s, "1F") == CERT_SUPERSEDED && cert_status(s, "1A") == CERT_SUPERSEDED);
        CHECK(store_cert_revoke_identity(b, "EDGE-9", 5, NOW + 20, &a, &n) == 0 && n == 2);
        CHECK(cert_status(s, "1A") == CERT_REVOKED && cert_status(s, "1B") == CERT_REVOKED);
        CHECK(cert_status(s, "1F") == CERT_SUPERSEDED && cert_status(s, "2A") == CERT_VALID);
        CHECK(audit_rows(s) == 1);
        CHECK(store_cert_revoke_identity(s, "edge-9", 5, NOW + 21, &a, &n) == -HWID_E_NOT_FOUND);
        CHECK(store_cert_revoke_identity(s, "nobody", 5, NOW + 21, NULL, &n) == -HWID_E_NOT_FOUND);
        CHECK(store_cert_revoke_identity(s, "edge-8", 7, NOW + 21, NULL, &n) == -HWID_E_INVALID);
        CHECK(cert_status(s, "2A") == CERT_VALID && store_key_blocked(s, spki_of("1A")) == 0);
        /* With key-compromise, the key of the identity's certificates is blocked. */
        CHECK(store_cert_revoke_identity(b, "edge-8", 1, NOW + 22, NULL, &n) == 0 && n == 1);
        CHECK(store_key_blocked(s, spki_of("2A")) == -HWID_E_KEY_BLOCKED);
}

/* ---- what an issuance reads ahead: the same answers as the store's ---- */

void contract_reads(void) {
        _cleanup_(store_freep) store *s = case_open("reads"), *b = case_again("reads");
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
        CHECK(add_token(s, "tokrea", 1, NOW + 3600) == 0);
        CHECK(commit(s, "EE0", "reads-0", NOW + 3600, NOW, NULL) == 0);
        CHECK(store_cert_revoke(s, "EE0", 1, NOW, NULL) == 0);
        CHECK(commit(s, "EE1", "reads-1", NOW + 3600, NOW,
                     &(store_issue) { .dns_names = names, .n_dns_names = 1 }) == 0);
        CHECK(store_reads_fetch(b, &k, &rd) == 0);
        /* The state changes after the fetch: a store that reads ahead
         * answers as it read, one that does not as it is now. */
        CHECK(store_token_revoke(s, "tokrea") == 0);
        CHECK(store_reads_token_get(b, rd, "tokrea", &t) == 0 && t.revoked == !store_reads_ahead(b));
        CHECK(t.uses_left == 1);
        store_token_clear(&t);
        CHECK(store_reads_cert_get(b, rd, "EE1", &c) == 0 && c.status == CERT_VALID);
        store_cert_clear(&c);
        CHECK(store_reads_key_blocked(b, rd, key0) == -HWID_E_KEY_BLOCKED);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_KEY_BLOCKED), "with certificate EE0");
        CHECK(store_reads_key_blocked(b, rd, key1) == 0); /* not a key fetched: asked of the store */
        CHECK(store_reads_cert_live_for(b, rd, "READS-1", NOW, &c) == 0);
        CHECK_STREQ(c.serial, "EE1");
        store_cert_clear(&c);
        CHECK(store_reads_binding_get(b, rd, "READS-1", &(store_binding) { 0 }) == -HWID_E_NOT_FOUND);
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
        CHECK(store_reads_fetch(s, &k, &rd) == 0);
        CHECK(store_reads_token_get(s, rd, "BAD!", &t) == -HWID_E_NOT_FOUND);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_NOT_FOUND), "no such token");
        CHECK(store_reads_cert_get(s, rd, "ee1", &c) == -HWID_E_NOT_FOUND);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_NOT_FOUND), "upper-case hex");
        store_reads_free(rd);
        /* No reads ahead at all: every answer is the store's. */
        CHECK(store_reads_token_get(s, NULL, "tokrea", &t) == 0 && t.revoked);
        store_token_clear(&t);
}
