/* The PostgreSQL store's server-side functions, installed by migration 3
 * (store-pg-schema.c): what an issuance writes, and the audit chain's
 * append, run inside the database so that each is one statement -- one
 * round trip -- and the chain's head is held for the microseconds of its
 * own work and the commit's WAL flush, never across a round trip
 * (docs/HA.md, "The write path").
 *
 *   hwid_audit_hash(prev, rec)   the record's hash: SHA-256 of store.h's
 *                                encoding, the bytes store_audit_hash()
 *                                and tests/integration/audit-chain.py hash
 *   hwid_audit_chain(recs)       appends recs in order, chained, and moves
 *                                the head, under the chain's lock
 *                                (PG_AUDIT_LOCK, taken last and held to
 *                                COMMIT); returns each id, prev_hash, hash
 *   hwid_audit_append(jsonb)     the same for records given as JSON
 *   hwid_issue_one(jsonb)        one issuance, as store_cert_commit() says:
 *                                the key's lock (shared) and block list,
 *                                the token use, the approved request, the
 *                                superseded certificate, the retired ones,
 *                                the identity's binding to its TPM
 *                                (migration 12), the certificate, its DNS
 *                                names; a refusal
 *                                raises SQLSTATE HW001 with a code
 *   hwid_issue(jsonb)            a group commit: the members, then each
 *                                token used once for all the members that
 *                                hold it (migration 8), or, when one
 *                                fails, every member in a subtransaction
 *                                of its own (one that fails is undone
 *                                alone); the audit record of each that
 *                                succeeded queued as it goes
 *                                (store-pg-link.c links them); returns
 *                                each member's result
 *   hwid_challenge_put(...)      store_challenge_put(), its bounds (all,
 *                                and per requester) exact across replicas
 *                                under PG_CHALLENGE_LOCK;
 *                                a refusal ("full", "exists") undoes its
 *                                deletion of expired challenges, as a
 *                                failed transaction did
 *
 * Results of hwid_issue() (store-pg-cert.c turns them into errors):
 * ok, key_blocked (detail: the serial that blocked it), token_unknown,
 * token ("revoked expires_at uses_left"), request_missing,
 * request_status (its status), request_identity (its identity),
 * cert_missing, cert_identity (its identity), cert_revoked,
 * cert_superseded, cert_expired, exists, live, bound (the binding), dns
 * (the name), retry (a
 * deadlock or serialization failure: run it again), invalid (a broken
 * constraint) and error ("SQLSTATE message"). */
#include "store-pg.h"

/* hwid_issue_one(): its plans are cached per connection (PL/pgSQL keeps a
 * generic plan from the sixth call on, and so do the foreign keys' checks
 * its inserts run), so each was made for the tables as they were then --
 * maybe a page long, when reading all of it costs less than an index, and
 * they may have grown a hundredfold before autovacuum's next ANALYZE makes
 * them planned again.  So it runs with sequential scans off, and no
 * statement leaves the planner a choice that reads more than its rows: a
 * certificate is reached by its serial or its identity, never with a bare
 * "status = 'valid'" that a full scan of a partial index on valid
 * certificates would also answer (tests/integration/pg-plans.sh). */
#define PG_ISSUE_ONE_SQL PG_ISSUE_ONE_SQL_USING_TOKEN("")
/* USE_TOKEN: what else decides whether the token is used here (migration
 * 8 leaves it to hwid_issue() when the member says "token_later"). */
#define PG_ISSUE_ONE_SQL_USING_TOKEN(USE_TOKEN) PG_ISSUE_ONE_SQL_WITH(USE_TOKEN, "")
/* BINDING: what runs before the certificate goes in (migration 11: its
 * identity's binding to a TPM, PG_ISSUE_BINDING_SQL). */
#define PG_ISSUE_ONE_SQL_WITH(USE_TOKEN, BINDING) PG_ISSUE_ONE_SQL_COLS(USE_TOKEN, BINDING, "", "")
/* COLS, VALS: more columns of the certificate and their values (migration
 * 13: the CA generation that issued it). */
#define PG_ISSUE_ONE_SQL_COLS(USE_TOKEN, BINDING, COLS, VALS) \
        "CREATE OR REPLACE FUNCTION hwid_issue_one(m jsonb) RETURNS void LANGUAGE plpgsql\n" \
        "  SET enable_seqscan = off AS $$\n" \
        "DECLARE\n" \
        "  now_ bigint := (m->>'now')::bigint;\n" \
        "  ident text := m->>'identity';\n" \
        "  s text := m->>'serial';\n" \
        "  v text;\n" \
        "  x record;\n" \
        "  do_replace boolean := coalesce((m->>'replace')::boolean, false);\n" \
        "  tries integer := 0;\n" \
        "BEGIN\n" \
        "  PERFORM pg_advisory_xact_lock_shared(" PG_KEY_LOCK_CLASS ", hwid_key_lock_id(m->>'spki'));\n" \
        "  SELECT serial INTO x FROM blocked_keys WHERE spki_sha256 = m->>'spki';\n" \
        "  IF FOUND THEN\n" \
        "    PERFORM hwid_fail('key_blocked', x.serial);\n" \
        "  END IF;\n" \
        "  v := m->>'token';\n" \
        "  IF v IS NOT NULL" USE_TOKEN " THEN\n" \
        "    UPDATE tokens SET uses_left = uses_left - 1\n" \
        "      WHERE id = v AND NOT revoked AND expires_at > now_ AND uses_left > 0;\n" \
        "    IF NOT FOUND THEN\n" \
        "      SELECT revoked, expires_at, uses_left INTO x FROM tokens WHERE id = v;\n" \
        "      IF NOT FOUND THEN\n" \
        "        PERFORM hwid_fail('token_unknown', NULL);\n" \
        "      END IF;\n" \
        "      PERFORM hwid_fail('token', format('%s %s %s', x.revoked::integer, x.expires_at, x.uses_left));\n" \
        "    END IF;\n" \
        "  END IF;\n" \
        "  v := m->>'request';\n" \
        "  IF v IS NOT NULL THEN\n" \
        "    UPDATE requests SET status = 'issued', serial = s, updated_at = now_\n" \
        "      WHERE id = v AND status = 'approved' AND hwid_fold(identity) = hwid_fold(ident);\n" \
        "    IF NOT FOUND THEN\n" \
        "      SELECT status, identity INTO x FROM requests WHERE id = v;\n" \
        "      IF NOT FOUND THEN\n" \
        "        PERFORM hwid_fail('request_missing', NULL);\n" \
        "      ELSIF x.status <> 'approved' THEN\n" \
        "        PERFORM hwid_fail('request_status', x.status);\n" \
        "      END IF;\n" \
        "      PERFORM hwid_fail('request_identity', x.identity);\n" \
        "    END IF;\n" \
        "  END IF;\n" \
        "  v := m->>'supersedes';\n" \
        "  IF v IS NOT NULL THEN\n" \
        "    SELECT identity, status, not_after INTO x FROM certificates WHERE serial = v FOR UPDATE;\n" \
        "    IF NOT FOUND THEN\n" \
        "      PERFORM hwid_fail('cert_missing', NULL);\n" \
        "    ELSIF hwid_fold(x.identity) <> hwid_fold(ident) THEN\n" \
        "      PERFORM hwid_fail('cert_identity', x.identity);\n" \
        "    ELSIF x.status <> 'valid' THEN\n" \
        "      PERFORM hwid_fail('cert_' || x.status, NULL);\n" \
        "    ELSIF now_ >= x.not_after THEN\n" \
        "      PERFORM hwid_fail('cert_expired', NULL);\n" \
        "    END IF;\n" \
        "    UPDATE certificates SET status = 'superseded' WHERE serial = v;\n" \
        "  END IF;\n" \
        BINDING \
        "  LOOP\n" \
        "    UPDATE certificates SET status = 'superseded'\n" \
        "      WHERE hwid_fold(identity) = hwid_fold(ident) AND status = 'valid'\n" \
        "        AND (not_after <= now_ OR do_replace);\n" \
        "    INSERT INTO certificates (serial, identity, subject, profile, spki_sha256, der, not_before, not_after,\n" \
        "        status, revoked_at, revocation_reason, request_id, created_at, role, token_id, scope, ek_cert_sha256,\n" \
        "        ek_pub_sha256, ak_name" COLS ")\n" \
        "      VALUES (s, ident, m->>'subject', m->>'profile', m->>'spki', decode(m->>'der', 'base64'),\n" \
        "        (m->>'not_before')::bigint, (m->>'not_after')::bigint, 'valid', 0, 0, m->>'request_id', now_,\n" \
        "        m->>'role', m->>'token', m->>'scope', m->>'ek_cert', m->>'ek_pub', m->>'ak_name'" VALS ")\n" \
        "      ON CONFLICT DO NOTHING;\n" \
        "    EXIT WHEN FOUND;\n" \
        "    IF EXISTS (SELECT 1 FROM certificates WHERE serial = s) THEN\n" \
        "      PERFORM hwid_fail('exists', NULL);\n" \
        "    END IF;\n" \
        "    tries := tries + 1;\n" \
        "    IF NOT do_replace OR tries >= 8 THEN\n" \
        "      PERFORM hwid_fail('live', NULL);\n" \
        "    END IF;\n" \
        "  END LOOP;\n" \
        "  FOR v IN SELECT jsonb_array_elements_text(m->'dns') LOOP\n" \
        "    SELECT c.serial, c.status, c.not_after INTO x FROM certificates AS c\n" \
        "      WHERE c.serial = (SELECT d.serial FROM certificate_dns AS d WHERE d.name = v AND d.live);\n" \
        "    IF FOUND AND x.status = 'valid' AND x.not_after <= now_ THEN\n" \
        "      UPDATE certificates SET status = 'superseded' WHERE serial = x.serial AND status = x.status;\n" \
        "    END IF;\n" \
        "    INSERT INTO certificate_dns (serial, name, live) VALUES (s, v, true) ON CONFLICT DO NOTHING;\n" \
        "    IF NOT FOUND THEN\n" \
        "      IF NOT EXISTS (SELECT 1 FROM certificate_dns WHERE serial = s AND name = v) THEN\n" \
        "        PERFORM hwid_fail('dns', v);\n" \
        "      END IF;\n" \
        "    END IF;\n" \
        "  END LOOP;\n" \
        "END $$;\n"

/* One member of a group commit, in a subtransaction of its own: RES and
 * DET (PL/pgSQL variables) get its result and detail when it fails. */
#define PG_ISSUE_MEMBER_SQL(RES, DET) \
        "    BEGIN\n" \
        "      PERFORM hwid_issue_one(m);\n" \
        "    EXCEPTION WHEN OTHERS THEN\n" \
        "      GET STACKED DIAGNOSTICS st = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;\n" \
        "      " RES " := CASE WHEN st = 'HW001' THEN msg WHEN st IN ('40P01', '40001') THEN 'retry'\n" \
        "                     WHEN st LIKE '23%' THEN 'invalid' ELSE 'error' END;\n" \
        "      " DET " := CASE WHEN st = 'HW001' THEN det ELSE st || ' ' || msg END;\n" \
        "    END;\n"

/* Each member of a group commit in a subtransaction of its own, its
 * result returned as it goes, its audit record queued when it succeeded;
 * LAST: the last member's index. */
#define PG_ISSUE_EACH_SQL(LAST) \
        "  FOR k IN 0 .. " LAST " LOOP\n" \
        "    m := batch -> k;\n" \
        "    member := k;\n" \
        "    result := 'ok';\n" \
        "    result_detail := NULL;\n" \
        "    audit_id := NULL;\n" \
        PG_ISSUE_MEMBER_SQL("result", "result_detail") \
        "    a := m -> 'audit';\n" \
        "    IF result = 'ok' AND jsonb_typeof(a) = 'object' THEN\n" \
        "      SELECT c.rec_id INTO audit_id\n" \
        "        FROM hwid_audit_chain(ARRAY[jsonb_populate_record(NULL::hwid_audit_rec, a)]) AS c;\n" \
        "    END IF;\n" \
        "    RETURN NEXT;\n" \
        "  END LOOP;\n"

const char pg_functions_sql[] =
        "CREATE TYPE hwid_audit_rec AS (at bigint, actor text, action text, target text, outcome text, reason text,\n"
        "  token_id text);\n"
        "CREATE FUNCTION hwid_audit_field(text) RETURNS bytea IMMUTABLE PARALLEL SAFE LANGUAGE sql AS\n"
        "  $$ SELECT CASE WHEN $1 IS NULL THEN '\\xffffffff'::bytea\n"
        "                 ELSE int4send(octet_length(convert_to($1, 'UTF8'))) || convert_to($1, 'UTF8') END $$;\n"
        "CREATE FUNCTION hwid_audit_hash(prev bytea, r hwid_audit_rec) RETURNS bytea IMMUTABLE PARALLEL SAFE\n"
        "  LANGUAGE sql AS\n"
        "  $$ SELECT sha256('\\x687769642d61756469742d763100'::bytea\n"
        "       || coalesce(prev, decode(repeat('00', 32), 'hex'))\n"
        "       || int8send(r.at) || hwid_audit_field(r.actor) || hwid_audit_field(r.action)\n"
        "       || hwid_audit_field(r.target)\n"
        "       || hwid_audit_field(r.outcome) || hwid_audit_field(r.reason) || hwid_audit_field(r.token_id)) $$;\n"
        "CREATE FUNCTION hwid_audit_chain(recs hwid_audit_rec[])\n"
        "RETURNS TABLE (rec_id bigint, rec_prev bytea, rec_hash bytea)\n"
        "LANGUAGE plpgsql AS $$\n"
        "DECLARE\n"
        "  h bytea;\n"
        "  r hwid_audit_rec;\n"
        "  last_at bigint;\n"
        "BEGIN\n"
        "  IF coalesce(cardinality(recs), 0) = 0 THEN\n"
        "    RETURN;\n"
        "  END IF;\n"
        "  PERFORM pg_advisory_xact_lock(" PG_AUDIT_LOCK ");\n"
        "  SELECT c.hash INTO h FROM audit_chain AS c WHERE c.role = 'head';\n"
        "  h := coalesce(h, decode(repeat('00', 32), 'hex'));\n"
        "  FOREACH r IN ARRAY recs LOOP\n"
        "    rec_prev := h;\n"
        "    rec_hash := hwid_audit_hash(h, r);\n"
        "    INSERT INTO audit (at, actor, action, target, outcome, reason, token_id, prev_hash, hash)\n"
        "      VALUES (r.at, r.actor, r.action, r.target, r.outcome, r.reason, r.token_id, rec_prev, rec_hash)\n"
        "      RETURNING audit.id INTO rec_id;\n"
        "    RETURN NEXT;\n"
        "    h := rec_hash;\n"
        "    last_at := r.at;\n"
        "  END LOOP;\n"
        "  INSERT INTO audit_chain AS c (role, id, at, hash) VALUES ('head', rec_id, last_at, h)\n"
        "    ON CONFLICT (role) DO UPDATE SET id = excluded.id, at = excluded.at, hash = excluded.hash;\n"
        "END $$;\n"
        "CREATE FUNCTION hwid_audit_append(recs jsonb)\n"
        "RETURNS TABLE (rec_id bigint, rec_prev bytea, rec_hash bytea)\n"
        "LANGUAGE sql AS $$\n"
        "  SELECT * FROM hwid_audit_chain(ARRAY(SELECT jsonb_populate_record(NULL::hwid_audit_rec, e)\n"
        "    FROM jsonb_array_elements(recs) WITH ORDINALITY AS t(e, o) ORDER BY o)) $$;\n"
        "CREATE FUNCTION hwid_key_lock_id(text) RETURNS integer IMMUTABLE STRICT PARALLEL SAFE LANGUAGE sql AS\n"
        "  $$ SELECT ('x' || left(md5($1), 8))::bit(32)::integer $$;\n"
        "CREATE FUNCTION hwid_fail(code text, detail text) RETURNS void LANGUAGE plpgsql AS\n"
        "  $$ BEGIN RAISE EXCEPTION USING ERRCODE = 'HW001', MESSAGE = code, DETAIL = coalesce(detail, ''); END $$;\n"
        PG_ISSUE_ONE_SQL
        "CREATE FUNCTION hwid_issue(batch jsonb)\n"
        "RETURNS TABLE (member integer, result text, result_detail text, audit_id bigint, audit_prev bytea,\n"
        "  audit_hash bytea)\n"
        "LANGUAGE plpgsql AS $$\n"
        "DECLARE\n"
        "  n integer := jsonb_array_length(batch);\n"
        "  m jsonb;\n"
        "  st text;\n"
        "  msg text;\n"
        "  det text;\n"
        "  res text[] := array_fill('ok'::text, ARRAY[n]);\n"
        "  dets text[] := array_fill(NULL::text, ARRAY[n]);\n"
        "  recs hwid_audit_rec[] := '{}';\n"
        "  who integer[] := '{}';\n"
        "  aid bigint[] := array_fill(NULL::bigint, ARRAY[n]);\n"
        "  ap bytea[] := array_fill(NULL::bytea, ARRAY[n]);\n"
        "  ah bytea[] := array_fill(NULL::bytea, ARRAY[n]);\n"
        "  x record;\n"
        "BEGIN\n"
        "  FOR k IN 1 .. n LOOP\n"
        "    m := batch -> (k - 1);\n"
        PG_ISSUE_MEMBER_SQL("res[k]", "dets[k]")
        "    IF res[k] = 'ok' AND jsonb_typeof(m->'audit') = 'object' THEN\n"
        "      recs := recs || jsonb_populate_record(NULL::hwid_audit_rec, m->'audit');\n"
        "      who := who || k;\n"
        "    END IF;\n"
        "  END LOOP;\n"
        "  FOR x IN SELECT * FROM hwid_audit_chain(recs) WITH ORDINALITY AS c(rec_id, rec_prev, rec_hash, o) LOOP\n"
        "    aid[who[x.o]] := x.rec_id;\n"
        "    ap[who[x.o]] := x.rec_prev;\n"
        "    ah[who[x.o]] := x.rec_hash;\n"
        "  END LOOP;\n"
        "  RETURN QUERY SELECT k - 1, res[k], dets[k], aid[k], ap[k], ah[k] FROM generate_series(1, n) AS k;\n"
        "END $$;\n"
        "CREATE FUNCTION hwid_challenge_put(p_id text, p_secret bytea, p_nonce bytea, p_ak bytea, p_ek bytea,\n"
        "  p_expires bigint, p_now bigint, p_max bigint, p_requester text, p_max_per bigint,\n"
        "  OUT result text, OUT replaced bigint) LANGUAGE plpgsql AS $$\n"
        "DECLARE n bigint;\n"
        "BEGIN\n"
        "  PERFORM pg_advisory_xact_lock(" PG_CHALLENGE_LOCK ");\n"
        "  replaced := 0;\n"
        "  BEGIN\n"
        "    DELETE FROM attest_challenges WHERE expires_at <= p_now;\n"
        /* The requester's oldest go while it has its bound or more. */
        "    IF p_requester <> '' AND p_max_per > 0 THEN\n"
        "      SELECT count(*) INTO n FROM attest_challenges WHERE requester = p_requester;\n"
        "      IF n >= p_max_per THEN\n"
        "        DELETE FROM attest_challenges WHERE id IN (SELECT id FROM attest_challenges\n"
        "          WHERE requester = p_requester ORDER BY created_at LIMIT n - p_max_per + 1);\n"
        "        GET DIAGNOSTICS replaced = ROW_COUNT;\n"
        "      END IF;\n"
        "    END IF;\n"
        "    IF (SELECT count(*) FROM attest_challenges) >= p_max THEN\n"
        "      PERFORM hwid_fail('full', NULL);\n"
        "    END IF;\n"
        "    INSERT INTO attest_challenges (id, secret_sha256, nonce, ak_public, ek_cert, expires_at, created_at,\n"
        "      requester) VALUES (p_id, p_secret, p_nonce, p_ak, p_ek, p_expires, p_now, p_requester);\n"
        "    result := 'ok';\n"
        "  EXCEPTION\n"
        "    WHEN unique_violation THEN result := 'exists'; replaced := 0;\n"
        "    WHEN SQLSTATE 'HW001' THEN result := 'full'; replaced := 0;\n"
        "  END;\n"
        "END $$;\n";

/* 6 -> 7: plans that stay cheap as the tables grow.  An issuance's
 * statements reach the certificates they touch by their key alone, with
 * sequential scans off (see PG_ISSUE_ONE_SQL), and the index on (status,
 * not_after) goes: no statement needs it, and it was the one a generic
 * plan could pick to read every valid certificate per issuance.  And
 * hwid_issue() without its arrays. */
const char pg_plans_sql[] =
        "DROP INDEX IF EXISTS certificates_status_not_after;\n"
        /* The same for what runs on each issuance's statements (the DNS
         * names follow their certificate's status) and the linker's read
         * of the queued records, once a second. */
        "ALTER FUNCTION hwid_dns_follow() SET enable_seqscan = off;\n"
        "ALTER FUNCTION hwid_audit_link(integer) SET enable_seqscan = off;\n"
        PG_ISSUE_ONE_SQL
        /* A group commit answers each member as it goes and queues its
         * audit record at once (the linker chains it: store-pg-link.c),
         * in member order as before, without the arrays that made every
         * call pay for the largest batch's bookkeeping. */
        "CREATE OR REPLACE FUNCTION hwid_issue(batch jsonb)\n"
        "RETURNS TABLE (member integer, result text, result_detail text, audit_id bigint, audit_prev bytea,\n"
        "  audit_hash bytea)\n"
        "LANGUAGE plpgsql SET enable_seqscan = off AS $$\n"
        "DECLARE\n"
        "  m jsonb;\n"
        "  a jsonb;\n"
        "  st text;\n"
        "  msg text;\n"
        "  det text;\n"
        "BEGIN\n"
        PG_ISSUE_EACH_SQL("jsonb_array_length(batch) - 1")
        "END $$;\n";

/* hwid_issue() of migration 8 and after: the members in one subtransaction,
 * their tokens used last; each member on its own when one fails. */
#define PG_ISSUE_TOKEN_LAST_SQL \
        "CREATE OR REPLACE FUNCTION hwid_issue(batch jsonb)\n" \
        "RETURNS TABLE (member integer, result text, result_detail text, audit_id bigint, audit_prev bytea,\n" \
        "  audit_hash bytea)\n" \
        "LANGUAGE plpgsql SET enable_seqscan = off AS $$\n" \
        "DECLARE\n" \
        "  n integer := jsonb_array_length(batch);\n" \
        "  m jsonb;\n" \
        "  a jsonb;\n" \
        "  st text;\n" \
        "  msg text;\n" \
        "  det text;\n" \
        "  ids bigint[] := '{}';\n" \
        "  toks text[] := '{}';\n" \
        "  nows bigint[] := '{}';\n" \
        "  x record;\n" \
        "BEGIN\n" \
        "  BEGIN\n" \
        "    FOR k IN 0 .. n - 1 LOOP\n" \
        "      m := batch -> k;\n" \
        "      PERFORM hwid_issue_one(m || '{\"token_later\": true}');\n" \
        "      IF m ? 'token' AND jsonb_typeof(m -> 'token') = 'string' THEN\n" \
        "        toks := toks || (m->>'token');\n" \
        "        nows := nows || (m->>'now')::bigint;\n" \
        "      END IF;\n" \
        "      a := m -> 'audit';\n" \
        "      ids := ids || CASE WHEN jsonb_typeof(a) = 'object' THEN (SELECT c.rec_id\n" \
        "        FROM hwid_audit_chain(ARRAY[jsonb_populate_record(NULL::hwid_audit_rec, a)]) AS c) END;\n" \
        "    END LOOP;\n" \
        /* In the tokens' order: two batches that share tokens never wait \
         * for each other the other way round. */ \
        "    FOR x IN SELECT t.id, count(*) AS uses, max(t.now) AS now FROM unnest(toks, nows) AS t(id, now)\n" \
        "      GROUP BY t.id ORDER BY t.id LOOP\n" \
        "      UPDATE tokens SET uses_left = uses_left - x.uses\n" \
        "        WHERE id = x.id AND NOT revoked AND expires_at > x.now AND uses_left >= x.uses;\n" \
        "      IF NOT FOUND THEN\n" \
        "        PERFORM hwid_fail('token', NULL);\n" \
        "      END IF;\n" \
        "    END LOOP;\n" \
        "    FOR k IN 1 .. n LOOP\n" \
        "      member := k - 1; result := 'ok'; result_detail := NULL; audit_id := ids[k];\n" \
        "      RETURN NEXT;\n" \
        "    END LOOP;\n" \
        "    RETURN;\n" \
        "  EXCEPTION WHEN OTHERS THEN\n" \
        "    NULL;\n" \
        "  END;\n" \
        PG_ISSUE_EACH_SQL("n - 1") \
        "END $$;\n"

/* 7 -> 8: a batch's token uses last, and no subtransaction per member
 * while none fails.  Every member of a batch used its token first, so
 * the token's row stayed locked through the whole batch and its commit:
 * replicas issuing with one token (a factory line's) issued one batch
 * at a time, whatever their number (docs/HA.md, "The write path").  Now
 * a batch runs its members first, all in one subtransaction, and then
 * uses each token once for all the members that hold it, taking its
 * row's lock for the last statement and the commit only.  If a member
 * fails, or a token has fewer uses left than its members need, that
 * subtransaction is undone and the batch runs as before, each member in
 * a subtransaction of its own, its token used first: each member gets
 * the same result as before, in every case.
 *
 * And a certificate's token is no longer a foreign key: its check took
 * a share lock on the token's row for each certificate, so the batches
 * of every replica issuing with one token were lockers of that one row
 * together (a MultiXact each time, read again by every check).  What it
 * guarded holds without it: an issuance with a token uses it in the same
 * transaction (no use, no certificate), and no token is ever deleted. */
const char pg_token_last_sql[] =
        "ALTER TABLE certificates DROP CONSTRAINT IF EXISTS certificates_token_id_fkey;\n"
        PG_ISSUE_ONE_SQL_USING_TOKEN(" AND NOT (m ? 'token_later')")
        PG_ISSUE_TOKEN_LAST_SQL;

/* 9 -> 10: no statement of an issuance planned again on every call.
 * PL/pgSQL keeps a generic plan for a statement once it costs no more
 * than the custom plans made for its first five runs; two never did, so
 * each call planned them again (some 16 µs an issuance): hwid_issue()'s
 * answer for a batch with no refusal, a RETURN QUERY over
 * generate_series(1, n) -- a custom plan knows n rows, a generic one
 * guesses 1,000 -- now a loop of RETURN NEXT, which plans nothing; and
 * hwid_issue_one()'s check that a DNS name it could not insert is its
 * own, "NOT FOUND AND NOT EXISTS (...)", which a custom plan folds to
 * false whenever FOUND is true -- now the EXISTS runs, and is planned,
 * only when the insert found the name taken
 * (tests/integration/pg-plans.sh counts the plans). */
const char pg_replan_sql[] =
        PG_ISSUE_ONE_SQL_USING_TOKEN(" AND NOT (m ? 'token_later')")
        PG_ISSUE_TOKEN_LAST_SQL;

/* The identity's binding to the TPM that attested it (store.h), held and
 * recorded as store-sqlite-binding.c does: bound, an enrollment must
 * record that TPM's attestation and no issuance another's; not bound, a
 * certificate recording an attestation binds it.  Of two issuances
 * binding one identity to two TPMs at once, the second waits on the
 * first's index entry, then finds it and is refused.  Refused: 'bound',
 * detail "EK SERIAL IDENTITY" of the binding (pg_binding_refusal()). */
#define PG_ISSUE_BINDING_SQL \
        "  SELECT ek_pub_sha256, serial, identity INTO x FROM identity_bindings\n" \
        "    WHERE hwid_fold(identity) = hwid_fold(ident);\n" \
        "  IF NOT FOUND THEN\n" \
        "    IF m->>'ek_pub' IS NOT NULL THEN\n" \
        "      INSERT INTO identity_bindings (identity, ek_pub_sha256, ek_cert_sha256, serial, bound_at)\n" \
        "        VALUES (ident, m->>'ek_pub', m->>'ek_cert', s, now_) ON CONFLICT DO NOTHING;\n" \
        "      IF NOT FOUND THEN\n" \
        "        SELECT ek_pub_sha256, serial, identity INTO x FROM identity_bindings\n" \
        "          WHERE hwid_fold(identity) = hwid_fold(ident);\n" \
        "        IF x.ek_pub_sha256 <> m->>'ek_pub' THEN\n" \
        "          PERFORM hwid_fail('bound', x.ek_pub_sha256 || ' ' || x.serial || ' ' || x.identity);\n" \
        "        END IF;\n" \
        "      END IF;\n" \
        "    END IF;\n" \
        "  ELSIF x.ek_pub_sha256 IS DISTINCT FROM m->>'ek_pub'\n" \
        "      AND (m->>'ek_pub' IS NOT NULL OR m->>'supersedes' IS NULL) THEN\n" \
        "    PERFORM hwid_fail('bound', x.ek_pub_sha256 || ' ' || x.serial || ' ' || x.identity);\n" \
        "  END IF;\n"

/* 10 -> 11: identities bound to the TPM that attested them (store.h,
 * SQLite's migration 12): the table, one row per hwid_fold() of an
 * identity; the bindings of the certificates recorded with an
 * attestation before (each identity to the TPM of its newest such
 * certificate); and hwid_issue_one() holding and recording them. */
const char pg_binding_sql[] =
        "CREATE TABLE identity_bindings (\n"
        "  identity text NOT NULL CHECK (length(identity) >= 1),\n"
        "  ek_pub_sha256 text NOT NULL CHECK (ek_pub_sha256 ~ '^[0-9a-f]{64}$'),\n"
        "  ek_cert_sha256 text CHECK (ek_cert_sha256 IS NULL OR ek_cert_sha256 ~ '^[0-9a-f]{64}$'),\n"
        "  serial text NOT NULL, bound_at bigint NOT NULL);\n"
        "CREATE UNIQUE INDEX identity_bindings_identity ON identity_bindings(hwid_fold(identity));\n"
        "INSERT INTO identity_bindings (identity, ek_pub_sha256, ek_cert_sha256, serial, bound_at)\n"
        "  SELECT DISTINCT ON (hwid_fold(identity)) identity, ek_pub_sha256, ek_cert_sha256, serial, created_at\n"
        "  FROM certificates WHERE ek_pub_sha256 IS NOT NULL\n"
        "  ORDER BY hwid_fold(identity), created_at DESC, serial DESC;\n"
        PG_ISSUE_ONE_SQL_WITH(" AND NOT (m ? 'token_later')", PG_ISSUE_BINDING_SQL);

/* 12 -> 13: CA generations (store.h, SQLite's 13): the table, at most one
 * active and one prepared generation, the sequence hwidd watches; and
 * each certificate's generation (those from before: 1), which
 * hwid_issue_one() records from the member's "generation". */
const char pg_generations_sql[] =
        "CREATE TABLE ca_generations (\n"
        "  generation integer PRIMARY KEY CHECK (generation BETWEEN 1 AND 1000),\n"
        "  state text NOT NULL CHECK (state IN ('prepared', 'active', 'previous', 'retired')),\n"
        "  subject text NOT NULL CHECK (length(subject) >= 1),\n"
        "  cert bytea CHECK (cert IS NOT NULL OR state = 'prepared'),\n"
        "  chain text,\n"
        "  key_uri text CHECK ((key_uri IS NULL) = (generation = 1)),\n"
        "  new_with_old bytea, old_with_new bytea,\n"
        "  prepared_at bigint NOT NULL, activated_at bigint, retired_at bigint);\n"
        "CREATE UNIQUE INDEX ca_generations_one_active ON ca_generations(state) WHERE state = 'active';\n"
        "CREATE UNIQUE INDEX ca_generations_one_prepared ON ca_generations(state) WHERE state = 'prepared';\n"
        "INSERT INTO meta (key, value) VALUES ('ca_generation_seq', 0);\n"
        "ALTER TABLE certificates ADD COLUMN generation integer NOT NULL DEFAULT 1 CHECK (generation >= 1);\n"
        "CREATE INDEX certificates_generation ON certificates(generation, not_after);\n"
        "CREATE INDEX certificates_revoked_generation ON certificates(generation, serial) WHERE status = 'revoked';\n"
        PG_ISSUE_ONE_SQL_COLS(" AND NOT (m ? 'token_later')", PG_ISSUE_BINDING_SQL, ", generation",
                              ", coalesce((m->>'generation')::integer, 1)");
