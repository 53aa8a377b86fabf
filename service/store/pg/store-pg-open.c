/* Opening and closing the PostgreSQL store, and its health: the URI is
 * checked (no password in it: the password comes from a passfile --
 * ?passfile=PATH in the URI, or PGPASSFILE -- or from PGPASSWORD, so that
 * it is never in a config file's database line, argv or a log), the
 * schema migrated, and /healthz and /readyz answered. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store-pg.h"

/* "host:port/dbname" for messages, and the refusal of a password. */
static int uri_check(store_pg *p, const char *uri) {
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

static int slots_init(store_pg *p, unsigned pool) {
        if (pool == 0)
                pool = STORE_PG_POOL_DEFAULT;
        if (pool > STORE_PG_POOL_MAX)
                return hwid_fail(HWID_E_CONFIG, "database_connections: at most %d", STORE_PG_POOL_MAX);
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

void store_pg_free(store_pg *p) {
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

DEFINE_TRIVIAL_CLEANUP_FUNC(store_pg *, store_pg_free)

int store_pg_open(const char *uri, unsigned pool, store_pg **ret) {
        _cleanup_(store_pg_freep) store_pg *p = NULL;
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
        *ret = TAKE_PTR(p);
        return 0;
}

void store_pg_set_audit_sink(store_pg *p, store_audit_fn fn, void *userdata, void (*free_userdata)(void *)) {
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

int store_pg_ping(store_pg *p) {
        return pg_read(p, ping_run, NULL);
}

int store_pg_probe_write(store_pg *p, int64_t now) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        _cleanup_(pg_leavep) pg_slot *c = NULL;
        pg_query q;
        int r = pg_bind(&q, "write the readiness probe",
                        "INSERT INTO meta (key, value) VALUES ('ready_probe', $1) "
                        "ON CONFLICT (key) DO UPDATE SET value = excluded.value", "I", now);

        return r < 0 ? r : pg_statement(p, &q, &c, &res);
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

int store_pg_stats_get(store_pg *p, int64_t now, store_stats *ret) {
        return pg_read(p, stats_run, &(stats_q) { .now = now, .ret = ret });
}

int store_pg_backup(store_pg *p, const char *path) {
        (void) path;
        return hwid_fail(HWID_E_CONFIG, "the store is PostgreSQL %s: back it up with pg_dump or pg_basebackup "
                         "(continuous archiving for point-in-time recovery), see docs/HA.md", p->label);
}

/* PostgreSQL checks pages and constraints itself; what can be asked is
 * that the schema is there and answers. */
int store_pg_integrity_check(store_pg *p) {
        return store_pg_ping(p);
}
