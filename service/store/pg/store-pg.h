/* The PostgreSQL store (database: postgresql://...): several hwidd
 * replicas share one database, and every invariant of store.h is held by
 * the database itself -- unique and partial unique indexes, row locks
 * taken by UPDATE ... WHERE ... RETURNING, an advisory lock for the audit
 * chain and for migrations -- never by one process's memory.
 *
 * A store keeps a few connections (slots), each used by one thread at a
 * time.  Every write is one transaction (READ COMMITTED) that first takes
 * the write lock (below), retried from the start on a serialization
 * failure or deadlock, and committed before the function returns 0: durable as far as the server's
 * synchronous_commit promises (docs/HA.md).  A connection that breaks is
 * dropped; the next call connects again, so a replica answers 503
 * (-HWID_E_STORE) while the database is away and recovers by itself. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "pq-dl.h"

#include "store.h"

#define STORE_PG_SLOTS 4

/* pg_advisory_xact_lock key every write transaction takes first: writes
 * from all replicas run one after the other (the audit chain, which
 * nearly every write extends, needs that order anyway), so that no two of
 * them can wait for each other's row locks in a cycle.  Reads never take it. */
#define PG_WRITE_LOCK "1752656229"

typedef struct store_pg store_pg;
typedef struct store_pg_audit_copy store_pg_audit_copy;

/* One connection and what its current transaction has queued. */
typedef struct pg_slot {
        store_pg *p;
        pthread_mutex_t lock;
        PGconn *conn;
        char sqlstate[6];       /* of the last failed statement */
        char constraint[64];    /* the constraint it broke, if any */
        bool retry;             /* serialization failure or deadlock: run again */
        bool lost;              /* the connection broke (and was dropped) */
        store_pg_audit_copy *queue; /* audit records for the sink after COMMIT */
        size_t n_queue, alloc_queue;
} pg_slot;

/* One caller's share of a group commit (store-pg-batch.c). */
typedef int (*pg_tx_fn)(pg_slot *c, void *userdata);
typedef struct pg_job {
        pg_tx_fn run;
        void *userdata;
        int r;                  /* set by the thread that ran the batch */
        char detail[512];
        bool done;
        pthread_cond_t wake;    /* done, or to lead the next batch */
        struct pg_job *next;
} pg_job;

struct store_pg {
        char *conninfo;  /* never logged: only label is */
        char label[160]; /* "host:port/dbname" for messages */
        pg_slot slots[STORE_PG_SLOTS];
        size_t n_slots;
        _Atomic unsigned next;
        pthread_mutex_t sink_lock;
        store_audit_fn sink;
        void *sink_userdata;
        void (*sink_free)(void *);
        /* Group commit: jobs queue here while a batch is committing. */
        pthread_mutex_t gc_lock;
        bool gc_busy;
        pg_job *gc_head, **gc_tail;
};

/* Whether database names a PostgreSQL server (a postgresql:// or
 * postgres:// URI) rather than a SQLite file. */
bool store_pg_is_uri(const char *database);
int store_pg_open(const char *uri, store_pg **ret);
void store_pg_free(store_pg *p);
int store_pg_ping(store_pg *p);
int store_pg_probe_write(store_pg *p, int64_t now);
int store_pg_stats_get(store_pg *p, int64_t now, store_stats *ret);
int store_pg_backup(store_pg *p, const char *path);
int store_pg_integrity_check(store_pg *p);
int store_pg_token_insert(store_pg *p, const store_token *t, size_t n);
int store_pg_token_get(store_pg *p, const char *id, store_token *ret);
int store_pg_token_list(store_pg *p, store_token **ret, size_t *ret_n);
int store_pg_token_revoke(store_pg *p, const char *id);
int store_pg_request_create(store_pg *p, const store_request *r, int64_t now);
int store_pg_request_get(store_pg *p, const char *id, store_request *ret);
int store_pg_request_find(store_pg *p, const char *token_id, const char *spki_sha256, store_request *ret);
int store_pg_request_list(store_pg *p, bool pending_only, store_request **ret, size_t *ret_n);
int store_pg_request_decide(store_pg *p, const char *id, bool approve, const char *reason, int64_t now);
int store_pg_cert_commit(store_pg *p, const store_issue *in, int64_t now);
int store_pg_cert_get(store_pg *p, const char *serial, store_cert *ret);
int store_pg_cert_live_for(store_pg *p, const char *identity, int64_t now, store_cert *ret);
int store_pg_cert_list(store_pg *p, const char *identity, store_cert **ret, size_t *ret_n);
int store_pg_dns_owner(store_pg *p, const char *name, int64_t now, char **ret_identity);
int store_pg_cert_dns_backfill(store_pg *p, int64_t now, store_dns_names_fn names_of, size_t *ret_recorded,
                               size_t *ret_skipped);
int store_pg_cert_revoke(store_pg *p, const char *serial, int reason, int64_t now, const store_audit *audit);
int store_pg_cert_revoke_identity(store_pg *p, const char *identity, int reason, int64_t now,
                                  const store_audit *audit, size_t *ret_n);
int store_pg_key_blocked(store_pg *p, const char *spki_sha256);
int store_pg_cert_foreach_revoked(store_pg *p, int64_t now, store_revoked_fn fn, void *userdata);
int store_pg_revocation_seq(store_pg *p, int64_t *ret);
int store_pg_crl_number_next(store_pg *p, int64_t now, int64_t *ret);
int store_pg_audit_append(store_pg *p, const store_audit *a);
int store_pg_audit_foreach(store_pg *p, size_t limit, store_audit_fn fn, void *userdata);
int store_pg_audit_prune(store_pg *p, int64_t before, size_t max_rows, store_audit_sign_fn sign, void *userdata,
                         size_t *ret_n);
int store_pg_audit_chain_read(store_pg *p, store_audit_link *ret_anchor, store_audit_link *ret_head,
                              store_audit_checkpoint_fn cpfn, store_audit_fn fn, void *userdata);
int store_pg_audit_head(store_pg *p, store_audit_link *ret);
/* store-pg-audit-checkpoint.c: signed checkpoints of the chain. */
int store_pg_audit_checkpoint_add(store_pg *p, const store_audit_checkpoint *cp);
/* Within a pruning's transaction: signs and stores the new anchor's
 * checkpoint, dropping those it makes stale. */
int pg_audit_prune_checkpoint(pg_slot *c, const store_audit_link *anchor, store_audit_sign_fn sign, void *userdata);
/* Within a read transaction: every checkpoint, oldest first. */
int pg_audit_checkpoints_each(pg_slot *c, store_audit_checkpoint_fn fn, void *userdata);
void store_pg_set_audit_sink(store_pg *p, store_audit_fn fn, void *userdata, void (*free_userdata)(void *));
int store_pg_challenge_put(store_pg *p, const store_challenge *c, int64_t now, size_t max_pending,
                           size_t max_per_requester, size_t *ret_replaced);
int store_pg_challenge_take(store_pg *p, const char *id, store_challenge *ret);
int store_pg_ek_add(store_pg *p, const store_ek *v, size_t n, const store_audit *audit, int64_t now);
int store_pg_ek_find(store_pg *p, const char *ek_cert_sha256, const char *ek_pub_sha256, store_ek *ret);
int store_pg_ek_list(store_pg *p, store_ek **ret, size_t *ret_n);
int store_pg_ek_remove(store_pg *p, const char *key, const store_audit *audit, int64_t now);

/* ---- store-pg.c: slots, statements, transactions ---- */

/* Locks a slot, connected (connecting again if its connection broke). */
int pg_enter(store_pg *p, pg_slot **ret);
void pg_leavep(pg_slot **slot);

/* Runs sql with parameters from fmt: 't' const char * (NULL binds NULL),
 * 'b' const void * + size_t (bytea), 'i' int, 'I' int64_t, 'B' bool.
 * *ret (may be NULL) gets the result, for PQclear.  -HWID_E_INVALID for a
 * broken constraint (slot->sqlstate, slot->constraint say which),
 * -HWID_E_STORE for anything else, naming `what`. */
int pg_exec(pg_slot *c, PGresult **ret, const char *what, const char *sql, const char *fmt, ...);
/* sql with n parameters given as libpq takes them (PQexecParams). */
int pg_exec_params(pg_slot *c, const char *what, const char *sql, int n, const char *const *values,
                   const int *lengths, const int *formats);
/* Several statements without parameters (the schema's migrations). */
int pg_exec_script(pg_slot *c, const char *what, const char *sql);
/* Rows a command changed (UPDATE, DELETE, INSERT). */
int64_t pg_changes(PGresult *res);

/* BEGIN, and the write lock. */
int pg_begin_write(pg_slot *c, const char *what);
/* Runs fn in one transaction (BEGIN ... COMMIT), again from the start
 * after a serialization failure or deadlock, and then hands the records
 * it appended to the audit sink.  0 once committed, or fn's error. */
int pg_tx(store_pg *p, pg_tx_fn fn, void *userdata, const char *what);
/* Runs fn in a transaction shared with the other jobs queued meanwhile,
 * each in its own savepoint, with one COMMIT; returns once fn's changes
 * are committed (0) or with fn's error (its detail on this thread). */
int pg_group_commit(store_pg *p, pg_tx_fn fn, void *userdata, const char *what);
/* Runs fn on a slot outside any transaction (single reads). */
int pg_read(store_pg *p, pg_tx_fn fn, void *userdata);

/* Column readers: NULL (or "") for SQL NULL; copies set *oom. */
const char *pg_val(PGresult *res, int row, int col);
char *pg_strdup(PGresult *res, int row, int col, bool *oom);
uint8_t *pg_blobdup(PGresult *res, int row, int col, size_t *ret_len, bool *oom);
/* Exactly len bytes of a bytea into dst; false if NULL or another length. */
bool pg_blob_copy(PGresult *res, int row, int col, uint8_t *dst, size_t len);
void pg_copy(PGresult *res, int row, int col, char *dst, size_t size);
int64_t pg_i64(PGresult *res, int row, int col);
bool pg_bool(PGresult *res, int row, int col);

DEFINE_TRIVIAL_CLEANUP_FUNC(PGresult *, PQclear)

/* ---- store-pg-cert.c ---- */
/* A certificate by serial (lock: FOR UPDATE, inside a transaction). */
int pg_cert_read_serial(pg_slot *c, const char *serial, bool lock, store_cert *ret);

/* ---- store-pg-schema.c ---- */
int pg_migrate(store_pg *p);

/* ---- store-pg-token.c (inside a transaction) ---- */
int pg_token_consume(pg_slot *c, const char *id, int64_t now);
int pg_request_mark_issued(pg_slot *c, const char *id, const char *identity, const char *serial, int64_t now);

/* ---- store-pg-audit.c ---- */
/* Inside a transaction: appends a (at now if a->at is 0), chained, and
 * queues it for the sink. */
int pg_audit_insert(pg_slot *c, const store_audit *a, int64_t now);
void pg_sink_flush(pg_slot *c);
void pg_sink_drop(pg_slot *c);
/* Forgets the records queued after the first keep (a job rolled back). */
void pg_sink_truncate(pg_slot *c, size_t keep);

/* ---- store-pg-revoke.c (inside a transaction) ---- */
int pg_revocation_bump(pg_slot *c);
int pg_keys_block(pg_slot *c, const char *serial, const char *identity, int64_t now);
int pg_key_check(pg_slot *c, const char *spki_sha256);
