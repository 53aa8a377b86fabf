#!/bin/bash
# ops-audit-chain.sh — the tamper-evident audit log of a real hwidd. Proves:
#   - hwid audit verify passes on an untouched log, while hwidd runs and
#     after; an independent implementation of the chain as
#     docs/OPERATIONS.md specifies it (audit-chain.py, Python's hashlib)
#     finds every hash, link and the head exactly as hwid wrote them;
#   - each edit made with sqlite3 directly is caught and named, exit 1:
#     a field changed, a time changed, a hash replaced, a record deleted
#     in the middle, the oldest one deleted, the newest one deleted, two
#     records swapped, the chain's head deleted;
#   - retention pruning (hwidd, audit.retention) removes the oldest
#     records and leaves an anchor: verify passes from it, the independent
#     check too; tampering after the pruning is still caught, and a
#     pruning never removes a record that does not verify;
#   - a log re-chained by the independent implementation after its oldest
#     records were back-dated is accepted by hwid (the spec holds both ways);
#   - signed checkpoints (the CA key, SoftHSM2): hwidd signs the head when
#     it stops and the anchor when it prunes; both implementations check
#     every signature, and catch the two truncations that need no hash
#     recomputed: the newest records deleted and the head moved back to the
#     new last row ("the newest record(s) were deleted: the log ends at
#     record N, but the checkpoint made at T signed record M"), and the
#     oldest records deleted under an anchor copied from a row; a
#     checkpoint altered does not verify; the checkpoints deleted, each
#     named by hwidd's note of it in the chain; a log stripped of its
#     checkpoints and their notes and re-chained: no checkpoint signs its
#     records, exit 1 (hwidd signs the head when it starts, so a log that
#     has none was stripped, or never saw hwidd).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

CHAIN=$SRCDIR/tests/integration/audit-chain.py
DB=$CA_DIR/hwid.db

# tampered NAME SQL EXPECTED — a copy of the log edited by SQL: hwid audit
# verify fails with one line naming EXPECTED.
tampered() {
        local name=$1 sql=$2 want=$3
        cp "$DB" "$CA_DIR/$name.db"
        sqlite3 "$CA_DIR/$name.db" "$sql" || fail "sqlite3 could not apply: $sql"
        sed "s|^database: .*|database: $name.db|" "$CFG" >"$CA_DIR/$name.yaml"
        expect_exit 1 "$want" -- "$HWID" audit verify --config "$CA_DIR/$name.yaml"
        assert_contains "$(cat "$T/last.err")" "does not verify" "verify's message for $name"
        if /usr/bin/python3 "$CHAIN" check "$CA_DIR/$name.db" "$CA_DIR/ca.pem" >/dev/null 2>&1; then
                fail "the independent check accepts $name"
        fi
}

ca_setup
hwidd_start
TOK=$(token_new --uses 5)
for i in 1 2 3; do
        enroll "dev-$i" "$TOK"
        expect_status 201 "$DEV/dev-$i"
done
post_csr "$DEV/bad" "abcdef.0123456789abcdef" "$DEV/dev-1.csr"
expect_status 401 "$DEV/bad"
admin token revoke "${TOK%%.*}" >/dev/null
run_ok "$HWID" audit verify --config "$CFG" >"$T/v1.out"
assert_contains "$(cat "$T/v1.out")" "audit log verified" "verify while hwidd runs"
hwidd_stop

N=$(sqlite3 "$DB" "SELECT count(*) FROM audit")
[ "$N" -ge 6 ] || fail "only $N audit records"
run_ok "$HWID" audit verify --config "$CFG" >"$T/v2.out"
assert_eq "$(head -n 1 "$T/v2.out")" "audit log verified: $N records (1 to $N)" "verify's report"
# hwidd signed the head when it stopped.
assert_contains "$(sed -n 2p "$T/v2.out")" "signs record $N: records after it are covered by the chain only" \
        "verify's report of the newest checkpoint"
assert_eq "$(/usr/bin/python3 "$CHAIN" check "$DB" "$CA_DIR/ca.pem")" "ok $N" "the independent check"

# --- tampering, each on a copy --------------------------------------------------
tampered reason "UPDATE audit SET reason = 'nothing happened' WHERE id = 3" "record 3 was modified"
tampered actor "UPDATE audit SET actor = 'admin:someone-else' WHERE id = 2" "record 2 was modified"
tampered at "UPDATE audit SET at = at - 3600 WHERE id = 4" "record 4 was modified"
tampered target "UPDATE audit SET target = NULL WHERE id = 5" "record 5 was modified"
tampered hash "UPDATE audit SET hash = (SELECT hash FROM audit WHERE id = 2) WHERE id = 3" "record 3 was modified"
tampered middle "DELETE FROM audit WHERE id = 3" "between 2 and 4 were deleted"
tampered oldest "DELETE FROM audit WHERE id = 1" "the oldest record(s) before it were deleted"
tampered newest "DELETE FROM audit WHERE id = $N" "the newest record(s) were deleted"
tampered swap "UPDATE audit SET id = -1 WHERE id = 3; UPDATE audit SET id = 3 WHERE id = 4;
        UPDATE audit SET id = 4 WHERE id = -1" "record 3 is stored before record 4, but was written after it"
tampered far "UPDATE audit SET id = -1 WHERE id = 2; UPDATE audit SET id = 2 WHERE id = 5;
        UPDATE audit SET id = 5 WHERE id = -1" "record 2 is stored before record 4, but was written after it"
tampered head "DELETE FROM audit_chain WHERE role = 'head'" "head is missing"
# Truncation without a hash recomputed: the newest records deleted and the
# head moved back onto the new last row.  The chain alone holds; the
# checkpoint hwidd signed at shutdown does not.
tampered cut-newest "DELETE FROM audit WHERE id > $((N - 2));
        UPDATE audit_chain SET id = $((N - 2)), at = (SELECT at FROM audit WHERE id = $((N - 2))),
        hash = (SELECT hash FROM audit WHERE id = $((N - 2))) WHERE role = 'head'" \
        "the newest record(s) were deleted: the log ends at record $((N - 2)), but the checkpoint made at"
# The oldest records deleted, an anchor copied from the row before the new
# first one: no signed pruning left it.
tampered cut-oldest "INSERT INTO audit_chain (role, id, at, hash) SELECT 'anchor', id, at, hash FROM audit WHERE id = 2;
        DELETE FROM audit WHERE id <= 2" "the chain's anchor (record 2) was not left by a signed pruning"
tampered checkpoint "UPDATE audit_checkpoints SET record_at = record_at - 1" "does not verify with the CA's key"
# Every checkpoint deleted: hwidd's notes of them in the chain still name
# them, the first one first.
note=$(sqlite3 "$DB" "SELECT target || ', noted by record ' || id FROM audit WHERE action = 'audit.checkpoint'
        ORDER BY id LIMIT 1")
tampered no-checkpoints "DELETE FROM audit_checkpoints" "the signed checkpoint of $note, is no longer stored"

# --- retention: the oldest records pruned, the chain verifiable from the anchor -----
# The first 4 records back-dated 400 days and the log re-chained by the
# independent implementation: hwid accepts its chain.
sqlite3 "$DB" "UPDATE audit SET at = at - 400 * 86400 WHERE id <= 4"
assert_eq "$(/usr/bin/python3 "$CHAIN" rechain "$DB")" "rechained $N" "re-chaining"
# A rewritten log no longer matches the checkpoints signed before (that is
# what they are for): verify says so; without them, the chain's notes of
# them name the missing ones; without the notes too (re-chained once
# more), no checkpoint signs its records: still refused, by both.
expect_exit 1 "is not the one the checkpoint made at" -- "$HWID" audit verify --config "$CFG"
sqlite3 "$DB" "DELETE FROM audit_checkpoints"
expect_exit 1 "noted by record" -- "$HWID" audit verify --config "$CFG"
sqlite3 "$DB" "DELETE FROM audit WHERE actor = 'hwidd' AND action = 'audit.checkpoint'"
/usr/bin/python3 "$CHAIN" rechain "$DB" >/dev/null
expect_exit 1 "no signed checkpoint covers its $(sqlite3 "$DB" "SELECT count(*) || ' records (' || min(id) || ' to ' ||
        max(id) || ')' FROM audit")" -- "$HWID" audit verify --config "$CFG"
if /usr/bin/python3 "$CHAIN" check "$DB" "$CA_DIR/ca.pem" >/dev/null 2>&1; then
        fail "the independent check accepts a log no checkpoint signs"
fi
sed -i 's/^profiles:$/audit:\n  retention: 30d\n&/' "$CFG"
hwidd_start
for _ in $(seq 100); do
        [ "$(sqlite3 "$DB" "SELECT min(id) FROM audit")" = 5 ] && break
        sleep 0.1
done
assert_eq "$(sqlite3 "$DB" "SELECT min(id) FROM audit")" 5 "the oldest record left after pruning"
assert_eq "$(sqlite3 "$DB" "SELECT id FROM audit_chain WHERE role = 'anchor'")" 4 "the anchor"
enroll after "$(token_new)"
expect_status 201 "$DEV/after"
run_ok "$HWID" audit verify --config "$CFG" >"$T/v3.out"
assert_contains "$(cat "$T/v3.out")" "chained from the anchor left by retention pruning at record 4" "verify after pruning"
hwidd_stop
assert_eq "$(sqlite3 "$DB" "SELECT kind, id FROM audit_checkpoints WHERE kind = 'P'")" "P|4" \
        "the pruning's signed checkpoint"
M=$(sqlite3 "$DB" "SELECT count(*) FROM audit")
assert_eq "$(/usr/bin/python3 "$CHAIN" check "$DB" "$CA_DIR/ca.pem")" "ok $M" "the independent check after pruning"
# Pruned once more by hand, the anchor moved along: not a signed pruning.
tampered cut-pruned "UPDATE audit_chain SET id = 6, at = (SELECT at FROM audit WHERE id = 6),
        hash = (SELECT hash FROM audit WHERE id = 6) WHERE role = 'anchor'; DELETE FROM audit WHERE id <= 6" \
        "the chain's anchor (record 6) was not left by a signed pruning"
tampered pruned-first "DELETE FROM audit WHERE id = 5" "the oldest record(s) before it were deleted"
tampered anchor "UPDATE audit_chain SET hash = zeroblob(32) WHERE role = 'anchor'" "record 5"

# --- a record that does not verify is never pruned away ----------------------------
sqlite3 "$DB" "UPDATE audit SET at = at - 400 * 86400 WHERE id IN (5, 6)"
sqlite3 "$DB" "UPDATE audit SET reason = 'rewritten' WHERE id = 5"
hwidd_start
sleep 2
assert_eq "$(sqlite3 "$DB" "SELECT min(id) FROM audit")" 5 "the tampered record is still there"
assert_contains "$(cat "$HWIDD_LOG")" "audit record 5" "hwidd says why it does not prune"
hwidd_stop
expect_exit 1 "record 5 was modified" -- "$HWID" audit verify --config "$CFG"
echo "ok"
