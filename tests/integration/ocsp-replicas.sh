#!/bin/bash
# ocsp-replicas.sh — two hwidd replicas on one PostgreSQL database answer
# OCSP alike, each from its own cache, and a revocation shows on both at
# once: each reads the certificate's status from the store at every
# request. `openssl ocsp` asks each replica's plain-HTTP listener and
# verifies every answer against ca.pem.
# Proves:
#   - both replicas answer `good` for a certificate issued by one of them,
#     and `unknown` for a serial never issued;
#   - both answers kept in their caches (asked twice without a nonce: the
#     second a cache hit on each replica);
#   - `hwid cert revoke` (through the shared store): the very next answer
#     of each replica is `revoked`, with the reason, no reload, no wait.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=policy-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/policy-lib.sh"
# shellcheck source=pg-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/pg-lib.sh"
# shellcheck source=ocsp-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ocsp-lib.sh"

# hits N — replica N's hwid_ocsp_cache_hits_total.
hits() {
        on_replica "$1" http "$DEV/metrics-$1" GET /metrics
        expect_status 200 "$DEV/metrics-$1"
        awk '$1 == "hwid_ocsp_cache_hits_total" { print $2 }' "$DEV/metrics-$1.body"
}

# ask_both TAG WHAT STATUS [ARGS...] — each replica says STATUS of WHAT.
ask_both() {
        local tag=$1 cert=$2 want=$3 n
        shift 3
        for n in 1 2; do
                ocsp_ask "$DEV/$tag-$n" "http://127.0.0.1:${REPLICA_HTTP[$n]}/ocsp" "$cert" "$@"
                assert_eq "$(ocsp_status "$DEV/$tag-$n")" "$want" "replica $n on $cert ($tag)"
        done
}

ca_setup
sed -i 's/^  audit_only: false$/&\n  public_metrics: true/' "$CFG"
# shellcheck disable=SC2119  # no --own: the run's cluster will do
pg_start
pg_use_config
replica_start 1
replica_start 2
on_replica 1 enrolled dev-1 "$(token_new)"

ask_both good "$DEV/dev-1.pem" good
ask_both unknown 0x0123456789 unknown
h1=$(hits 1)
h2=$(hits 2)
ask_both cached "$DEV/dev-1.pem" good -no_nonce
ask_both cached2 "$DEV/dev-1.pem" good -no_nonce
assert_eq "$(($(hits 1) - h1))/$(($(hits 2) - h2))" "1/1" "cache hits of each replica"

admin cert revoke --reason key-compromise "$(serial_of "$DEV/dev-1.pem")" >/dev/null
ask_both revoked "$DEV/dev-1.pem" revoked -no_nonce
for n in 1 2; do
        assert_contains "$(cat "$DEV/revoked-$n.out")" "Reason: keyCompromise" "replica $n's reason"
done
ask_both revoked-nonce "$DEV/dev-1.pem" revoked
# A replica stops cleanly (ASan: without leaks) on SIGTERM.
HWIDD_PID=${REPLICA_PID[1]} hwidd_stop
echo "ocsp-replicas: both replicas answer alike, the revocation at once"
