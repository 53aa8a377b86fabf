/* CA generations in PostgreSQL (store.h), as the SQLite store keeps them
 * (store-sqlite-gens.c): each write one transaction, taking the table's
 * lock first so that two rollover commands on two hosts are ordered,
 * with its audit record and a move of meta.ca_generation_seq, which every
 * replica reads once a second to switch together. */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "store-pg.h"
#include "store-rows.h"

static int gen_from_row(PGresult *res, int row, void *ret) {
        store_ca_gen g = { 0 };
        bool oom = false;

        g.generation = (int) pg_i64(res, row, 0);
        g.state = store_ca_state_parse(pg_val(res, row, 1));
        g.subject = pg_strdup(res, row, 2, &oom);
        g.cert = pg_blobdup(res, row, 3, &g.cert_len, &oom);
        g.chain = pg_strdup(res, row, 4, &oom);
        g.key_uri = pg_strdup(res, row, 5, &oom);
        g.new_with_old = pg_blobdup(res, row, 6, &g.new_with_old_len, &oom);
        g.old_with_new = pg_blobdup(res, row, 7, &g.old_with_new_len, &oom);
        g.prepared_at = pg_i64(res, row, 8);
        g.activated_at = pg_i64(res, row, 9);
        g.retired_at = pg_i64(res, row, 10);
        if (oom) {
                store_ca_gen_clear(&g);
                return hwid_fail(HWID_E_NOMEM, NULL);
        }
        *(store_ca_gen *) ret = g;
        return 0;
}

static void gens_free(void *all, size_t n) {
        store_ca_gen_list_free(all, n);
}

typedef struct gen_q {
        const store_ca_gen *first, *next;
        bool replace;
        int generation;
        int64_t now;
        const store_audit *audit;
        store_ca_gen *list;
        size_t n;
        int64_t seq;
        uint64_t count;
} gen_q;

static int list_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        gen_q *q = userdata;
        int r = pg_exec(c, &res, "list the CA generations",
                        "SELECT " CA_GEN_COLS " FROM ca_generations ORDER BY generation", NULL);

        return r < 0 ? r : pg_rows(res, sizeof(store_ca_gen), gen_from_row, gens_free, (void **) &q->list, &q->n);
}

int pg_ca_gen_list(store *s, store_ca_gen **ret, size_t *ret_n) {
        gen_q q = { 0 };
        int r = pg_read(pg_of(s), list_run, &q);

        if (r < 0)
                return r;
        *ret = q.list;
        *ret_n = q.n;
        return 0;
}

static int seq_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        gen_q *q = userdata;
        int r = pg_exec(c, &res, "read the CA generations' sequence",
                        "SELECT value FROM meta WHERE key = 'ca_generation_seq'", NULL);

        if (r >= 0 && PQntuples(res) != 1)
                return hwid_fail(HWID_E_STORE, "PostgreSQL %s has no CA generations' sequence", c->p->label);
        if (r >= 0)
                q->seq = pg_i64(res, 0, 0);
        return r;
}

int pg_ca_gen_seq(store *s, int64_t *ret) {
        gen_q q = { 0 };
        int r = pg_read(pg_of(s), seq_run, &q);

        if (r >= 0)
                *ret = q.seq;
        return r;
}

/* The first statement of every write: rollover commands on two hosts
 * take their turns. */
static int gen_lock(pg_slot *c) {
        return pg_exec(c, NULL, "lock the CA generations", "LOCK TABLE ca_generations IN EXCLUSIVE MODE", NULL);
}

/* The last statements of every write: the sequence moves, the record. */
static int gen_write_end(pg_slot *c, const gen_q *q) {
        int r = pg_exec(c, NULL, "move the CA generations' sequence",
                        "UPDATE meta SET value = value + 1 WHERE key = 'ca_generation_seq'", NULL);

        return r >= 0 && q->audit ? pg_audit_insert(c, q->audit, q->now) : r;
}

static int gen_insert(pg_slot *c, const store_ca_gen *g, int64_t now) {
        int r = pg_exec(c, NULL, "record a CA generation",
                        "INSERT INTO ca_generations (" CA_GEN_COLS ") "
                        "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, nullif($10, 0), NULL)", "ittbttbbII",
                        g->generation, store_ca_state_name(g->state), g->subject, (const char *) g->cert, g->cert_len,
                        g->chain, g->key_uri, (const char *) g->new_with_old, g->new_with_old_len,
                        (const char *) g->old_with_new, g->old_with_new_len, g->prepared_at ? g->prepared_at : now,
                        g->state == CA_GEN_ACTIVE ? (g->activated_at ? g->activated_at : now) : (int64_t) 0);

        char why[512];

        if (r != -HWID_E_INVALID)
                return r;
        snprintf(why, sizeof(why), "%s", hwid_strerror(r));
        return hwid_fail(HWID_E_CONFLICT, "cannot record CA generation %d: %s", g->generation, why);
}

/* The highest generation recorded (0: none) and the prepared one (0: none). */
static int gen_summary(pg_slot *c, int *ret_max, int *ret_prepared) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = pg_exec(c, &res, "read the CA generations",
                        "SELECT coalesce(max(generation), 0), "
                        "coalesce(max(CASE WHEN state = 'prepared' THEN generation END), 0) FROM ca_generations",
                        NULL);

        if (r < 0)
                return r;
        *ret_max = (int) pg_i64(res, 0, 0);
        *ret_prepared = (int) pg_i64(res, 0, 1);
        return 0;
}

static int prepare_run(pg_slot *c, void *userdata) {
        gen_q *q = userdata;
        int max, prepared, r = gen_lock(c);

        if (r >= 0)
                r = gen_summary(c, &max, &prepared);
        if (r >= 0 && max == 0 && !q->first)
                return hwid_fail(HWID_E_INVALID, "the first rollover records generation 1 with the next");
        if (r >= 0 && max == 0 && (r = store_ca_gen_check(q->first, CA_GEN_ACTIVE)) >= 0)
                r = q->first->generation == 1 ? gen_insert(c, q->first, q->now)
                                              : hwid_fail(HWID_E_INVALID, "the first generation recorded is 1");
        if (r >= 0 && prepared && q->replace &&
            (r = pg_exec(c, NULL, "replace the prepared CA generation",
                         "DELETE FROM ca_generations WHERE state = 'prepared'", NULL)) >= 0)
                r = gen_summary(c, &max, &prepared);
        if (r < 0)
                return r;
        if (prepared)
                return hwid_fail(HWID_E_CONFLICT, "CA generation %d is prepared already: activate it, or prepare "
                                 "again replacing it", prepared);
        if (q->next->generation != (max ? max : 1) + 1)
                return hwid_fail(HWID_E_CONFLICT, "the next CA generation is %d, not %d", (max ? max : 1) + 1,
                                 q->next->generation);
        r = gen_insert(c, q->next, q->now);
        return r < 0 ? r : gen_write_end(c, q);
}

int pg_ca_gen_prepare(store *s, const store_ca_gen *first, const store_ca_gen *next, bool replace,
                      const store_audit *audit, int64_t now) {
        gen_q q = { .first = first, .next = next, .replace = replace, .audit = audit, .now = now };
        int r = store_ca_gen_check(next, CA_GEN_PREPARED);

        return r < 0 ? r : pg_tx(pg_of(s), prepare_run, &q, "commit the CA generations");
}

/* Generation n must be prepared (-HWID_E_NOT_FOUND); with_cert: and
 * have its certificate (else -HWID_E_CONFLICT), without: not yet. */
static int must_be_prepared(pg_slot *c, int n, bool with_cert) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = pg_exec(c, &res, "read a CA generation",
                        "SELECT state, cert IS NOT NULL FROM ca_generations WHERE generation = $1", "i", n);

        if (r < 0)
                return r;
        if (PQntuples(res) != 1 || store_ca_state_parse(pg_val(res, 0, 0)) != CA_GEN_PREPARED)
                return hwid_fail(HWID_E_NOT_FOUND, "CA generation %d is not prepared%s", n,
                                 PQntuples(res) == 1 ? " (it is not a rollover in the making)" : "");
        if (with_cert && !pg_bool(res, 0, 1))
                return hwid_fail(HWID_E_CONFLICT, "CA generation %d has no certificate yet: import the one the "
                                 "offline root signed first", n);
        if (!with_cert && pg_bool(res, 0, 1))
                return hwid_fail(HWID_E_CONFLICT, "CA generation %d has its certificate already", n);
        return 0;
}

static int import_run(pg_slot *c, void *userdata) {
        gen_q *q = userdata;
        const store_ca_gen *g = q->next;
        int r = gen_lock(c);

        if (r >= 0)
                r = must_be_prepared(c, q->generation, false);
        if (r >= 0)
                r = pg_exec(c, NULL, "import a CA generation's certificate",
                            "UPDATE ca_generations SET subject = $2, cert = $3, chain = $4, new_with_old = $5, "
                            "old_with_new = $6 WHERE generation = $1", "itbtbb", q->generation, g->subject,
                            (const char *) g->cert, g->cert_len, g->chain, (const char *) g->new_with_old,
                            g->new_with_old_len, (const char *) g->old_with_new, g->old_with_new_len);
        return r < 0 ? r : gen_write_end(c, q);
}

int pg_ca_gen_import(store *s, int generation, const store_ca_gen *g, const store_audit *audit, int64_t now) {
        gen_q q = { .next = g, .generation = generation, .audit = audit, .now = now };
        int r = store_ca_gen_check(g, CA_GEN_PREPARED);

        if (r >= 0 && (g->generation != generation || !g->cert))
                r = hwid_fail(HWID_E_INVALID, "an import gives CA generation %d its certificate", generation);
        return r < 0 ? r : pg_tx(pg_of(s), import_run, &q, "commit the CA generations");
}

static int activate_run(pg_slot *c, void *userdata) {
        gen_q *q = userdata;
        int r = gen_lock(c);

        if (r >= 0)
                r = must_be_prepared(c, q->generation, true);
        if (r >= 0)
                r = pg_exec(c, NULL, "activate a CA generation",
                            "UPDATE ca_generations SET state = 'previous' WHERE state = 'active'", NULL);
        if (r >= 0)
                r = pg_exec(c, NULL, "activate a CA generation",
                            "UPDATE ca_generations SET state = 'active', activated_at = $2 WHERE generation = $1",
                            "iI", q->generation, q->now);
        return r < 0 ? r : gen_write_end(c, q);
}

int pg_ca_gen_activate(store *s, int generation, const store_audit *audit, int64_t now) {
        return pg_tx(pg_of(s), activate_run, &(gen_q) { .generation = generation, .audit = audit, .now = now },
                     "commit the CA generations");
}

static int retire_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        gen_q *q = userdata;
        store_ca_state st;
        int r = gen_lock(c);

        if (r >= 0)
                r = pg_exec(c, &res, "read a CA generation", "SELECT state FROM ca_generations WHERE generation = $1",
                            "i", q->generation);
        if (r < 0)
                return r;
        if (PQntuples(res) != 1)
                return hwid_fail(HWID_E_NOT_FOUND, "there is no CA generation %d", q->generation);
        if ((st = store_ca_state_parse(pg_val(res, 0, 0))) == CA_GEN_RETIRED)
                return hwid_fail(HWID_E_NOT_FOUND, "CA generation %d is retired already", q->generation);
        if (st != CA_GEN_PREVIOUS)
                return hwid_fail(HWID_E_CONFLICT, "CA generation %d is %s: only a generation a newer one replaced "
                                 "is retired", q->generation, store_ca_state_name(st));
        r = pg_exec(c, NULL, "retire a CA generation",
                    "UPDATE ca_generations SET state = 'retired', retired_at = $2 WHERE generation = $1", "iI",
                    q->generation, q->now);
        return r < 0 ? r : gen_write_end(c, q);
}

int pg_ca_gen_retire(store *s, int generation, const store_audit *audit, int64_t now) {
        return pg_tx(pg_of(s), retire_run, &(gen_q) { .generation = generation, .audit = audit, .now = now },
                     "commit the CA generations");
}

static int unexpired_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        gen_q *q = userdata;
        int r = pg_exec(c, &res, "count a CA generation's certificates",
                        "SELECT count(*), coalesce(max(not_after), 0) FROM certificates "
                        "WHERE generation = $1 AND not_after > $2", "iI", q->generation, q->now);

        if (r < 0)
                return r;
        q->count = (uint64_t) pg_i64(res, 0, 0);
        q->seq = pg_i64(res, 0, 1);
        return 0;
}

int pg_ca_gen_unexpired(store *s, int generation, int64_t now, uint64_t *ret_n, int64_t *ret_last) {
        gen_q q = { .generation = generation, .now = now };
        int r = pg_read(pg_of(s), unexpired_run, &q);

        if (r < 0)
                return r;
        *ret_n = q.count;
        *ret_last = q.seq;
        return 0;
}
