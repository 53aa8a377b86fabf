#!/bin/bash
# pg-token-last.sh — a group commit on PostgreSQL uses its tokens last
# (schema version 8, store-pg-functions.c), and gives each member the
# result it gave when each used its token first:
#   - a session holds the token's row; an enrollment with that token must
#     wait for it only once it has written its certificate (hwid_issue()
#     holds certificates' lock, not only the token's): the token's row is
#     locked for the last statement and the commit, so replicas sharing a
#     token (a factory line's) commit side by side. Before, it waited
#     before writing anything, and held the row through the whole batch;
#   - batches called in SQL: all members ok (each token used once for
#     all); more members than uses left (the first ones issue, the last is
#     refused "token"); a member that fails (a live certificate) is undone
#     alone and its token use with it;
#   - (schema version 9) a record queued the way replicas of schema 8 and
#     older queue theirs (in the audit table, with a negative id) while a
#     cluster is upgraded is linked all the same, and the chain verifies.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=pg-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/pg-lib.sh"

# uses_left TOKEN — the uses TOKEN has left, as the database has them.
uses_left() {
        pg_sql "SELECT uses_left FROM tokens WHERE id = '${1%%.*}'"
}

# batch TOKEN NAME... — hwid_issue() with one member a NAME, each with
# TOKEN; prints each member's result, one a line.
batch() {
        local tok=${1%%.*} names
        shift
        names=$(printf "'%s'," "$@")
        pg_sql "SELECT result FROM hwid_issue((SELECT jsonb_agg(jsonb_build_object(
                  'now', extract(epoch FROM now())::bigint, 'serial', upper(md5(n || clock_timestamp())), 'identity', n,
                  'subject', 'CN=' || n, 'profile', 'default', 'spki', md5(n) || md5(n || 'k'),
                  'der', encode('\\x30'::bytea, 'base64'), 'not_before', 0, 'not_after', 4000000000,
                  'role', 'node', 'token', '$tok', 'replace', false,
                  'audit', jsonb_build_object('at', 0, 'actor', 'token:$tok', 'action', 'enroll', 'target', n,
                                              'outcome', 'allow', 'reason', 'pg-token-last', 'token_id', '$tok'))
                  ORDER BY o) FROM unnest(ARRAY[${names%,}]) WITH ORDINALITY AS t(n, o))) ORDER BY member"
}

ca_setup
pg_start --own
pg_use_config
hwidd_start
TOK=$(token_new --uses 10)
enroll warm "$TOK"
expect_status 201 "$DEV/warm"
[ "$(pg_sql "SELECT value FROM meta WHERE key = 'schema_version'")" -ge 8 ] || fail "schema version below 8"
# No share lock on the token's row per certificate (a foreign key's check).
assert_eq "$(pg_sql "SELECT count(*) FROM pg_constraint WHERE conrelid = 'certificates'::regclass
                     AND confrelid = 'tokens'::regclass")" 0 "foreign keys from certificates to tokens"

# 1. The token's row is locked last.
start_bg "$T/holder.log" env PGPASSFILE="$PG_PASSFILE" PGAPPNAME=pg-token-last-holder "$PG_BIN/psql" -X -q \
        -h 127.0.0.1 -p "$PG_PORT" -U hwid -d "$PG_DB" \
        -c "BEGIN; SELECT 1 FROM tokens WHERE id = '${TOK%%.*}' FOR NO KEY UPDATE; SELECT pg_sleep(60); COMMIT;"
for _ in $(seq 100); do
        [ "$(pg_sql "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pg-token-last-holder'
                       AND state = 'active' AND query LIKE '%pg_sleep%'")" = 1 ] && break
        sleep 0.1
done
make_csr held
(post_csr "$DEV/held" "$TOK" "$DEV/held.csr" && echo "$CODE" >"$DEV/held.code") &
POSTER=$!
track_pid "$POSTER"
waiter=
for _ in $(seq 100); do
        waiter=$(pg_sql "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%hwid_issue%'")
        [ -n "$waiter" ] && break
        sleep 0.1
done
[ -n "$waiter" ] || fail "the enrollment did not wait for the token's row held by another session"
held=$(pg_sql "SELECT string_agg(DISTINCT c.relname, ',' ORDER BY c.relname) FROM pg_locks AS l
                 JOIN pg_class AS c ON c.oid = l.relation
               WHERE l.pid = $waiter AND l.granted AND l.mode = 'RowExclusiveLock'")
echo "waiting for the token's row, hwid_issue() holds: $held"
assert_contains "$held" "certificates" "tables hwid_issue() wrote before waiting for the token's row"
assert_contains "$held" "audit" "tables hwid_issue() wrote before waiting for the token's row"
pg_sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pg-token-last-holder'" \
        >/dev/null
wait "$POSTER"
assert_eq "$(cat "$DEV/held.code")" 201 "the enrollment once the token's row is free"
assert_eq "$(uses_left "$TOK")" 8 "uses left of 10 after two enrollments"

# 2. Batches: each member's result as when each used its token first.
assert_eq "$(batch "$TOK" b-1 b-2 b-3 | tr '\n' ' ')" "ok ok ok " "a batch of three, 8 uses left"
assert_eq "$(uses_left "$TOK")" 5 "uses left after a batch of three"
assert_eq "$(pg_sql "SELECT count(*) FROM certificates WHERE identity LIKE 'b-%'")" 3 "certificates of the batch"

TOK2=$(token_new --uses 2)
assert_eq "$(batch "$TOK2" c-1 c-2 c-3 | tr '\n' ' ')" "ok ok token " "a batch of three, 2 uses left"
assert_eq "$(uses_left "$TOK2")" 0 "uses left after two of three issued"
assert_eq "$(pg_sql "SELECT string_agg(identity, ' ' ORDER BY identity) FROM certificates
                     WHERE identity LIKE 'c-%'")" "c-1 c-2" "certificates issued with 2 uses for 3"

assert_eq "$(batch "$TOK" d-1 b-2 d-3 | tr '\n' ' ')" "ok live ok " "a batch whose second member has a live certificate"
assert_eq "$(uses_left "$TOK")" 3 "uses left: the refused member's use undone"
assert_eq "$(pg_sql "SELECT count(*) FROM certificates WHERE identity IN ('d-1', 'd-3')")" 2 "the others issued"
assert_eq "$(pg_sql "SELECT (SELECT count(*) FROM audit WHERE reason = 'pg-token-last')
                          + (SELECT count(*) FROM audit_queue WHERE reason = 'pg-token-last')")" 7 \
        "audit records of the members issued (3 + 2 + 2)"

# A record an older replica queued in the audit table itself.
pg_sql "INSERT INTO audit (id, at, actor, action, target, outcome, reason)
        VALUES (-nextval('audit_pending_seq'), 0, 'token:old', 'enroll', 'old-replica', 'allow', 'schema 8')" >/dev/null

# hwidd links what the batches queued; the chain verifies.
pg_wait_linked 5 || fail "$(pg_unlinked) audit records still unchained after 5 s"
assert_eq "$(pg_sql "SELECT count(*) FROM audit WHERE target = 'old-replica' AND id > 0 AND hash IS NOT NULL")" 1 \
        "the older replica's record, linked"
assert_contains "$(admin audit verify)" "audit log verified" "hwid audit verify"
hwidd_stop
echo "pg-token-last: OK"
