/* The store's schema and its migrations.
 *
 * meta.schema_version says which migrations a database has had; at open
 * the missing ones run in order, in one transaction, so a crash halfway
 * leaves the old version intact.  A database from a newer hwid is
 * refused rather than half-understood.  Migrations are append-only:
 * never edit one that has shipped, add the next.
 *
 * The database enforces what must hold even against a buggy or racing
 * caller: unique serials (primary key), upper-case hex serials, one
 * live certificate per identity (partial unique index, identities
 * compared without ASCII case), one live certificate per DNS name,
 * uses_left never below zero, status values from a closed set. */
#include <stdio.h>

#include "error.h"
#include "store-sqlite.h"

/* A column of lower-case hex digits whose length satisfies `len`, or NULL. */
#define HEX_CHECK(col, len) \
        " CHECK (" col " IS NULL OR (length(" col ") " len " AND " col " NOT GLOB '*[^0-9a-f]*'))"

static const char *const migrations[] = {
        /* 0 -> 1: the first schema. */
        "CREATE TABLE meta ("
        "  key TEXT PRIMARY KEY NOT NULL,"
        "  value INTEGER NOT NULL) STRICT;"
        "INSERT INTO meta (key, value) VALUES ('schema_version', 0), ('revocation_seq', 0);"

        "CREATE TABLE tokens ("
        "  id TEXT PRIMARY KEY NOT NULL CHECK (length(id) = 6),"
        "  secret_hash BLOB NOT NULL CHECK (length(secret_hash) = 32),"
        "  profile TEXT NOT NULL,"
        "  name_pattern TEXT,"
        "  description TEXT,"
        "  created_at INTEGER NOT NULL,"
        "  expires_at INTEGER NOT NULL,"
        "  uses_total INTEGER NOT NULL CHECK (uses_total >= 0),"
        "  uses_left INTEGER NOT NULL CHECK (uses_left >= 0),"
        "  revoked INTEGER NOT NULL DEFAULT 0 CHECK (revoked IN (0, 1))) STRICT;"

        "CREATE TABLE requests ("
        "  id TEXT PRIMARY KEY NOT NULL,"
        "  identity TEXT NOT NULL,"
        "  profile TEXT NOT NULL,"
        "  token_id TEXT NOT NULL REFERENCES tokens(id),"
        "  spki_sha256 TEXT NOT NULL,"
        "  csr_der BLOB NOT NULL,"
        "  status TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'denied', 'issued')),"
        "  reason TEXT,"
        "  serial TEXT,"
        "  created_at INTEGER NOT NULL,"
        "  updated_at INTEGER NOT NULL) STRICT;"
        "CREATE INDEX requests_status ON requests(status);"

        "CREATE TABLE certificates ("
        "  serial TEXT PRIMARY KEY NOT NULL"
        "    CHECK (length(serial) > 0 AND serial NOT GLOB '*[^0-9A-F]*'),"
        "  identity TEXT NOT NULL,"
        "  subject TEXT NOT NULL,"
        "  profile TEXT NOT NULL,"
        "  spki_sha256 TEXT NOT NULL,"
        "  der BLOB NOT NULL,"
        "  not_before INTEGER NOT NULL,"
        "  not_after INTEGER NOT NULL,"
        "  status TEXT NOT NULL CHECK (status IN ('valid', 'revoked', 'superseded')),"
        "  revoked_at INTEGER NOT NULL DEFAULT 0,"
        "  revocation_reason INTEGER NOT NULL DEFAULT 0,"
        "  request_id TEXT REFERENCES requests(id),"
        "  created_at INTEGER NOT NULL) STRICT;"
        /* Invariant 6, held by the database itself: concurrent commits
         * for one identity cannot both insert a 'valid' row. */
        "CREATE UNIQUE INDEX certificates_one_live ON certificates(identity) WHERE status = 'valid';"
        "CREATE INDEX certificates_identity ON certificates(identity, status);"
        "CREATE INDEX certificates_status_not_after ON certificates(status, not_after);"
        /* The CRL walk: revoked rows in serial order without a sort and
         * without touching the table (covering). */
        "CREATE INDEX certificates_revoked"
        "  ON certificates(serial, not_after, revoked_at, revocation_reason) WHERE status = 'revoked';"

        "CREATE TABLE audit ("
        "  id INTEGER PRIMARY KEY AUTOINCREMENT,"
        "  at INTEGER NOT NULL,"
        "  actor TEXT NOT NULL,"
        "  action TEXT NOT NULL,"
        "  target TEXT,"
        "  outcome TEXT NOT NULL,"
        "  reason TEXT,"
        "  token_id TEXT) STRICT;"
        "CREATE INDEX audit_at ON audit(at);",

        /* 1 -> 2: names compared canonically.
         *
         * An identity (a certificate's CN) compares without regard to
         * ASCII case: the column itself gets NOCASE, so that every
         * comparison and index on it -- one live certificate per
         * identity included -- is case-insensitive, whoever writes the
         * query.  SQLite cannot change a column's collation in place: the
         * table is rebuilt.  Live certificates whose identities differ
         * only in case break the new rule: the newest stays live, the
         * others become superseded (valid to relying parties until they
         * expire, but no longer the identity's; they cannot renew).
         * The copy names every column the table has at this point: a
         * later migration that changes certificates (or points a foreign
         * key at it) must come after this one. */
        "CREATE TABLE certificates_v2 ("
        "  serial TEXT PRIMARY KEY NOT NULL"
        "    CHECK (length(serial) > 0 AND serial NOT GLOB '*[^0-9A-F]*'),"
        "  identity TEXT NOT NULL COLLATE NOCASE,"
        "  subject TEXT NOT NULL,"
        "  profile TEXT NOT NULL,"
        "  spki_sha256 TEXT NOT NULL,"
        "  der BLOB NOT NULL,"
        "  not_before INTEGER NOT NULL,"
        "  not_after INTEGER NOT NULL,"
        "  status TEXT NOT NULL CHECK (status IN ('valid', 'revoked', 'superseded')),"
        "  revoked_at INTEGER NOT NULL DEFAULT 0,"
        "  revocation_reason INTEGER NOT NULL DEFAULT 0,"
        "  request_id TEXT REFERENCES requests(id),"
        "  created_at INTEGER NOT NULL) STRICT;"
        "INSERT INTO certificates_v2 (serial, identity, subject, profile, spki_sha256, der, not_before, not_after,"
        "  status, revoked_at, revocation_reason, request_id, created_at)"
        "  SELECT serial, identity, subject, profile, spki_sha256, der, not_before, not_after,"
        "  status, revoked_at, revocation_reason, request_id, created_at FROM certificates;"
        "DROP TABLE certificates;"
        "ALTER TABLE certificates_v2 RENAME TO certificates;"
        "UPDATE certificates SET status = 'superseded' WHERE status = 'valid' AND EXISTS ("
        "  SELECT 1 FROM certificates AS newer WHERE newer.status = 'valid'"
        "  AND newer.identity = certificates.identity"
        "  AND (newer.created_at, newer.serial) > (certificates.created_at, certificates.serial));"
        "CREATE UNIQUE INDEX certificates_one_live ON certificates(identity) WHERE status = 'valid';"
        "CREATE INDEX certificates_identity ON certificates(identity, status);"
        "CREATE INDEX certificates_status_not_after ON certificates(status, not_after);"
        "CREATE INDEX certificates_revoked"
        "  ON certificates(serial, not_after, revoked_at, revocation_reason) WHERE status = 'revoked';"

        /* A DNS name (lower case, no trailing dot) belongs to at most one
         * live certificate, hence to at most one identity.  A partial index
         * cannot look at another table, so each row carries `live`, which
         * the triggers keep equal to "its certificate is 'valid'" whatever
         * statement changes the certificate.  Certificates stored before
         * this version have no rows: hwidd records their names at start
         * (store_cert_dns_backfill()), noted in meta.dns_backfilled. */
        "CREATE TABLE certificate_dns ("
        "  serial TEXT NOT NULL REFERENCES certificates(serial),"
        "  name TEXT NOT NULL"
        "    CHECK (length(name) BETWEEN 1 AND 253 AND name = lower(name) AND substr(name, -1) <> '.'),"
        "  live INTEGER NOT NULL CHECK (live IN (0, 1)),"
        "  PRIMARY KEY (serial, name)) STRICT, WITHOUT ROWID;"
        "CREATE UNIQUE INDEX certificate_dns_one_live ON certificate_dns(name) WHERE live = 1;"
        "CREATE TRIGGER certificate_dns_live_at_insert BEFORE INSERT ON certificate_dns"
        "  WHEN NEW.live IS NOT coalesce((SELECT status = 'valid' FROM certificates WHERE serial = NEW.serial), 0)"
        "  BEGIN SELECT RAISE(ABORT, 'certificate_dns.live must say whether its certificate is valid'); END;"
        "CREATE TRIGGER certificate_dns_live_follows AFTER UPDATE OF status ON certificates"
        "  BEGIN UPDATE certificate_dns SET live = (NEW.status = 'valid') WHERE serial = NEW.serial; END;"
        "CREATE TRIGGER certificate_dns_no_live_update BEFORE UPDATE OF live ON certificate_dns"
        "  WHEN NEW.live IS NOT coalesce((SELECT status = 'valid' FROM certificates WHERE serial = NEW.serial), 0)"
        "  BEGIN SELECT RAISE(ABORT, 'certificate_dns.live must say whether its certificate is valid'); END;"
        "INSERT INTO meta (key, value) VALUES ('dns_backfilled', (SELECT count(*) = 0 FROM certificates));",

        /* 2 -> 3: the role a certificate was issued with (its profile's),
         * the only source of what its holder may do.  Rows from before
         * are nodes.  A lower-case name, so that new roles need no new
         * constraint; hwidd refuses a name it does not know. */
        "ALTER TABLE certificates ADD COLUMN role TEXT NOT NULL DEFAULT 'node'"
        "  CHECK (length(role) BETWEEN 1 AND 15 AND role NOT GLOB '*[^a-z]*');"
        /* Keys of certificates revoked for keyCompromise: never certified
         * again.  A table of its own, so that the block outlives any
         * pruning of old certificate rows. */
        "CREATE TABLE blocked_keys ("
        "  spki_sha256 TEXT PRIMARY KEY NOT NULL CHECK (length(spki_sha256) = 64),"
        "  serial TEXT NOT NULL,"
        "  blocked_at INTEGER NOT NULL) STRICT;"
        /* Every certificate of a key, for revoking them all at once. */
        "CREATE INDEX certificates_spki ON certificates(spki_sha256);",

        /* 3 -> 4: which token enrolled a certificate, so that the same
         * enrollment repeated (its answer lost) gets the same certificate. */
        "ALTER TABLE certificates ADD COLUMN token_id TEXT REFERENCES tokens(id);",

        /* 4 -> 5: a provisioner's scope (the token profiles and name
         * patterns it may create tokens for), decided by its profile at
         * issuance and recorded with the certificate like its role: JSON,
         * NULL for every other role.  (The JSON functions cannot check
         * it: hwid's connections do not trust the schema, and they are
         * not innocuous.  hwidd refuses a scope it cannot read.) */
        ("ALTER TABLE certificates ADD COLUMN scope TEXT"
         "  CHECK (scope IS NULL OR (length(scope) BETWEEN 2 AND 16384 AND substr(scope, 1, 1) = '{'));"),

        /* 5 -> 6: the audit log becomes a hash chain (store.h says how
         * each hash is made).  Each record keeps the hash of the one
         * before it and its own; audit_chain keeps the newest record's
         * (head) and the last pruned one's (anchor).  Records from before
         * are chained once when the database is first opened by this
         * version (sqlite_audit_backfill(), noted in meta.audit_chained).
         * meta.ready_probe is what /readyz writes to prove the store takes
         * writes. */
        "ALTER TABLE audit ADD COLUMN prev_hash BLOB;"
        "ALTER TABLE audit ADD COLUMN hash BLOB;"
        "CREATE TABLE audit_chain ("
        "  role TEXT PRIMARY KEY NOT NULL CHECK (role IN ('anchor', 'head')),"
        "  id INTEGER NOT NULL,"
        "  at INTEGER NOT NULL,"
        "  hash BLOB NOT NULL CHECK (length(hash) = 32)) STRICT;"
        "INSERT INTO meta (key, value) VALUES ('audit_chained', 0), ('ready_probe', 0);",

        /* 6 -> 7: TPM attestation (docs/ATTESTATION.md).
         *
         * What a certificate's key proved, recorded with it (and with a
         * request waiting for approval): the EK certificate's and the EK
         * public key's SHA-256 and the AK's name, lower-case hex, all NULL
         * when the key was not attested. */
        "ALTER TABLE certificates ADD COLUMN ek_cert_sha256 TEXT" HEX_CHECK("ek_cert_sha256", "= 64") ";"
        "ALTER TABLE certificates ADD COLUMN ek_pub_sha256 TEXT" HEX_CHECK("ek_pub_sha256", "= 64") ";"
        "ALTER TABLE certificates ADD COLUMN ak_name TEXT" HEX_CHECK("ak_name", "BETWEEN 4 AND 132") ";"
        "CREATE INDEX certificates_ek ON certificates(ek_pub_sha256) WHERE ek_pub_sha256 IS NOT NULL;"
        "ALTER TABLE requests ADD COLUMN ek_cert_sha256 TEXT" HEX_CHECK("ek_cert_sha256", "= 64") ";"
        "ALTER TABLE requests ADD COLUMN ek_pub_sha256 TEXT" HEX_CHECK("ek_pub_sha256", "= 64") ";"
        "ALTER TABLE requests ADD COLUMN ak_name TEXT" HEX_CHECK("ak_name", "BETWEEN 4 AND 132") ";"
        /* Challenges sent and not yet answered: a row is deleted by the
         * first answer (or once expired), so each is answered once, by
         * whichever hwidd sharing the database gets it.  The secret itself
         * is never stored: only its hash. */
        "CREATE TABLE attest_challenges ("
        "  id TEXT PRIMARY KEY NOT NULL CHECK (length(id) = 32 AND id NOT GLOB '*[^0-9a-f]*'),"
        "  secret_sha256 BLOB NOT NULL CHECK (length(secret_sha256) = 32),"
        "  nonce BLOB NOT NULL CHECK (length(nonce) = 32),"
        "  ak_public BLOB NOT NULL CHECK (length(ak_public) BETWEEN 1 AND 1024),"
        "  ek_cert BLOB NOT NULL CHECK (length(ek_cert) BETWEEN 1 AND 4096),"
        "  expires_at INTEGER NOT NULL,"
        "  created_at INTEGER NOT NULL) STRICT;"
        "CREATE INDEX attest_challenges_expires ON attest_challenges(expires_at);"
        /* The EK allowlist: a TPM (by its EK certificate or public key)
         * that may enroll without a token, under one name.  A name, an EK
         * certificate and an EK key are each listed once at most. */
        "CREATE TABLE ek_allowlist ("
        "  ek_cert_sha256 TEXT UNIQUE" HEX_CHECK("ek_cert_sha256", "= 64") ","
        "  ek_pub_sha256 TEXT UNIQUE" HEX_CHECK("ek_pub_sha256", "= 64") ","
        "  identity TEXT NOT NULL UNIQUE COLLATE NOCASE CHECK (length(identity) BETWEEN 1 AND 64),"
        "  profile TEXT NOT NULL CHECK (length(profile) BETWEEN 1 AND 64),"
        "  added_at INTEGER NOT NULL,"
        "  CHECK (ek_cert_sha256 IS NOT NULL OR ek_pub_sha256 IS NOT NULL)) STRICT;",
        /* 7 -> 8: an EST client asks again with the same token and key
         * (RFC 7030 §4.2.3): its request is found without reading them all. */
        "CREATE INDEX requests_token_key ON requests(token_id, spki_sha256);",
        /* 8 -> 9: signed checkpoints of the audit chain (store.h): which
         * record the head had reached, or the anchor a pruning left, under
         * the CA key's signature.  Pruning removes those it makes stale. */
        "CREATE TABLE audit_checkpoints ("
        "  seq INTEGER PRIMARY KEY,"
        "  kind TEXT NOT NULL CHECK (kind IN ('H', 'P')),"
        "  id INTEGER NOT NULL,"
        "  record_at INTEGER NOT NULL,"
        "  hash BLOB NOT NULL CHECK (length(hash) = 32),"
        "  at INTEGER NOT NULL,"
        "  sig BLOB NOT NULL CHECK (length(sig) BETWEEN 1 AND 512)) STRICT;",
        /* 9 -> 10: who asked for each attestation challenge (the token,
         * certificate or EK it came with), so that each requester's
         * challenges are bounded on their own (attestation.max_pending_per_requester). */
        "ALTER TABLE attest_challenges ADD COLUMN requester TEXT NOT NULL DEFAULT ''"
        "  CHECK (length(requester) <= 80);"
        "CREATE INDEX attest_challenges_requester ON attest_challenges(requester, created_at);",
        /* 10 -> 11: derived tokens (ca/token.h): a token made with the CA's
         * token key keeps the nonce its secret was derived from, and no
         * hash (nothing from which its secret, or what CMP checks its MAC
         * with, can be computed); tokens from before keep their hash until
         * they expire.  secret_hash becomes nullable the one way SQLite
         * allows: a new column, the old one copied and dropped (its own
         * CHECK goes with it; the new nonce column's CHECK says that a
         * token holds exactly one of the two). */
        "ALTER TABLE tokens RENAME COLUMN secret_hash TO secret_hash_v10;"
        "ALTER TABLE tokens ADD COLUMN secret_hash BLOB"
        "  CHECK (secret_hash IS NULL OR length(secret_hash) = 32);"
        "UPDATE tokens SET secret_hash = secret_hash_v10;"
        "ALTER TABLE tokens DROP COLUMN secret_hash_v10;"
        "ALTER TABLE tokens ADD COLUMN nonce BLOB"
        "  CHECK ((nonce IS NULL) <> (secret_hash IS NULL) AND (nonce IS NULL OR length(nonce) = 32));",
        /* 11 -> 12: an identity bound to the TPM that attested it (store.h,
         * docs/ATTESTATION.md): one row per identity (compared without
         * ASCII case), written by the issuance of its first certificate
         * recording an attestation, removed only by an admin's release.
         * Certificates recorded with an attestation before this version
         * bind their identity to the TPM of its newest such certificate. */
        "CREATE TABLE identity_bindings ("
        "  identity TEXT PRIMARY KEY NOT NULL COLLATE NOCASE CHECK (length(identity) >= 1),"
        "  ek_pub_sha256 TEXT NOT NULL" HEX_CHECK("ek_pub_sha256", "= 64") ","
        "  ek_cert_sha256 TEXT" HEX_CHECK("ek_cert_sha256", "= 64") ","
        "  serial TEXT NOT NULL,"
        "  bound_at INTEGER NOT NULL) STRICT;"
        "INSERT INTO identity_bindings (identity, ek_pub_sha256, ek_cert_sha256, serial, bound_at)"
        "  SELECT identity, ek_pub_sha256, ek_cert_sha256, serial, created_at FROM certificates AS c"
        "  WHERE ek_pub_sha256 IS NOT NULL AND NOT EXISTS (SELECT 1 FROM certificates AS newer"
        "    WHERE newer.identity = c.identity AND newer.ek_pub_sha256 IS NOT NULL"
        "    AND (newer.created_at, newer.serial) > (c.created_at, c.serial));",
        /* 12 -> 13: CA generations (store.h, docs/OPERATIONS.md "Rolling
         * the CA over"): the table, empty until the first rollover records
         * generation 1 with the next; at most one active and one prepared
         * generation.  Each certificate records the generation that issued
         * it (those from before: 1, the only one there was), for its
         * generation's CRL and the count of what a generation still has. */
        "CREATE TABLE ca_generations ("
        "  generation INTEGER PRIMARY KEY NOT NULL CHECK (generation BETWEEN 1 AND 1000),"
        "  state TEXT NOT NULL CHECK (state IN ('prepared', 'active', 'previous', 'retired')),"
        "  subject TEXT NOT NULL CHECK (length(subject) >= 1),"
        "  cert BLOB CHECK (cert IS NOT NULL OR state = 'prepared'),"
        "  chain TEXT,"
        "  key_uri TEXT CHECK ((key_uri IS NULL) = (generation = 1)),"
        "  new_with_old BLOB,"
        "  old_with_new BLOB,"
        "  prepared_at INTEGER NOT NULL,"
        "  activated_at INTEGER,"
        "  retired_at INTEGER) STRICT;"
        "CREATE UNIQUE INDEX ca_generations_one_active ON ca_generations(state) WHERE state = 'active';"
        "CREATE UNIQUE INDEX ca_generations_one_prepared ON ca_generations(state) WHERE state = 'prepared';"
        "INSERT INTO meta (key, value) VALUES ('ca_generation_seq', 0);"
        "ALTER TABLE certificates ADD COLUMN generation INTEGER NOT NULL DEFAULT 1 CHECK (generation >= 1);"
        "CREATE INDEX certificates_generation ON certificates(generation, not_after);"
        "CREATE INDEX certificates_revoked_generation"
        "  ON certificates(generation, serial, not_after, revoked_at, revocation_reason) WHERE status = 'revoked';",
};

#define SCHEMA_VERSION ((int64_t) ELEMENTSOF(migrations))

int64_t sqlite_schema_version(void) {
        return SCHEMA_VERSION;
}

/* Whether there is a meta table, and whether anything else is there. */
static int probe(sqlite_store *s, bool *ret_meta, bool *ret_other) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        static const char sql[] =
                "SELECT (SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = 'meta'),"
                "       (SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name NOT LIKE 'sqlite_%')";
        int r;

        if (sqlite3_prepare_v2(s->db, sql, -1, &st, NULL) != SQLITE_OK)
                return sqlite_sql_fail(s, "read the schema");
        r = sqlite_step(s, st, "read the schema");
        if (r <= 0)
                return r < 0 ? r : sqlite_sql_fail(s, "read the schema");
        *ret_meta = sqlite3_column_int64(st, 0) > 0;
        *ret_other = sqlite3_column_int64(st, 1) > (*ret_meta ? 1 : 0);
        return 0;
}

static int read_version(sqlite_store *s, int64_t *ret) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        bool meta = false, other = false;
        int r = probe(s, &meta, &other);

        if (r < 0)
                return r;
        /* Tables but no meta: some other program's database; leave it be. */
        if (!meta && other)
                return hwid_fail(HWID_E_STORE, "%s is not an hwid database (no meta table)", s->path);
        if (!meta) {
                *ret = 0;
                return 0;
        }
        if (sqlite3_prepare_v2(s->db, "SELECT value FROM meta WHERE key = 'schema_version'", -1, &st,
                               NULL) != SQLITE_OK)
                return sqlite_sql_fail(s, "read the schema version");
        r = sqlite_step(s, st, "read the schema version");
        if (r < 0)
                return r;
        if (r == 0)
                return hwid_fail(HWID_E_STORE, "%s has no schema version in its meta table", s->path);
        *ret = sqlite3_column_int64(st, 0);
        return 0;
}

static int check_known(sqlite_store *s, int64_t version) {
        if (version > SCHEMA_VERSION)
                return hwid_fail(HWID_E_STORE,
                                 "database %s has schema version %lld, newer than the %lld this hwid knows: "
                                 "upgrade hwid (or restore a backup made for this version)",
                                 s->path, (long long) version, (long long) SCHEMA_VERSION);
        if (version < 0)
                return hwid_fail(HWID_E_STORE, "database %s has an invalid schema version %lld", s->path,
                                 (long long) version);
        return 0;
}

static int apply(sqlite_store *s, int64_t from) {
        _cleanup_(sqlite3_finalizep) sqlite3_stmt *st = NULL;
        char what[64];
        int r;

        snprintf(what, sizeof(what), "migrate the schema to version %lld", (long long) from + 1);
        if (sqlite3_exec(s->db, migrations[from], NULL, NULL, NULL) != SQLITE_OK)
                return sqlite_sql_fail(s, what);
        if (sqlite3_prepare_v2(s->db, "UPDATE meta SET value = ?1 WHERE key = 'schema_version'", -1, &st,
                               NULL) != SQLITE_OK)
                return sqlite_sql_fail(s, what);
        r = sqlite_bind(s, st, "I", from + 1);
        if (r >= 0)
                r = sqlite_step(s, st, what);
        return r < 0 ? r : 0;
}

int sqlite_migrate(sqlite_store *s) {
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        int64_t v;
        int r;

        /* The common case, an up-to-date database, needs no write lock. */
        r = read_version(s, &v);
        if (r >= 0)
                r = check_known(s, v);
        if (r < 0 || v == SCHEMA_VERSION)
                return r;
        r = sqlite_enter(s, true, &g);
        if (r < 0)
                return r;
        /* Again under the write lock: another opener may have migrated. */
        r = read_version(s, &v);
        if (r >= 0)
                r = check_known(s, v);
        for (; r >= 0 && v < SCHEMA_VERSION; v++)
                r = apply(s, v);
        if (r < 0)
                return r;
        return sqlite_commit(s, "commit the schema migration");
}
