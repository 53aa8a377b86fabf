-- One issuance as hwidd commits it: one call of hwid_issue() (one
-- statement, one round trip), each pgbench client with a token of its own
-- (pgbNNN). bench/stores.sh runs it with pgbench against
-- issue-pipeline.sql, the same writes as a pipeline of statements.
\set n random(1, 1000000000000)
SELECT * FROM hwid_issue(jsonb_build_array(jsonb_build_object(
  'now', 1700000000, 'serial', upper(to_hex(CAST(:n AS bigint))), 'identity', 'pgb-' || CAST(:n AS bigint), 'subject', 'CN=pgb-' || CAST(:n AS bigint),
  'profile', 'default', 'spki', md5(CAST(:n AS text)) || md5(CAST(:n AS text) || 'k'), 'der', repeat('MIIB', 100),
  'not_before', 1700000000, 'not_after', 1800000000, 'role', 'node', 'token', 'pgb' || lpad(CAST(:client_id AS text), 3, '0'), 'replace', false,
  'dns', jsonb_build_array('pgb-' || CAST(:n AS bigint)),
  'audit', jsonb_build_object('at', 1700000000, 'actor', 'token' || chr(58) || 'pgbtok', 'action', 'enroll', 'target', 'pgb-' || CAST(:n AS bigint),
    'outcome', 'allow', 'reason', 'issued under profile default', 'token_id', 'pgb' || lpad(CAST(:client_id AS text), 3, '0')))));
