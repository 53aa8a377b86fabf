/* The PostgreSQL store (database: postgresql://...): several hwidd
 * replicas share one database, and every invariant of store.h is held by
 * the database itself -- unique and partial unique indexes, row locks
 * taken by UPDATE ... WHERE ... RETURNING, a lock per key for the
 * key-compromise block, the audit chain's head row -- never by one
 * process's memory, and no lock shared by the whole cluster is held
 * across a network round trip (docs/HA.md, "The write path").
 *
 * A store keeps a pool of connections (slots), each used by one thread at
 * a time.  An issuance reads what it needs in one pipeline before signing
 * (store-pg-reads.c) and commits with one statement, hwid_issue(), a
 * server-side function that the migrations install (store-pg-schema.c),
 * shared by the issuances of a group commit (store-pg-batch.c), which
 * queues their audit records for hwidd to chain (store-pg-link.c).  Other
 * writes are one transaction (READ COMMITTED) each, retried from the start
 * on a serialization failure or deadlock; their audit records are chained
 * by the same pipeline that commits them.  Nothing returns 0 before the
 * commit: durable as far as the server's synchronous_commit promises
 * (docs/HA.md).  A connection that breaks is dropped; the next call
 * connects again, so a replica answers 503 (-HWID_E_STORE) while the
 * database is away and recovers by itself. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "pq-dl.h"

#include "store-backend.h"

typedef struct json_object json_object;

/* Connections per store: one for the group commit in flight, the reads
 * in flight (about issuances per second x round trip: 2 at 2,000/s and
 * 1 ms), and room for admin requests, health checks and bursts. */
#define PG_POOL_DEFAULT 8
#define PG_POOL_MAX 64

/* pg_advisory_xact_lock(class, key) class of the per-key lock: an
 * issuance holds its key's lock shared, a keyCompromise revocation the
 * keys it blocks exclusive (key: hwid_key_lock_id(spki_sha256)). */
#define PG_KEY_LOCK_CLASS "1752656230"
/* pg_advisory_xact_lock keys: the audit chain's turn, taken by
 * hwid_audit_chain() just before it reads the head (the key earlier
 * versions took for every write, so that replicas of both keep the chain
 * in one order while a cluster is upgraded), and the bound on pending
 * attestation challenges (hwid_challenge_put()). */
#define PG_AUDIT_LOCK "1752656229"
#define PG_CHALLENGE_LOCK "1752656231"

typedef struct pg_store pg_store;
typedef struct pg_audit_copy pg_audit_copy;

/* One connection and what its current transaction has queued. */
typedef struct pg_slot {
        pg_store *p;
        pthread_mutex_t lock;
        PGconn *conn;
        _Atomic bool up;        /* conn is set: read without the lock, to choose a slot */
        char sqlstate[6];       /* of the last failed statement */
        char constraint[64];    /* the constraint it broke, if any */
        bool retry;             /* serialization failure or deadlock: run again */
        bool lost;              /* the connection broke (and was dropped) */
        bool begin_pending;     /* BEGIN goes with the next statement */
        bool bump_revocations;  /* move meta.revocation_seq at COMMIT */
        uint32_t prepared;      /* bit s: statement s is prepared on conn */
        /* Audit records of the transaction: chained at COMMIT, then
         * handed to the sink. */
        pg_audit_copy *queue;
        size_t n_queue, alloc_queue;
} pg_slot;

typedef int (*pg_tx_fn)(pg_slot *c, void *userdata);

/* One caller's issuance in a group commit (store-pg-batch.c). */
typedef struct pg_job {
        const store_issue *in;
        int64_t now;
        int r;                  /* set by the thread that ran the batch */
        bool sent;              /* in the batch's statement being run */
        char detail[512];
        bool done;
        pthread_cond_t wake;    /* done, or to lead the next batch */
        struct pg_job *next;
} pg_job;

struct pg_store {
        store base;      /* its operations: pg_ops */
        char *conninfo;  /* never logged: only label is */
        char label[160]; /* "host:port/dbname" for messages */
        pg_slot *slots;
        size_t n_slots;
        _Atomic unsigned next;
        _Atomic unsigned connecting; /* connections being opened */
        pthread_mutex_t sink_lock;
        store_audit_fn sink;
        void *sink_userdata;
        void (*sink_free)(void *);
        /* Group commit: jobs queue here while a batch is committing. */
        pthread_mutex_t gc_lock;
        bool gc_busy;
        pg_job *gc_head, **gc_tail;
};

/* ---- the backend: store_open() takes it for a URI (store-open.c) ---- */

extern const store_backend pg_backend;

/* Whether database names a PostgreSQL server (a postgresql:// or
 * postgres:// URI) rather than a SQLite file. */
bool pg_is_uri(const char *database);

/* The PostgreSQL store behind s (s is its base). */
static inline pg_store *pg_of(store *s) {
        return (pg_store *) s;
}

/* ---- its operations (store-backend.h says what each does) ---- */

/* pool: connections to keep (0: PG_POOL_DEFAULT). */
int pg_open(const char *uri, unsigned pool, store **ret);
void pg_free(store *s);
int pg_ping(store *s);
int pg_probe_write(store *s, int64_t now);
int pg_stats_get(store *s, int64_t now, store_stats *ret);
int pg_backup(store *s, const char *path);
int pg_integrity_check(store *s);
int pg_token_insert(store *s, const store_token *t, size_t n);
int pg_token_get(store *s, const char *id, store_token *ret);
int pg_token_list(store *s, store_token **ret, size_t *ret_n);
int pg_token_revoke(store *s, const char *id);
int pg_request_create(store *s, const store_request *r, int64_t now);
int pg_request_get(store *s, const char *id, store_request *ret);
int pg_request_find(store *s, const char *token_id, const char *spki_sha256, store_request *ret);
int pg_request_list(store *s, bool pending_only, store_request **ret, size_t *ret_n);
int pg_request_decide(store *s, const char *id, bool approve, const char *reason, int64_t now);
int pg_cert_commit(store *s, const store_issue *in, int64_t now);
int pg_cert_get(store *s, const char *serial, store_cert *ret);
int pg_cert_live_for(store *s, const char *identity, int64_t now, store_cert *ret);
int pg_cert_list(store *s, const char *identity, store_cert **ret, size_t *ret_n);
int pg_dns_owner(store *s, const char *name, int64_t now, char **ret_identity);
int pg_cert_dns_backfill(store *s, int64_t now, store_dns_names_fn names_of, size_t *ret_recorded,
                         size_t *ret_skipped);
int pg_cert_revoke(store *s, const char *serial, int reason, int64_t now, const store_audit *audit);
int pg_cert_revoke_identity(store *s, const char *identity, int reason, int64_t now,
                            const store_audit *audit, size_t *ret_n);
int pg_key_blocked(store *s, const char *spki_sha256);
int pg_cert_foreach_revoked(store *s, int generation, int64_t now, store_revoked_fn fn, void *userdata);
int pg_revocation_seq(store *s, int64_t *ret);
int pg_crl_number_next(store *s, int64_t now, int64_t *ret);
int pg_audit_append(store *s, const store_audit *a);
int pg_audit_foreach(store *s, size_t limit, store_audit_fn fn, void *userdata);
int pg_audit_prune(store *s, int64_t before, size_t max_rows, store_audit_sign_fn sign, void *userdata,
                   size_t *ret_n);
int pg_audit_chain_read(store *s, store_audit_link *ret_anchor, store_audit_link *ret_head,
                        store_audit_checkpoint_fn cpfn, store_audit_fn fn, void *userdata);
int pg_audit_head(store *s, store_audit_link *ret);
int pg_audit_chain_pending(store *s, size_t *ret_n);
int pg_audit_pending(store *s, size_t *ret_n);
int pg_audit_checkpoint_add(store *s, const store_audit_checkpoint *cp);
void pg_set_audit_sink(store *s, store_audit_fn fn, void *userdata, void (*free_userdata)(void *));
int pg_challenge_put(store *s, const store_challenge *c, int64_t now, size_t max_pending,
                     size_t max_per_requester, size_t *ret_replaced);
int pg_challenge_take(store *s, const char *id, store_challenge *ret);
int pg_ek_add(store *s, const store_ek *v, size_t n, const store_audit *audit, int64_t now);
int pg_ek_find(store *s, const char *ek_cert_sha256, const char *ek_pub_sha256, store_ek *ret);
int pg_ek_list(store *s, store_ek **ret, size_t *ret_n);
int pg_ek_remove(store *s, const char *key, const store_audit *audit, int64_t now);
int pg_binding_get(store *s, const char *identity, store_binding *ret);
int pg_binding_list(store *s, store_binding **ret, size_t *ret_n);
int pg_binding_release(store *s, const store_binding *b, const store_audit *audit, int64_t now);
int pg_reads_fetch(store *s, store_reads *rd);
int pg_ca_gen_list(store *s, store_ca_gen **ret, size_t *ret_n);
int pg_ca_gen_seq(store *s, int64_t *ret);
int pg_ca_gen_prepare(store *s, const store_ca_gen *first, const store_ca_gen *next, bool replace,
                      const store_audit *audit, int64_t now);
int pg_ca_gen_import(store *s, int generation, const store_ca_gen *g, const store_audit *audit, int64_t now);
int pg_ca_gen_activate(store *s, int generation, const store_audit *audit, int64_t now);
int pg_ca_gen_retire(store *s, int generation, const store_audit *audit, int64_t now);
int pg_ca_gen_unexpired(store *s, int generation, int64_t now, uint64_t *ret_n, int64_t *ret_last);

/* ---- store-pg.c: slots, statements, transactions ---- */

/* Locks a slot, connected (connecting again if its connection broke). */
int pg_enter(pg_store *p, pg_slot **ret);
void pg_leavep(pg_slot **slot);

#define PG_PARAMS_MAX 20

typedef struct pg_params {
        const char *v[PG_PARAMS_MAX];
        int len[PG_PARAMS_MAX];
        int fmt[PG_PARAMS_MAX];
        char num[PG_PARAMS_MAX][24];
        int n;
} pg_params;

/* The reads on every issuance's path and its write, prepared once per
 * connection (the first use sends the preparation in the same round
 * trip): planning the reads each time cost PostgreSQL 370 µs of CPU per
 * issuance, 70 prepared (docs/HA.md).  A prepared statement's plan is
 * cached, made for the tables as they were then, so hwidd's sessions run
 * with sequential scans off and each of these reaches its rows by a key
 * (tests/integration/pg-plans.sh). */
typedef enum pg_stmt {
        PG_STMT_NONE,           /* sent with its text each time */
        PG_STMT_TOKEN,          /* a token by id */
        PG_STMT_CERT,           /* a certificate by serial */
        PG_STMT_KEY,            /* a blocked key by its SPKI hash */
        PG_STMT_LIVE,           /* an identity's live certificate */
        PG_STMT_DNS,            /* a DNS name's live holder */
        PG_STMT_ISSUE,          /* hwid_issue() */
        PG_STMT_BINDING,        /* an identity's binding to its TPM */
        PG_STMT_MAX_
} pg_stmt;

/* A statement and its parameters, ready to send (its strings are the
 * caller's: they must outlive it). */
typedef struct pg_query {
        const char *what; /* for messages: "read a token" */
        const char *sql;
        pg_stmt stmt;
        pg_params p;
} pg_query;

/* q run as the named statement s; returns bound (pg_bind()'s result):
 * pg_named(q, PG_STMT_TOKEN, pg_bind(q, ...)). */
int pg_named(pg_query *q, pg_stmt s, int bound);
/* Binds sql's parameters from fmt: 't' const char * (NULL binds NULL),
 * 'b' const void * + size_t (bytea), 'i' int, 'I' int64_t, 'B' bool. */
int pg_bind(pg_query *q, const char *what, const char *sql, const char *fmt, ...);
/* Runs q.  *ret (may be NULL) gets the result, for PQclear.
 * -HWID_E_INVALID for a broken constraint (slot->sqlstate,
 * slot->constraint say which), -HWID_E_STORE for anything else, naming
 * q->what. */
int pg_run(pg_slot *c, const pg_query *q, PGresult **ret);
/* pg_bind() and pg_run() in one. */
int pg_exec(pg_slot *c, PGresult **ret, const char *what, const char *sql, const char *fmt, ...);
/* Sends the n statements at once, in one pipeline (one round trip), and
 * reads their results into ret[0..n-1]; fails as pg_run() does for the
 * first that failed (the statements after it are not run), with every
 * ret[i] NULL. */
int pg_pipeline(pg_slot *c, const pg_query *q, size_t n, PGresult **ret);
/* sql with n parameters given as libpq takes them (PQexecParams). */
int pg_exec_params(pg_slot *c, const char *what, const char *sql, int n, const char *const *values,
                   const int *lengths, const int *formats);
/* Several statements without parameters (the schema's migrations). */
int pg_exec_script(pg_slot *c, const char *what, const char *sql);
/* Runs fn in one transaction (BEGIN ... COMMIT), again from the start
 * after a serialization failure or deadlock, and then hands the records
 * it appended to the audit sink.  0 once committed, or fn's error. */
int pg_tx(pg_store *p, pg_tx_fn fn, void *userdata, const char *what);
/* Runs q as a transaction of its own (one round trip); again on a
 * serialization failure or deadlock; *ret its result, and *ret_slot the
 * slot it ran on (pg_leavep() it), for the audit sink. */
int pg_statement(pg_store *p, const pg_query *q, pg_slot **ret_slot, PGresult **ret);
/* Commits the issuance in (at now) with one statement, hwid_issue(),
 * shared with the issuances queued meanwhile: returns once it is
 * committed (0) or with its own error (store-pg-batch.c). */
int pg_group_commit(pg_store *p, const store_issue *in, int64_t now);
/* Runs fn on a slot outside any transaction (single reads). */
int pg_read(pg_store *p, pg_tx_fn fn, void *userdata);
/* A short random pause before running again what lost a race. */
void pg_backoff(void);

/* ---- store-pg-cols.c: results ---- */

/* Rows a command changed (UPDATE, DELETE, INSERT). */
int64_t pg_changes(PGresult *res);
/* Column readers: NULL (or "") for SQL NULL; copies set *oom. */
const char *pg_val(PGresult *res, int row, int col);
char *pg_strdup(PGresult *res, int row, int col, bool *oom);
uint8_t *pg_blobdup(PGresult *res, int row, int col, size_t *ret_len, bool *oom);
/* Exactly len bytes of a bytea into dst; false if NULL or another length. */
bool pg_blob_copy(PGresult *res, int row, int col, uint8_t *dst, size_t len);
void pg_copy(PGresult *res, int row, int col, char *dst, size_t size);
int64_t pg_i64(PGresult *res, int row, int col);
bool pg_bool(PGresult *res, int row, int col);

/* Every row of res through from_row into a new array of elements of
 * size bytes (one more, zeroed, at the end), freed by free_all on
 * failure: the list functions' common part. */
typedef int (*pg_row_fn)(PGresult *res, int row, void *ret);
int pg_rows(PGresult *res, size_t size, pg_row_fn from_row, void (*free_all)(void *all, size_t n), void **ret,
            size_t *ret_n);

DEFINE_TRIVIAL_CLEANUP_FUNC(PGresult *, PQclear)

/* ---- reads (store-pg-cert.c, store-pg-token.c, store-pg-revoke.c) ----
 * Each read is a statement and what its result answers, so that the
 * same read is made alone or within a pipeline (store-pg-reads.c).  A
 * *_query() that fails is the answer already (a malformed key). */
int pg_cert_serial_query(const char *serial, bool lock, pg_query *q);
int pg_cert_serial_answer(PGresult *res, const char *serial, store_cert *ret);
int pg_cert_live_query(const char *identity, int64_t now, pg_query *q);
int pg_cert_live_answer(PGresult *res, const char *identity, store_cert *ret);
int pg_dns_owner_query(const char *canon, int64_t now, pg_query *q);
int pg_dns_owner_answer(PGresult *res, const char *canon, char **ret_identity);
int pg_token_query(const char *id, pg_query *q);
int pg_token_answer(PGresult *res, const char *id, store_token *ret);
int pg_key_query(const char *spki_sha256, pg_query *q);
int pg_key_answer(PGresult *res, const char *spki_sha256);
int pg_binding_query(const char *identity, pg_query *q);
int pg_binding_answer(PGresult *res, const char *identity, store_binding *ret);

/* A certificate by serial (lock: FOR UPDATE, inside a transaction). */
int pg_cert_read_serial(pg_slot *c, const char *serial, bool lock, store_cert *ret);

/* ---- store-pg-issue.c: an issuance as a hwid_issue() member ---- */
/* in, at now, as the JSON object hwid_issue_one() takes. */
int pg_issue_json(const store_issue *in, int64_t now, json_object **ret);
/* The error of the member's result (and detail), or 0 for "ok". */
int pg_issue_result(pg_store *p, const store_issue *in, int64_t now, const char *result, const char *detail);
/* store-pg-binding.c: the refusal 'bound' of in, from its detail. */
int pg_binding_refusal(const store_issue *in, const char *detail);

/* ---- store-pg-schema.c, store-pg-functions.c ---- */
int pg_migrate(pg_store *p);
/* The server-side functions (migration 5). */
extern const char pg_functions_sql[];
/* store-pg-link.c: the audit chain's linker (migration 6). */
extern const char pg_link_sql[];
/* Plans that stay cheap as the tables grow (migration 7). */
extern const char pg_plans_sql[];
/* A batch's token uses last (migration 8). */
extern const char pg_token_last_sql[];
/* store-pg-link.c: the linker's queue in a table of its own (migration 9). */
extern const char pg_queue_sql[];
/* No issuance's statement planned on every call (migration 10). */
extern const char pg_replan_sql[];
/* Identities bound to the TPM that attested them (migration 11). */
extern const char pg_binding_sql[];
/* Migration 13: CA generations (store-pg-functions.c). */
extern const char pg_generations_sql[];

/* ---- store-pg-token.c (inside a transaction) ---- */
int pg_token_consume(pg_slot *c, const char *id, int64_t now);
/* Why a token could not be used, from its state as hwid_issue() saw it
 * ("revoked expires_at uses_left", NULL: unknown). */
int pg_token_refusal(const char *id, const char *state, int64_t now);

/* ---- store-pg-queue.c: a transaction's audit records ---- */
/* Whether a has what every record needs (an actor, action, outcome). */
bool pg_audit_ok(const store_audit *a);
/* Inside a transaction: queues a (at now if a->at is 0), to be chained
 * at COMMIT (pg_tx()) and then handed to the sink. */
int pg_audit_insert(pg_slot *c, const store_audit *a, int64_t now);
/* The queued records as hwid_audit_append() takes them (JSON). */
int pg_audit_json(pg_slot *c, char **ret);
/* Gives the queued records their ids and hashes from the rows
 * hwid_audit_append() returned (rec_id, rec_prev, rec_hash). */
int pg_audit_chained(pg_slot *c, PGresult *res);
/* Sets key to the string v, or to null for NULL. */
void pg_json_str(json_object *o, const char *key, const char *v);
/* a (at now if a->at is 0) as hwid_audit_rec in JSON, its fields escaped
 * as stored. */
int pg_audit_record(const store_audit *a, int64_t now, json_object **ret);
void pg_sink_flush(pg_slot *c);
void pg_sink_drop(pg_slot *c);

/* ---- store-pg-audit-checkpoint.c: signed checkpoints of the chain ---- */
/* Within a pruning's transaction: signs and stores the new anchor's
 * checkpoint, dropping those it makes stale. */
int pg_audit_prune_checkpoint(pg_slot *c, const store_audit_link *anchor, store_audit_sign_fn sign, void *userdata);
/* Within a read transaction: every checkpoint, oldest first. */
int pg_audit_checkpoints_each(pg_slot *c, store_audit_checkpoint_fn fn, void *userdata);

/* ---- store-pg-revoke.c (inside a transaction) ---- */
int pg_keys_block(pg_slot *c, const char *serial, const char *identity, int64_t now);
