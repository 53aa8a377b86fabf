#!/bin/bash
# shellcheck disable=SC2119  # lib.sh helpers take optional arguments
# device-reenroll.sh — a device that was away comes back by TPM attestation
# alone, without a token (issue 27, part 1; docs/ATTESTATION.md "Coming
# back by attestation"). Certificates live one minute; every device joins,
# then its agent stays stopped until its certificate has expired (on the
# test's clock, which hwidd and the devices share: test_clock in lib.sh).
# Proves:
#   - reenroll_by_attestation: allowlist — the agent, started after expiry,
#     comes back with no token (renewal refused as expired, then a new key
#     certified by the TPM, a new certificate that openssl verifies, DIR's
#     next generation, the old key deleted); the CA's audit record is a
#     `reenroll` naming the rule (ek-allowlist) and the EK's hash;
#   - reenroll_by_attestation: last-certificate — a device that joined with
#     a token and is on no allowlist comes back as the TPM of its last
#     certificate (rule last-certificate); and so does one whose certificate
#     was revoked (superseded, then unspecified), each return audited as
#     `reenroll` naming the revocation, until a key-compromise revocation
#     keeps it out;
#   - allowlist: a device revoked for cessation-of-operation comes back by
#     its EK entry, audited as `reenroll`;
#   - refused, each with the agent's exit 4 as before (and nothing issued),
#     each case as soon as its device's certificate has expired:
#     the profile's setting off (the default); the EK entry removed while
#     the device was away (allowlist); another TPM claiming the identity
#     (hwid join --attest without a token from a second swtpm); a "do not
#     return" revocation (privilege-withdrawn) of a device that came back
#     by its last certificate, and a key-compromise one of a device whose
#     TPM is on the allowlist;
#   - no transient object is left in any TPM.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=attest-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/attest-lib.sh"

test_clock
swtpm_init 3
A=${TCTIS[0]} B=${TCTIS[1]} C=${TCTIS[2]}
manufacturer_roots "$T/ek-roots"
attest_ca "$T/ek-roots" <<'EOF'
  back:
    validity: 1m
    subject: {allowed_rdns: [CN]}
    attestation: optional
    reenroll_by_attestation: allowlist
  last:
    validity: 1m
    subject: {allowed_rdns: [CN]}
    attestation: required
    reenroll_by_attestation: last-certificate
  plain:
    validity: 1m
    subject: {allowed_rdns: [CN]}
    attestation: required
EOF
ek_cert "$A" "$T/ek-a.der"
ek_cert "$B" "$T/ek-b.der"
EK_A=$(ek_pub_sha256 "$T/ek-a.der")
EK_C=$(ek_cert "$C" "$T/ek-c.der" && ek_pub_sha256 "$T/ek-c.der")

# attested_join TCTI DIR NAME [TOKEN] — hwid join --attest (no token: by EK).
attested_join() {
        run_ok join_dev "$2" "$3" "${4:-}" --tcti "$1" --attest >/dev/null
        HWID_TCTI=$1 check_dir "$2" "$3"
}

# agent TCTI DIR — hwid agent --once on DIR with that TPM; exit code in RC,
# its log in DIR.log.
agent() {
        RC=0
        "${CLOCK[@]}" "$HWID" agent --dir "$2" --tcti "$1" --once --min-backoff 1s --max-backoff 2s --verbose \
                >"$2.log" 2>&1 || RC=$?
}

# stays_out TCTI NAME WHY NEEDLE — NAME's agent exits 4 as before, its log
# saying NEEDLE.
stays_out() {
        agent "$1" "$T/$2"
        assert_eq "$RC" 4 "agent exit code ($2, $3)"
        assert_contains "$(cat "$T/$2.log")" "trying to come back by TPM attestation"
        assert_contains "$(cat "$T/$2.log")" "$4"
}

# reenroll_audit NAME — the reasons of NAME's `reenroll` audit records.
reenroll_audit() {
        store_sql "SELECT actor || ' ' || reason FROM audit WHERE action = 'reenroll' AND target = '$1'"
}

# wait_expired NAME — the test's clock moves past the expiry of NAME's
# newest certificate.
wait_expired() {
        local end
        end=$(store_sql "SELECT max(not_after) FROM certificates WHERE identity = '$1'")
        clock_past "$end"
}

echo "== four devices join by attestation: two on the EK allowlist, two with a token"
# In the order their certificates will expire, each case comes as soon as
# its device's has: the others' cases run while the later ones wait.
admin ek add --cn edge-a --profile back --ek-cert "$T/ek-a.der" >/dev/null
admin ek add --cn edge-b --profile back --ek-cert "$T/ek-b.der" >/dev/null
attested_join "$C" "$T/edge-d" edge-d "$(token_new --profile plain)"
attested_join "$B" "$T/edge-b" edge-b
attested_join "$C" "$T/edge-c" edge-c "$(token_new --profile last)"
attested_join "$A" "$T/edge-a" edge-a
assert_no_transient
SERIAL_A=$(dir_serial "$T/edge-a")
KEY_A=$(cert_pubkey "$T/edge-a/cert.pem")
# While the devices are away, edge-b's TPM leaves the allowlist.
admin ek remove edge-b >/dev/null
issued=$(cert_count)

echo "== reenroll_by_attestation off (the default), once expired: exit 4 as before"
wait_expired edge-d
stays_out "$C" edge-d "profile plain" "does not let it come back by TPM attestation (reenroll_by_attestation: off)"

echo "== the EK entry removed while away (allowlist): exit 4"
wait_expired edge-b
stays_out "$B" edge-b "its EK entry removed" "is not on the EK allowlist for edge-b"

echo "== another TPM claims edge-c (hwid join --attest, no token): refused"
wait_expired edge-c
expect_exit 1 "is not on the EK allowlist for edge-c nor the TPM of its last certificate" --multiline \
        -- join_dev "$T/impostor" edge-c "" --tcti "$B" --attest
assert_eq "$(cert_count)" "$issued" "certificates after the refusals"

echo "== the TPM of the last certificate (last-certificate): the agent comes back"
agent "$C" "$T/edge-c"
assert_eq "$RC" 0 "agent exit code (edge-c): $(tail -n 3 "$T/edge-c.log")"
HWID_TCTI=$C check_dir "$T/edge-c" edge-c
assert_contains "$(reenroll_audit edge-c)" "rule last-certificate, EK sha256:$EK_C"

echo "== 'do not return' (privilege-withdrawn): exit 4"
admin cert revoke --identity edge-c --reason privilege-withdrawn >/dev/null
stays_out "$C" edge-c "revoked: do not return" "privilegeWithdrawn (do not return)"

echo "== revoked (superseded, unspecified), the TPM of the last certificate comes back; key-compromise keeps it out"
attested_join "$C" "$T/edge-e" edge-e "$(token_new --profile last)"
for why in superseded unspecified; do
        serial=$(dir_serial "$T/edge-e")
        admin cert revoke --identity edge-e --reason "$why" >/dev/null
        agent "$C" "$T/edge-e"
        assert_eq "$RC" 0 "agent exit code (edge-e, revoked $why): $(tail -n 3 "$T/edge-e.log")"
        assert_contains "$(cat "$T/edge-e.log")" "edge-e came back by TPM attestation (no token)"
        HWID_TCTI=$C check_dir "$T/edge-e" edge-e
        [ "$(dir_serial "$T/edge-e")" != "$serial" ] || fail "edge-e kept its revoked certificate"
        assert_contains "$(reenroll_audit edge-e)" "ek:edge-e issued under profile last: re-enrollment by TPM \
attestation without a token: rule last-certificate, EK sha256:$EK_C, last certificate $serial (profile last) revoked \
($why)"
done
assert_eq "$(store_sql "SELECT count(*) FROM audit WHERE action = 'enroll' AND target = 'edge-e'")" 1 \
        "edge-e's enrollments (its returns are reenroll records)"
# The store's times are seconds, and certificates of one second list in
# serial order: as if all three had been issued in one second, the one
# revoked unspecified listing last. The key-compromise revocation still
# keeps edge-e out.
store_sql "UPDATE certificates SET created_at = (SELECT max(created_at) FROM certificates WHERE identity = 'edge-e')
        WHERE identity = 'edge-e'"
store_sql "UPDATE certificates SET serial = 'FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF' WHERE serial = '$serial'"
issued=$(cert_count)
admin cert revoke --identity edge-e --reason key-compromise >/dev/null
stays_out "$C" edge-e "revoked for key compromise" \
        "was revoked for keyCompromise: it comes back only with a bootstrap token"
assert_eq "$(cert_count)" "$issued" "certificates after edge-e was kept out"

echo "== on the allowlist: the agent comes back with no token"
wait_expired edge-a
agent "$A" "$T/edge-a"
assert_eq "$RC" 0 "agent exit code (edge-a): $(tail -n 3 "$T/edge-a.log")"
assert_contains "$(cat "$T/edge-a.log")" "edge-a came back by TPM attestation (no token): generation 2"
HWID_TCTI=$A check_dir "$T/edge-a" edge-a
[ "$(dir_serial "$T/edge-a")" != "$SERIAL_A" ] || fail "edge-a kept its old certificate"
[ "$(cert_pubkey "$T/edge-a/cert.pem")" != "$KEY_A" ] || fail "edge-a came back with its old key"
[ ! -e "$T/edge-a/device.tss2.pem" ] || fail "the old key file of edge-a is still there"
assert_eq "$(permanent_id "$T/edge-a/cert.pem")" "sha256:$EK_A" "the new certificate names the TPM"
assert_contains "$(reenroll_audit edge-a)" "ek:edge-a issued under profile back: re-enrollment by TPM attestation without a token: rule ek-allowlist, EK sha256:$EK_A, last certificate $SERIAL_A"

echo "== revoked for cessation-of-operation: back by its EK entry, audited as reenroll"
serial=$(dir_serial "$T/edge-a")
admin cert revoke --identity edge-a --reason cessation-of-operation >/dev/null
agent "$A" "$T/edge-a"
assert_eq "$RC" 0 "agent exit code (edge-a, revoked): $(tail -n 3 "$T/edge-a.log")"
HWID_TCTI=$A check_dir "$T/edge-a" edge-a
assert_contains "$(reenroll_audit edge-a)" "rule ek-allowlist, EK sha256:$EK_A, last certificate $serial (profile \
back) revoked (cessation-of-operation)"

echo "== revoked for key compromise: exit 4, though its TPM is on the allowlist"
admin cert revoke --identity edge-a --reason key-compromise >/dev/null
stays_out "$A" edge-a "revoked for key compromise" \
        "was revoked for keyCompromise: it comes back only with a bootstrap token"
assert_eq "$(store_sql "SELECT count(*) FROM audit WHERE action = 'reenroll'")" 5 "reenroll records"
assert_no_transient
echo "PASS"
