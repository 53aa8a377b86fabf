-- The writes of one issuance (issue-function.sql) as a pipeline of
-- statements: also one round trip, each statement parsed, planned and
-- answered on its own. The audit record is queued unchained, as
-- hwid_issue() queues it (schema version 9: hwidd links it later).
\set n random(1, 1000000000000)
\startpipeline
BEGIN;
SELECT pg_advisory_xact_lock_shared(1752656230, hwid_key_lock_id(md5(CAST(:n AS text)) || md5(CAST(:n AS text) || 'k')));
SELECT serial FROM blocked_keys WHERE spki_sha256 = md5(CAST(:n AS text)) || md5(CAST(:n AS text) || 'k');
UPDATE tokens SET uses_left = uses_left - 1
  WHERE id = 'pgb' || lpad(CAST(:client_id AS text), 3, '0') AND NOT revoked AND expires_at > 1700000000 AND uses_left > 0;
UPDATE certificates SET status = 'superseded'
  WHERE hwid_fold(identity) = hwid_fold('pgb-' || CAST(:n AS bigint)) AND status = 'valid' AND not_after <= 1700000000;
INSERT INTO certificates (serial, identity, subject, profile, spki_sha256, der, not_before, not_after, status,
    revoked_at, revocation_reason, request_id, created_at, role, token_id, scope, ek_cert_sha256, ek_pub_sha256, ak_name)
  VALUES (upper(to_hex(CAST(:n AS bigint))), 'pgb-' || CAST(:n AS bigint), 'CN=pgb-' || CAST(:n AS bigint), 'default', md5(CAST(:n AS text)) || md5(CAST(:n AS text) || 'k'),
    decode(repeat('MIIB', 100), 'base64'), 1700000000, 1800000000, 'valid', 0, 0, NULL, 1700000000, 'node', 'pgb' || lpad(CAST(:client_id AS text), 3, '0'),
    NULL, NULL, NULL, NULL);
UPDATE certificates SET status = 'superseded' WHERE status = 'valid' AND not_after <= 1700000000
  AND serial = (SELECT serial FROM certificate_dns WHERE name = 'pgb-' || CAST(:n AS bigint) AND live);
INSERT INTO certificate_dns (serial, name, live) VALUES (upper(to_hex(CAST(:n AS bigint))), 'pgb-' || CAST(:n AS bigint), true);
INSERT INTO audit_queue (seq, at, actor, action, target, outcome, reason, token_id)
  VALUES (nextval('audit_pending_seq'), 1700000000, 'token' || chr(58) || 'pgbtok', 'enroll', 'pgb-' || CAST(:n AS bigint),
    'allow', 'issued under profile default', 'pgb' || lpad(CAST(:client_id AS text), 3, '0'));
COMMIT;
\endpipeline
