/* Opening and closing the PostgreSQL store, its health, and its table of
 * operations: what store_open() gives for a postgresql:// URI.  The URI
 * is checked (no password in it: the password comes from a passfile --
 * ?passfile=PATH in the URI, or PGPASSFILE -- or from PGPASSWORD, so that
 * it is never in a config file's database line, argv or a log), the
 * schema migrated, and /healthz and /readyz answered. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store-pg.h"

static const store_ops pg_ops;

/* "host:port/dbname" for messages, and the refusal of a password. */
static int uri_check(pg_store *p, const char *uri) {
        const char *host = "localhost", *port = "5432", *db = "";
        char *err = NULL;
        PQconninfoOption *opts = PQconninfoParse(uri, &err);
        bool password = false;

        if (!opts) {
                /* libpq's message may quote the URI: not repeated. */
                PQfreemem(err);
                return hwid_fail(HWID_E_CONFIG, "database: not a valid postgresql:// URI");
        }
        for (PQconninfoOption *o = opts; o->keyword; o++) {
                if (!o->val)
                        continue;
                if (strcmp(o->keyword, "host") == 0)
                        host = o->val;
                else if (strcmp(o->keyword, "port") == 0)
                        port = o->val;
                else if (strcmp(o->keyword, "dbname") == 0)
                        db = o->val;
                else if (strcmp(o->keyword, "password") == 0)
                        password = true;
        }
        snprintf(p->label, sizeof(p->label), "%s:%s/%s", host, port, db);
        PQconninfoFree(opts);
        if (password)
                return hwid_fail(HWID_E_CONFIG, "database: the URI for %s holds a password: put it in a passfile "
                                 "(?passfile=PATH in the URI, or PGPASSFILE) or in PGPASSWORD instead",
                                 p->label);
        return 0;
}

static int slots_init(pg_store *p, unsigned pool) {
        if (pool == 0)
                pool = PG_POOL_DEFAULT;
        if (pool > PG_POOL_MAX)
                return hwid_fail(HWID_E_CONFIG, "database_connections: at most %d", PG_POOL_MAX);
        if (!(p->slots = calloc(pool, sizeof(*p->slots))))
                return hwid_fail(HWID_E_NOMEM, NULL);
        for (size_t i = 0; i < pool; i++) {
                p->slots[i].p = p;
                if (pthread_mutex_init(&p->slots[i].lock, NULL) != 0)
                        return hwid_fail(HWID_E_NOMEM, "cannot create the store's locks");
                p->n_slots++;
        }
        return 0;
}

static void close_all(pg_store *p) {
        if (!p)
                return;
        for (size_t i = 0; i < p->n_slots; i++) {
                pg_sink_drop(&p->slots[i]);
                free(p->slots[i].queue);
                PQfinish(p->slots[i].conn);
                pthread_mutex_destroy(&p->slots[i].lock);
        }
        free(p->slots);
        if (p->sink_free)
                p->sink_free(p->sink_userdata);
        pthread_mutex_destroy(&p->sink_lock);
        pthread_mutex_destroy(&p->gc_lock);
        if (p->conninfo)
                explicit_bzero(p->conninfo, strlen(p->conninfo));
        free(p->conninfo);
        free(p);
}

DEFINE_TRIVIAL_CLEANUP_FUNC(pg_store *, close_all)

void pg_free(store *s) {
        close_all(pg_of(s));
}

int pg_open(const char *uri, unsigned pool, store **ret) {
        _cleanup_(close_allp) pg_store *p = NULL;
        int r = pq_load();

        if (r < 0)
                return r;
        p = calloc(1, sizeof(*p));
        if (!p || pthread_mutex_init(&p->sink_lock, NULL) != 0)
                return hwid_fail(HWID_E_NOMEM, NULL);
        p->gc_tail = &p->gc_head;
        if (pthread_mutex_init(&p->gc_lock, NULL) != 0) {
                pthread_mutex_destroy(&p->sink_lock);
                free(TAKE_PTR(p));
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        if ((r = uri_check(p, uri)) < 0 || (r = slots_init(p, pool)) < 0)
                return r;
        if (!(p->conninfo = strdup(uri)))
                return hwid_fail(HWID_E_NOMEM, NULL);
        if ((r = pg_migrate(p)) < 0)
                return r;
        p->base.ops = &pg_ops;
        *ret = &TAKE_PTR(p)->base;
        return 0;
}

void pg_set_audit_sink(store *base, store_audit_fn fn, void *userdata, void (*free_userdata)(void *)) {
        pg_store *p = pg_of(base);

        pthread_mutex_lock(&p->sink_lock);
        if (p->sink_free)
                p->sink_free(p->sink_userdata);
        p->sink = fn;
        p->sink_userdata = fn ? userdata : NULL;
        p->sink_free = fn ? free_userdata : NULL;
        pthread_mutex_unlock(&p->sink_lock);
}

static int ping_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = pg_exec(c, &res, "read the schema version", "SELECT value FROM meta WHERE key = 'schema_version'",
                        NULL);

        (void) userdata;
        if (r >= 0 && PQntuples(res) != 1)
                r = hwid_fail(HWID_E_STORE, "PostgreSQL %s has no schema version", c->p->label);
        return r;
}

int pg_ping(store *s) {
        return pg_read(pg_of(s), ping_run, NULL);
}

int pg_probe_write(store *s, int64_t now) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        _cleanup_(pg_leavep) pg_slot *c = NULL;
        pg_query q;
        int r = pg_bind(&q, "write the readiness probe",
                        "INSERT INTO meta (key, value) VALUES ('ready_probe', $1) "
                        "ON CONFLICT (key) DO UPDATE SET value = excluded.value", "I", now);

        return r < 0 ? r : pg_statement(pg_of(s), &q, &c, &res);
}

typedef struct stats_q {
        int64_t now;
        store_stats *ret;
} stats_q;

static int stats_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        stats_q *q = userdata;
        int r = pg_exec(c, &res, "count certificates and requests",
                        "SELECT (SELECT count(*) FROM certificates WHERE status = 'valid' AND not_after > $1),"
                        "       (SELECT count(*) FROM requests WHERE status = 'pending')", "I", q->now);

        if (r < 0)
                return r;
        *q->ret = (store_stats) { .live_certificates = (uint64_t) pg_i64(res, 0, 0),
                                  .pending_requests = (uint64_t) pg_i64(res, 0, 1) };
        return 0;
}

int pg_stats_get(store *s, int64_t now, store_stats *ret) {
        return pg_read(pg_of(s), stats_run, &(stats_q) { .now = now, .ret = ret });
}

int pg_backup(store *base, const char *path) {
        pg_store *p = pg_of(base);

        (void) path;
        return hwid_fail(HWID_E_CONFIG, "the store is PostgreSQL %s: back it up with pg_dump or pg_basebackup "
                         "(continuous archiving for point-in-time recovery), see docs/HA.md", p->label);
}

/* PostgreSQL checks pages and constraints itself; what can be asked is
 * that the schema is there and answers. */
int pg_integrity_check(store *s) {
        return pg_ping(s);
}

bool pg_is_uri(const char *database) {
        return database && (strncmp(database, "postgresql://", 13) == 0 || strncmp(database, "postgres://", 11) == 0);
}

static const store_ops pg_ops = {
        .free = pg_free,
        .ping = pg_ping,
        .probe_write = pg_probe_write,
        .stats_get = pg_stats_get,
        .backup = pg_backup,
        .integrity_check = pg_integrity_check,
        .token_insert = pg_token_insert,
        .token_get = pg_token_get,
        .token_list = pg_token_list,
        .token_revoke = pg_token_revoke,
        .request_create = pg_request_create,
        .request_get = pg_request_get,
        .request_find = pg_request_find,
        .request_list = pg_request_list,
        .request_decide = pg_request_decide,
        .cert_commit = pg_cert_commit,
        .cert_get = pg_cert_get,
        .cert_live_for = pg_cert_live_for,
        .cert_list = pg_cert_list,
        .dns_owner = pg_dns_owner,
        .cert_dns_backfill = pg_cert_dns_backfill,
        .cert_revoke = pg_cert_revoke,
        .cert_revoke_identity = pg_cert_revoke_identity,
        .key_blocked = pg_key_blocked,
        .cert_foreach_revoked = pg_cert_foreach_revoked,
        .revocation_seq = pg_revocation_seq,
        .crl_number_next = pg_crl_number_next,
        .reads_ahead = true,
        .reads_fetch = pg_reads_fetch,
        .audit_append = pg_audit_append,
        .audit_foreach = pg_audit_foreach,
        .audit_prune = pg_audit_prune,
        .audit_chain_read = pg_audit_chain_read,
        .audit_head = pg_audit_head,
        .audit_chain_pending = pg_audit_chain_pending,
        .audit_pending = pg_audit_pending,
        .audit_checkpoint_add = pg_audit_checkpoint_add,
        .set_audit_sink = pg_set_audit_sink,
        .challenge_put = pg_challenge_put,
        .challenge_take = pg_challenge_take,
        .ek_add = pg_ek_add,
        .ek_find = pg_ek_find,
        .ek_list = pg_ek_list,
        .ek_remove = pg_ek_remove,
        .binding_get = pg_binding_get,
        .binding_list = pg_binding_list,
        .binding_release = pg_binding_release,
        .ca_gen_list = pg_ca_gen_list,
        .ca_gen_seq = pg_ca_gen_seq,
        .ca_gen_prepare = pg_ca_gen_prepare,
        .ca_gen_import = pg_ca_gen_import,
        .ca_gen_activate = pg_ca_gen_activate,
        .ca_gen_retire = pg_ca_gen_retire,
        .ca_gen_unexpired = pg_ca_gen_unexpired,
};

/* A postgresql:// or postgres:// URI (docs/HA.md). */
const store_backend pg_backend = {
        .name = "PostgreSQL",
        .takes = pg_is_uri,
        .open = pg_open,
};
