#!/bin/bash
# pg-audit-link.sh — on PostgreSQL an issuance does not wait for the audit
# chain: it queues its record unchained, and hwidd links the queued records
# once a second (service/store/pg/store-pg-link.c, docs/HA.md "The write
# path"), so that the replicas' commits do not take turns on the chain's
# lock through each other's WAL flush. Two replicas on one database.
# Proves:
#   - with the chain's lock held by someone else (a psql session holding
#     the chain's advisory lock), enrollments on both replicas are answered
#     201 at once (before: each waited for the lock, and answered 503 at
#     lock_timeout); their records are in the queue (audit_queue, schema
#     version 9), unchained, shown by `hwid audit list` and counted by
#     `hwid audit verify`;
#   - once the lock is let go the replicas link them within seconds, in
#     the order they were queued: `hwid audit verify` passes over every
#     record, and the head is the newest;
#   - a replica killed (kill -9) while its records are still queued loses
#     none of them: the other links them;
#   - a replica stopped (SIGTERM) links what is queued before its last
#     signed checkpoint, which then signs the newest record;
#   - the audit copy to syslog (audit.syslog, a Unix datagram socket this
#     test binds) gets each issuance's record once, when it is linked, with
#     the id and hash the database has for it;
#   - linking a record inserts it in the audit table and never updates a
#     row there (before schema version 9 it moved each from its negative
#     id with an UPDATE: a dead row and dead index entries per issuance).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=pg-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/pg-lib.sh"

AUDIT_LOCK=1752656229 # PG_AUDIT_LOCK (service/store/pg/store-pg.h)
HOLDER=hwid-test-chain-holder

# hold_chain — a psql session takes the chain's lock and keeps it until
# release_chain.
hold_chain() {
        start_bg "$T/holder.$RANDOM.log" env PGPASSFILE="$PG_PASSFILE" PGAPPNAME=$HOLDER \
                "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U hwid -d "$PG_DB" \
                -c "SELECT pg_advisory_lock($AUDIT_LOCK)" -c "SELECT pg_sleep(120)"
        for _ in $(seq 50); do
                [ "$(pg_sql "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objid = $AUDIT_LOCK
                        AND granted")" = 1 ] && return 0
                sleep 0.1
        done
        fail "the psql session did not get the chain's lock"
}

release_chain() {
        pg_sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = '$HOLDER'" >/dev/null
}

# wait_linked SECONDS — until no record waits to be chained.
wait_linked() {
        pg_wait_linked "$1" || fail "$(pg_unlinked) audit records still unchained after $1 s"
}

# enroll_on N NAME... — enrollments on replica N, each answered 201.
enroll_on() {
        local n=$1 name
        shift
        for name in "$@"; do
                on_replica "$n" enroll "$name" "$TOK"
                expect_status 201 "$DEV/$name"
        done
}

SOCK=$T/log.sock
GOT=$T/syslog.txt
syslog_listen "$SOCK" "$GOT"

ca_setup
sed -i "s|^profiles:\$|audit:\n  syslog: true\n  syslog_socket: $SOCK\n&|" "$CFG"
pg_start --own
pg_use_config
replica_start 1
replica_start 2
TOK=$(token_new --uses 100)
enroll_on 1 warm-1
wait_linked 5
records=$(pg_sql "SELECT count(*) FROM audit")
base=$(pg_sql "SELECT max(id) FROM audit")
# notes — records since then that note a checkpoint of the head (hwidd's
# own, after each: docs/OPERATIONS.md), besides the test's.
notes() {
        pg_sql "SELECT count(*) FROM audit WHERE id > $base AND action = 'audit.checkpoint'"
}

# The chain's lock held elsewhere: issuances go on regardless.
hold_chain
start=$SECONDS
enroll_on 1 held-1 held-2
enroll_on 2 held-3 held-4
took=$((SECONDS - start))
[ "$took" -lt 5 ] || fail "4 enrollments with the chain's lock held took ${took}s: they waited for it"
assert_eq "$(pg_unlinked)" 4 "records queued unchained while the lock is held"
assert_eq "$(pg_sql "SELECT count(*) FROM audit_queue WHERE action = 'enroll' AND target LIKE 'held-%'")" 4 \
        "the enrollments' records in the queue"
assert_contains "$(admin audit list)" "held-4" "hwid audit list shows a record not chained yet"
out=$(admin audit verify)
assert_contains "$out" "4 newer records are committed and not chained yet" "hwid audit verify while they wait"

# Let go: the replicas link them, in the order they were queued.
release_chain
wait_linked 5
assert_eq "$(pg_sql "SELECT string_agg(target, ' ' ORDER BY id) FROM audit
        WHERE action = 'enroll' AND target LIKE 'held-%'")" "held-1 held-2 held-3 held-4" "chain order"
assert_eq "$(pg_sql "SELECT id FROM audit_chain WHERE role = 'head'")" "$(pg_sql "SELECT max(id) FROM audit")" \
        "the head is the newest record"
out=$(admin audit verify)
assert_contains "$out" "audit log verified: $((records + 4 + $(notes))) records" "hwid audit verify over every record"
assert_not_contains "$out" "not chained" "hwid audit verify once linked"
# Each reached syslog once, as linked: the database's id and hash.
want=$(pg_sql "SELECT id || ' ' || encode(hash, 'hex') FROM audit WHERE action = 'enroll' AND target LIKE 'held-%'
        ORDER BY id")
for _ in $(seq 30); do
        [ "$(grep -c "hwid-audit id=.*target=\"\?held-" "$GOT" || true)" -ge 4 ] && break
        sleep 0.1
done
got=$(grep "target=\"\?held-" "$GOT" | sed -n 's/.*hwid-audit id=\([0-9]*\) at=[^ ]* hash=\([0-9a-f]*\) .*/\1 \2/p' | sort -n)
assert_eq "$got" "$want" "the held records as syslog received them (id and hash, once each)"

# A replica killed with its records still queued: the other links them.
hold_chain
enroll_on 2 lost-1 lost-2
kill -KILL "${REPLICA_PID[2]}"
wait "${REPLICA_PID[2]}" 2>/dev/null || true
assert_eq "$(pg_unlinked)" 2 "records of the killed replica, queued"
release_chain
wait_linked 5
out=$(admin audit verify)
assert_contains "$out" "audit log verified: $((records + 6 + $(notes))) records" "hwid audit verify after the kill"

# SIGTERM: what is queued is linked before the last checkpoint.
hold_chain
enroll_on 1 last-1
kill -TERM "${REPLICA_PID[1]}"
sleep 1 # its last link waits for the lock meanwhile
release_chain
wait "${REPLICA_PID[1]}" || fail "replica 1 exited $? after SIGTERM"
assert_eq "$(pg_unlinked)" 0 "records queued when hwidd stopped"
assert_eq "$(pg_sql "SELECT id FROM audit_checkpoints ORDER BY seq DESC LIMIT 1")" \
        "$(pg_sql "SELECT max(id) FROM audit")" "the last checkpoint signs the newest record"
run_ok "$HWID" audit verify --config "$CFG" >"$T/v.out"
assert_contains "$(cat "$T/v.out")" "audit log verified: $((records + 7 + $(notes))) records" "hwid audit verify at the end"
# Every replica has stopped: their sessions' counters are flushed.
assert_eq "$(pg_sql "SELECT n_tup_upd FROM pg_stat_user_tables WHERE relname = 'audit'")" 0 \
        "rows of the audit table updated (linking only inserts)"
echo "pg-audit-link: all checks passed"
