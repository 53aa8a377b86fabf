#!/bin/bash
# shellcheck disable=SC2119  # lib.sh helpers take optional arguments
# attest-device.sh — the device side of TPM attestation with the real
# binaries (hwid join --attest, hwid renew, hwid factory --attest) against a
# real hwidd, devices on swtpm.
# Proves:
#   - an attested join (a new key file, persistent RSA EK, `--ek auto`)
#     costs at most 16 TPM commands and 2 CreatePrimary, counted in swtpm's
#     command log, none refused with TPM_RC_RETRY; nothing is left loaded;
#   - hwid renew, under a profile that requires attestation and rotates the
#     key, attests the new key by itself (the server's identity status says
#     so): the new certificate names the same TPM and the store records a
#     new AK proof; under a profile that keeps the key, it does not attest,
#     and the certificate keeps naming the TPM;
#   - hwid renew --attest under a profile that asks for nothing still
#     proves it (recorded by optional profiles);
#   - hwid factory --attest enrolls a line of devices without tokens, their
#     TPMs imported to the EK allowlist from a JSON manifest of their EK
#     certificates; each certificate names its own TPM; no TPM is left with
#     a transient object or session.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=attest-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/attest-lib.sh"
# shellcheck source=tpm-log-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/tpm-log-lib.sh"

# Four TPMs of one manufacturer: A for one device, 1..3 for a factory line.
swtpm_init --log 4
A=${TCTIS[0]}
manufacturer_roots "$T/ek-roots"
attest_ca "$T/ek-roots" <<'EOF'
  rotating:
    validity: 1h
    subject: {allowed_rdns: [CN]}
    renewal: {window: 1.0, rotate_key: true}
    attestation: required
  keeping:
    validity: 1h
    subject: {allowed_rdns: [CN]}
    renewal: {window: 1.0}
    attestation: required
  opt:
    validity: 1h
    subject: {allowed_rdns: [CN]}
    renewal: {window: 1.0}
    attestation: optional
  line:
    validity: 30d
    subject: {allowed_rdns: [CN]}
    attestation: required
EOF
ek_cert "$A" "$T/ek-a.der"
EK_A=$(ek_pub_sha256 "$T/ek-a.der")

renew_dev() {
        "$HWID" renew --dir "$1" --tcti "$2" "${@:3}"
}

# renewed DIR TCTI [ARGS...] — hwid renew succeeds, to generation 2.
renewed() {
        expect_exit 0 "" --multiline -- renew_dev "$@"
        assert_contains "$(cat "$T/last.out")" "renewed: generation 2"
}

echo "== an attested join: at most 16 TPM commands, 2 CreatePrimary"
# A fresh swtpm answers the first command that uses an algorithm (a Sign,
# an ActivateCredential) with TPM_RC_RETRY, then tests the algorithm:
# attest once before counting, as on a device that has been used.
run_ok "$HWID" key create "tpm2:file=$T/warm.pem" --tcti "$A" >/dev/null
run_ok "$ATTEST_TOOL" exchange --tcti "$A" --roots "$T/ek-roots" --key "tpm2:file=$T/warm.pem" >/dev/null
tok=$(token_new --profile rotating)
l0=$(log_lines 0)
HWID_TOKEN=$tok expect_exit 0 "enrolled dev-1" --multiline -- \
        join_dev "$T/dev-1" dev-1 "$tok" --tcti "$A" --attest
cmds=$(commands_since --retries 0 "$l0")
n=$(grep -c . <<<"$cmds")
cp=$(grep -c '^CreatePrimary$' <<<"$cmds" || true)
echo "  $n commands, $cp CreatePrimary: $(tr '\n' ' ' <<<"$cmds")"
! grep -q RETRY <<<"$cmds" || fail "a command was refused with TPM_RC_RETRY: $cmds"
[ "$n" -le 16 ] || fail "an attested join took $n TPM commands, more than 16"
[ "$cp" -le 2 ] || fail "an attested join took $cp CreatePrimary, more than 2"
for c in ActivateCredential Certify Sign; do
        assert_eq "$(grep -c "^$c\$" <<<"$cmds")" 1 "$c per attested join"
done
assert_no_transient "$A"
check_dir "$T/dev-1" dev-1
assert_eq "$(permanent_id "$T/dev-1/cert.pem")" "sha256:$EK_A" "the joined certificate names the TPM"

echo "== hwid renew attests a new key by itself when the profile requires it"
serial1=$(dir_serial "$T/dev-1")
ak1=$(store_sql "SELECT ak_name FROM certificates WHERE serial = '$serial1'")
renewed "$T/dev-1" "$A"
assert_contains "$(cat "$T/last.err")" "asking $URL for an attestation challenge"
assert_contains "$(cat "$T/last.err")" "with TPM attestation"
check_dir "$T/dev-1" dev-1
serial2=$(dir_serial "$T/dev-1")
[ "$serial2" != "$serial1" ] || fail "renewal kept the serial"
assert_eq "$(permanent_id "$T/dev-1/cert.pem")" "sha256:$EK_A" "the renewed certificate names the same TPM"
assert_eq "$(store_sql "SELECT ek_pub_sha256 || ' ' || CASE WHEN ak_name = '$ak1' THEN 1 ELSE 0 END FROM certificates
        WHERE serial = '$serial2'")" "$EK_A 1" "recorded: the same TPM, its AK"
[ "$(cat "$T/dev-1/key.uri")" != "tpm2:file=$T/dev-1/device.tss2.pem" ] || fail "the key was not rotated"
assert_no_transient "$A"

echo "== hwid renew keeps an attested key without attesting again"
tok=$(token_new --profile keeping)
HWID_TOKEN=$tok expect_exit 0 "enrolled dev-2" --multiline -- join_dev "$T/dev-2" dev-2 "$tok" --tcti "$A" --attest
renewed "$T/dev-2" "$A"
assert_not_contains "$(cat "$T/last.err")" "attestation challenge"
assert_eq "$(permanent_id "$T/dev-2/cert.pem")" "sha256:$EK_A" "the same key keeps naming its TPM"
assert_no_transient "$A"

echo "== hwid renew --attest where the profile does not ask"
tok=$(token_new --profile opt)
HWID_TOKEN=$tok expect_exit 0 "enrolled dev-3" --multiline -- join_dev "$T/dev-3" dev-3 "$tok" --tcti "$A"
assert_eq "$(permanent_id "$T/dev-3/cert.pem")" "" "joined without attestation: unmarked"
renewed "$T/dev-3" "$A" --attest
assert_eq "$(permanent_id "$T/dev-3/cert.pem")" "sha256:$EK_A" "renewed with attestation: marked"
assert_no_transient "$A"

echo "== hwid factory --attest: a line of TPMs from the EK allowlist, no tokens"
{
        printf '{"devices": ['
        for i in 1 2 3; do
                ek_cert "${TCTIS[$i]}" "$T/ek-$i.der"
                printf '%s{"cn": "line-%d", "profile": "line", "ek_cert": "%s"}' "$([ "$i" = 1 ] || echo ,)" "$i" \
                        "$(base64 -w0 <"$T/ek-$i.der")"
        done
        printf ']}\n'
} >"$T/manifest.json"
assert_contains "$(admin ek import "$T/manifest.json")" "3 TPMs added"
for i in 1 2 3; do
        printf 'line-%d %s tpm2:file=%s/line-%d/device.tss2.pem\n' "$i" "${TCTIS[$i]}" "$T/line" "$i"
done >"$T/devices.txt"
out=$(run_ok "$HWID" factory --server "$URL" --ca-hash "$PIN" --devices "$T/devices.txt" --out-dir "$T/line" \
        --attest --parallel 3)
assert_contains "$out" "3 devices in"
assert_contains "$out" "3 enrolled"
for i in 1 2 3; do
        HWID_TCTI=${TCTIS[$i]} check_dir "$T/line/line-$i" "line-$i"
        assert_eq "$(permanent_id "$T/line/line-$i/cert.pem")" "sha256:$(ek_pub_sha256 "$T/ek-$i.der")" \
                "line-$i names its own TPM"
done
assert_no_transient

hwidd_stop
echo "attest-device: all checks passed"
