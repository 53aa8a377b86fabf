#!/bin/bash
# pg-store.sh — the PostgreSQL store against store.h's semantics: runs
# tests/unit/test-store-pg.c (tokens, requests, certificates, DNS names,
# revocation and key blocking, CRL numbers, the audit chain, attestation,
# and races between two store objects standing for two replicas) on a
# cluster of the test's own.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=pg-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/pg-lib.sh"

: "${TEST_STORE_PG:=$BUILDDIR/tests/test-store-pg}"
[ -x "$TEST_STORE_PG" ] || fail "no $TEST_STORE_PG (build it first)"
pg_start
HWID_TEST_PG_URI=$PG_URI run_ok "$TEST_STORE_PG"
# What the database holds agrees with what the store answered.
assert_eq "$(pg_sql "SELECT count(*) FROM certificates WHERE hwid_fold(identity) = 'race-one'")" 1 \
        "certificates of the identity raced for"
assert_eq "$(pg_sql "SELECT uses_left FROM tokens WHERE id = 'tokrac'")" 0 "uses left of the raced token"
assert_eq "$(pg_sql "SELECT count(*) FROM certificates WHERE identity = 'race-replace' AND status = 'valid'")" 1 \
        "live certificates after the replacing race"
echo "pg-store: OK"
