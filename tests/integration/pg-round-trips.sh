#!/bin/bash
# pg-round-trips.sh — an issuance and a renewal on PostgreSQL each cost at
# most 2 round trips to the database (one read before signing, one write
# after: docs/HA.md, "The write path"), whatever the round-trip time:
#   - hwidd reaches PostgreSQL through bench/pg-relay, which counts the
#     round trips its connections make (a client chunk after server data);
#   - N enrollments one after another, then N renewals, each counted, and
#     N enrollments from N clients at once (group commit: still at most 2
#     each, with no round trip per member of a batch, and fewer
#     hwid_issue() calls than issuances: several share a commit);
#   - PostgreSQL logs every statement (log_statement = all): the window's
#     statements are listed by kind, and none takes a lock of the whole
#     cluster (pg_advisory_xact_lock), opens a transaction or a savepoint
#     from the client, since nothing may hold a lock across a round trip;
#   - the documented reads that are not per request (one check of the
#     audit retention a minute, per replica) are allowed on top: EXTRA;
#     so is the audit head's read for its signed checkpoint (one a second
#     per replica, ca-maintain.c), counted in the statement log and held
#     to one a second of the window; and so is the linking of the audit
#     records issuances queued (hwid_audit_link(), in the same tick: one a
#     second per replica, whatever the load), held to the same; and so is
#     the read of the CA generations' sequence (the same tick: replicas
#     switch CA together, docs/OPERATIONS.md), held to the same;
#     and so is opening a connection (the pool grows under the parallel
#     load: SSL negotiation, startup, SCRAM's two messages: SETUP each).
#   - the audit chain that hwid_audit_link() computed in SQL, every
#     record linked, verifies with `hwid audit verify`.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=pg-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/pg-lib.sh"

: "${PG_RELAY:=$BUILDDIR/bench/pg-relay}"
[ -x "$PG_RELAY" ] || missing_hardware "$PG_RELAY (built with meson setup -Dbench=true)"

N=12
EXTRA=2
SETUP=4

# stat NAME — a count of the relay's so far (its stats file is rewritten
# every 50 ms): round_trips, connections.
stat() {
        sed -n "s/.*$1=\([0-9]*\).*/\1/p" "$T/relay.stats"
}

# window_start / window_end NAME — the counts around a window, and marks
# in PostgreSQL's statement log.
window_start() {
        mark "$1-start"
        sleep 0.2
        T0=$(stat round_trips)
        C0=$(stat connections)
        W0=$SECONDS
}
window_end() {
        sleep 0.2
        T1=$(stat round_trips)
        C1=$(stat connections)
        W1=$SECONDS
        mark "$1-end"
}

# mark TEXT — a line in PostgreSQL's statement log (psql straight to the
# server: not through the relay, not counted).
mark() {
        pg_sql "SELECT 'hwid-mark $1'" >/dev/null
}

# statements FROM TO — the statements hwid sent between two marks, one per
# line (log_statement = all logs each as "execute <unnamed>: SQL").
statements() {
        sed -n "/hwid-mark $1/,/hwid-mark $2/p" "$PG_DIR/postgres.log" |
                sed -n 's/.*LOG:  execute [^:]*: //p'
}

# check_window NAME OPS — at most 2 round trips an operation, and no
# client-side transaction or lock in what was sent.
check_window() {
        local name=$1 ops=$2 trips=$((T1 - T0)) conns=$((C1 - C0)) secs=$((W1 - W0 + 1)) stmts heads links gens
        stmts=$(statements "$name-start" "$name-end")
        heads=$(grep -c "^SELECT id, at, hash FROM audit_chain WHERE role" <<<"$stmts" || true)
        links=$(grep -c "^SELECT \* FROM hwid_audit_link" <<<"$stmts" || true)
        gens=$(grep -c "^SELECT value FROM meta WHERE key = 'ca_generation_seq'" <<<"$stmts" || true)
        echo "$name: $ops operations, $trips round trips ($conns connections opened, $heads head reads, $links links and $gens reads of the CA generations in ${secs}s), statements:"
        sed 's/(.*//' <<<"$stmts" | sort | uniq -c | sed 's/^/  /'
        [ "$heads" -le $((secs + 1)) ] ||
                fail "$name: $heads reads of the audit head in ${secs}s: more than the checkpoint's one a second"
        [ "$links" -le $((secs + 1)) ] ||
                fail "$name: $links links of the audit chain in ${secs}s: more than the tick's one a second"
        [ "$gens" -le $((secs + 1)) ] ||
                fail "$name: $gens reads of the CA generations in ${secs}s: more than the tick's one a second"
        [ "$trips" -le $((2 * ops + EXTRA + heads + links + gens + SETUP * conns)) ] ||
                fail "$name: $trips round trips for $ops operations (at most 2 each, plus $EXTRA, plus $heads head reads, $links links and $gens reads of the CA generations, plus $SETUP for each of $conns new connections)"
        ! grep -qiE '^(BEGIN|SAVEPOINT|COMMIT)|pg_advisory' <<<"$stmts" ||
                fail "$name: a transaction or lock held across round trips: $(grep -iE '^(BEGIN|SAVEPOINT|COMMIT)|pg_advisory' <<<"$stmts" | head -3)"
}

ca_setup
# Renewal open at once, so that a certificate just issued can be renewed.
sed -i 's/window: 0.3333/window: 1.0/' "$CFG"
pg_start --own
pg_sql "ALTER SYSTEM SET log_statement = 'all'" >/dev/null
pg_sql "SELECT pg_reload_conf()" >/dev/null

# The relay in front of PostgreSQL (1 ms round trip), and hwid on it.
RELAY_PORT=$(free_port)
start_bg "$T/relay.log" "$PG_RELAY" --listen "$RELAY_PORT" --to "127.0.0.1:$PG_PORT" --rtt-us 1000 \
        --stats "$T/relay.stats"
wait_for_port "$RELAY_PORT" 20 "$BG_PID"
sed -n "s/^127.0.0.1:$PG_PORT:/127.0.0.1:$RELAY_PORT:/p" "$PG_PASSFILE" >>"$PG_PASSFILE"
PG_URI=${PG_URI/127.0.0.1:$PG_PORT\//127.0.0.1:$RELAY_PORT/}
pg_use_config
hwidd_start
TOK=$(token_new --uses 1000)

# Warm: the first connection opened, the first retention check made.
enroll warm "$TOK"
expect_status 201 "$DEV/warm"

window_start enroll
for i in $(seq $N); do
        enroll "rt-$i" "$TOK"
        expect_status 201 "$DEV/rt-$i"
done
window_end enroll
check_window enroll $N

window_start renew
for i in $(seq $N); do
        make_csr "rn-$i" -subj "/CN=rt-$i"
        renew "$DEV/rn-$i" "$DEV/rt-$i.pem" "$DEV/rt-$i.key" "$DEV/rn-$i.csr"
        expect_status 201 "$DEV/rn-$i"
done
window_end renew
check_window renew $N

# N clients at once: group commit shares the writes, never adds a round trip.
for i in $(seq $N); do make_csr "par-$i"; done
window_start parallel
# The token's row held by a psql session of the test's own (straight to
# PostgreSQL: neither counted nor in the statement log's extended-protocol
# lines) while the enrollments arrive: the first write waits for it, and
# those that arrive meanwhile must share the next -- else how many share a
# commit would depend on how fast this machine starts curl.
start_bg "$T/holder.log" env PGPASSFILE="$PG_PASSFILE" "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U hwid \
        -d "$PG_DB" -c "BEGIN; SELECT 1 FROM tokens WHERE id = '${TOK%%.*}' FOR UPDATE; SELECT pg_sleep(3); COMMIT;"
HOLDER=$BG_PID
for _ in $(seq 50); do
        [ "$(pg_sql "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                WHERE c.relname = 'tokens' AND l.mode = 'RowShareLock' AND l.granted")" -ge 1 ] && break
        sleep 0.1
done
pids=()
for i in $(seq $N); do
        (post_csr "$DEV/par-$i" "$TOK" "$DEV/par-$i.csr" && echo "$CODE" >"$DEV/par-$i.code") &
        pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
wait "$HOLDER" 2>/dev/null || true
window_end parallel
assert_eq "$(cat "$DEV"/par-*.code | sort -u)" 201 "statuses of $N enrollments at once"
check_window parallel $N
# And it still groups: issuances that arrive during a write share the next
# hwid_issue() call (a commit each would be N calls).
calls=$(statements parallel-start parallel-end | grep -c hwid_issue)
echo "parallel: $N issuances in $calls hwid_issue() calls"
[ "$calls" -lt $N ] || fail "group commit: $N issuances at once made $calls hwid_issue() calls, none shared"

# What hwid_audit_link() chained in SQL is the chain hwid audit verify
# checks, and hwidd linked every record within its tick.
sleep 2
assert_eq "$(pg_unlinked)" 0 "audit records left unchained 2 s after the load"
assert_contains "$(admin audit verify)" "audit log verified" "hwid audit verify of the chain PostgreSQL hashed"
HWIDD_PID=$HWIDD_PID hwidd_stop
echo "pg-round-trips: OK"
