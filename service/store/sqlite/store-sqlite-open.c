/* Opening and closing the SQLite store, its health, and its table of
 * operations: what store_open() gives for a database path. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "error.h"
#include "store-sqlite.h"

static const store_ops sqlite_ops;

/* Created by us, owner-only: the store holds every CSR and the audit
 * trail.  The -wal and -shm files SQLite adds inherit this mode. */
static int create_file(const char *path) {
        static const char magic[16] = "SQLite format 3";
        _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        char head[sizeof(magic)];
        ssize_t n;

        if (fd < 0)
                return hwid_fail(HWID_E_STORE, "cannot open database %s: %s", path, strerror(errno));
        /* SQLite treats a file shorter than a page as empty and would
         * overwrite it: a mistyped path (a config file, say) is refused. */
        n = pread(fd, head, sizeof(head), 0);
        if (n < 0)
                return hwid_fail(HWID_E_STORE, "cannot read database %s: %s", path, strerror(errno));
        if (n > 0 && (n < (ssize_t) sizeof(head) || memcmp(head, magic, sizeof(magic)) != 0))
                return hwid_fail(HWID_E_STORE, "%s is not an SQLite database", path);
        return 0;
}

/* The store and what its connection keeps going beside it. */
static void close_all(sqlite_store *s) {
        if (!s)
                return;
        sqlite_readers_close(s);
        sqlite_checkpointer_stop(s);
        sqlite_audit_sink_close(s);
        sqlite_conn_free(s);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(sqlite_store *, close_all)

int sqlite_open(const char *path, unsigned connections, store **ret) {
        _cleanup_(close_allp) sqlite_store *s = NULL;
        int r;

        (void) connections; /* one: a file has one writer */
        if (!store_str_ok(path, 4096))
                return hwid_fail(HWID_E_INVALID, "no database path given");
        if ((r = sqlite_alloc(path, &s)) < 0)
                return r;
        s->gc_ready = pthread_mutex_init(&s->gc_lock, NULL) == 0;
        if (!s->gc_ready)
                return hwid_fail(HWID_E_NOMEM, "cannot create the store's commit queue");
        r = create_file(path);
        if (r >= 0)
                r = sqlite_connect(s);
        if (r >= 0)
                r = sqlite_configure(s);
        if (r >= 0)
                r = sqlite_migrate(s);
        if (r >= 0)
                r = sqlite_audit_backfill(s);
        if (r >= 0)
                r = sqlite_checkpointer_start(s);
        if (r >= 0)
                r = sqlite_readers_open(s);
        if (r < 0)
                return r;
        s->base.ops = &sqlite_ops;
        *ret = &TAKE_PTR(s)->base;
        return 0;
}

void sqlite_free(store *s) {
        close_all(sqlite_of(s));
}

int sqlite_ping(store *base) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r;

        r = sqlite_read_enter(&s, &g);
        if (r < 0)
                return r;
        /* Reads a real page (not just "SELECT 1") so a vanished or
         * unreadable file shows. */
        r = sqlite_stmt(s, ST_PING, "SELECT value FROM meta WHERE key = 'schema_version'", &st);
        if (r < 0)
                return r;
        r = sqlite_step(s, st, "read the schema version");
        if (r < 0)
                return r;
        return r == 1 ? 0 : hwid_fail(HWID_E_STORE, "database %s has no schema version", s->path);
}

int sqlite_probe_write(store *base, int64_t now) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sqlite_enter(s, true, &g);

        if (r >= 0)
                r = sqlite_stmt(s, ST_PROBE_WRITE,
                                "INSERT INTO meta (key, value) VALUES ('ready_probe', ?1) "
                                "ON CONFLICT (key) DO UPDATE SET value = excluded.value", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "I", now);
        if (r >= 0)
                r = sqlite_step(s, st, "write the readiness probe");
        if (r < 0)
                return r;
        return sqlite_commit(s, "commit the readiness probe");
}

int sqlite_stats_get(store *base, int64_t now, store_stats *ret) {
        sqlite_store *s = sqlite_of(base);
        _cleanup_(sqlite_leavep) sqlite_store *g = NULL;
        _cleanup_stmt_ sqlite3_stmt *st = NULL;
        int r = sqlite_read_enter(&s, &g);

        /* status = 'valid' literally: certificates_status_not_after serves it. */
        if (r >= 0)
                r = sqlite_stmt(s, ST_STATS,
                                "SELECT (SELECT count(*) FROM certificates WHERE status = 'valid' AND not_after > ?1),"
                                "       (SELECT count(*) FROM requests WHERE status = 'pending')", &st);
        if (r >= 0)
                r = sqlite_bind(s, st, "I", now);
        if (r >= 0)
                r = sqlite_step(s, st, "count certificates and requests");
        if (r == 0)
                r = sqlite_sql_fail(s, "count certificates and requests");
        if (r < 0)
                return r;
        *ret = (store_stats) { .live_certificates = (uint64_t) sqlite3_column_int64(st, 0),
                               .pending_requests = (uint64_t) sqlite3_column_int64(st, 1) };
        return 0;
}

/* SQLite reads nothing ahead: in-process, a read costs no round trip. */
int sqlite_reads_fetch(store *s, store_reads *rd) {
        (void) s;
        (void) rd;
        return 0;
}

int sqlite_audit_nothing_pending(store *s, size_t *ret_n) {
        (void) s;
        *ret_n = 0;
        return 0;
}

static const store_ops sqlite_ops = {
        .free = sqlite_free,
        .ping = sqlite_ping,
        .probe_write = sqlite_probe_write,
        .stats_get = sqlite_stats_get,
        .backup = sqlite_backup,
        .integrity_check = sqlite_integrity_check,
        .token_insert = sqlite_token_insert,
        .token_get = sqlite_token_get,
        .token_list = sqlite_token_list,
        .token_revoke = sqlite_token_revoke,
        .request_create = sqlite_request_create,
        .request_get = sqlite_request_get,
        .request_find = sqlite_request_find,
        .request_list = sqlite_request_list,
        .request_decide = sqlite_request_decide,
        .cert_commit = sqlite_cert_commit,
        .cert_get = sqlite_cert_get,
        .cert_live_for = sqlite_cert_live_for,
        .cert_list = sqlite_cert_list,
        .dns_owner = sqlite_dns_owner,
        .cert_dns_backfill = sqlite_cert_dns_backfill,
        .cert_revoke = sqlite_cert_revoke,
        .cert_revoke_identity = sqlite_cert_revoke_identity,
        .key_blocked = sqlite_key_blocked,
        .cert_foreach_revoked = sqlite_cert_foreach_revoked,
        .revocation_seq = sqlite_revocation_seq,
        .crl_number_next = sqlite_crl_number_next,
        .reads_ahead = false,
        .reads_fetch = sqlite_reads_fetch,
        .audit_append = sqlite_audit_append,
        .audit_foreach = sqlite_audit_foreach,
        .audit_prune = sqlite_audit_prune,
        .audit_chain_read = sqlite_audit_chain_read,
        .audit_head = sqlite_audit_head,
        .audit_chain_pending = sqlite_audit_nothing_pending,
        .audit_pending = sqlite_audit_nothing_pending,
        .audit_checkpoint_add = sqlite_audit_checkpoint_add,
        .set_audit_sink = sqlite_set_audit_sink,
        .challenge_put = sqlite_challenge_put,
        .challenge_take = sqlite_challenge_take,
        .ek_add = sqlite_ek_add,
        .ek_find = sqlite_ek_find,
        .ek_list = sqlite_ek_list,
        .ek_remove = sqlite_ek_remove,
        .binding_get = sqlite_binding_get,
        .binding_list = sqlite_binding_list,
        .binding_release = sqlite_binding_release,
        .ca_gen_list = sqlite_ca_gen_list,
        .ca_gen_seq = sqlite_ca_gen_seq,
        .ca_gen_prepare = sqlite_ca_gen_prepare,
        .ca_gen_import = sqlite_ca_gen_import,
        .ca_gen_activate = sqlite_ca_gen_activate,
        .ca_gen_retire = sqlite_ca_gen_retire,
        .ca_gen_unexpired = sqlite_ca_gen_unexpired,
};

/* Any database string no backend before it takes: a file path. */
const store_backend sqlite_backend = {
        .name = "SQLite",
        .takes = NULL,
        .open = sqlite_open,
};
