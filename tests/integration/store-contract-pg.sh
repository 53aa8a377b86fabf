#!/bin/bash
# store-contract-pg.sh — the store contract on PostgreSQL: runs
# tests/unit/test-store-contract.c (what store.h promises every backend:
# tokens, requests and approvals, certificates and DNS names, revocation,
# key blocking and CRL numbers, the reads ahead, the audit chain with its
# checkpoints and sink, attestation, bindings, migration from the first
# schema, and races between two store objects standing for two replicas)
# on a cluster of the test's own, a database per case; store-contract-sqlite
# runs the same binary on SQLite files. Then checks, with psql, what only
# PostgreSQL's schema holds: the rows the races left, and what a token's
# row may hold.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=pg-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/pg-lib.sh"

: "${TEST_STORE_CONTRACT:=$BUILDDIR/tests/test-store-contract}"
[ -x "$TEST_STORE_CONTRACT" ] || fail "no $TEST_STORE_CONTRACT (build it first)"
pg_start --own   # the contract makes a database per case (contract_*): a cluster of its own
run_ok "$TEST_STORE_CONTRACT" "$PG_URI"
# What the databases hold agrees with what the store answered.
PG_DB=contract_race_one
assert_eq "$(pg_sql "SELECT count(*) FROM certificates WHERE hwid_fold(identity) = 'race-one'")" 1 \
        "certificates of the identity raced for"
PG_DB=contract_race_tokens
assert_eq "$(pg_sql "SELECT uses_left FROM tokens WHERE id = 'tokrac'")" 0 "uses left of the raced token"
PG_DB=contract_race_replace
assert_eq "$(pg_sql "SELECT count(*) FROM certificates WHERE identity = 'race-replace' AND status = 'valid'")" 1 \
        "live certificates after the replacing race"
# A derived token holds its nonce and no hash, a legacy one its hash; the
# schema refuses a token with both or neither, or a short nonce.
PG_DB=contract_derived
assert_eq "$(pg_sql "SELECT secret_hash IS NULL, length(nonce) FROM tokens WHERE id = 'der001'")" "t|32" \
        "what the derived token's row holds"
assert_eq "$(pg_sql "SELECT nonce IS NULL, length(secret_hash) FROM tokens WHERE id = 'leg001'")" "t|32" \
        "what the legacy token's row holds"
pg_sql "INSERT INTO tokens (id, secret_hash, nonce, profile, created_at, expires_at, uses_total, uses_left)
        VALUES ('good01', NULL, '\\x$(printf '%064d' 0)'::bytea, 'p', 0, 1, 1, 1)" >/dev/null ||
        fail "the schema refused a well-formed derived token"
for vals in "'\\x$(printf '%064d' 0)'::bytea, '\\x$(printf '%064d' 0)'::bytea" "NULL, NULL" \
        "NULL, '\\x$(printf '%032d' 0)'::bytea"; do
        ! pg_sql "INSERT INTO tokens (id, secret_hash, nonce, profile, created_at, expires_at, uses_total, uses_left)
                  VALUES ('bad001', $vals, 'p', 0, 1, 1, 1)" >/dev/null 2>&1 ||
                fail "the schema took a token with (secret_hash, nonce) = ($vals)"
done
echo "store-contract-pg: OK"
