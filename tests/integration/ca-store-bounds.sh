#!/bin/bash
# ca-store-bounds.sh — the store never grows without bound, against a real
# hwidd (CA and TLS keys in SoftHSM2) driven by curl:
#   - WAL: a sustained mix of issuances, refusals of a valid token holder
#     (audited one by one) and anonymous refusals keeps hwid.db-wal under
#     8 MiB the whole time (sampled every 20 ms; without working
#     checkpoints it grows by tens of MB), and once the load stops the
#     file is emptied;
#   - refusals without valid credentials (no token, unknown token,
#     malformed Authorization, renewal and identity reads without a client
#     certificate), 3000 of them, grow hwid.db + WAL by no more than 64 KiB
#     and the audit table by at most one row; they are counted
#     (/metrics hwid_unauthenticated_refusals_total), logged a few at a
#     time (10 lines a minute), and summarized in one audit record;
#   - audit retention: 5000 records older than audit.retention (written
#     straight into the database while hwidd was down) are removed in the
#     background after start, the recent ones stay, and enrollment answers
#     at once meanwhile; a retention under a day is refused at start.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

WAL_BOUND=$((8 * 1024 * 1024))
DB=$CA_DIR/hwid.db

# with_top_level LINE... — $CFG with these top-level lines put before `profiles:`.
with_top_level() {
        local body='' line
        for line in "$@"; do
                body+="$line"$'\n'
        done
        awk -v body="$body" '$0 == "profiles:" { printf "%s", body } { print }' "$CFG" >"$CFG.new"
        mv "$CFG.new" "$CFG"
}

file_size() {
        stat -c %s "$1" 2>/dev/null || echo 0
}

audit_rows() {
        sqlite3 "$DB" "SELECT count(*) FROM audit"
}

# many OUT N ARGS... — N requests in one curl (one kept-alive connection);
# OUT gets one status code per line.
many() {
        local out=$1 n=$2 path=$3
        shift 3
        curl -sS --max-time 300 --cacert "$CA_DIR/ca.pem" -o /dev/null -w '%{http_code}\n' "$@" \
                "$URL$path?n=[1-$n]" >"$out" 2>"$out.err" || fail "curl: $(cat "$out.err")"
}

# all_status OUT STATUS N — OUT holds N lines, each STATUS.
all_status() {
        assert_eq "$(sort "$1" | uniq -c | awk '{ print $1 " " $2 }')" "$3 $2" "statuses in $1"
}

# sample_wal OUT — until killed, append the WAL's size to OUT every 20 ms.
sample_wal() {
        while :; do
                file_size "$DB-wal" >>"$1"
                sleep 0.02
        done
}

metric() {
        http "$DEV/metrics" GET /metrics
        expect_status 200 "$DEV/metrics"
        awk -v m="$1" '$1 == m { print $2 }' "$DEV/metrics.body"
}

ca_setup
add_profiles <<'YAML'
  again:
    validity: 30d
    allow_reenroll: true
YAML
sed -i 's/^  audit_only: false$/&\n  public_metrics: true/' "$CFG"
# Thousands of requests a second from one address: what the store keeps of
# them is the question here, not limits.rate_per_ip (which would answer
# most of them 429 before the store sees them).
sed -i 's/^  rate_per_ip: .*$/  rate_per_ip: 0/' "$CFG"
grep -q '^  rate_per_ip: 0$' "$CFG" || fail "could not lift rate_per_ip in $CFG"
hwidd_start
TOK=$(token_new --profile again --uses 100000)
PTOK=$(token_new --profile again --uses 100000 --name-pattern 'other-*')
make_csr load

# --- the WAL under sustained load ----------------------------------------------
start_bg "$T/sampler.log" sample_wal "$T/wal-sizes"
SAMPLER=$BG_PID
auth=(-H "Content-Type: application/pkcs10" --data-binary "@$DEV/load.csr")
many "$DEV/issued" 1500 /csr -H "Authorization: Bearer $TOK" "${auth[@]}" &
p1=$!
many "$DEV/denied" 1500 /csr -H "Authorization: Bearer $PTOK" "${auth[@]}" &
p2=$!
many "$DEV/anon" 1500 /csr "${auth[@]}" &
p3=$!
wait $p1 $p2 $p3
kill "$SAMPLER"
wait "$SAMPLER" 2>/dev/null || true
all_status "$DEV/issued" 201 1500
all_status "$DEV/denied" 403 1500
all_status "$DEV/anon" 401 1500
max=$(sort -n "$T/wal-sizes" | tail -n 1)
echo "WAL: at most $max bytes over $(wc -l <"$T/wal-sizes") samples" >&2
[ "$(wc -l <"$T/wal-sizes")" -ge 20 ] || fail "too few samples of the WAL's size"
[ "$max" -le $WAL_BOUND ] || fail "the WAL grew to $max bytes under load (bound $WAL_BOUND)"
# Every issuance and every refusal of the token holder is in the store.
assert_eq "$(sqlite3 "$DB" "SELECT count(*) FROM certificates WHERE identity = 'load'")" 1500 "certificates issued"
assert_eq "$(sqlite3 "$DB" "SELECT count(*) FROM audit WHERE outcome = 'deny' AND token_id = '${PTOK%%.*}'")" 1500 \
        "refusals of the token holder audited one by one"
# Idle: the WAL is emptied within a few seconds.
for _ in $(seq 50); do
        [ "$(file_size "$DB-wal")" -gt 0 ] || break
        sleep 0.1
done
assert_eq "$(file_size "$DB-wal")" 0 "WAL size once idle"
assert_eq "$(sqlite3 "$DB" "PRAGMA integrity_check")" ok "integrity of the store"

# --- refusals without valid credentials ------------------------------------------
refused_before=$(metric hwid_unauthenticated_refusals_total)
rows_before=$(audit_rows)
size_before=$(($(file_size "$DB") + $(file_size "$DB-wal")))
many "$DEV/r1" 1000 /csr "${auth[@]}"
many "$DEV/r2" 1000 /csr -H "Authorization: Bearer abcdef.0123456789abcdefgh" "${auth[@]}"
many "$DEV/r3" 400 /csr -H "Authorization: Basic Zm9vOmJhcg==" "${auth[@]}"
many "$DEV/r4" 300 /v1/renew "${auth[@]}"
many "$DEV/r5" 300 /v1/identities/load
all_status "$DEV/r1" 401 1000
all_status "$DEV/r2" 401 1000
all_status "$DEV/r3" 401 400
all_status "$DEV/r4" 401 300
all_status "$DEV/r5" 401 300
size_after=$(($(file_size "$DB") + $(file_size "$DB-wal")))
echo "store: $size_before -> $size_after bytes after 3000 anonymous refusals" >&2
[ $((size_after - size_before)) -le 65536 ] ||
        fail "3000 anonymous refusals grew the store by $((size_after - size_before)) bytes"
[ $(($(audit_rows) - rows_before)) -le 1 ] || fail "3000 anonymous refusals wrote $(($(audit_rows) - rows_before)) audit rows"
refused=$(($(metric hwid_unauthenticated_refusals_total) - refused_before))
assert_eq "$refused" 3000 "hwid_unauthenticated_refusals_total after 3000 refusals"
# Logged one by one: a few per minute (the token holder's refusals aside).
logged=$(grep 'deny — ' "$HWIDD_LOG" | grep -cv "token:${PTOK%%.*} " || true)
if [ "$logged" -lt 1 ] || [ "$logged" -gt 20 ]; then
        fail "$logged log lines for 4500 anonymous refusals (1..20 expected)"
fi
# The summary: one record (at shutdown at the latest) with the counts.
hwidd_stop
summary=$(sqlite3 "$DB" "SELECT reason FROM audit WHERE action = 'refused' ORDER BY id DESC LIMIT 1")
assert_contains "$summary" "without valid credentials refused" "summary audit record"
total=$(sqlite3 "$DB" "SELECT reason FROM audit WHERE action = 'refused'" |
        awk '{ n += $1 } END { print n + 0 }')
# The 1500 anonymous refusals of the load phase are in it too.
assert_eq "$total" 4500 "refusals summarized in the audit log"
assert_contains "$(admin audit list)" "without valid credentials refused" "hwid audit list"

# --- audit retention ----------------------------------------------------------------
# A database from before the audit chain whose oldest 5000 records are 400
# days old: written here in SQL, before every other record (ids below
# theirs), with the chain taken away as such a database has none. hwidd
# chains them all when it opens the database, and retention then prunes
# the oldest, in the order they were written, from its anchor on.
now=$(date +%s)
sqlite3 "$DB" "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000)
        INSERT INTO audit (id, at, actor, action, target, outcome) SELECT i - 5000, $now - 400 * 86400 + i,
        'admin:old', 'token.create', 'old-' || i, 'allow' FROM n;
        INSERT INTO audit (at, actor, action, target, outcome)
        VALUES ($now - 86400, 'admin:recent', 'token.create', 'recent-1', 'allow'),
               ($now - 29 * 86400, 'admin:recent', 'token.create', 'recent-2', 'allow');
        UPDATE audit SET prev_hash = NULL, hash = NULL; DELETE FROM audit_chain;
        UPDATE meta SET value = 0 WHERE key = 'audit_chained';"
last_id=$(sqlite3 "$DB" "SELECT max(id) FROM audit")
recent_before=$(sqlite3 "$DB" "SELECT count(*) FROM audit WHERE at >= $now - 30 * 86400")
with_top_level "audit:" "  retention: 30d"
# Under a day is refused, with the field named.
sed 's/^  retention: 30d$/  retention: 12h/' "$CFG" >"$CA_DIR/short.yaml"
expect_exit 1 "audit.retention" -- "$HWIDD" --config "$CA_DIR/short.yaml" --check
hwidd_start
make_csr during
t0=$(date +%s%N)
post_csr "$DEV/during" "$TOK" "$DEV/during.csr"
expect_status 201 "$DEV/during"
ms=$((($(date +%s%N) - t0) / 1000000))
[ "$ms" -lt 2000 ] || fail "an enrollment took $ms ms while the audit log was pruned"
for _ in $(seq 150); do
        [ "$(sqlite3 "$DB" "SELECT count(*) FROM audit WHERE actor = 'admin:old'")" != 0 ] || break
        sleep 0.1
done
assert_eq "$(sqlite3 "$DB" "SELECT count(*) FROM audit WHERE actor = 'admin:old'")" 0 "records past the retention"
assert_eq "$(sqlite3 "$DB" "SELECT count(*) FROM audit WHERE at >= $now - 30 * 86400 AND id <= $last_id")" \
        "$recent_before" "records within the retention"
assert_eq "$(sqlite3 "$DB" "SELECT count(*) FROM audit WHERE actor = 'admin:recent'")" 2 "recent records"
assert_contains "$(cat "$HWIDD_LOG")" "audit retention: removed" "hwidd's log"
hwidd_stop
# What is left verifies from the anchor the pruning left.
run_ok "$HWID" audit verify --config "$CFG" >"$T/verify.out"
assert_contains "$(cat "$T/verify.out")" "anchor" "audit verify after pruning"
echo "ok"
