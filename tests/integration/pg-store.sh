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
# A derived token holds its nonce and no hash, a legacy one its hash; the
# schema refuses a token with both or neither, or a short nonce.
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
echo "pg-store: OK"
