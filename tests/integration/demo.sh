#!/bin/bash
# demo.sh — the demo (demo/demo.sh, what scripts/demo.sh runs) end to end
# with this build: CA key in SoftHSM2, five devices on swtpm. Proves the
# demo runs to "Done." and shows what it claims, including issue 12's
# attested join:
#   - edge-1..3 enroll (edge-3 after manual approval), edge-1 renews,
#     edge-2 is revoked (in the CRL) and cannot renew;
#   - TPM attestation: a laptop's software-key CSR is refused (403
#     attestation_failed); edge-4 joins with --attest and its certificate
#     carries the permanentIdentifier of its EK (openssl); the CA records
#     it as attested; edge-5, on the EK allowlist, enrolls without a token;
#   - no TPM is left with a transient object, and nothing the demo started
#     is left running.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

require_tools swtpm swtpm_setup softhsm2-util tpm2_nvread tpm2_getcap openssl curl ss

start_bg "$T/demo.log" env TMPDIR="$T" bash "$SRCDIR/demo/demo.sh"
DEMO=$BG_PID
rc=0
wait "$DEMO" || rc=$?
out=$(sed 's/\x1b\[[0-9;]*m//g' "$T/demo.log")
[ "$rc" = 0 ] || fail "the demo exited $rc: $(tail -n 30 <<<"$out")"
assert_contains "$out" "== Done."

for n in 1 2 3 4 5; do
        assert_contains "$out" "enrolled edge-$n" "edge-$n enrolled"
done
assert_contains "$out" "(exit 3: pending)" "edge-3 waited for approval"
assert_contains "$out" "Key Compromise" "edge-2 in the CRL"

# Step 8: attestation.
step8=$(sed -n '/^== 8\. TPM attestation/,/^== 9\./p' <<<"$out")
[ -n "$step8" ] || fail "the demo has no attestation step"
assert_contains "$step8" '"error":"attestation_failed"' "the laptop's CSR refused"
assert_contains "$step8" "requires TPM attestation of the key" "why the laptop's CSR was refused"
assert_contains "$step8" "hwid join --server" "edge-4 joins"
assert_contains "$step8" "othername: Permanent Identifier::" "edge-4's certificate names its TPM"
assert_contains "$step8" "attested: TPM ek-sha256:" "the CA records edge-4 as attested"
assert_contains "$step8" "may enroll edge-5 (profile attested) without a token" "edge-5 on the EK allowlist"
assert_contains "$step8" "enrolled edge-5" "edge-5 enrolled without a token"

# Every TPM clean at the end.
t=$(grep -c '^transient objects in .*: 0$' <<<"$out" || true)
assert_eq "$t" 5 "TPMs without transient objects at the end"
! grep -q '^transient objects in .*: [1-9]' <<<"$out" || fail "a TPM has transient objects: $out"

# The demo stopped its hwidd and swtpms and removed its files.
left=$(find "$T" -maxdepth 1 -name 'hwid-demo.*')
[ -z "$left" ] || fail "the demo left $left"
if pgrep -f "$T/hwid-demo" >/dev/null; then
        fail "the demo left processes running: $(pgrep -af "$T/hwid-demo")"
fi
echo "demo: all checks passed"
