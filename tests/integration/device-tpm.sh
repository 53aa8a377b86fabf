#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# device-tpm.sh — the device side against what a TPM in the field goes
# through: power cuts, a TPM whose object memory another client filled, and
# other applications' keys next to hwid's at persistent handles.
# Proves:
#   - power cuts: after the device key signed (join, renew), swtpm is killed
#     with SIGKILL (no TPM2_Shutdown) and started again, three times in a
#     row; the device key still signs a CSR (openssl verifies it) and
#     renews; the TPM's lockout counter stayed 0; the key is noDA (hwid key
#     show, and tpm2-tools' reading of the public area);
#   - a TPM whose object memory is full (three transient objects another
#     client left): hwid renew exits 1 naming "TPM object memory full
#     (0x902)", not libssl's "EVP lib"; DIR is untouched; once the objects
#     are flushed, renewal works;
#   - no transient object is left in the TPM; no file holds a private key.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"

require_tools tpm2_createprimary tpm2_flushcontext tpm2_getcap
device_ca <<'EOF'
  device:
    validity: 1h
    key_types: [ec-p256]
    renewal:
      window: 1.0
EOF
swtpm_init
D=$T/edge-1

lockout_counter() {
        tpm2_getcap properties-variable | sed -n 's/^TPM2_PT_LOCKOUT_COUNTER: *//p'
}

test_power_cuts() {
        local tok i uri
        tok=$(token_new --profile device)
        expect_exit 0 "enrolled edge-1" --multiline -- join_dev "$D" edge-1 "$tok"
        uri=$(cat "$D/key.uri")
        for i in 1 2 3; do
                # The key signs (the TLS handshake and the CSR), then the power goes.
                run_ok "$HWID" renew --dir "$D" >/dev/null
                swtpm_power_cut
        done
        assert_eq "$(lockout_counter)" 0x0 "TPM lockout counter after three power cuts"
        run_ok "$HWID" csr --key "$uri" --subject /CN=edge-1 --out "$T/after-cuts.csr" >/dev/null
        run_ok openssl req -in "$T/after-cuts.csr" -noout -verify 2>&1 | grep -q "verify OK" ||
                fail "openssl does not verify the CSR signed after the power cuts"
        run_ok "$HWID" renew --dir "$D" >/dev/null
        check_dir "$D" edge-1
        assert_contains "$("$HWID" key show "$uri")" "noDA=yes" "hwid key show of the device key"
        assert_eq "$(lockout_counter)" 0x0 "TPM lockout counter after renewing"
        assert_no_transient
}

# Another client of a TPM without a resource manager left three objects
# loaded: swtpm has room for three.
test_object_memory_full() {
        local i before
        before=$(dir_serial "$D")
        for i in 1 2 3; do
                run_ok tpm2_createprimary -C o -c "$T/leak-$i.ctx" >/dev/null
        done
        expect_exit 1 "TPM object memory full (0x902)" -- "$HWID" renew --dir "$D"
        assert_not_contains "$(cat "$T/last.err")" "EVP lib" "hwid renew's message with the TPM full"
        assert_eq "$(dir_serial "$D")" "$before" "certificate in DIR after the refused renewal"
        run_ok tpm2_flushcontext -t
        check_dir "$D" edge-1
        run_ok "$HWID" renew --dir "$D" >/dev/null
        check_dir "$D" edge-1
        assert_no_transient
}

test_power_cuts
test_object_memory_full
no_private_keys_in "$T"
echo "device-tpm: all checks passed"
