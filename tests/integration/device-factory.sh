#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# device-factory.sh — a factory station (hwid factory) enrolls 20 devices,
# each with its own swtpm, 8 at a time, with tokens from
# `hwid token create --count 20 --out FILE`.
# Proves:
#   - exit 0 and the summary "20 enrolled"; one progress line per device
#     ("[ i/20] NAME enrolled (Ns)", i = 1..20 once each);
#   - every certificate verifies (openssl) and is for its device's name and
#     for the key in that device's own TPM (hwid key show on its TCTI); a key
#     file does not load in another device's TPM; serials and public keys
#     are all distinct; one valid certificate per name in the store;
#   - tokens are spent in file order (device i ⇐ token line i, from hwidd's
#     log), all 20 once, and no token appears in the station's output;
#   - no TPM is left with a transient object or session;
#   - running the station again: exit 0, "20 already enrolled", no token
#     needed (empty tokens file), nothing issued;
#   - failures are per device and named: an unreachable TPM and a bad token
#     fail (exit 1) with their reasons in the summary while the other device
#     enrolls; too few tokens and a duplicate name stop it before anything
#     runs.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"

N=20
device_ca </dev/null
swtpm_init "$N"
mkdir -p "$T/line"

factory() {
        "$HWID" factory --server "$URL" --ca-hash "$PIN" "$@"
}

# The devices file: comments, a blank line, most DIRs by default under
# --out-dir, a few given explicitly.
write_devices() {
        local i dir
        {
                echo "# NAME TCTI KEY-URI [DIR]"
                echo
                for ((i = 0; i < N; i++)); do
                        dir=$T/line/edge-$(printf %02d "$i")
                        if ((i % 5 == 4)); then
                                dir=$T/other/e$i
                                printf 'edge-%02d %s tpm2:file=%s/device.tss2.pem %s  # explicit DIR\n' \
                                        "$i" "${TCTIS[$i]}" "$dir" "$dir"
                        else
                                printf 'edge-%02d\t%s tpm2:file=%s/device.tss2.pem\n' "$i" "${TCTIS[$i]}" "$dir"
                        fi
                        DIRS[i]=$dir
                done
        } >"$T/devices.txt"
}

test_enroll_all() {
        local i out err line tok id
        admin token create --count "$N" --out "$T/tokens.txt" >/dev/null
        assert_file_mode "$T/tokens.txt" 600
        write_devices
        run_ok factory --tokens "$T/tokens.txt" --devices "$T/devices.txt" --parallel 8 \
                --out-dir "$T/line" >"$T/factory.out" 2>"$T/factory.err"
        out=$(cat "$T/factory.out")
        err=$(cat "$T/factory.err")
        assert_contains "$out" "$N devices in" "summary"
        assert_contains "$out" ": $N enrolled, 0 already enrolled, 0 pending, 0 failed" "summary counts"
        assert_eq "$(grep -cE '^\[ ?[0-9]+/20\] edge-[0-9]{2} enrolled \([0-9]+\.[0-9]{2}s\)$' <<<"$err")" "$N" \
                "progress lines"
        assert_eq "$(sed -n 's/^\[ *\([0-9]*\)\/20\].*/\1/p' <<<"$err" | sort -n | tr '\n' ' ')" \
                "$(seq -s ' ' 1 $N) " "progress counters"
        # Tokens: spent in order, never shown.
        i=0
        while read -r tok; do
                assert_not_contains "$out$err" "${tok#*.}" "token secret in the station's output"
                id=${tok%%.*}
                line=$(grep "(token $id)" "$HWIDD_LOG") || fail "token $id of line $((i + 1)) was not used"
                assert_contains "$line" "to edge-$(printf %02d "$i") " "device of token line $((i + 1))"
                assert_eq "$(token_used "$tok")" 1 "uses of token $id"
                i=$((i + 1))
        done <"$T/tokens.txt"
        assert_eq "$i" "$N" "tokens in the file"
}

test_certificates() {
        local i name serials keys
        for ((i = 0; i < N; i++)); do
                name=edge-$(printf %02d "$i")
                HWID_TCTI=${TCTIS[$i]} check_dir "${DIRS[$i]}" "$name"
                assert_eq "$(cert_rows --identity "$name" | grep -cw valid)" 1 "valid certificates for $name"
        done
        serials=$(for d in "${DIRS[@]}"; do dir_serial "$d"; done | sort -u | wc -l)
        assert_eq "$serials" "$N" "distinct serials"
        keys=$(for d in "${DIRS[@]}"; do cert_pubkey "$d/cert.pem" | sha256sum; done | sort -u | wc -l)
        assert_eq "$keys" "$N" "distinct public keys"
        # A key made in TPM 0 is useless in TPM 1 (and the other way round).
        for i in 0 1; do
                if HWID_TCTI=${TCTIS[$((1 - i))]} "$HWID" key show "$(cat "${DIRS[$i]}/key.uri")" \
                        >/dev/null 2>&1; then
                        fail "the key of edge-0$i loads in another device's TPM"
                fi
        done
        assert_no_transient
        no_private_keys_in "$T"
}

test_again() {
        local rows
        rows=$(cert_rows | wc -l)
        : >"$T/no-tokens.txt"
        run_ok factory --tokens "$T/no-tokens.txt" --devices "$T/devices.txt" --parallel 8 \
                --out-dir "$T/line" >"$T/again.out" 2>/dev/null
        assert_contains "$(cat "$T/again.out")" ": 0 enrolled, $N already enrolled, 0 pending, 0 failed" \
                "summary of a second run"
        assert_eq "$(cert_rows | wc -l)" "$rows" "certificates after a second run"
        assert_no_transient
}

test_failures() {
        local dead rc=0 out
        dead=$(free_port)   # no TPM there
        admin token create --count 2 --out "$T/tokens2.txt" >/dev/null
        echo "aaaaaa.bbbbbbbbbbbbbbbbbbbbbbbb" >>"$T/tokens2.txt"
        cat >"$T/devices2.txt" <<EOF
edge-20 ${TCTIS[0]} tpm2:file=$T/line2/edge-20/device.tss2.pem
edge-21 swtpm:host=127.0.0.1,port=$dead tpm2:file=$T/line2/edge-21/device.tss2.pem
edge-22 ${TCTIS[1]} tpm2:file=$T/line2/edge-22/device.tss2.pem
EOF
        factory --tokens "$T/tokens2.txt" --devices "$T/devices2.txt" --parallel 3 --out-dir "$T/line2" \
                >"$T/fail.out" 2>"$T/fail.err" || rc=$?
        out=$(cat "$T/fail.out")
        assert_eq "$rc" 1 "exit code with failed devices"
        assert_contains "$out" ": 1 enrolled, 0 already enrolled, 0 pending, 2 failed" "summary with failures"
        assert_contains "$out" "failed: edge-21 (line 2): cannot reach the TPM" "reason of the TPM failure"
        assert_contains "$out" "failed: edge-22 (line 3): server answered 401" "reason of the token failure"
        assert_not_contains "$out$(cat "$T/fail.err")" "bbbbbbbbbbbbbbbb" "token secret in the output"
        check_dir "$T/line2/edge-20" edge-20
        assert_no_transient
        # Too few tokens, a duplicate name: refused before anything runs.
        head -n 1 "$T/tokens.txt" >"$T/one-token.txt"
        printf 'edge-30 %s k1\nedge-31 %s k2\n' "${TCTIS[2]}" "${TCTIS[3]}" >"$T/devices3.txt"
        expect_exit 1 "holds 1 token for 2 devices" -- factory --tokens "$T/one-token.txt" \
                --devices "$T/devices3.txt" --out-dir "$T/line3"
        printf 'edge-30 - k1\nedge-30 - k2\n' >"$T/devices4.txt"
        expect_exit 1 "device 'edge-30' appears twice" -- factory --tokens "$T/tokens.txt" \
                --devices "$T/devices4.txt" --out-dir "$T/line3"
        [ ! -e "$T/line3" ] || fail "a refused station run created $T/line3"
        expect_exit 2 "needs --server, --ca-hash, --tokens and --devices" -- "$HWID" factory --server "$URL"
}

DIRS=()
test_enroll_all
test_certificates
test_again
test_failures
echo "device-factory: all checks passed"
