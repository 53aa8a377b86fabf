/* The store: everything hwidd must not lose.  A narrow interface so that a
 * PostgreSQL implementation (several hwidd replicas on one database) can
 * join SQLite without touching the layers above.
 *
 * Every write is one transaction, committed durably before the function
 * returns 0.  Functions return 0 or -hwid_err: -HWID_E_STORE when the
 * database cannot be used (the caller answers 503 and returns nothing),
 * -HWID_E_NOT_FOUND, -HWID_E_CONFLICT (identity has a live certificate),
 * -HWID_E_TOKEN_INVALID (token unknown, expired, revoked or used up). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <openssl/types.h>

#include "cleanup.h"

typedef struct store store;
typedef struct store_binding store_binding; /* below: identities bound to a TPM */

/* Times are Unix seconds (UTC). */

typedef enum store_token_state {
        TOKEN_ACTIVE,
        TOKEN_EXPIRED,
        TOKEN_USED_UP,
        TOKEN_REVOKED,
} store_token_state;

#define STORE_TOKEN_NONCE_LEN 32

/* A token's secret is never stored.  A derived token (made since the CA
 * has a token key, docs/CONFIG.md) keeps only the random nonce its
 * secret was derived from with that key, which never leaves the HSM/TPM
 * (ca/token.h); a token from before keeps the SHA-256 of its secret until
 * it expires. */
typedef struct store_token {
        char id[7];               /* 6 chars [a-z0-9] */
        bool derived;             /* the secret is derived from nonce; else legacy: secret_hash */
        uint8_t nonce[STORE_TOKEN_NONCE_LEN]; /* derived: the nonce; legacy: zeros */
        uint8_t secret_hash[32];  /* legacy: SHA-256 of the secret; derived: zeros */
        char *profile;
        char *name_pattern;       /* NULL: any name the profile allows */
        char *description;        /* NULL allowed */
        int64_t created_at;
        int64_t expires_at;
        int uses_total;
        int uses_left;
        bool revoked;
} store_token;

/* What TPM attestation proved of a certificate's key (docs/ATTESTATION.md):
 * lower-case hex, all three empty when the key was not attested. */
typedef struct store_attestation {
        char ek_cert_sha256[65]; /* SHA-256 of the EK certificate (DER) */
        char ek_pub_sha256[65];  /* SHA-256 of the EK's SubjectPublicKeyInfo (DER): the TPM itself */
        char ak_name[133];       /* TPM name of the attestation key (nameAlg + digest) */
} store_attestation;

/* Whether a holds an attestation (its EK public key hash is set). */
static inline bool store_attested(const store_attestation *a) {
        return a && a->ek_pub_sha256[0] != '\0';
}

typedef enum store_request_status {
        REQUEST_PENDING,
        REQUEST_APPROVED, /* approved by an admin, not yet signed */
        REQUEST_DENIED,
        REQUEST_ISSUED,
} store_request_status;

/* Request ids are the device's poll capability (whoever has one gets the
 * certificate): messages, logs and audit records show only their first 8
 * characters, with this format.  `hwid request list` on the CA host shows
 * them whole, for the admin to approve. */
#define REQUEST_ID_FMT "%.8s..."

typedef struct store_request {
        char id[33];             /* 128-bit random, hex: also the device's poll capability */
        char *identity;          /* requested CN */
        char *profile;
        char token_id[7];
        char spki_sha256[65];    /* what the admin compares with the device's screen */
        uint8_t *csr_der;
        size_t csr_der_len;
        store_request_status status;
        char *reason;            /* deny reason, NULL otherwise */
        char *serial;            /* hex serial once issued */
        int64_t created_at;
        int64_t updated_at;
        store_attestation attestation; /* what the key's attestation proved, if it had one */
} store_request;

typedef enum store_cert_status {
        CERT_VALID,
        CERT_REVOKED,
        CERT_SUPERSEDED, /* replaced by a renewal */
} store_cert_status;

typedef struct store_cert {
        char *serial;            /* upper-case hex, no leading zeros stripped: as in the cert */
        char *identity;          /* the CN: one live certificate per identity */
        char *subject;           /* RFC 2253 */
        char *profile;
        char spki_sha256[65];
        uint8_t *der;
        size_t der_len;
        int64_t not_before;
        int64_t not_after;
        store_cert_status status;
        int64_t revoked_at;      /* 0 unless revoked */
        int revocation_reason;   /* RFC 5280 CRLReason code */
        char *request_id;        /* NULL if issued without a request record */
        char token_id[7];        /* the token that enrolled it directly, "" otherwise */
        int64_t created_at;
        /* What the holder may do ("node", "admin", ...: policy_cert_role_name()),
         * decided by the profile at issuance.  Empty when committing: "node". */
        char role[16];
        /* A provisioner's scope as decided by its profile at issuance:
         * JSON {"profiles": [...], "name_patterns": [...]} (cert-scope.h);
         * NULL for every other role. */
        char *scope;
        /* The TPM attestation the key passed, recorded with the certificate
         * when its profile's attestation is optional or required. */
        store_attestation attestation;
        /* The CA generation that issued it (below: CA generations); 0 when
         * committing means 1, the CA hwid ca init made. */
        int generation;
} store_cert;

typedef struct store_audit {
        int64_t at;
        const char *actor;   /* "token:abc123", "node:edge-1", "admin:root", "anonymous" */
        const char *action;  /* "enroll", "renew", "revoke", "token.create", ... */
        const char *target;  /* identity, serial, token id, request id */
        const char *outcome; /* "allow", "deny", "would-deny", "error" */
        const char *reason;  /* NULL allowed; never a secret */
        const char *token_id; /* NULL allowed */
        /* Set when a record is read back or handed to the audit sink;
         * ignored when appending (the store chains what it appends). */
        int64_t id;               /* ascending in the order records were appended */
        const uint8_t *prev_hash; /* STORE_AUDIT_HASH_LEN bytes; NULL if not chained */
        const uint8_t *hash;
} store_audit;

/* ---- the audit hash chain ----
 *
 * Every audit record carries hash = SHA-256(E), where E is, byte by byte:
 *
 *   "hwid-audit-v1" and one 0x00 byte (14 bytes: the format's name)
 *   prev_hash       32 bytes: the hash of the record appended before it,
 *                   or 32 zero bytes for the first record ever
 *   at              8 bytes: the record's time (Unix seconds) as stored,
 *                   two's complement, big-endian
 *   actor, action, target, outcome, reason, token_id, in this order, each
 *                   as 4 bytes big-endian length + the UTF-8 bytes as
 *                   stored (no terminator), or the 4 bytes FF FF FF FF
 *                   for NULL (the empty string is length 0)
 *
 * The record's id (its storage order) is not hashed: the order is held by
 * each record's prev_hash.  Every store keeps per record: id, the fields,
 * prev_hash and hash; and two chain ends beside the records:
 *   head    id, at and hash of the newest record appended (so that the
 *           newest records cannot be deleted unseen);
 *   anchor  id, at and hash of the newest record retention pruning has
 *           deleted (the first remaining record's prev_hash equals it).
 * Appending reads the head, hashes, inserts and moves the head in the
 * same transaction as the rest of the write; pruning deletes only the
 * oldest records in id order, after checking their chain, and moves the
 * anchor in the same transaction.  A backend implements the same bytes
 * by calling store_audit_hash(). */
#define STORE_AUDIT_HASH_LEN 32

/* hash = SHA-256 of the encoding above, for a with prev (NULL: zeros). */
int store_audit_hash(const uint8_t *prev, const store_audit *a, uint8_t ret[STORE_AUDIT_HASH_LEN]);

typedef struct store_audit_link {
        bool set;
        int64_t id;
        int64_t at;
        /* All zeros when unset: what a first record's prev_hash stores.  A
         * statement binds it as it is, never a temporary in its place (a
         * compound literal in an if's branch dies before the step reads
         * it: SQLite's binds are SQLITE_STATIC). */
        uint8_t hash[STORE_AUDIT_HASH_LEN];
} store_audit_link;

/* ---- signed checkpoints of the chain ----
 *
 * The head and the anchor are only rows: whoever can write the database
 * can move them.  A checkpoint says, under the CA key's signature, which
 * record (id, time, hash) the chain had reached at a time: of the head
 * (hwidd, every audit.checkpoint_records records or checkpoint_interval,
 * and when it stops), or of the anchor a pruning left (made and stored in
 * the pruning's own transaction).  The signature covers, byte by byte
 * (docs/OPERATIONS.md):
 *
 *   "hwid-audit-checkpoint-v1" 0x00     25 bytes
 *   kind                                 1 byte: 'H' the head, 'P' a pruning's anchor
 *   id, record_at                        8 bytes each, signed, big-endian
 *   hash                                 32 bytes: that record's
 *   at                                   8 bytes, signed, big-endian: when it was made
 *
 * signed with SHA-256 (ECDSA: DER; RSA: PKCS#1 v1.5).  The first byte is
 * never DER's 0x30, so no checkpoint reads as a certificate or a CRL. */
#define STORE_CHECKPOINT_HEAD 'H'
#define STORE_CHECKPOINT_PRUNE 'P'
/* Each head checkpoint is noted in the chain itself: right after storing
 * it, hwidd appends a record by actor "hwidd", action "audit.checkpoint",
 * target "record ID" (the record it signed), and signs that note in turn
 * (a checkpoint without a note of its own).  A checkpoint deleted while
 * its note stands is caught by store_audit_verify(). */
#define STORE_CHECKPOINT_NOTE_ACTOR "hwidd"
#define STORE_CHECKPOINT_NOTE_ACTION "audit.checkpoint"
#define STORE_CHECKPOINT_MSG_LEN (25 + 1 + 8 + 8 + STORE_AUDIT_HASH_LEN + 8)
#define STORE_CHECKPOINT_SIG_MAX 512

typedef struct store_audit_checkpoint {
        char kind;
        int64_t id;
        int64_t record_at;
        uint8_t hash[STORE_AUDIT_HASH_LEN];
        int64_t at;
        uint8_t sig[STORE_CHECKPOINT_SIG_MAX];
        size_t sig_len;
} store_audit_checkpoint;

/* The bytes the signature covers. */
void store_audit_checkpoint_message(const store_audit_checkpoint *cp, uint8_t ret[STORE_CHECKPOINT_MSG_LEN]);
/* Signs cp (fills sig and sig_len), or -hwid_err: hwidd's signer uses the
 * CA key. */
typedef int (*store_audit_sign_fn)(store_audit_checkpoint *cp, void *userdata);
typedef int (*store_audit_checkpoint_fn)(const store_audit_checkpoint *cp, void *userdata);

/* Opens (creating if needed) and migrates the schema.  A path: SQLite,
 * WAL mode, durable commits (synchronous=FULL), busy timeout so concurrent
 * writers wait.  A postgresql:// URI: PostgreSQL (store-pg.h), shared by
 * several hwidd replicas (docs/HA.md). */
int store_open(const char *path, store **ret);
/* The same, keeping up to connections connections to a PostgreSQL
 * database (0: its default, store-pg.h); a SQLite file has one. */
int store_open_pooled(const char *path, unsigned connections, store **ret);
void store_free(store *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(store *, store_free)
/* Cheap liveness probe for /healthz. */
int store_ping(store *s);
/* Readiness (/readyz): commits a small write (the probe's time, in the
 * store's own metadata), so that a full disk, a read-only file system or a
 * database that refuses writers shows. */
int store_probe_write(store *s, int64_t now);

/* Gauges for metrics. */
typedef struct store_stats {
        uint64_t live_certificates; /* VALID and not expired at now */
        uint64_t pending_requests;
} store_stats;
int store_stats_get(store *s, int64_t now, store_stats *ret);

/* A consistent copy of the whole store at path, taken while others keep
 * writing, and checked (the copy's integrity) before this returns; path
 * must not exist.  A store that a file copy cannot capture (PostgreSQL)
 * answers -HWID_E_CONFIG naming the tool to use instead. */
int store_backup(store *s, const char *path);
/* The database's own consistency check (pages, indexes, constraints). */
int store_integrity_check(store *s);
/* Who uses a database file: hwidd holds a shared claim while it runs, a
 * restore an exclusive one, so that neither replaces the database under
 * the other (a lock on "<database>.lock"; -HWID_E_CONFLICT naming who
 * holds it).  *ret_fd holds the claim until closed; -1 for a database
 * that is not a file (a URI or conninfo string: nothing is claimed). */
int store_claim(const char *database, bool exclusive, int *ret_fd);

/* Copies the SQLite store at path into the PostgreSQL database at uri,
 * which must hold no hwid data yet: every table, in one transaction on
 * the PostgreSQL side, committed only if each table then holds as many
 * rows as in SQLite (-HWID_E_STORE naming the table otherwise), and the
 * audit chain verifies there.  summary: "tokens 3, requests 1, ...". */
int store_copy_sqlite_to_pg(const char *path, const char *uri, char *summary, size_t size);

/* ---- tokens ---- */
/* Stores the n tokens t[0..n-1] in one transaction: every one of them, or
 * none (an id already taken: -HWID_E_EXISTS), so that a batch that fails
 * leaves no token behind whose secret nobody was given. */
int store_token_insert(store *s, const store_token *t, size_t n);
int store_token_get(store *s, const char *id, store_token *ret);
int store_token_list(store *s, store_token **ret, size_t *ret_n);
int store_token_revoke(store *s, const char *id);
/* State of a token at time now (does not change anything). */
store_token_state store_token_state_at(const store_token *t, int64_t now);
/* Why a token in state st cannot be used: -HWID_E_TOKEN_INVALID naming
 * id and the reason, or 0 when it is active.  One wording for the check
 * at authentication and for the store's own when it takes a use. */
int store_token_refusal(store_token_state st, const char *id);
void store_token_clear(store_token *t);

/* ---- requests (manual approval) ---- */
/* Consumes one use of token_id (which must be active at now) and records
 * the pending request, in one transaction. */
int store_request_create(store *s, const store_request *r, int64_t now);
int store_request_get(store *s, const char *id, store_request *ret);
/* The latest request made with token_id for the key spki_sha256 (an EST
 * client asking again, RFC 7030 §4.2.3); -HWID_E_NOT_FOUND if none. */
int store_request_find(store *s, const char *token_id, const char *spki_sha256, store_request *ret);
int store_request_list(store *s, bool pending_only, store_request **ret, size_t *ret_n);
/* PENDING -> APPROVED or DENIED (reason kept); -HWID_E_CONFLICT if not pending. */
int store_request_decide(store *s, const char *id, bool approve, const char *reason, int64_t now);
void store_request_clear(store_request *r);

/* ---- certificates ---- */

/* How a certificate came to be; store_cert_commit() does all of it in one
 * transaction, or nothing. */
typedef struct store_issue {
        const store_cert *cert;
        /* Enrollment with a token: consume one use (must be active at now);
         * the certificate records the token. */
        const char *consume_token_id;
        /* Issuance of an approved request: APPROVED -> ISSUED with serial. */
        const char *request_id;
        /* Renewal: this serial (must be VALID) becomes SUPERSEDED. */
        const char *supersedes_serial;
        /* Re-enrollment allowed by policy: the identity's live certificate
         * (if any) becomes SUPERSEDED instead of answering -HWID_E_CONFLICT. */
        bool replace_live;
        const store_audit *audit; /* written in the same transaction */
        /* The certificate's DNS names (its subjectAltName): none may be
         * held by another live certificate, compared canonically (ASCII
         * lower case, no trailing dot) -- -HWID_E_CONFLICT otherwise,
         * enforced by the database. */
        const char *const *dns_names;
        size_t n_dns_names;
} store_issue;

/* Commits an issued certificate.  Fails with -HWID_E_CONFLICT if the
 * identity already has a live (VALID, not expired at now) certificate
 * other than supersedes_serial, or one of its DNS names belongs to
 * another live certificate — enforced by the database, so concurrent
 * callers cannot both succeed.
 *
 * Identities compare without regard to ASCII case everywhere in the
 * store ("edge-CAM1" is "edge-cam1"); a certificate keeps its CN as
 * issued. */
int store_cert_commit(store *s, const store_issue *in, int64_t now);
int store_cert_get(store *s, const char *serial, store_cert *ret);
/* The identity's live certificate at now; -HWID_E_NOT_FOUND if none. */
int store_cert_live_for(store *s, const char *identity, int64_t now, store_cert *ret);
int store_cert_list(store *s, const char *identity /* NULL: all */, store_cert **ret, size_t *ret_n);
/* The identity whose live certificate (at now) holds DNS name `name`
 * (compared canonically); -HWID_E_NOT_FOUND if none. */
int store_dns_owner(store *s, const char *name, int64_t now, char **ret_identity);
/* Gives the DNS names of a certificate (DER): an array of strings, both
 * freed by the caller. */
typedef int (*store_dns_names_fn)(const void *der, size_t der_len, char ***ret_names, size_t *ret_n);
/* Records the DNS names of the live certificates stored before the store
 * kept them (a database from before schema 2), once per database; a name
 * two of them held stays with the older (*ret_skipped counts those, and
 * certificates names_of cannot read). */
int store_cert_dns_backfill(store *s, int64_t now, store_dns_names_fn names_of, size_t *ret_recorded,
                            size_t *ret_skipped);
/* VALID or SUPERSEDED -> REVOKED; -HWID_E_NOT_FOUND, -HWID_E_CONFLICT if
 * already revoked.  With reason 1 (keyCompromise) the certificate's key is
 * blocked: every unexpired certificate of it is revoked too, in the same
 * transaction, and store_cert_commit() refuses it from then on
 * (-HWID_E_KEY_BLOCKED). */
int store_cert_revoke(store *s, const char *serial, int reason, int64_t now, const store_audit *audit);
/* Every certificate of identity not revoked and not expired at now (the
 * live one and superseded generations) -> REVOKED, in one transaction, with
 * the key blocking of reason 1 as above; *ret_n: how many.  -HWID_E_NOT_FOUND
 * if there is none. */
int store_cert_revoke_identity(store *s, const char *identity, int reason, int64_t now, const store_audit *audit,
                               size_t *ret_n);
/* -HWID_E_KEY_BLOCKED (with the serial that blocked it) if a certificate
 * of this key (SPKI SHA-256, hex) was revoked for keyCompromise; 0 if not. */
int store_key_blocked(store *s, const char *spki_sha256);
/* Revoked certificates not yet expired at now, for the CRL of CA
 * generation `generation` (its own certificates only; 0: every
 * generation's). */
typedef int (*store_revoked_fn)(const char *serial, int64_t revoked_at, int reason, void *userdata);
int store_cert_foreach_revoked(store *s, int generation, int64_t now, store_revoked_fn fn, void *userdata);
/* Bumped on every revocation: hwidd regenerates the CRL when it changes. */
int store_revocation_seq(store *s, int64_t *ret);
/* The number of the next CRL (RFC 5280 cRLNumber), committed before it is
 * returned: greater than every number this store gave before, to any
 * hwidd sharing it, and at least now (above the time-based numbers of
 * earlier versions). */
int store_crl_number_next(store *s, int64_t now, int64_t *ret);
void store_cert_clear(store_cert *c);

/* ---- CA generations (docs/OPERATIONS.md, "Rolling the CA over") ----
 *
 * The CA's keys over time.  Generation 1 is the CA hwid ca init made
 * (the configuration's ca.certificate and ca.key); a rollover prepares
 * generation n+1 (a new key, its CA certificate and the two link
 * certificates between it and generation n), activates it, and retires
 * the generation before once its certificates have expired.  The table
 * is empty until the first rollover, which records generation 1 with its
 * own.  At most one generation is active and at most one prepared (the
 * database holds both); every write below is one transaction with its
 * audit record (audit may be NULL), and moves the sequence
 * (store_ca_gen_seq()) that hwidd watches to reload them. */
typedef enum store_ca_state {
        CA_GEN_PREPARED, /* made, not signing yet: served, with its links, for devices to adopt */
        CA_GEN_ACTIVE,   /* signs every new certificate, and its own CRL */
        CA_GEN_PREVIOUS, /* signed before: still signs its CRL and is served, until retired */
        CA_GEN_RETIRED,  /* no longer served */
} store_ca_state;

typedef struct store_ca_gen {
        int generation;          /* 1, 2, ... */
        store_ca_state state;
        char *subject;           /* its CA certificate's subject, RFC 2253 */
        /* Its CA certificate (DER); NULL for a generation prepared under an
         * offline root until its certificate is imported.  chain: the PEM
         * of the certificates above it (the root's), NULL: none. */
        uint8_t *cert;
        size_t cert_len;
        char *chain;
        /* Its key's URI (never a PIN: a pin-source=); NULL for generation
         * 1, whose key is the configuration's ca.key. */
        char *key_uri;
        /* The link certificates (RFC 4210 §4.4), DER, NULL for generation 1
         * and until its certificate is there: its key certified by the
         * generation before's (NewWithOld) and that one's key certified by
         * its own (OldWithNew). */
        uint8_t *new_with_old, *old_with_new;
        size_t new_with_old_len, old_with_new_len;
        int64_t prepared_at, activated_at, retired_at; /* 0: not (yet) */
} store_ca_gen;

/* The name of a state as stored ("prepared", "active", "previous",
 * "retired"). */
const char *store_ca_state_name(store_ca_state st);
/* Every recorded generation, in ascending order (none: *ret_n 0). */
int store_ca_gen_list(store *s, store_ca_gen **ret, size_t *ret_n);
/* Moves with every write below: hwidd reads it once a second and reloads
 * the generations when it changed (every replica alike). */
int store_ca_gen_seq(store *s, int64_t *ret);
/* Records next (state CA_GEN_PREPARED, generation one above the highest)
 * and, when the table is empty, first (generation 1, CA_GEN_ACTIVE) with
 * it.  -HWID_E_CONFLICT if a generation is prepared already (with
 * replace: that one is deleted first, if it was never activated) or next
 * is not the next number; -HWID_E_INVALID for rows that are not what
 * their state needs. */
int store_ca_gen_prepare(store *s, const store_ca_gen *first, const store_ca_gen *next, bool replace,
                         const store_audit *audit, int64_t now);
/* The prepared generation `generation` that has no certificate yet gets
 * g's: cert, chain, new_with_old and old_with_new.  -HWID_E_NOT_FOUND if
 * it is not prepared, -HWID_E_CONFLICT if it has its certificate. */
int store_ca_gen_import(store *s, int generation, const store_ca_gen *g, const store_audit *audit, int64_t now);
/* The prepared generation `generation` (with its certificate) becomes
 * the active one, the active one CA_GEN_PREVIOUS.  -HWID_E_NOT_FOUND if
 * it is not prepared, -HWID_E_CONFLICT if it has no certificate yet. */
int store_ca_gen_activate(store *s, int generation, const store_audit *audit, int64_t now);
/* CA_GEN_PREVIOUS -> CA_GEN_RETIRED; -HWID_E_CONFLICT for the active or
 * a prepared generation, -HWID_E_NOT_FOUND for none or a retired one. */
int store_ca_gen_retire(store *s, int generation, const store_audit *audit, int64_t now);
/* How many certificates of the generation have not expired at now
 * (valid, superseded or revoked: each still needs its CRL), and the
 * latest notAfter among them (0: none). */
int store_ca_gen_unexpired(store *s, int generation, int64_t now, uint64_t *ret_n, int64_t *ret_last);
void store_ca_gen_clear(store_ca_gen *g);
void store_ca_gen_list_free(store_ca_gen *v, size_t n);

/* ---- what an issuance reads before signing, read at once ----
 *
 * An enrollment or a renewal looks up its token, the certificate it
 * presents, whether its key is blocked, its identity's live certificate
 * and who holds its DNS names.  store_reads_fetch() reads all of those it
 * is given keys for at once -- one round trip to PostgreSQL; SQLite reads
 * nothing ahead and answers each when it is asked -- and store_reads_*()
 * give each answer as the store function of the same name would have
 * given it then, errors and their details included.  An answer is given
 * once: asked again, or for a key that was not fetched (r NULL too), the
 * store is read at that moment.  Every key is optional (NULL). */
typedef struct store_reads_keys {
        const char *token_id;
        const char *serial;
        const char *spki_sha256;
        const char *identity;            /* its live certificate at now */
        const char *const *dns_names;    /* who holds each at now */
        size_t n_dns_names;
        int64_t now;
} store_reads_keys;

typedef struct store_reads store_reads;

/* Whether s reads ahead at all (PostgreSQL): where it does not, there is
 * nothing to gain by preparing the keys early. */
bool store_reads_ahead(const store *s);
/* 0, or -HWID_E_NOMEM: a store that cannot be read gives its failure as
 * every answer, as the functions below would have. */
int store_reads_fetch(store *s, const store_reads_keys *k, store_reads **ret);
void store_reads_free(store_reads *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(store_reads *, store_reads_free)
int store_reads_token_get(store *s, store_reads *r, const char *id, store_token *ret);
int store_reads_cert_get(store *s, store_reads *r, const char *serial, store_cert *ret);
int store_reads_key_blocked(store *s, store_reads *r, const char *spki_sha256);
int store_reads_cert_live_for(store *s, store_reads *r, const char *identity, int64_t now, store_cert *ret);
int store_reads_dns_owner(store *s, store_reads *r, const char *name, int64_t now, char **ret_identity);
/* The identity's binding (store_binding_get()), read ahead with its live
 * certificate. */
int store_reads_binding_get(store *s, store_reads *r, const char *identity, store_binding *ret);

/* ---- audit ---- */
/* Appends a record and chains it (see the hash chain above). */
int store_audit_append(store *s, const store_audit *a);
/* Calls fn for the last `limit` records, oldest first (limit 0: all). */
typedef int (*store_audit_fn)(const store_audit *a, void *userdata);
int store_audit_foreach(store *s, size_t limit, store_audit_fn fn, void *userdata);
/* Retention: deletes at most max_rows (1..10000) of the oldest records
 * (in id order) written before `before`, stopping at the first that is
 * not, in one short transaction, and moves the anchor to the last one
 * deleted; *ret_n: how many (0 when none is left).  Refuses (-HWID_E_STORE)
 * to delete records whose chain does not verify: tampering is never
 * pruned away.  The only way audit records are ever removed. */
/* With sign (NULL: none, for tests and tools), the new anchor gets a
 * pruning checkpoint, signed and stored in the pruning's transaction;
 * checkpoints of records now pruned, and older pruning ones, go with it. */
int store_audit_prune(store *s, int64_t before, size_t max_rows, store_audit_sign_fn sign, void *userdata,
                      size_t *ret_n);
/* The chain as one consistent snapshot: its anchor and head (unset when
 * there is none; both filled in before anything is called), every
 * checkpoint to cpfn (oldest first; cpfn may be NULL), then every record,
 * oldest first, with its id and hashes, to fn. */
int store_audit_chain_read(store *s, store_audit_link *ret_anchor, store_audit_link *ret_head,
                           store_audit_checkpoint_fn cpfn, store_audit_fn fn, void *userdata);
/* The chain's head now (unset: an empty log). */
int store_audit_head(store *s, store_audit_link *ret);
/* Chains the records that are committed and not chained yet (*ret_n: how
 * many), handing each to the sink.  PostgreSQL only: issuances there
 * queue their records unchained, so that replicas' commits do not wait
 * for each other, and hwidd links them once a second (store-pg-link.c);
 * SQLite chains every record in its own transaction (0 here). */
int store_audit_chain_pending(store *s, size_t *ret_n);
/* How many committed records store_audit_chain_pending() has yet to chain. */
int store_audit_pending(store *s, size_t *ret_n);
/* Stores a signed checkpoint (of the head). */
int store_audit_checkpoint_add(store *s, const store_audit_checkpoint *cp);
/* Gives every record, once it is durable (committed), to fn -- with its
 * id and hashes -- e.g. to send it to syslog.  fn runs on the committing
 * thread with the store locked: it must be quick and must not call the
 * store.  The store owns userdata from now on (free_userdata at
 * store_free()).  One sink per store; NULL fn removes it. */
void store_set_audit_sink(store *s, store_audit_fn fn, void *userdata, void (*free_userdata)(void *));

/* What hwid audit verify reports (store-audit.c, for every backend). */
typedef enum store_audit_problem {
        AUDIT_OK,
        AUDIT_MODIFIED,  /* a record's content does not match its hash */
        AUDIT_DELETED,   /* records missing before `id` (or after it, at the head) */
        AUDIT_REORDERED, /* a record stored out of the order it was written in */
        AUDIT_HEAD,      /* the chain's head does not match the newest record */
        AUDIT_CHECKPOINT, /* a checkpoint is forged, or the chain does not reach what one signed */
} store_audit_problem;

typedef struct store_audit_report {
        store_audit_problem problem;
        int64_t id;           /* the first record in error (0: none) */
        char detail[512];     /* what is wrong with it, for a person */
        size_t n_records;     /* records checked */
        int64_t first_id, last_id;
        int64_t first_at;     /* the oldest record's time */
        bool anchored;        /* the oldest records were pruned: verified from the anchor */
        int64_t anchor_id;
        size_t n_checkpoints; /* signatures checked */
        store_audit_checkpoint last; /* the newest checkpoint of the head (kind 0: none) */
        size_t n_unchained;   /* committed records not chained yet (PostgreSQL: hwidd links them) */
} store_audit_report;

/* Walks the whole chain: the first modified, deleted or reordered record
 * is reported in *ret (problem != AUDIT_OK); returns 0 either way, and
 * -hwid_err only when the store cannot be read.  With ca_key (the CA
 * certificate's public key; NULL: the chain alone, as a backup's check):
 * every checkpoint's signature, the newest checkpoint of the head reached
 * by the chain with the hash it signed, an anchor only as a signed
 * pruning checkpoint left it, its record older than retention (seconds,
 * 0: not checked) when it was pruned, and every checkpoint the chain
 * notes still stored.  Whether any checkpoint signs the records is the
 * caller's to judge (last, anchor_id, first_at: a running hwidd may not
 * have signed its first records yet). */
int store_audit_verify(store *s, EVP_PKEY *ca_key, int64_t retention, store_audit_report *ret);

/* ---- TPM attestation (service/attest-*.c, docs/ATTESTATION.md) ---- */

/* A challenge the CA sent and has not seen answered yet.  Single use:
 * taken (deleted) by the first answer, whatever that answer is worth, so
 * that a challenge is answered once across restarts and replicas. */
typedef struct store_challenge {
        char id[33];               /* 32 lower-case hex digits */
        uint8_t secret_sha256[32]; /* SHA-256 of the secret only the TPM can recover (never the secret) */
        uint8_t nonce[32];         /* what the device's Certify must be over */
        uint8_t *ak_public;        /* the AK's marshalled TPMT_PUBLIC, 1..1024 bytes */
        size_t ak_public_len;
        uint8_t *ek_cert;          /* the verified EK certificate, DER, 1..4096 bytes */
        size_t ek_cert_len;
        int64_t expires_at;
        /* Who asked for it, the credential it came with: "token:ID",
         * "cert:SERIAL", "ek:SHA256 of the EK" (1..80 bytes). */
        const char *requester;
} store_challenge;

/* Records c.  Challenges expired at now are deleted first; then, when
 * c's requester already has max_per_requester waiting, its oldest ones
 * go (*ret_replaced: how many) so that it has room for this one: a
 * requester can only ever crowd out itself.  If max_pending unexpired
 * ones still wait, all requesters together: -HWID_E_RATE_LIMITED.
 * -HWID_E_EXISTS if the id is taken. */
int store_challenge_put(store *s, const store_challenge *c, int64_t now, size_t max_pending,
                        size_t max_per_requester, size_t *ret_replaced);
/* Deletes challenge id and returns it, in one step (of two concurrent
 * takers one gets it, the other -HWID_E_NOT_FOUND, as for an unknown id).
 * Expired or not: the caller checks expires_at. */
int store_challenge_take(store *s, const char *id, store_challenge *ret);
void store_challenge_clear(store_challenge *c);

/* The EK allowlist: TPMs that may enroll without a bootstrap token, each
 * under one name and profile (hwid ek add/import). */
typedef struct store_ek {
        char ek_cert_sha256[65]; /* hex; "" when listed by its public key only */
        char ek_pub_sha256[65];  /* hex SHA-256 of its SubjectPublicKeyInfo; "" when by certificate only */
        char *identity;          /* the only CN it may enroll (compared without ASCII case) */
        char *profile;
        int64_t added_at;
} store_ek;

/* Adds n entries in one transaction, all or none, with audit (may be
 * NULL).  -HWID_E_EXISTS naming the entry if one of its hashes or its
 * identity is listed already (or twice among them). */
int store_ek_add(store *s, const store_ek *v, size_t n, const store_audit *audit, int64_t now);
/* The entry of an EK, matched by certificate hash or public key hash
 * (either may be NULL); -HWID_E_NOT_FOUND if neither is listed,
 * -HWID_E_CONFLICT if they match two different entries. */
int store_ek_find(store *s, const char *ek_cert_sha256, const char *ek_pub_sha256, store_ek *ret);
int store_ek_list(store *s, store_ek **ret, size_t *ret_n);
/* Removes the entry whose identity, certificate hash or public key hash
 * is key; -HWID_E_NOT_FOUND if none. */
int store_ek_remove(store *s, const char *key, const store_audit *audit, int64_t now);
void store_ek_clear(store_ek *e);
void store_ek_list_free(store_ek *v, size_t n);

/* ---- identities bound to the TPM that attested them ----
 *
 * An identity is bound to a TPM (its EK public key) by the first
 * certificate of it that records a TPM attestation, in that issuance's
 * transaction; revocation and expiry leave the binding, and only an
 * admin's release (store_binding_release()) ends it.  store_cert_commit()
 * holds it (-HWID_E_FORBIDDEN, in store_binding_check()'s words): an
 * enrollment (no supersedes_serial) of a bound identity must record an
 * attestation by its TPM, and no issuance records one by another TPM
 * (docs/ATTESTATION.md, "A name is bound to its TPM"). */
struct store_binding {
        char *identity;          /* as the certificate that bound it spells it (compared without ASCII case) */
        char ek_pub_sha256[65];  /* the TPM: hex SHA-256 of its EK's SubjectPublicKeyInfo */
        char ek_cert_sha256[65]; /* of the EK certificate it presented then; "" if none was recorded */
        char *serial;            /* the certificate that bound it */
        int64_t bound_at;
};

/* identity's binding; -HWID_E_NOT_FOUND if it is bound to no TPM. */
int store_binding_get(store *s, const char *identity, store_binding *ret);
int store_binding_list(store *s, store_binding **ret, size_t *ret_n);
/* Ends the binding b (as store_binding_get() gave it), with audit (may be
 * NULL), in one transaction: only if its identity is still bound to that
 * same TPM, else -HWID_E_NOT_FOUND (nothing changed, nothing audited). */
int store_binding_release(store *s, const store_binding *b, const store_audit *audit, int64_t now);
/* Whether an issuance for an identity bound by b (NULL: not bound) may
 * record the attestation of ek_pub_sha256 (NULL or "": none); renewal:
 * it supersedes the identity's certificate.  0, or -HWID_E_FORBIDDEN
 * naming the binding and the release. */
int store_binding_check(const store_binding *b, const char *ek_pub_sha256, bool renewal);
void store_binding_clear(store_binding *b);
void store_binding_list_free(store_binding *v, size_t n);

/* Frees arrays returned by the list functions. */
void store_token_list_free(store_token *t, size_t n);
void store_request_list_free(store_request *r, size_t n);
void store_cert_list_free(store_cert *c, size_t n);
