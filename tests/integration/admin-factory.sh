#!/bin/bash
# shellcheck disable=SC2119  # lib.sh helpers take optional arguments
# admin-factory.sh — a factory station runs on tokens it mints remotely as
# a provisioner. The station's own identity key is in its TPM (an swtpm);
# each device has an swtpm of its own; hwidd's CA key is in SoftHSM2.
# Proves:
#   - the station, enrolled under a `role: provisioner` profile scoped to
#     profile `line` and `line-3-*`, mints 3 tokens remotely (`hwid token
#     create --dir STATION --count 3 --out FILE`, mode 0600) and `hwid
#     factory` enrolls line-3-00..02 with them: "3 enrolled", every
#     certificate verified by openssl for its device's TPM key, under
#     profile `line`;
#   - the audit log names the station as the actor of each token.create
#     (one record per token id), and the devices' enrollments spent those
#     tokens;
#   - the station cannot mint for `line-4-*` nor for another profile (403
#     with the reason, no token stored), and cannot list tokens;
#   - 1001 tokens at once come in two requests, all distinct and audited;
#   - no token secret is in hwidd's log or the CA's database, nor in the
#     station's output; no TPM is left with a transient object.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"
# shellcheck source=policy-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/policy-lib.sh"
# shellcheck source=admin-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/admin-lib.sh"

N=3
device_ca < <(operator_profiles)
swtpm_init $((N + 1))   # TPM 0: the station's; 1..N: the devices'
STATION_TCTI=${TCTIS[0]}

test_station_enrolls() {
        HWID_TCTI=$STATION_TCTI op_join op-station ops-provisioner "tpm2:file=$OPS/op-station/station.tss2.pem"
        assert_eq "$(store_sql "SELECT role FROM certificates WHERE identity = 'op-station'")" \
                provisioner "the station's recorded role"
        assert_no_transient "$STATION_TCTI"
}

test_mint_and_run() {
        local i out err tok id
        run_ok "$HWID" token create --dir "$OPS/op-station" --tcti "$STATION_TCTI" --profile line \
                --name-pattern 'line-3-*' --count "$N" --out "$T/tokens.txt" >"$T/mint.out"
        assert_contains "$(cat "$T/mint.out")" "wrote $N tokens (profile line) to $T/tokens.txt" "mint summary"
        assert_file_mode "$T/tokens.txt" 600
        assert_eq "$(grep -cE '^[a-z0-9]{6}\.[a-z0-9]{16,}$' "$T/tokens.txt")" "$N" "tokens in the file"
        assert_no_transient "$STATION_TCTI"
        for ((i = 0; i < N; i++)); do
                printf 'line-3-%02d %s tpm2:file=%s/line-3-%02d/device.tss2.pem\n' "$i" "${TCTIS[$((i + 1))]}" \
                        "$T/line" "$i"
        done >"$T/devices.txt"
        run_ok "$HWID" factory --server "$URL" --ca-hash "$PIN" --tokens "$T/tokens.txt" --devices "$T/devices.txt" \
                --parallel "$N" --out-dir "$T/line" >"$T/factory.out" 2>"$T/factory.err"
        out=$(cat "$T/factory.out")
        err=$(cat "$T/factory.err")
        assert_contains "$out" ": $N enrolled, 0 already enrolled, 0 pending, 0 failed" "factory summary"
        for ((i = 0; i < N; i++)); do
                HWID_TCTI=${TCTIS[$((i + 1))]} check_dir "$T/line/line-3-$(printf %02d "$i")" \
                        "line-3-$(printf %02d "$i")"
                assert_eq "$(cert_rows --identity "line-3-$(printf %02d "$i")" | awk '{ print $2, $4 }')" "valid line" \
                        "status and profile of line-3-$(printf %02d "$i")"
        done
        while read -r tok; do
                id=${tok%%.*}
                expect_audit provisioner:op-station token.create "$id" allow \
                        "profile line, name pattern line-3-*, 1 use, valid for 86400s"
                assert_eq "$(token_used "$tok")" 1 "uses of token $id"
                assert_not_contains "$out$err$(cat "$T/mint.out")" "${tok#*.}" "token secret in the station's output"
        done <"$T/tokens.txt"
        assert_no_transient
}

test_station_limits() {
        local before
        before=$(admin token list)
        expect_exit 1 "outside the scope of provisioner 'op-station'" -- "$HWID" token create --dir "$OPS/op-station" \
                --tcti "$STATION_TCTI" --profile line --name-pattern 'line-4-*' --count 2 --out "$T/t4.txt"
        assert_contains "$(cat "$T/last.err")" "server answered 403: name pattern 'line-4-*'" "reason for line-4-*"
        [ ! -e "$T/t4.txt" ] || fail "a refused mint wrote $T/t4.txt"
        expect_exit 1 "profile 'default' is outside the scope" -- "$HWID" token create --dir "$OPS/op-station" \
                --tcti "$STATION_TCTI" --profile default --name-pattern 'line-3-*'
        expect_exit 1 "may not perform 'token.list'" -- "$HWID" token list --dir "$OPS/op-station" \
                --tcti "$STATION_TCTI"
        assert_eq "$(admin token list)" "$before" "tokens after the station's refusals"
        assert_no_transient "$STATION_TCTI"
}

# More than hwidd gives in one answer (1000): the command asks twice.
test_batches() {
        local before
        before=$(admin token list | tail -n +2 | wc -l)
        run_ok "$HWID" token create --dir "$OPS/op-station" --tcti "$STATION_TCTI" --profile line \
                --name-pattern 'line-3-*' --count 1001 --out "$T/many.txt" >/dev/null
        assert_eq "$(sort -u "$T/many.txt" | grep -cE '^[a-z0-9]{6}\.[a-z0-9]{16,}$')" 1001 "distinct tokens minted"
        assert_eq "$(admin token list | tail -n +2 | wc -l)" $((before + 1001)) "tokens stored"
        assert_eq "$(store_sql "SELECT count(*) FROM audit WHERE actor = 'provisioner:op-station'
                AND action = 'token.create' AND outcome = 'allow'")" $((N + 1001)) "token.create records of the station"
        assert_no_transient "$STATION_TCTI"
}

test_no_secrets() {
        mapfile -t toks < <(cat "$T/tokens.txt" "$T/many.txt")
        secrets_absent "$HWIDD_LOG" "${toks[@]}"
        store_secrets_absent "${toks[@]}"
}

test_station_enrolls
test_mint_and_run
test_station_limits
test_batches
test_no_secrets
hwidd_stop
echo "admin-factory: all checks passed"
