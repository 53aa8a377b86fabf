#!/bin/bash
# ops-audit-truncation.sh — the audit chain's signed checkpoints catch the
# truncations that need no hash recomputed, on whichever store ca-lib.sh
# sets up (SQLite; PostgreSQL in pg-suite-ops-audit-truncation). A real
# hwidd (CA key in SoftHSM2) signs a checkpoint of the head every 3
# records (audit.checkpoint_records) and when it stops. Proves:
#   - hwid audit verify passes and names the newest checkpoint;
#   - the newest records deleted and the head moved back onto the new last
#     row: exit 1, "the newest record(s) were deleted: the log ends at
#     record K, but the checkpoint made at T signed record N";
#   - the oldest records deleted under an anchor copied from a row: exit 1,
#     "the chain's anchor (record 3) was not left by a signed pruning";
#   - a checkpoint altered: its signature does not verify;
#   - checkpoints deleted, the oldest, the newest two, or all: hwidd's note
#     of each in the chain names the one that is gone, exit 1;
#   - each log put back as it was verifies again (only the edit was caught).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

# edited SQL EXPECTED — the store edited by SQL: verify exits 1 naming
# EXPECTED; then the saved tables are put back and verify passes again.
edited() {
        store_sql "$1" >/dev/null
        expect_exit 1 "$2" -- "$HWID" audit verify --config "$CFG"
        assert_contains "$(cat "$T/last.err")" "does not verify" "verify's message"
        store_sql "DELETE FROM audit; INSERT INTO audit SELECT * FROM audit_saved;
                DELETE FROM audit_chain; INSERT INTO audit_chain SELECT * FROM audit_chain_saved;
                DELETE FROM audit_checkpoints; INSERT INTO audit_checkpoints SELECT * FROM audit_checkpoints_saved"
        run_ok "$HWID" audit verify --config "$CFG" >/dev/null
}

ca_setup
CFG=$CA_DIR/hwidd.yaml
sed -i 's/^profiles:$/audit:\n  checkpoint_records: 3\n&/' "$CFG"
hwidd_start
TOK=$(token_new --uses 6)
for i in 1 2 3; do
        enroll "dev-$i" "$TOK"
        expect_status 201 "$DEV/dev-$i"
done
# hwidd signs the head within its next tick (a second) once 3 records
# passed since the last checkpoint -- on PostgreSQL in the tick that links
# them -- however fast the enrollments came.
for _ in $(seq 50); do
        [ "$(store_sql "SELECT count(*) FROM audit_checkpoints WHERE kind = 'H'")" -ge 1 ] && break
        sleep 0.1
done
[ "$(store_sql "SELECT count(*) FROM audit_checkpoints WHERE kind = 'H'")" -ge 1 ] ||
        fail "hwidd signed no checkpoint while it ran (every 3 records)"
for i in 4 5 6; do
        enroll "dev-$i" "$TOK"
        expect_status 201 "$DEV/dev-$i"
done
hwidd_stop
N=$(store_sql "SELECT max(id) FROM audit")
assert_eq "$(store_sql "SELECT id FROM audit_checkpoints ORDER BY seq DESC LIMIT 1")" "$N" \
        "the checkpoint hwidd signed when it stopped"
[ "$(store_sql "SELECT count(*) FROM audit_checkpoints WHERE kind = 'H'")" -ge 2 ] ||
        fail "hwidd signed no checkpoint of the records after the first one"
run_ok "$HWID" audit verify --config "$CFG" >"$T/v.out"
assert_contains "$(cat "$T/v.out")" "signs record $N: records after it are covered by the chain only" "verify's report"
store_sql "CREATE TABLE audit_saved AS SELECT * FROM audit; CREATE TABLE audit_chain_saved AS SELECT * FROM audit_chain;
        CREATE TABLE audit_checkpoints_saved AS SELECT * FROM audit_checkpoints" >/dev/null

K=$((N - 3))
edited "DELETE FROM audit WHERE id > $K;
        UPDATE audit_chain SET id = $K, at = (SELECT at FROM audit WHERE id = $K),
        hash = (SELECT hash FROM audit WHERE id = $K) WHERE role = 'head'" \
        "the newest record(s) were deleted: the log ends at record $K, but the checkpoint made at"
edited "INSERT INTO audit_chain (role, id, at, hash) SELECT 'anchor', id, at, hash FROM audit WHERE id = 3;
        DELETE FROM audit WHERE id <= 3" "the chain's anchor (record 3) was not left by a signed pruning"
edited "UPDATE audit_checkpoints SET at = at + 1" "does not verify with the CA's key: it was forged or altered"
# Checkpoints deleted, records left as they were: the chain notes each one
# hwidd signed (the record after the one signed), so none goes unseen.
first=$(store_sql "SELECT id FROM audit_checkpoints WHERE kind = 'H' ORDER BY seq LIMIT 1")
note=$(store_sql "SELECT min(id) FROM audit WHERE action = 'audit.checkpoint' AND target = 'record $first'")
edited "DELETE FROM audit_checkpoints WHERE seq = (SELECT min(seq) FROM audit_checkpoints)" \
        "the signed checkpoint of record $first, noted by record $note, is no longer stored"
last=$(store_sql "SELECT target FROM audit WHERE id = $N")
edited "DELETE FROM audit_checkpoints WHERE seq IN (SELECT seq FROM audit_checkpoints ORDER BY seq DESC LIMIT 2)" \
        "the signed checkpoint of ${last}, noted by record $N, is no longer stored"
edited "DELETE FROM audit_checkpoints" "noted by record $note, is no longer stored"
echo "ops-audit-truncation: all checks passed"
