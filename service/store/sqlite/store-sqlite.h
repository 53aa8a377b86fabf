/* Internals shared by the files of the SQLite store (store-sqlite*.c).
 *
 * One sqlite3 connection per store object, guarded by one mutex: every
 * public function holds it from start to end (store_enter/store_leavep),
 * so the connection and its cached statements are never used by two
 * threads at once.  Writes run inside BEGIN IMMEDIATE so that the write
 * lock is taken up front (no SQLITE_BUSY_SNAPSHOT halfway through), and
 * are committed with synchronous=FULL before the function returns. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <sqlite3.h>

#include "store-rows.h"
#include "store.h"

/* How long a writer waits for another (thread or process) to finish. */
#define STORE_BUSY_TIMEOUT_MS 5000

/* Where the WAL file is cut back to when it starts over: about the 1000
 * pages at which a checkpoint is due. */
#define STORE_WAL_LIMIT_BYTES (4 * 1024 * 1024)

/* What a savepoint would undo (each job of a group commit runs in one)
 * stays in memory up to this size.  SQLite's default, 64 KiB, is less than
 * one issuance's: each then also wrote its pages to a temporary file, ~30
 * write calls per issuance, and failed where no temporary directory is
 * writable. */
#define STORE_SAVEPOINT_MEMORY (4 * 1024 * 1024)

/* Read connections (store-sqlite-readers.c): lookups run there, beside
 * the writer.  A lookup takes tens of microseconds, so a few suffice. */
#define STORE_READERS 4

/* Statements prepared once per connection and kept. */
typedef enum stmt_id {
        ST_BEGIN_IMMEDIATE,
        ST_COMMIT,
        ST_PING,
        ST_META_GET,
        ST_SEQ_BUMP,
        ST_TOKEN_INSERT,
        ST_TOKEN_GET,
        ST_TOKEN_LIST,
        ST_TOKEN_REVOKE,
        ST_TOKEN_CONSUME,
        ST_REQ_INSERT,
        ST_REQ_GET,
        ST_REQ_LIST,
        ST_REQ_LIST_PENDING,
        ST_REQ_DECIDE,
        ST_REQ_ISSUE,
        ST_REQ_FIND,
        ST_CERT_INSERT,
        ST_CERT_GET,
        ST_CERT_LIVE,
        ST_CERT_LIST,
        ST_CERT_LIST_IDENTITY,
        ST_CERT_RETIRE_EXPIRED,
        ST_CERT_RETIRE_LIVE,
        ST_CERT_SUPERSEDE,
        ST_CERT_REVOKE,
        ST_CERT_REVOKED,
        ST_CERT_REVOKE_IDENTITY,
        ST_CERT_REVOKE_BLOCKED,
        ST_KEY_BLOCK,
        ST_KEY_BLOCKED,
        ST_AUDIT_INSERT,
        ST_AUDIT_LAST,
        ST_AUDIT_PRUNE,
        ST_AUDIT_PRUNE_SCAN,
        ST_AUDIT_HEAD,
        ST_AUDIT_ANCHOR,
        ST_AUDIT_SET_HEAD,
        ST_AUDIT_SET_ANCHOR,
        ST_AUDIT_ALL,
        ST_STATS,
        ST_PROBE_WRITE,
        ST_DNS_HOLDER,
        ST_DNS_RETIRE,
        ST_DNS_INSERT,
        ST_DNS_OWNER,
        ST_CHAL_PURGE,
        ST_CHAL_COUNT,
        ST_CHAL_INSERT,
        ST_CHAL_TAKE,
        ST_EK_INSERT,
        ST_EK_FIND,
        ST_EK_LIST,
        ST_EK_REMOVE,
        ST_BIND_GET,
        ST_BIND_INSERT,
        ST_BIND_LIST,
        ST_BIND_RELEASE,
        ST_SAVEPOINT,
        ST_RELEASE,
        ST_ROLLBACK_TO,
        _ST_MAX,
} stmt_id;

typedef struct store_audit_copy store_audit_copy;

/* One writer's share of a group commit (store_group_commit()). */
typedef struct store_job {
        /* The job's statements, run inside the batch's transaction with
         * the lock held; 0 or -hwid_err. */
        int (*run)(store *s, void *userdata);
        void *userdata;
        /* Set by the thread that ran the batch. */
        int r;
        char detail[512];
        bool done;
        pthread_cond_t wake;    /* signalled when done, or when it is to lead */
        struct store_job *next;
} store_job;

struct store {
        /* Set when the store is PostgreSQL (store-pg.h): then nothing
         * below is used, and store-dispatch.c sends every call there. */
        struct store_pg *pg;
        sqlite3 *db;
        char *path;
        pthread_mutex_t lock;
        bool lock_ready;
        sqlite3_stmt *stmts[_ST_MAX];
        /* Group commit: writers queue here while a batch is committing. */
        pthread_mutex_t gc_lock;
        bool gc_ready;
        bool gc_busy;           /* a batch is being committed */
        store_job *gc_head, **gc_tail;
        /* Background WAL checkpoints (store-sqlite-checkpoint.c). */
        sqlite3 *ck_db;
        pthread_t ck_thread;
        pthread_mutex_t ck_lock;
        pthread_cond_t ck_cond;
        bool ck_ready, ck_running, ck_due, ck_stop;
        unsigned long ck_commits; /* commits since the last round */
        /* Read connections, each itself a store object with no readers. */
        struct store *readers[STORE_READERS];
        size_t n_readers;
        _Atomic unsigned next_reader;
        /* The audit sink and the records of the open write transaction
         * waiting for its COMMIT (store-sqlite-sink.c); under `lock`. */
        store_audit_fn sink;
        void *sink_userdata;
        void (*sink_free)(void *);
        store_audit_copy *sink_queue;
        size_t sink_n, sink_alloc;
};

/* ---- the SQLite store's side of store.h (store-dispatch.c calls them) ---- */

int store_sqlite_open(const char *path, store **ret);
void store_sqlite_free(store *s);
/* store_free() calls it; inside the backend it is called directly: a
 * backend does not call back up into store-dispatch.c. */
DEFINE_TRIVIAL_CLEANUP_FUNC(store *, store_sqlite_free)
int store_sqlite_ping(store *s);
int store_sqlite_probe_write(store *s, int64_t now);
int store_sqlite_stats_get(store *s, int64_t now, store_stats *ret);
int store_sqlite_backup(store *s, const char *path);
int store_sqlite_integrity_check(store *s);
int store_sqlite_token_insert(store *s, const store_token *t, size_t n);
int store_sqlite_token_get(store *s, const char *id, store_token *ret);
int store_sqlite_token_list(store *s, store_token **ret, size_t *ret_n);
int store_sqlite_token_revoke(store *s, const char *id);
int store_sqlite_request_create(store *s, const store_request *r, int64_t now);
int store_sqlite_request_get(store *s, const char *id, store_request *ret);
int store_sqlite_request_find(store *s, const char *token_id, const char *spki_sha256, store_request *ret);
int store_sqlite_request_list(store *s, bool pending_only, store_request **ret, size_t *ret_n);
int store_sqlite_request_decide(store *s, const char *id, bool approve, const char *reason, int64_t now);
int store_sqlite_cert_commit(store *s, const store_issue *in, int64_t now);
int store_sqlite_cert_get(store *s, const char *serial, store_cert *ret);
int store_sqlite_cert_live_for(store *s, const char *identity, int64_t now, store_cert *ret);
int store_sqlite_cert_list(store *s, const char *identity, store_cert **ret, size_t *ret_n);
int store_sqlite_dns_owner(store *s, const char *name, int64_t now, char **ret_identity);
int store_sqlite_cert_dns_backfill(store *s, int64_t now, store_dns_names_fn names_of, size_t *ret_recorded,
                                   size_t *ret_skipped);
int store_sqlite_cert_revoke(store *s, const char *serial, int reason, int64_t now, const store_audit *audit);
int store_sqlite_cert_revoke_identity(store *s, const char *identity, int reason, int64_t now,
                                      const store_audit *audit, size_t *ret_n);
int store_sqlite_key_blocked(store *s, const char *spki_sha256);
int store_sqlite_cert_foreach_revoked(store *s, int64_t now, store_revoked_fn fn, void *userdata);
int store_sqlite_revocation_seq(store *s, int64_t *ret);
int store_sqlite_crl_number_next(store *s, int64_t now, int64_t *ret);
int store_sqlite_audit_append(store *s, const store_audit *a);
int store_sqlite_audit_foreach(store *s, size_t limit, store_audit_fn fn, void *userdata);
int store_sqlite_audit_prune(store *s, int64_t before, size_t max_rows, store_audit_sign_fn sign, void *userdata,
                             size_t *ret_n);
int store_sqlite_audit_checkpoint_add(store *s, const store_audit_checkpoint *cp);
int store_sqlite_audit_head(store *s, store_audit_link *ret);
int store_sqlite_audit_chain_read(store *s, store_audit_link *ret_anchor, store_audit_link *ret_head,
                                  store_audit_checkpoint_fn cpfn, store_audit_fn fn, void *userdata);
void store_sqlite_set_audit_sink(store *s, store_audit_fn fn, void *userdata, void (*free_userdata)(void *));
int store_sqlite_challenge_put(store *s, const store_challenge *c, int64_t now, size_t max_pending,
                               size_t max_per_requester, size_t *ret_replaced);
int store_sqlite_challenge_take(store *s, const char *id, store_challenge *ret);
int store_sqlite_ek_add(store *s, const store_ek *v, size_t n, const store_audit *audit, int64_t now);
int store_sqlite_ek_find(store *s, const char *ek_cert_sha256, const char *ek_pub_sha256, store_ek *ret);
int store_sqlite_ek_list(store *s, store_ek **ret, size_t *ret_n);
int store_sqlite_ek_remove(store *s, const char *key, const store_audit *audit, int64_t now);
int store_sqlite_binding_get(store *s, const char *identity, store_binding *ret);
int store_sqlite_binding_list(store *s, store_binding **ret, size_t *ret_n);
int store_sqlite_binding_release(store *s, const store_binding *b, const store_audit *audit, int64_t now);

/* ---- store-sqlite-binding.c ---- */
/* Inside an issuance's transaction: holds and records the binding of the
 * certificate's identity to its TPM (store.h). */
int store_binding_commit(store *s, const store_issue *in, int64_t now);

/* ---- store-sqlite-readers.c ---- */
int store_readers_open(store *s);
void store_readers_close(store *s);

/* For lookups: locks one of the store's read connections and points *s
 * at it (the caller's code then runs on it unchanged); *ret_guard as for
 * store_enter().  Sees everything committed before it was called. */
int store_read_enter(store **s, store **ret_guard);

/* ---- store-sqlite-checkpoint.c ---- */
int store_checkpointer_start(store *s);
void store_checkpointer_stop(store *s);
/* One checkpoint on the checkpointer's connection (mode: SQLITE_CHECKPOINT_*;
 * anything beyond PASSIVE holds the store's lock meanwhile).  *ret_log:
 * frames in the WAL, *ret_ckpt: frames copied back into the database.
 * -HWID_E_STORE if it failed or could not finish (a reader in the way). */
int store_checkpoint_run(store *s, int mode, int *ret_log, int *ret_ckpt);

/* ---- store-sqlite.c: connection, locking, transactions, statements ---- */

/* Takes the store's lock and, if write, opens a write transaction;
 * *ret_guard is set to s so that _cleanup_(store_leavep) rolls back
 * whatever was not committed and releases the lock. */
int store_enter(store *s, bool write, store **ret_guard);
/* A store object for path with its lock, not yet connected: the main
 * store and each read connection start as one. */
int store_alloc(const char *path, store **ret);
/* Opens s->path on s->db with the store's settings (busy timeout, extended codes). */
int store_connect(store *s);
void store_leavep(store **guard);
int store_commit(store *s, const char *what);

/* Runs job->run in a write transaction shared with whatever other jobs
 * are queued meanwhile, each in its own savepoint (a job that fails is
 * rolled back alone), and one COMMIT for all of them: several issuances
 * per fsync.  Returns only once the job is durable (0) or has failed
 * (its error, with its detail, on the calling thread). */
int store_group_commit(store *s, store_job *job, const char *what);

DEFINE_TRIVIAL_CLEANUP_FUNC(sqlite3_stmt *, sqlite3_finalize)

/* The cached statement id, prepared from sql on first use. */
int store_stmt(store *s, stmt_id id, const char *sql, sqlite3_stmt **ret);
static inline void stmt_resetp(sqlite3_stmt **st) {
        if (*st) {
                sqlite3_reset(*st);
                sqlite3_clear_bindings(*st);
        }
}
#define _cleanup_stmt_ _cleanup_(stmt_resetp)

/* Binds parameters 1.. from a format: 't' const char * (NULL binds
 * NULL), 'b' const void * + size_t, 'i' int, 'I' int64_t. */
int store_bind(store *s, sqlite3_stmt *st, const char *fmt, ...);
/* 1 for a row, 0 when done, or -HWID_E_STORE naming what failed
 * (-HWID_E_INVALID for a constraint the caller did not expect). */
int store_step(store *s, sqlite3_stmt *st, const char *what);
/* The extended code of the connection's last failure, e.g. to tell a
 * duplicate primary key (SQLITE_CONSTRAINT_PRIMARYKEY) from another
 * unique index (SQLITE_CONSTRAINT_UNIQUE). */
int store_last_code(store *s);
int store_sql_fail(store *s, const char *what);

/* Column readers: copies that set *oom on allocation failure. */
char *store_col_strdup(sqlite3_stmt *st, int i, bool *oom);
uint8_t *store_col_blobdup(sqlite3_stmt *st, int i, size_t *ret_len, bool *oom);
void store_col_copy(sqlite3_stmt *st, int i, char *dst, size_t size);

/* Makes room for element n of a growing array: the (possibly moved)
 * array, or NULL (arr untouched) when out of memory. */
void *store_array_grow(void *arr, size_t *alloc, size_t n, size_t elem);


/* ---- store-sqlite-schema.c ---- */

/* Brings the schema to the version this code knows, in one transaction;
 * refuses a database from a newer hwid or one that is not hwid's. */
int store_migrate(store *s);
/* The schema version store_migrate() brings a database to. */
int64_t store_schema_version(void);

/* ---- store-sqlite-dns.c ---- */

/* Inside a certificate's write transaction: records its n DNS names;
 * -HWID_E_CONFLICT if another live certificate holds one. */
int store_dns_record(store *s, const char *serial, const char *identity, const char *const *names, size_t n,
                     int64_t now);

/* ---- store-sqlite-token.c: helpers used inside cert transactions ---- */

/* Inside a write transaction: consumes one use of an active token. */
int store_token_consume(store *s, const char *id, int64_t now);
/* Inside a write transaction: APPROVED -> ISSUED with serial, for the
 * request's own identity only. */
int store_request_mark_issued(store *s, const char *id, const char *identity, const char *serial,
                              int64_t now);
/* ---- store-sqlite-audit.c ---- */

/* Inside a write transaction: appends a (at now if a->at is 0), chained. */
int store_audit_insert(store *s, const store_audit *a, int64_t now);
/* Chains the records of a database from before the chain, once. */
int store_audit_backfill(store *s);

/* ---- store-sqlite-sink.c ---- */
/* Queues a record just inserted for the sink (if there is one). */
void store_audit_sink_queue(store *s, const store_audit *a);
/* After COMMIT: hands the queue to the sink. */
void store_audit_sink_flush(store *s);
/* After a rollback: forgets all but the first `keep` queued records. */
void store_audit_sink_drop(store *s, size_t keep);
/* At store_sqlite_free(): frees the queue and the sink's userdata. */
void store_audit_sink_close(store *s);

/* ---- store-sqlite-attest.c ---- */

/* Reads the three attestation columns starting at column i ("" for NULL). */
void store_col_attestation(sqlite3_stmt *st, int i, store_attestation *ret);

/* ---- store-sqlite-revoke.c (within a write transaction) ---- */
int store_revocation_bump(store *s);
/* keyCompromise: blocks the keys revoked with serial or of identity (either
 * may be NULL) and revokes every unexpired certificate of a blocked key. */
int store_keys_block(store *s, const char *serial, const char *identity, int64_t now);
/* -HWID_E_KEY_BLOCKED if the key is blocked; 0 if not. */
int store_key_check(store *s, const char *spki_sha256);
