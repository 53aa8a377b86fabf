#!/bin/bash
# shellcheck disable=SC2119  # lib.sh helpers take optional arguments
# attest-bounds.sh — one requester cannot exhaust the attestation
# challenges of a CA: two hwidd on one store (SQLite; the bounds on
# PostgreSQL: store-contract-pg), attestation.max_pending 12, 4 per requester
# (the default). Proves:
#   - a token holder (its token unspent) and the holder of an allowlisted
#     EK certificate (no TPM needed: it is not a secret) each ask replica 1
#     for 20 challenges with curl: every one is answered 201, and each
#     keeps only its newest 4 in the store (its older ones replaced);
#   - meanwhile another TPM attests and joins with `hwid join --attest` on
#     replica 2, its certificate naming its TPM;
#   - /metrics counts the challenges issued and replaced
#     (hwid_attest_challenges_total), and the audit log sums up the
#     replacements in one `attest.bounds` record when hwidd stops.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=attest-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/attest-lib.sh"
# shellcheck source=ops-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ops-lib.sh"

swtpm_init 2
A=${TCTIS[0]}   # the flooder's TPM: only its EK certificate is used
B=${TCTIS[1]}   # the device that must still get through
manufacturer_roots "$T/ek-roots"
ca_setup
add_profiles <<'EOF2'
  attested:
    validity: 1h
    subject: {allowed_rdns: [CN]}
    attestation: required
EOF2
{ printf 'attestation:\n  ek_roots: [%s]\n  max_pending: 12\n' "$T/ek-roots"; cat "$CFG"; } >"$CFG.new"
mv "$CFG.new" "$CFG"
sed -i 's/^  audit_only: false$/&\n  public_metrics: true/' "$CFG"
hwidd_start
PIN=$(run_ok "$HWID" ca hash "$CA_DIR/ca.pem")

# The second replica: the same configuration and store, its own ports.
PORT2=$(free_port)
sed -e "s|^listen: .*|listen: \"127.0.0.1:$PORT2\"|" -e "s|^http_listen: .*|http_listen: \"127.0.0.1:$(free_port)\"|" \
        "$CFG" >"$CA_DIR/replica-2.yaml"
start_bg "$T/replica-2.log" "$HWIDD" --config "$CA_DIR/replica-2.yaml"
wait_for_port "$PORT2" 20 "$BG_PID"

# What a flooder sends: A's EK certificate and public area, and an AK.
mkdir -p "$T/ek-a"
run_ok "$ATTEST_TOOL" ek-export --tcti "$A" --ek rsa-2048 --out "$T/ek-a" >/dev/null
assert_no_transient "$A"
printf '{"ek_cert":"%s","ek_public":"%s","ak_public":"%s"}' "$(base64 -w0 <"$T/ek-a/ek.der")" \
        "$(base64 -w0 <"$T/ek-a/ek.pub")" "$(base64 -w0 <"$T/ek-a/ak.pub")" >"$T/flood.json"
run_ok "$HWID" ek add --config "$CFG" --cn flooder-ek --profile attested --ek-cert "$T/ek-a/ek.der" >/dev/null

# flood TAG [CURL-ARGS...] — 20 challenges asked for in a row; statuses in $T/TAG.codes.
flood() {
        local tag=$1 i
        shift
        for i in $(seq 20); do
                http "$T/$tag" POST /v1/attest -H "Content-Type: application/json" --data-binary "@$T/flood.json" "$@"
                echo "$CODE"
        done >"$T/$tag.codes"
        assert_eq "$(sort -u "$T/$tag.codes" | tr '\n' ' ')" "201 " "answers to 20 challenges of $tag"
}

scrape "$T/m0"
TOK=$(token_new --profile attested)
flood token -H "Authorization: Bearer $TOK"
flood ek
assert_eq "$(store_sql "SELECT count(*) FROM attest_challenges WHERE requester = 'token:${TOK%%.*}'")" 4 \
        "challenges the token holder keeps"
assert_eq "$(store_sql "SELECT count(*) FROM attest_challenges WHERE requester LIKE 'ek:%'")" 4 \
        "challenges the EK's holder keeps"
assert_eq "$(token_used "$TOK")" 0 "uses of the flooder's token"

# Another TPM joins, attested, through the other replica.
tok=$(token_new --profile attested)
URL=https://127.0.0.1:$PORT2 HWID_TOKEN=$tok expect_exit 0 "enrolled dev-b" --multiline -- \
        join_dev "$T/dev-b" dev-b "$tok" --tcti "$B" --attest
HWID_TCTI=$B check_dir "$T/dev-b" dev-b
ek_cert "$B" "$T/ek-b.der"
assert_eq "$(permanent_id "$T/dev-b/cert.pem")" "sha256:$(ek_pub_sha256 "$T/ek-b.der")" \
        "the TPM dev-b's certificate names"
assert_no_transient "$B"

scrape "$T/m1"
[ "$(metric_delta "$T/m0" "$T/m1" 'hwid_attest_challenges_total{result="issued"}')" -ge 40 ] ||
        fail "challenges counted as issued: $(grep attest_challenges "$T/m1.body")"
assert_eq "$(metric_delta "$T/m0" "$T/m1" 'hwid_attest_challenges_total{result="replaced"}')" 32 \
        "challenges counted as replaced (16 of each flooder)"
hwidd_stop
assert_contains "$(store_sql "SELECT reason FROM audit WHERE actor = 'hwidd' AND action = 'attest.bounds'")" \
        "32 attestation challenge(s) replaced by a newer one of the same requester" "the audit summary"
echo "attest-bounds: all checks passed"
