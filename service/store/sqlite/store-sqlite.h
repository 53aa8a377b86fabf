/* The SQLite store (a database file path): its operations (store-backend.h)
 * and the internals its files (store-sqlite*.c) share.
 *
 * One sqlite3 connection per store object, guarded by one mutex: every
 * public function holds it from start to end (sqlite_enter/sqlite_leavep),
 * so the connection and its cached statements are never used by two
 * threads at once.  Writes run inside BEGIN IMMEDIATE so that the write
 * lock is taken up front (no SQLITE_BUSY_SNAPSHOT halfway through), and
 * are committed with synchronous=FULL before the function returns. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <sqlite3.h>

#include "store-backend.h"
#include "store-rows.h"

/* How long a writer waits for another (thread or process) to finish. */
#define SQLITE_STORE_BUSY_TIMEOUT_MS 5000

/* Where the WAL file is cut back to when it starts over: about the 1000
 * pages at which a checkpoint is due. */
#define SQLITE_STORE_WAL_LIMIT_BYTES (4 * 1024 * 1024)

/* What a savepoint would undo (each job of a group commit runs in one)
 * stays in memory up to this size.  SQLite's default, 64 KiB, is less than
 * one issuance's: each then also wrote its pages to a temporary file, ~30
 * write calls per issuance, and failed where no temporary directory is
 * writable. */
#define SQLITE_STORE_SAVEPOINT_MEMORY (4 * 1024 * 1024)

/* Read connections (store-sqlite-readers.c): lookups run there, beside
 * the writer.  A lookup takes tens of microseconds, so a few suffice. */
#define SQLITE_STORE_READERS 4

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
        ST_CERT_REVOKED_GEN,
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

typedef struct sqlite_store sqlite_store;
typedef struct sqlite_audit_copy sqlite_audit_copy;

/* One writer's share of a group commit (sqlite_group_commit()). */
typedef struct sqlite_job {
        /* The job's statements, run inside the batch's transaction with
         * the lock held; 0 or -hwid_err. */
        int (*run)(sqlite_store *s, void *userdata);
        void *userdata;
        /* Set by the thread that ran the batch. */
        int r;
        char detail[512];
        bool done;
        pthread_cond_t wake;    /* signalled when done, or when it is to lead */
        struct sqlite_job *next;
} sqlite_job;

struct sqlite_store {
        store base;             /* its operations: sqlite_ops */
        sqlite3 *db;
        char *path;
        pthread_mutex_t lock;
        bool lock_ready;
        sqlite3_stmt *stmts[_ST_MAX];
        /* Group commit: writers queue here while a batch is committing. */
        pthread_mutex_t gc_lock;
        bool gc_ready;
        bool gc_busy;           /* a batch is being committed */
        sqlite_job *gc_head, **gc_tail;
        /* Background WAL checkpoints (store-sqlite-checkpoint.c). */
        sqlite3 *ck_db;
        pthread_t ck_thread;
        pthread_mutex_t ck_lock;
        pthread_cond_t ck_cond;
        bool ck_ready, ck_running, ck_due, ck_stop;
        unsigned long ck_commits; /* commits since the last round */
        /* Read connections, each itself a store object with no readers. */
        struct sqlite_store *readers[SQLITE_STORE_READERS];
        size_t n_readers;
        _Atomic unsigned next_reader;
        /* The audit sink and the records of the open write transaction
         * waiting for its COMMIT (store-sqlite-sink.c); under `lock`. */
        store_audit_fn sink;
        void *sink_userdata;
        void (*sink_free)(void *);
        sqlite_audit_copy *sink_queue;
        size_t sink_n, sink_alloc;
};

/* ---- the backend: store_open() takes it for a path (store-open.c) ---- */

extern const store_backend sqlite_backend;

/* The SQLite store behind s (s is its base). */
static inline sqlite_store *sqlite_of(store *s) {
        return (sqlite_store *) s;
}

/* ---- its operations (store-backend.h says what each does) ---- */

int sqlite_open(const char *path, unsigned connections, store **ret);
void sqlite_free(store *s);
int sqlite_ping(store *s);
int sqlite_probe_write(store *s, int64_t now);
int sqlite_stats_get(store *s, int64_t now, store_stats *ret);
int sqlite_backup(store *s, const char *path);
int sqlite_integrity_check(store *s);
int sqlite_token_insert(store *s, const store_token *t, size_t n);
int sqlite_token_get(store *s, const char *id, store_token *ret);
int sqlite_token_list(store *s, store_token **ret, size_t *ret_n);
int sqlite_token_revoke(store *s, const char *id);
int sqlite_request_create(store *s, const store_request *r, int64_t now);
int sqlite_request_get(store *s, const char *id, store_request *ret);
int sqlite_request_find(store *s, const char *token_id, const char *spki_sha256, store_request *ret);
int sqlite_request_list(store *s, bool pending_only, store_request **ret, size_t *ret_n);
int sqlite_request_decide(store *s, const char *id, bool approve, const char *reason, int64_t now);
int sqlite_cert_commit(store *s, const store_issue *in, int64_t now);
int sqlite_cert_get(store *s, const char *serial, store_cert *ret);
int sqlite_cert_live_for(store *s, const char *identity, int64_t now, store_cert *ret);
int sqlite_cert_list(store *s, const char *identity, store_cert **ret, size_t *ret_n);
int sqlite_dns_owner(store *s, const char *name, int64_t now, char **ret_identity);
int sqlite_cert_dns_backfill(store *s, int64_t now, store_dns_names_fn names_of, size_t *ret_recorded,
                             size_t *ret_skipped);
int sqlite_cert_revoke(store *s, const char *serial, int reason, int64_t now, const store_audit *audit);
int sqlite_cert_revoke_identity(store *s, const char *identity, int reason, int64_t now,
                                const store_audit *audit, size_t *ret_n);
int sqlite_key_blocked(store *s, const char *spki_sha256);
int sqlite_cert_foreach_revoked(store *s, int generation, int64_t now, store_revoked_fn fn, void *userdata);
int sqlite_revocation_seq(store *s, int64_t *ret);
int sqlite_crl_number_next(store *s, int64_t now, int64_t *ret);
int sqlite_audit_append(store *s, const store_audit *a);
int sqlite_audit_foreach(store *s, size_t limit, store_audit_fn fn, void *userdata);
int sqlite_audit_prune(store *s, int64_t before, size_t max_rows, store_audit_sign_fn sign, void *userdata,
                       size_t *ret_n);
int sqlite_audit_checkpoint_add(store *s, const store_audit_checkpoint *cp);
int sqlite_audit_head(store *s, store_audit_link *ret);
int sqlite_audit_chain_read(store *s, store_audit_link *ret_anchor, store_audit_link *ret_head,
                            store_audit_checkpoint_fn cpfn, store_audit_fn fn, void *userdata);
int sqlite_reads_fetch(store *s, store_reads *rd);
/* Every record is chained in its own transaction: none is pending. */
int sqlite_audit_nothing_pending(store *s, size_t *ret_n);
void sqlite_set_audit_sink(store *s, store_audit_fn fn, void *userdata, void (*free_userdata)(void *));
int sqlite_challenge_put(store *s, const store_challenge *c, int64_t now, size_t max_pending,
                         size_t max_per_requester, size_t *ret_replaced);
int sqlite_challenge_take(store *s, const char *id, store_challenge *ret);
int sqlite_ek_add(store *s, const store_ek *v, size_t n, const store_audit *audit, int64_t now);
int sqlite_ek_find(store *s, const char *ek_cert_sha256, const char *ek_pub_sha256, store_ek *ret);
int sqlite_ek_list(store *s, store_ek **ret, size_t *ret_n);
int sqlite_ek_remove(store *s, const char *key, const store_audit *audit, int64_t now);
int sqlite_binding_get(store *s, const char *identity, store_binding *ret);
int sqlite_binding_list(store *s, store_binding **ret, size_t *ret_n);
int sqlite_binding_release(store *s, const store_binding *b, const store_audit *audit, int64_t now);
int sqlite_ca_gen_list(store *s, store_ca_gen **ret, size_t *ret_n);
int sqlite_ca_gen_seq(store *s, int64_t *ret);
int sqlite_ca_gen_prepare(store *s, const store_ca_gen *first, const store_ca_gen *next, bool replace,
                          const store_audit *audit, int64_t now);
int sqlite_ca_gen_import(store *s, int generation, const store_ca_gen *g, const store_audit *audit, int64_t now);
int sqlite_ca_gen_activate(store *s, int generation, const store_audit *audit, int64_t now);
int sqlite_ca_gen_retire(store *s, int generation, const store_audit *audit, int64_t now);
int sqlite_ca_gen_unexpired(store *s, int generation, int64_t now, uint64_t *ret_n, int64_t *ret_last);

/* ---- what its files share ---- */

/* ---- store-sqlite-cols.c ---- */

/* Column readers: copies that set *oom on allocation failure. */
char *sqlite_col_strdup(sqlite3_stmt *st, int i, bool *oom);
uint8_t *sqlite_col_blobdup(sqlite3_stmt *st, int i, size_t *ret_len, bool *oom);
void sqlite_col_copy(sqlite3_stmt *st, int i, char *dst, size_t size);

/* Makes room for element n of a growing array: the (possibly moved)
 * array, or NULL (arr untouched) when out of memory. */
void *sqlite_array_grow(void *arr, size_t *alloc, size_t n, size_t elem);

/* ---- store-sqlite-sink.c ---- */
/* Queues a record just inserted for the sink (if there is one). */
void sqlite_audit_sink_queue(sqlite_store *s, const store_audit *a);
/* After COMMIT: hands the queue to the sink. */
void sqlite_audit_sink_flush(sqlite_store *s);
/* After a rollback: forgets all but the first `keep` queued records. */
void sqlite_audit_sink_drop(sqlite_store *s, size_t keep);
/* At sqlite_free(): frees the queue and the sink's userdata. */
void sqlite_audit_sink_close(sqlite_store *s);

/* ---- store-sqlite.c: connections, locking, transactions, statements ---- */

/* Takes the store's lock and, if write, opens a write transaction;
 * *ret_guard is set to s so that _cleanup_(sqlite_leavep) rolls back
 * whatever was not committed and releases the lock. */
int sqlite_enter(sqlite_store *s, bool write, sqlite_store **ret_guard);
/* A store object for path with its lock, not yet connected: the main
 * store and each read connection start as one. */
int sqlite_alloc(const char *path, sqlite_store **ret);
/* Opens s->path on s->db with the store's settings (busy timeout, extended codes). */
int sqlite_connect(sqlite_store *s);
/* The writing connection's settings: WAL, durable commits, foreign keys. */
int sqlite_configure(sqlite_store *s);
/* Closes what sqlite_alloc() and sqlite_connect() opened (a read
 * connection; the store's own is closed by sqlite_free()). */
void sqlite_conn_free(sqlite_store *s);
DEFINE_TRIVIAL_CLEANUP_FUNC(sqlite_store *, sqlite_conn_free)
void sqlite_leavep(sqlite_store **guard);
int sqlite_commit(sqlite_store *s, const char *what);

/* Runs job->run in a write transaction shared with whatever other jobs
 * are queued meanwhile, each in its own savepoint (a job that fails is
 * rolled back alone), and one COMMIT for all of them: several issuances
 * per fsync.  Returns only once the job is durable (0) or has failed
 * (its error, with its detail, on the calling thread). */
int sqlite_group_commit(sqlite_store *s, sqlite_job *job, const char *what);

DEFINE_TRIVIAL_CLEANUP_FUNC(sqlite3_stmt *, sqlite3_finalize)

/* The cached statement id, prepared from sql on first use. */
int sqlite_stmt(sqlite_store *s, stmt_id id, const char *sql, sqlite3_stmt **ret);
static inline void stmt_resetp(sqlite3_stmt **st) {
        if (*st) {
                sqlite3_reset(*st);
                sqlite3_clear_bindings(*st);
        }
}
#define _cleanup_stmt_ _cleanup_(stmt_resetp)

/* Binds parameters 1.. from a format: 't' const char * (NULL binds
 * NULL), 'b' const void * + size_t, 'B' the same or NULL (for a NULL
 * pointer), 'i' int, 'I' int64_t. */
int sqlite_bind(sqlite_store *s, sqlite3_stmt *st, const char *fmt, ...);
/* 1 for a row, 0 when done, or -HWID_E_STORE naming what failed
 * (-HWID_E_INVALID for a constraint the caller did not expect). */
int sqlite_step(sqlite_store *s, sqlite3_stmt *st, const char *what);
/* The extended code of the connection's last failure, e.g. to tell a
 * duplicate primary key (SQLITE_CONSTRAINT_PRIMARYKEY) from another
 * unique index (SQLITE_CONSTRAINT_UNIQUE). */
int sqlite_last_code(sqlite_store *s);
int sqlite_sql_fail(sqlite_store *s, const char *what);

/* ---- store-sqlite-binding.c ---- */
/* Inside an issuance's transaction: holds and records the binding of the
 * certificate's identity to its TPM (store.h). */
int sqlite_binding_commit(sqlite_store *s, const store_issue *in, int64_t now);

/* ---- store-sqlite-readers.c ---- */
int sqlite_readers_open(sqlite_store *s);
void sqlite_readers_close(sqlite_store *s);

/* For lookups: locks one of the store's read connections and points *s
 * at it (the caller's code then runs on it unchanged); *ret_guard as for
 * sqlite_enter().  Sees everything committed before it was called. */
int sqlite_read_enter(sqlite_store **s, sqlite_store **ret_guard);

/* ---- store-sqlite-checkpoint.c ---- */
int sqlite_checkpointer_start(sqlite_store *s);
void sqlite_checkpointer_stop(sqlite_store *s);
/* One checkpoint on the checkpointer's connection (mode: SQLITE_CHECKPOINT_*;
 * anything beyond PASSIVE holds the store's lock meanwhile).  *ret_log:
 * frames in the WAL, *ret_ckpt: frames copied back into the database.
 * -HWID_E_STORE if it failed or could not finish (a reader in the way). */
int sqlite_checkpoint_run(sqlite_store *s, int mode, int *ret_log, int *ret_ckpt);

/* ---- store-sqlite-schema.c ---- */

/* Brings the schema to the version this code knows, in one transaction;
 * refuses a database from a newer hwid or one that is not hwid's. */
int sqlite_migrate(sqlite_store *s);
/* The schema version sqlite_migrate() brings a database to. */
int64_t sqlite_schema_version(void);

/* ---- store-sqlite-dns.c ---- */

/* Inside a certificate's write transaction: records its n DNS names;
 * -HWID_E_CONFLICT if another live certificate holds one. */
int sqlite_dns_record(sqlite_store *s, const char *serial, const char *identity, const char *const *names, size_t n,
                      int64_t now);

/* ---- store-sqlite-token.c: helpers used inside cert transactions ---- */

/* Inside a write transaction: consumes one use of an active token. */
int sqlite_token_consume(sqlite_store *s, const char *id, int64_t now);
/* Inside a write transaction: APPROVED -> ISSUED with serial, for the
 * request's own identity only. */
int sqlite_request_mark_issued(sqlite_store *s, const char *id, const char *identity, const char *serial,
                               int64_t now);
/* ---- store-sqlite-audit.c ---- */

/* Inside a write transaction: appends a (at now if a->at is 0), chained. */
int sqlite_audit_insert(sqlite_store *s, const store_audit *a, int64_t now);
/* Chains the records of a database from before the chain, once. */
int sqlite_audit_backfill(sqlite_store *s);

/* ---- store-sqlite-attest.c ---- */

/* Reads the three attestation columns starting at column i ("" for NULL). */
void sqlite_col_attestation(sqlite3_stmt *st, int i, store_attestation *ret);

/* ---- store-sqlite-revoke.c (within a write transaction) ---- */
int sqlite_revocation_bump(sqlite_store *s);
/* keyCompromise: blocks the keys revoked with serial or of identity (either
 * may be NULL) and revokes every unexpired certificate of a blocked key. */
int sqlite_keys_block(sqlite_store *s, const char *serial, const char *identity, int64_t now);
/* -HWID_E_KEY_BLOCKED if the key is blocked; 0 if not. */
int sqlite_key_check(sqlite_store *s, const char *spki_sha256);
