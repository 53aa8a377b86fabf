/* The store contract: what store.h promises, held by every backend alike.
 *
 *     test-store-contract            SQLite: a file per case in a temporary directory
 *     test-store-contract URI        PostgreSQL: a database per case on URI's server
 *
 * (meson's store-contract-sqlite and store-contract-pg; the second through
 * tests/integration/store-contract-pg.sh, which starts a cluster.)  The
 * cases are in this file (tokens, requests, approvals),
 * store-contract-certs.c (certificates, names, revocation, the CRL, the
 * reads ahead), store-contract-races.c (races), store-contract-audit.c
 * (the audit chain and its checkpoints, migration),
 * store-contract-attest.c (attestation, bindings) and
 * store-contract-gens.c (CA generations, each certificate's).  Two store objects on one
 * database stand for two hwidd replicas; threads race on them for what the
 * database must decide alone.  What one backend does beyond the contract is
 * tested beside it: tests/unit/test-store*.c (SQLite's file, locks, WAL,
 * schema) and tests/integration/pg-*.sh (PostgreSQL's round trips, plans,
 * linker, failover). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "error.h"
#include "fsutil.h"
#include "pq-dl.h"
#include "store-contract.h"

char dir[] = "/tmp/hwid-test-store-contract-XXXXXX";

/* ---- the fixture: a database per case ---- */

#define CASES_MAX 64

static const char *pg_uri; /* NULL: SQLite */
static PGconn *pg_admin;   /* creates the cases' databases */
static struct {
        char name[32];
        char *database;
} cases[CASES_MAX];
static size_t n_cases;

static void die(const char *what, const char *detail) {
        fprintf(stderr, "store contract: cannot %s: %s\n", what, detail);
        abort();
}

/* pg_uri with its database name replaced by db. */
static char *uri_with_database(const char *db) {
        const char *host = strstr(pg_uri, "://"), *query, *path;
        char *out = NULL;
        int n;

        host = host ? host + 3 : pg_uri;
        query = strchr(host, '?');
        path = strchr(host, '/');
        n = (int) (path && (!query || path < query) ? path - pg_uri : query ? query - pg_uri : (long) strlen(pg_uri));
        if (asprintf(&out, "%.*s/%s%s", n, pg_uri, db, query ? query : "") < 0)
                abort();
        return out;
}

static void pg_command(const char *sql) {
        PGresult *res = PQexec(pg_admin, sql);

        if (PQresultStatus(res) != PGRES_COMMAND_OK)
                die(sql, PQerrorMessage(pg_admin));
        PQclear(res);
}

/* A database of the case's own: a file, or a new PostgreSQL database. */
static char *new_database(const char *name) {
        char db[64], sql[160];

        if (!pg_uri) {
                char file[48];

                snprintf(file, sizeof(file), "%s.db", name);
                return db_path(file);
        }
        snprintf(db, sizeof(db), "contract_%s", name);
        for (char *p = db; *p; p++)
                if (*p == '-')
                        *p = '_';
        snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS %s", db);
        pg_command(sql);
        snprintf(sql, sizeof(sql), "CREATE DATABASE %s", db);
        pg_command(sql);
        return uri_with_database(db);
}

const char *case_database(const char *name) {
        for (size_t i = 0; i < n_cases; i++)
                if (strcmp(cases[i].name, name) == 0)
                        return cases[i].database;
        if (n_cases == CASES_MAX || strlen(name) >= sizeof(cases[0].name))
                die("name a case", name);
        snprintf(cases[n_cases].name, sizeof(cases[0].name), "%s", name);
        cases[n_cases].database = new_database(name);
        return cases[n_cases++].database;
}

static store *open_or_die(const char *database) {
        store *s = NULL;
        int r = store_open(database, &s);

        if (r < 0)
                die("open a case's store", hwid_strerror(r));
        return s;
}

store *case_open(const char *name) {
        return open_or_die(case_database(name));
}

store *case_again(const char *name) {
        return open_or_die(case_database(name));
}

store *case_migrated(const char *name, const char *old_path) {
        char summary[512];
        store *s = NULL;
        int r;

        if (!pg_uri) {
                CHECK((r = store_open(old_path, &s)) == 0);
                return s;
        }
        r = store_copy_sqlite_to_pg(old_path, case_database(name), summary, sizeof(summary));
        CHECK(r == 0);
        if (r < 0) {
                fprintf(stderr, "migration: %s\n", hwid_strerror(r));
                return NULL;
        }
        return case_open(name);
}

/* "database ... does not exist, skipping": not the test's to print. */
static void notice_quiet(void *arg, const char *message) {
        (void) arg;
        (void) message;
}

static int pg_begin(const char *uri) {
        int r = pq_load();

        if (r < 0)
                return r;
        pg_uri = uri;
        pg_admin = PQconnectdbParams((const char *const[]) { "dbname", NULL }, (const char *const[]) { uri, NULL }, 1);
        if (!pg_admin || PQstatus(pg_admin) != CONNECTION_OK)
                die("connect to PostgreSQL", pg_admin ? PQerrorMessage(pg_admin) : "out of memory");
        PQsetNoticeProcessor(pg_admin, notice_quiet, NULL);
        return 0;
}

/* ---- helpers of the cases ---- */

bool held_by(store *s, const char *name, int64_t now, const char *expect) {
        _cleanup_free_ char *id = NULL;
        int r = store_dns_owner(s, name, now, &id);

        if (!expect)
                return r == -HWID_E_NOT_FOUND;
        return r == 0 && strcmp(id, expect) == 0;
}

int cert_count(store *s, const char *identity) {
        store_cert *all = NULL;
        size_t n = 0;

        if (store_cert_list(s, identity, &all, &n) < 0)
                return -1;
        store_cert_list_free(all, n);
        return (int) n;
}

int cert_count_status(store *s, const char *identity, store_cert_status st) {
        store_cert *all = NULL;
        size_t n = 0;
        int k = 0;

        if (store_cert_list(s, identity, &all, &n) < 0)
                return -1;
        for (size_t i = 0; i < n; i++)
                k += all[i].status == st;
        store_cert_list_free(all, n);
        return k;
}

/* ---- tokens ---- */

void contract_tokens(void) {
        _cleanup_(store_freep) store *s = case_open("tokens"), *b = case_again("tokens");
        store_token t = { 0 }, *all = NULL;
        size_t n = 0;

        CHECK(store_ping(s) == 0);
        CHECK(add_token(s, "abc123", 2, NOW + 3600) == 0);
        CHECK(add_token(b, "abc123", 2, NOW + 3600) == -HWID_E_EXISTS);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_EXISTS), "abc123");
        CHECK(add_token(s, "ABC123", 1, NOW) == -HWID_E_INVALID);
        CHECK(add_token(s, "zz9zz9", 1, NOW + 10) == 0);
        CHECK(store_token_get(b, "abc123", &t) == 0);
        CHECK_STREQ(t.id, "abc123");
        CHECK_STREQ(t.profile, "edge");
        CHECK(t.name_pattern == NULL && t.description == NULL);
        CHECK(t.secret_hash[0] == 0xab && t.secret_hash[31] == 0xab);
        CHECK(t.expires_at == NOW + 3600 && t.created_at == NOW - 60);
        CHECK(t.uses_total == 2 && t.uses_left == 2 && !t.revoked);
        CHECK(store_token_state_at(&t, NOW) == TOKEN_ACTIVE);
        CHECK(store_token_state_at(&t, NOW + 3599) == TOKEN_ACTIVE);
        CHECK(store_token_state_at(&t, NOW + 3600) == TOKEN_EXPIRED);
        t.uses_left = 0;
        CHECK(store_token_state_at(&t, NOW) == TOKEN_USED_UP);
        CHECK(store_token_state_at(&t, NOW + 3600) == TOKEN_EXPIRED);
        t.revoked = true;
        CHECK(store_token_state_at(&t, NOW + 3600) == TOKEN_REVOKED);
        store_token_clear(&t);
        CHECK(store_token_get(s, "nope00", &t) == -HWID_E_NOT_FOUND);
        CHECK(store_token_list(s, &all, &n) == 0 && n == 2);
        CHECK(n == 2 && strcmp(all[0].id, "abc123") == 0 && strcmp(all[1].id, "zz9zz9") == 0);
        store_token_list_free(all, n);
        /* A token scoped to names, described. */
        t = (store_token) { .id = "pat001", .profile = (char *) "line", .name_pattern = (char *) "line-3-*",
                            .description = (char *) "line 3, shift 2", .created_at = NOW, .expires_at = NOW + 60,
                            .uses_total = 20, .uses_left = 20 };
        memset(t.secret_hash, 0xcd, sizeof(t.secret_hash));
        CHECK(store_token_insert(s, &t, 1) == 0);
        t = (store_token) { 0 };
        CHECK(store_token_get(b, "pat001", &t) == 0);
        CHECK_STREQ(t.profile, "line");
        CHECK_STREQ(t.name_pattern, "line-3-*");
        CHECK_STREQ(t.description, "line 3, shift 2");
        CHECK(t.uses_total == 20 && t.uses_left == 20 && t.secret_hash[5] == 0xcd);
        store_token_clear(&t);
        /* Revoked through one replica: the other sees it, and refuses it. */
        CHECK(store_token_revoke(b, "abc123") == 0);
        CHECK(store_token_revoke(s, "abc123") == 0); /* idempotent */
        CHECK(store_token_revoke(s, "nope00") == -HWID_E_NOT_FOUND);
        CHECK(store_token_get(s, "abc123", &t) == 0 && t.revoked);
        CHECK(store_token_state_at(&t, NOW) == TOKEN_REVOKED);
        store_token_clear(&t);
        CHECK(add_request(s, REQ1, "r-1", "abc123", NOW) == -HWID_E_TOKEN_INVALID);
}

/* A derived token keeps its nonce and no hash, a legacy one its hash
 * (ca/token.h); either is spent the same way. */
void contract_derived_tokens(void) {
        _cleanup_(store_freep) store *s = case_open("derived"), *b = case_again("derived");
        static const uint8_t zeros[32];
        store_token t = { 0 };

        CHECK(add_derived_token(s, "der001", 0x5a, NOW + 3600) == 0);
        CHECK(add_token(s, "leg001", 1, NOW + 3600) == 0);
        CHECK(store_token_get(b, "der001", &t) == 0);
        CHECK(t.derived && t.nonce[0] == 0x5a && t.nonce[31] == 0x5a);
        CHECK(memcmp(t.secret_hash, zeros, sizeof(zeros)) == 0);
        store_token_clear(&t);
        CHECK(store_token_get(b, "leg001", &t) == 0);
        CHECK(!t.derived && memcmp(t.nonce, zeros, sizeof(zeros)) == 0 && t.secret_hash[0] == 0xab);
        store_token_clear(&t);
        CHECK(add_request(b, REQ1, "d-1", "der001", NOW) == 0);
        CHECK(uses_left(s, "der001") == 0);
        CHECK(add_request(s, REQ2, "d-2", "der001", NOW) == -HWID_E_TOKEN_INVALID);
        CHECK(add_request(s, REQ2, "d-2", "leg001", NOW) == 0 && uses_left(b, "leg001") == 0);
}

/* n tokens "bNNNNN" from first on, in one store_token_insert(). */
static int add_many(store *s, int first, size_t n) {
        _cleanup_free_ store_token *t = calloc(n, sizeof(*t));

        if (!t)
                abort();
        for (size_t i = 0; i < n; i++) {
                t[i] = (store_token) { .derived = true, .profile = (char *) "line", .created_at = NOW,
                                       .expires_at = NOW + 3600, .uses_total = 1, .uses_left = 1 };
                snprintf(t[i].id, sizeof(t[i].id), "b%05d", first + (int) i);
                memset(t[i].nonce, (int) i, sizeof(t[i].nonce));
        }
        return store_token_insert(s, t, n);
}

/* Tokens are stored a batch at a time, whole or not at all: an id taken,
 * or one malformed, and none of the batch is there. */
void contract_token_batches(void) {
        _cleanup_(store_freep) store *s = case_open("token-batches"), *b = case_again("token-batches");
        static const char *const ok[] = { "bat001", "bat002", "bat003" };
        static const char *const clash[] = { "bat004", "bat002", "bat005" };
        static const char *const bad[] = { "bat006", "BAD!!!" };
        store_token *all = NULL;
        size_t n = 0;

        CHECK(add_tokens(s, ok, ELEMENTSOF(ok), 1, NOW + 3600) == 0);
        CHECK(uses_left(b, "bat003") == 1);
        CHECK(add_tokens(b, clash, ELEMENTSOF(clash), 1, NOW + 3600) == -HWID_E_EXISTS);
        CHECK(uses_left(s, "bat004") == -1 && uses_left(s, "bat005") == -1);
        CHECK(add_tokens(s, bad, ELEMENTSOF(bad), 1, NOW + 3600) == -HWID_E_INVALID);
        CHECK(uses_left(s, "bat006") == -1);
        CHECK(store_token_insert(s, NULL, 0) == -HWID_E_INVALID);
        CHECK(store_token_list(b, &all, &n) == 0 && n == ELEMENTSOF(ok));
        store_token_list_free(all, n);
        /* As many as the admin API mints at once (1000), and a batch whose
         * last token clashes leaves none of the other 999. */
        CHECK(add_many(s, 0, 1000) == 0);
        CHECK(add_many(b, 1999, 1000) == 0);
        CHECK(add_many(s, 1000, 1000) == -HWID_E_EXISTS);
        CHECK(uses_left(b, "b00999") == 1 && uses_left(b, "b01000") == -1 && uses_left(b, "b01998") == -1);
        CHECK(store_token_list(s, &all, &n) == 0 && n == ELEMENTSOF(ok) + 2000);
        store_token_list_free(all, n);
}

/* ---- requests: a token's use for a request held for approval ---- */

void contract_requests(void) {
        _cleanup_(store_freep) store *s = case_open("requests"), *b = case_again("requests");
        store_request q = { 0 };
        int r;

        CHECK(add_token(s, "two222", 2, NOW + 3600) == 0);
        CHECK(add_request(s, REQ1, "edge-1", "two222", NOW) == 0);
        CHECK(uses_left(b, "two222") == 1);
        CHECK(store_request_get(b, REQ1, &q) == 0);
        CHECK(q.status == REQUEST_PENDING && q.created_at == NOW && q.updated_at == NOW);
        CHECK_STREQ(q.identity, "edge-1");
        CHECK_STREQ(q.token_id, "two222");
        CHECK_STREQ(q.spki_sha256, spki);
        CHECK(q.csr_der_len == sizeof(der) && memcmp(q.csr_der, der, sizeof(der)) == 0);
        CHECK(q.reason == NULL && q.serial == NULL);
        store_request_clear(&q);
        /* A duplicate id is refused and does not cost a use. */
        CHECK(add_request(b, REQ1, "edge-1", "two222", NOW) == -HWID_E_EXISTS);
        CHECK(uses_left(s, "two222") == 1);
        CHECK(add_request(s, REQ2, "edge-2", "two222", NOW + 1) == 0);
        r = add_request(s, REQ3, "edge-3", "two222", NOW);
        CHECK(r == -HWID_E_TOKEN_INVALID);
        CHECK_CONTAINS(hwid_strerror(r), "used up");
        CHECK(store_request_get(s, REQ3, &q) == -HWID_E_NOT_FOUND);
        CHECK(add_token(s, "rev333", 5, NOW + 3600) == 0 && store_token_revoke(s, "rev333") == 0);
        r = add_request(s, REQ3, "edge-3", "rev333", NOW);
        CHECK(r == -HWID_E_TOKEN_INVALID);
        CHECK_CONTAINS(hwid_strerror(r), "revoked");
        CHECK(add_token(s, "exp444", 5, NOW) == 0);
        r = add_request(s, REQ3, "edge-3", "exp444", NOW);
        CHECK(r == -HWID_E_TOKEN_INVALID);
        CHECK_CONTAINS(hwid_strerror(r), "expired");
        CHECK(uses_left(s, "exp444") == 5);
        r = add_request(s, REQ3, "edge-3", "nope00", NOW);
        CHECK(r == -HWID_E_TOKEN_INVALID);
        CHECK_CONTAINS(hwid_strerror(r), "unknown");
        /* An EST client asking again finds its latest request (RFC 7030 §4.2.3). */
        CHECK(store_request_find(b, "two222", spki, &q) == 0);
        CHECK_STREQ(q.id, REQ2);
        store_request_clear(&q);
        CHECK(store_request_find(b, "rev333", spki, &q) == -HWID_E_NOT_FOUND);
}

/* ---- approvals: one decision per request, issued once ---- */

static int request_count(store *s, bool pending_only) {
        store_request *all = NULL;
        size_t n = 0;

        if (store_request_list(s, pending_only, &all, &n) < 0)
                return -1;
        store_request_list_free(all, n);
        return (int) n;
}

void contract_approvals(void) {
        _cleanup_(store_freep) store *s = case_open("approvals"), *b = case_again("approvals");
        store_issue in = { .request_id = REQ1 };
        store_request q = { 0 };
        store_cert c = { 0 };
        int r;

        CHECK(add_token(s, "tok111", 3, NOW + 3600) == 0);
        CHECK(add_request(s, REQ1, "Edge-1", "tok111", NOW) == 0);
        CHECK(add_request(s, REQ2, "edge-2", "tok111", NOW) == 0);
        CHECK(request_count(b, true) == 2 && request_count(b, false) == 2);
        /* Pending: not issued, and nothing of it taken. */
        CHECK(commit(s, "0A", "edge-1", NOW + 100, NOW, &in) == -HWID_E_CONFLICT);
        CHECK_CONTAINS(hwid_strerror(-HWID_E_CONFLICT), "pending");
        CHECK(cert_status(s, "0A") == -1 && request_status(s, REQ1) == REQUEST_PENDING);
        /* One decision, on whichever replica comes first. */
        CHECK(store_request_decide(b, REQ1, true, "fingerprints match", NOW + 5) == 0);
        r = store_request_decide(s, REQ1, false, "changed my mind", NOW + 6);
        CHECK(r == -HWID_E_CONFLICT);
        CHECK_CONTAINS(hwid_strerror(r), "approved");
        CHECK(store_request_decide(s, REQ2, false, "unknown device", NOW + 7) == 0);
        CHECK(store_request_decide(b, REQ2, true, NULL, NOW + 8) == -HWID_E_CONFLICT);
        CHECK(store_request_decide(s, REQ3, true, NULL, NOW) == -HWID_E_NOT_FOUND);
        CHECK(store_request_get(b, REQ1, &q) == 0 && q.status == REQUEST_APPROVED && q.updated_at == NOW + 5);
        store_request_clear(&q);
        CHECK(store_request_get(b, REQ2, &q) == 0 && q.status == REQUEST_DENIED);
        CHECK_STREQ(q.reason, "unknown device");
        store_request_clear(&q);
        CHECK(request_count(s, true) == 0 && request_count(s, false) == 2);
        /* Issued for its own identity only (whatever the case), once. */
        CHECK(commit(b, "0A", "edge-2", NOW + 100, NOW + 9, &in) == -HWID_E_FORBIDDEN);
        CHECK(commit(b, "0A", "EDGE-1", NOW + 100, NOW + 9, &in) == 0);
        CHECK(store_request_get(s, REQ1, &q) == 0 && q.status == REQUEST_ISSUED && q.updated_at == NOW + 9);
        CHECK_STREQ(q.serial, "0A");
        store_request_clear(&q);
        CHECK(store_cert_get(s, "0A", &c) == 0);
        CHECK_STREQ(c.request_id, REQ1);
        store_cert_clear(&c);
        /* A second poll racing the first gets a conflict, even replacing. */
        in.replace_live = true;
        CHECK(commit(s, "0B", "edge-1", NOW + 100, NOW + 10, &in) == -HWID_E_CONFLICT);
        CHECK(cert_status(b, "0A") == CERT_VALID && cert_status(b, "0B") == -1);
        in.request_id = REQ2;
        CHECK(commit(s, "0B", "edge-2", NOW + 100, NOW + 10, &in) == -HWID_E_CONFLICT); /* denied */
        in.request_id = REQ3;
        CHECK(commit(s, "0B", "edge-1", NOW + 100, NOW + 10, &in) == -HWID_E_NOT_FOUND);
        /* Another request for another spelling of the name, approved: the
         * name is live, so it is not issued. */
        CHECK(add_request(b, REQ3, "EDGE-1", "tok111", NOW + 11) == 0);
        CHECK(store_request_decide(s, REQ3, true, NULL, NOW + 12) == 0);
        in = (store_issue) { .request_id = REQ3 };
        CHECK(commit(b, "0C", "EDGE-1", NOW + 100, NOW + 13, &in) == -HWID_E_CONFLICT);
        CHECK(request_status(s, REQ3) == REQUEST_APPROVED && cert_status(s, "0C") == -1);
        /* Only the uses taken by the requests. */
        CHECK(uses_left(b, "tok111") == 0);
}

/* ---- a store closed and opened again keeps everything ---- */

void contract_reopen(void) {
        store_audit a = { .at = NOW, .actor = "admin:root", .action = "revoke", .target = "0A", .outcome = "allow" };
        store *s = case_open("reopen");
        store_cert c = { 0 };
        int64_t seq = 0;

        CHECK(add_token(s, "tok111", 3, NOW + 3600) == 0);
        CHECK(add_request(s, REQ1, "edge-9", "tok111", NOW) == 0);
        CHECK(commit(s, "0A", "edge-1", NOW + 1000, NOW, &(store_issue) { .consume_token_id = "tok111" }) == 0);
        CHECK(commit(s, "0B", "edge-2", NOW + 1000, NOW, NULL) == 0);
        CHECK(store_cert_revoke(s, "0A", 1, NOW, &a) == 0);
        store_free(s);
        s = case_again("reopen");
        CHECK(uses_left(s, "tok111") == 1);
        CHECK(request_status(s, REQ1) == REQUEST_PENDING);
        CHECK(cert_status(s, "0A") == CERT_REVOKED && cert_status(s, "0B") == CERT_VALID);
        CHECK(store_cert_live_for(s, "edge-2", NOW, &c) == 0 && c.der_len == sizeof(der));
        store_cert_clear(&c);
        CHECK(store_revocation_seq(s, &seq) == 0 && seq == 1);
        CHECK(audit_rows(s) == 1);
        CHECK(store_ping(s) == 0 && store_probe_write(s, NOW) == 0 && store_integrity_check(s) == 0);
        store_free(s);
}

int main(int argc, char **argv) {
        int r;

        if (argc > 2 || (argc == 2 && strncmp(argv[1], "postgres", 8) != 0)) {
                fprintf(stderr, "usage: %s [postgresql://URI]\n", argv[0]);
                return 2;
        }
        if (!fixture_begin())
                return 1;
        if (argc == 2 && (r = pg_begin(argv[1])) < 0)
                die("load libpq", hwid_strerror(r));
        contract_tokens();
        contract_derived_tokens();
        contract_token_batches();
        contract_requests();
        contract_approvals();
        contract_reopen();
        contract_commit();
        contract_one_live();
        contract_identity_case();
        contract_renewal();
        contract_atomicity();
        contract_dns();
        contract_dns_renew_and_expiry();
        contract_revocation();
        contract_crl_numbers();
        contract_key_compromise();
        contract_revoke_identity();
        contract_reads();
        contract_race_one_identity();
        contract_race_dns();
        contract_race_tokens();
        contract_race_replace();
        contract_race_mixed_batch();
        contract_race_key();
        contract_race_first_open();
        contract_audit();
        contract_audit_checkpoints();
        contract_audit_notes();
        contract_audit_sink();
        contract_challenges();
        contract_requester_bound();
        contract_allowlist();
        contract_attestation_records();
        contract_bindings();
        contract_binding_race();
        contract_migration();
        contract_ca_generations();
        contract_ca_generation_import();
        contract_ca_generation_race();
        contract_cert_generations();
        for (size_t i = 0; i < n_cases; i++)
                free(cases[i].database);
        if (pg_admin)
                PQfinish(pg_admin);
        return fixture_end(pg_uri ? "store-contract-pg" : "store-contract-sqlite");
}
