/* The PostgreSQL store's schema and its migrations.
 *
 * The same tables and rules as the SQLite store (store-sqlite-schema.c),
 * written for PostgreSQL, with its own version numbers in
 * meta.schema_version.  Migrations run in one transaction under an
 * advisory lock, so that replicas starting at once wait for each other
 * and the second finds the work done.  Append-only: never edit a
 * migration that has shipped, add the next.
 *
 * Identities compare without regard to ASCII case through hwid_fold()
 * (ASCII only, whatever the database's locale), in the partial unique
 * index that allows one live certificate per identity and in every
 * query; DNS names are stored canonical, and certificate_dns.live follows
 * its certificate's status by trigger. */
#include <stdio.h>

#include "error.h"
#include "store-pg.h"

/* pg_advisory_xact_lock key of migrations ("hwid" in ASCII). */
#define PG_MIGRATE_LOCK "1752656228"

#define HEX(col, len) " CHECK (" col " IS NULL OR " col " ~ '^[0-9a-f]{" len "}$')"

static const char *const migrations[] = {
        /* 0 -> 1: the schema of SQLite's version 7. */
        "CREATE FUNCTION hwid_fold(text) RETURNS text IMMUTABLE STRICT PARALLEL SAFE LANGUAGE sql AS "
        "  $$ SELECT translate($1, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz') $$;"
        "INSERT INTO meta (key, value) VALUES ('revocation_seq', 0), ('dns_backfilled', 1), "
        "  ('audit_chained', 1), ('ready_probe', 0);"
        "CREATE TABLE tokens ("
        "  id text PRIMARY KEY CHECK (length(id) = 6),"
        "  secret_hash bytea NOT NULL CHECK (length(secret_hash) = 32),"
        "  profile text NOT NULL, name_pattern text, description text,"
        "  created_at bigint NOT NULL, expires_at bigint NOT NULL,"
        "  uses_total integer NOT NULL CHECK (uses_total >= 0),"
        "  uses_left integer NOT NULL CHECK (uses_left >= 0),"
        "  revoked boolean NOT NULL DEFAULT false);"
        "CREATE TABLE requests ("
        "  id text PRIMARY KEY, identity text NOT NULL, profile text NOT NULL,"
        "  token_id text NOT NULL REFERENCES tokens(id), spki_sha256 text NOT NULL, csr_der bytea NOT NULL,"
        "  status text NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'issued')),"
        "  reason text, serial text, created_at bigint NOT NULL, updated_at bigint NOT NULL,"
        "  ek_cert_sha256 text" HEX("ek_cert_sha256", "64") ","
        "  ek_pub_sha256 text" HEX("ek_pub_sha256", "64") ","
        "  ak_name text" HEX("ak_name", "4,132") ");"
        "CREATE INDEX requests_status ON requests(status);"
        "CREATE TABLE certificates ("
        "  serial text PRIMARY KEY CHECK (serial ~ '^[0-9A-F]+$'),"
        "  identity text NOT NULL, subject text NOT NULL, profile text NOT NULL,"
        "  spki_sha256 text NOT NULL, der bytea NOT NULL,"
        "  not_before bigint NOT NULL, not_after bigint NOT NULL,"
        "  status text NOT NULL CHECK (status IN ('valid', 'revoked', 'superseded')),"
        "  revoked_at bigint NOT NULL DEFAULT 0, revocation_reason integer NOT NULL DEFAULT 0,"
        "  request_id text REFERENCES requests(id), created_at bigint NOT NULL,"
        "  role text NOT NULL DEFAULT 'node' CHECK (role ~ '^[a-z]{1,15}$'),"
        "  token_id text REFERENCES tokens(id),"
        "  scope text CHECK (scope IS NULL OR (length(scope) BETWEEN 2 AND 16384 AND left(scope, 1) = '{')),"
        "  ek_cert_sha256 text" HEX("ek_cert_sha256", "64") ","
        "  ek_pub_sha256 text" HEX("ek_pub_sha256", "64") ","
        "  ak_name text" HEX("ak_name", "4,132") ");"
        "CREATE UNIQUE INDEX certificates_one_live ON certificates(hwid_fold(identity)) WHERE status = 'valid';"
        "CREATE INDEX certificates_identity ON certificates(hwid_fold(identity), status);"
        "CREATE INDEX certificates_status_not_after ON certificates(status, not_after);"
        "CREATE INDEX certificates_revoked ON certificates(serial) WHERE status = 'revoked';"
        "CREATE INDEX certificates_spki ON certificates(spki_sha256);"
        "CREATE INDEX certificates_ek ON certificates(ek_pub_sha256) WHERE ek_pub_sha256 IS NOT NULL;"
        "CREATE TABLE certificate_dns ("
        "  serial text NOT NULL REFERENCES certificates(serial),"
        "  name text NOT NULL CHECK (length(name) BETWEEN 1 AND 253 AND name = lower(name) AND right(name, 1) <> '.'),"
        "  live boolean NOT NULL, PRIMARY KEY (serial, name));"
        "CREATE UNIQUE INDEX certificate_dns_one_live ON certificate_dns(name) WHERE live;"
        "CREATE FUNCTION hwid_dns_follow() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
        "  UPDATE certificate_dns SET live = (NEW.status = 'valid') WHERE serial = NEW.serial; RETURN NULL; END $$;"
        "CREATE TRIGGER certificate_dns_live_follows AFTER UPDATE OF status ON certificates FOR EACH ROW "
        "  WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION hwid_dns_follow();"
        "CREATE TABLE blocked_keys ("
        "  spki_sha256 text PRIMARY KEY CHECK (length(spki_sha256) = 64),"
        "  serial text NOT NULL, blocked_at bigint NOT NULL);"
        "CREATE TABLE audit ("
        "  id bigserial PRIMARY KEY, at bigint NOT NULL, actor text NOT NULL, action text NOT NULL,"
        "  target text, outcome text NOT NULL, reason text, token_id text, prev_hash bytea, hash bytea);"
        "CREATE INDEX audit_at ON audit(at);"
        "CREATE TABLE audit_chain ("
        "  role text PRIMARY KEY CHECK (role IN ('anchor', 'head')), id bigint NOT NULL, at bigint NOT NULL,"
        "  hash bytea NOT NULL CHECK (length(hash) = 32));"
        "CREATE TABLE attest_challenges ("
        "  id text PRIMARY KEY CHECK (id ~ '^[0-9a-f]{32}$'),"
        "  secret_sha256 bytea NOT NULL CHECK (length(secret_sha256) = 32),"
        "  nonce bytea NOT NULL CHECK (length(nonce) = 32),"
        "  ak_public bytea NOT NULL CHECK (length(ak_public) BETWEEN 1 AND 1024),"
        "  ek_cert bytea NOT NULL CHECK (length(ek_cert) BETWEEN 1 AND 4096),"
        "  expires_at bigint NOT NULL, created_at bigint NOT NULL);"
        "CREATE INDEX attest_challenges_expires ON attest_challenges(expires_at);"
        "CREATE TABLE ek_allowlist ("
        "  ek_cert_sha256 text" HEX("ek_cert_sha256", "64") ","
        "  ek_pub_sha256 text" HEX("ek_pub_sha256", "64") ","
        "  identity text NOT NULL CHECK (length(identity) BETWEEN 1 AND 64),"
        "  profile text NOT NULL CHECK (length(profile) BETWEEN 1 AND 64), added_at bigint NOT NULL,"
        "  CHECK (ek_cert_sha256 IS NOT NULL OR ek_pub_sha256 IS NOT NULL));"
        /* The identity's index first: PostgreSQL checks unique indexes in
         * the order they were made, and a name listed twice is what an
         * admin is told about first (as SQLite does). */
        "CREATE UNIQUE INDEX ek_allowlist_identity ON ek_allowlist(hwid_fold(identity));"
        "CREATE UNIQUE INDEX ek_allowlist_cert ON ek_allowlist(ek_cert_sha256);"
        "CREATE UNIQUE INDEX ek_allowlist_pub ON ek_allowlist(ek_pub_sha256);",
        /* 1 -> 2: an EST client asks again with the same token and key. */
        "CREATE INDEX requests_token_key ON requests(token_id, spki_sha256);",
        /* 2 -> 3: signed checkpoints of the audit chain (store.h). */
        "CREATE TABLE audit_checkpoints ("
        "  seq bigserial PRIMARY KEY, kind text NOT NULL CHECK (kind IN ('H', 'P')), id bigint NOT NULL,"
        "  record_at bigint NOT NULL, hash bytea NOT NULL CHECK (length(hash) = 32), at bigint NOT NULL,"
        "  sig bytea NOT NULL CHECK (length(sig) BETWEEN 1 AND 512));",
        /* 3 -> 4: who asked for each attestation challenge (SQLite's 10). */
        "ALTER TABLE attest_challenges ADD COLUMN requester text NOT NULL DEFAULT ''"
        "  CHECK (length(requester) <= 80);"
        "CREATE INDEX attest_challenges_requester ON attest_challenges(requester, created_at);",
        /* 4 -> 5: an issuance and the audit chain's append as one statement
         * each (store-pg-functions.c). */
        pg_functions_sql,
        /* 5 -> 6: issuances queue their audit records, hwidd links them
         * (store-pg-link.c). */
        pg_link_sql,
        /* 6 -> 7: plans that stay cheap as the tables grow
         * (store-pg-functions.c). */
        pg_plans_sql,
        /* 7 -> 8: a batch's token uses last (store-pg-functions.c). */
        pg_token_last_sql,
        /* 8 -> 9: the audit records waiting for the linker in a table of
         * their own (store-pg-link.c). */
        pg_queue_sql,
        /* 9 -> 10: no statement of an issuance planned on every call
         * (store-pg-functions.c). */
        pg_replan_sql,
        /* 10 -> 11: derived tokens (SQLite's 11): a token made with the
         * CA's token key keeps its nonce and no hash; tokens from before
         * keep their hash.  Exactly one of the two. */
        "ALTER TABLE tokens ALTER COLUMN secret_hash DROP NOT NULL,"
        "  ADD COLUMN nonce bytea CHECK (nonce IS NULL OR length(nonce) = 32),"
        "  ADD CONSTRAINT tokens_one_secret CHECK ((nonce IS NULL) <> (secret_hash IS NULL));",
        /* 11 -> 12: identities bound to the TPM that attested them
         * (SQLite's 12), recorded by hwid_issue_one() (store-pg-functions.c). */
        pg_binding_sql,
        /* 12 -> 13: CA generations, each certificate's (SQLite's 13,
         * store-pg-functions.c). */
        pg_generations_sql,
};

#define SCHEMA_VERSION ((int64_t) ELEMENTSOF(migrations))

static int read_version(pg_slot *c, int64_t *ret) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = pg_exec(c, &res, "read the schema version", "SELECT value FROM meta WHERE key = 'schema_version'",
                        NULL);

        if (r < 0)
                return r;
        *ret = PQntuples(res) == 1 ? pg_i64(res, 0, 0) : 0;
        if (*ret > SCHEMA_VERSION || *ret < 0)
                return hwid_fail(HWID_E_STORE,
                                 "PostgreSQL %s has schema version %lld, not one this hwid knows (up to %lld): "
                                 "upgrade hwid", c->p->label, (long long) *ret, (long long) SCHEMA_VERSION);
        return 0;
}

static int migrate_run(pg_slot *c, void *userdata) {
        char what[64];
        int64_t v;
        int r;

        (void) userdata;
        if ((r = pg_exec(c, NULL, "lock the schema", "SELECT pg_advisory_xact_lock(" PG_MIGRATE_LOCK ")", NULL)) < 0 ||
            (r = pg_exec(c, NULL, "create the meta table",
                         "CREATE TABLE IF NOT EXISTS meta (key text PRIMARY KEY, value bigint NOT NULL)", NULL)) < 0 ||
            (r = read_version(c, &v)) < 0)
                return r;
        for (; v < SCHEMA_VERSION; v++) {
                snprintf(what, sizeof(what), "migrate the schema to version %lld", (long long) v + 1);
                if ((r = pg_exec_script(c, what, migrations[v])) < 0 ||
                    (r = pg_exec(c, NULL, what,
                                 "INSERT INTO meta (key, value) VALUES ('schema_version', $1) "
                                 "ON CONFLICT (key) DO UPDATE SET value = excluded.value", "I", v + 1)) < 0)
                        return r;
        }
        return 0;
}

int pg_migrate(pg_store *p) {
        return pg_tx(p, migrate_run, NULL, "commit the schema migration");
}
