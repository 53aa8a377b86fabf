/* The audit chain's linker (PostgreSQL, schema version 6; its queue a
 * table of its own since version 9).
 *
 * An issuance does not chain its audit records.  hwid_issue() queues them
 * in audit_queue as they are -- numbered from audit_pending_seq, no
 * hashes -- so that its commit holds no lock that the whole cluster
 * shares: the commits of every replica flush their WAL side by side,
 * where each used to wait for the previous one's flush under the chain's
 * lock (docs/HA.md, "The write path").  hwidd links them: once a second
 * (its maintenance tick) and before its last checkpoint at shutdown,
 * hwid_audit_link() takes the chain's lock, hashes the committed
 * pending records in the order they were queued, gives each the next id,
 * moves it to the audit table and moves the head -- one statement and one
 * flush for everything every replica committed meanwhile.  A record is
 * in the queue (shown by hwid audit list, with a negative id) from its
 * issuance's commit on, and in the audit table and the chain (checked by
 * hwid audit verify, covered by the next signed checkpoint) from its
 * linking on; a replica that dies leaves its committed records to the
 * others' next tick.  The audit sink gets each record when it is linked,
 * from the replica that linked it.
 *
 * Migration 6 keeps the chain's sequential append for the writes that
 * still use it (revocations, tokens, admin records: hwid_audit_append(),
 * one transaction each) under its new name, hwid_audit_chain_now(), and
 * puts the queue in the place of hwid_audit_chain(), the name that
 * hwid_issue() (migration 5) calls: replicas of version 5 and 6 can run
 * on one database while a cluster is upgraded, both keeping one chain. */
#include <string.h>

#include "error.h"
#include "store-pg.h"

#define LINK_BATCH 5000
#define LINK_ROUNDS 20 /* at most 100,000 records a call: the next tick does the rest */

/* In hwid_audit_link(): queued record x as the chain's next, after h. */
#define PG_LINK_NEXT_SQL \
        "    rec_id := nextval(ids);\n" \
        "    rec_at := x.at; rec_actor := x.actor; rec_action := x.action; rec_target := x.target;\n" \
        "    rec_outcome := x.outcome; rec_reason := x.reason; rec_token_id := x.token_id;\n" \
        "    rec_prev := h;\n" \
        "    rec_hash := hwid_audit_hash(h, ROW(x.at, x.actor, x.action, x.target, x.outcome, x.reason,\n" \
        "      x.token_id)::hwid_audit_rec);\n"

const char pg_link_sql[] =
        "ALTER FUNCTION hwid_audit_chain(hwid_audit_rec[]) RENAME TO hwid_audit_chain_now;\n"
        "CREATE OR REPLACE FUNCTION hwid_audit_append(recs jsonb)\n"
        "RETURNS TABLE (rec_id bigint, rec_prev bytea, rec_hash bytea)\n"
        "LANGUAGE sql AS $$\n"
        "  SELECT * FROM hwid_audit_chain_now(ARRAY(SELECT jsonb_populate_record(NULL::hwid_audit_rec, e)\n"
        "    FROM jsonb_array_elements(recs) WITH ORDINALITY AS t(e, o) ORDER BY o)) $$;\n"
        "CREATE SEQUENCE audit_pending_seq;\n"
        /* Queued: rec_id is the pending (negative) id, no hashes yet. */
        "CREATE FUNCTION hwid_audit_chain(recs hwid_audit_rec[])\n"
        "RETURNS TABLE (rec_id bigint, rec_prev bytea, rec_hash bytea)\n"
        "LANGUAGE plpgsql AS $$\n"
        "DECLARE r hwid_audit_rec;\n"
        "BEGIN\n"
        "  FOREACH r IN ARRAY coalesce(recs, '{}') LOOP\n"
        "    INSERT INTO audit (id, at, actor, action, target, outcome, reason, token_id)\n"
        "      VALUES (-nextval('audit_pending_seq'), r.at, r.actor, r.action, r.target, r.outcome, r.reason,\n"
        "        r.token_id)\n"
        "      RETURNING audit.id INTO rec_id;\n"
        "    RETURN NEXT;\n"
        "  END LOOP;\n"
        "END $$;\n"
        /* Links at most max_n pending records, oldest first; returns
         * each as chained. */
        "CREATE FUNCTION hwid_audit_link(max_n integer)\n"
        "RETURNS TABLE (rec_id bigint, rec_at bigint, rec_actor text, rec_action text, rec_target text,\n"
        "  rec_outcome text, rec_reason text, rec_token_id text, rec_prev bytea, rec_hash bytea)\n"
        "LANGUAGE plpgsql AS $$\n"
        "DECLARE\n"
        "  h bytea;\n"
        "  x record;\n"
        "  ids regclass := pg_get_serial_sequence('audit', 'id');\n"
        "BEGIN\n"
        "  PERFORM pg_advisory_xact_lock(" PG_AUDIT_LOCK ");\n"
        "  SELECT c.hash INTO h FROM audit_chain AS c WHERE c.role = 'head';\n"
        "  h := coalesce(h, decode(repeat('00', 32), 'hex'));\n"
        "  FOR x IN SELECT * FROM audit AS a WHERE a.id < 0 ORDER BY a.id DESC LIMIT max_n LOOP\n"
        PG_LINK_NEXT_SQL
        "    UPDATE audit AS a SET id = rec_id, prev_hash = rec_prev, hash = rec_hash WHERE a.id = x.id;\n"
        "    RETURN NEXT;\n"
        "    h := rec_hash;\n"
        "  END LOOP;\n"
        "  IF rec_id IS NOT NULL THEN\n"
        "    INSERT INTO audit_chain AS c (role, id, at, hash) VALUES ('head', rec_id, rec_at, h)\n"
        "      ON CONFLICT (role) DO UPDATE SET id = excluded.id, at = excluded.at, hash = excluded.hash;\n"
        "  END IF;\n"
        "END $$;\n";

/* Each linked record to the sink, as the store of a write hands it. */
static void sink_rows(pg_store *p, PGresult *res) {
        uint8_t prev[STORE_AUDIT_HASH_LEN], hash[STORE_AUDIT_HASH_LEN];

        pthread_mutex_lock(&p->sink_lock);
        for (int i = 0; p->sink && i < PQntuples(res); i++) {
                store_audit a = { .id = pg_i64(res, i, 0), .at = pg_i64(res, i, 1), .actor = pg_val(res, i, 2),
                                  .action = pg_val(res, i, 3), .target = pg_val(res, i, 4),
                                  .outcome = pg_val(res, i, 5), .reason = pg_val(res, i, 6),
                                  .token_id = pg_val(res, i, 7) };
                if (!pg_blob_copy(res, i, 8, prev, sizeof(prev)) || !pg_blob_copy(res, i, 9, hash, sizeof(hash)))
                        continue;
                a.prev_hash = prev;
                a.hash = hash;
                (void) p->sink(&a, p->sink_userdata);
        }
        pthread_mutex_unlock(&p->sink_lock);
}

/* One statement a batch, in a transaction of its own: a link that broke
 * in flight is either committed or not, and the next one links what is
 * still pending either way. */
int pg_audit_chain_pending(store *base, size_t *ret_n) {
        pg_store *p = pg_of(base);
        size_t total = 0;
        int r = 0;

        for (int round = 0; round < LINK_ROUNDS; round++) {
                _cleanup_(PQclearp) PGresult *res = NULL;
                _cleanup_(pg_leavep) pg_slot *c = NULL;
                pg_query q;
                int n;

                if ((r = pg_bind(&q, "link the audit chain", "SELECT * FROM hwid_audit_link($1)", "i",
                                 LINK_BATCH)) < 0 ||
                    (r = pg_statement(p, &q, &c, &res)) < 0)
                        break;
                n = PQntuples(res);
                sink_rows(p, res);
                total += (size_t) n;
                if (n < LINK_BATCH)
                        break;
        }
        *ret_n = total;
        return r;
}

static int unchained_run(pg_slot *c, void *userdata) {
        _cleanup_(PQclearp) PGresult *res = NULL;
        int r = pg_exec(c, &res, "count the audit records not chained yet",
                        "SELECT count(*) FROM audit_queue", NULL);

        if (r >= 0)
                *(size_t *) userdata = (size_t) pg_i64(res, 0, 0);
        return r;
}

int pg_audit_pending(store *s, size_t *ret_n) {
        return pg_read(pg_of(s), unchained_run, ret_n);
}

/* Records queued in the audit table (negative ids) to the queue, in one
 * statement: by the migration, and by each link, for those that replicas
 * of an older schema committed while the cluster was being upgraded. */
#define PG_QUEUE_SWEEP_SQL(INDENT) \
        INDENT "WITH moved AS (DELETE FROM audit AS a WHERE a.id < 0 RETURNING a.*)\n" \
        INDENT "  INSERT INTO audit_queue (seq, at, actor, action, target, outcome, reason, token_id)\n" \
        INDENT "  SELECT -m.id, m.at, m.actor, m.action, m.target, m.outcome, m.reason, m.token_id FROM moved AS m;\n"

/* 8 -> 9: the records waiting for the linker in a table of their own.
 * They were queued in the audit table itself, with negative ids, and
 * linking one moved it to its place in the chain: an UPDATE of its
 * primary key, which left a dead row and two dead index entries in the
 * audit table for every issuance.  Autovacuum then had the whole table's
 * indexes to scan for them, longer each time as the log grows, and the
 * linker's own scan stepped over every record it had linked since the
 * last vacuum.  Now an issuance inserts its record in audit_queue, and
 * the linker moves it: one insert into the audit table, which only grows,
 * and one delete from a queue a second's worth long.  hwid audit list
 * shows queued records as before (negative ids: -seq). */
const char pg_queue_sql[] =
        "CREATE TABLE audit_queue (\n"
        "  seq bigint PRIMARY KEY, at bigint NOT NULL, actor text NOT NULL, action text NOT NULL, target text,\n"
        "  outcome text NOT NULL, reason text, token_id text);\n"
        PG_QUEUE_SWEEP_SQL("")
        "CREATE OR REPLACE FUNCTION hwid_audit_chain(recs hwid_audit_rec[])\n"
        "RETURNS TABLE (rec_id bigint, rec_prev bytea, rec_hash bytea)\n"
        "LANGUAGE plpgsql AS $$\n"
        "DECLARE r hwid_audit_rec;\n"
        "BEGIN\n"
        "  FOREACH r IN ARRAY coalesce(recs, '{}') LOOP\n"
        "    INSERT INTO audit_queue AS q (seq, at, actor, action, target, outcome, reason, token_id)\n"
        "      VALUES (nextval('audit_pending_seq'), r.at, r.actor, r.action, r.target, r.outcome, r.reason,\n"
        "        r.token_id)\n"
        "      RETURNING -q.seq INTO rec_id;\n"
        "    RETURN NEXT;\n"
        "  END LOOP;\n"
        "END $$;\n"
        "CREATE OR REPLACE FUNCTION hwid_audit_link(max_n integer)\n"
        "RETURNS TABLE (rec_id bigint, rec_at bigint, rec_actor text, rec_action text, rec_target text,\n"
        "  rec_outcome text, rec_reason text, rec_token_id text, rec_prev bytea, rec_hash bytea)\n"
        "LANGUAGE plpgsql SET enable_seqscan = off AS $$\n"
        "DECLARE\n"
        "  h bytea;\n"
        "  x record;\n"
        "  ids regclass := pg_get_serial_sequence('audit', 'id');\n"
        "  done bigint[] := '{}';\n"
        "BEGIN\n"
        "  PERFORM pg_advisory_xact_lock(" PG_AUDIT_LOCK ");\n"
        "  SELECT c.hash INTO h FROM audit_chain AS c WHERE c.role = 'head';\n"
        "  h := coalesce(h, decode(repeat('00', 32), 'hex'));\n"
        PG_QUEUE_SWEEP_SQL("  ")
        "  FOR x IN SELECT * FROM audit_queue AS q ORDER BY q.seq LIMIT max_n LOOP\n"
        PG_LINK_NEXT_SQL
        "    INSERT INTO audit (id, at, actor, action, target, outcome, reason, token_id, prev_hash, hash)\n"
        "      VALUES (rec_id, x.at, x.actor, x.action, x.target, x.outcome, x.reason, x.token_id, rec_prev, rec_hash);\n"
        "    done := done || x.seq;\n"
        "    RETURN NEXT;\n"
        "    h := rec_hash;\n"
        "  END LOOP;\n"
        "  DELETE FROM audit_queue AS q WHERE q.seq = ANY (done);\n"
        "  IF rec_id IS NOT NULL THEN\n"
        "    INSERT INTO audit_chain AS c (role, id, at, hash) VALUES ('head', rec_id, rec_at, h)\n"
        "      ON CONFLICT (role) DO UPDATE SET id = excluded.id, at = excluded.at, hash = excluded.hash;\n"
        "  END IF;\n"
        "END $$;\n";
