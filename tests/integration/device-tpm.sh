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
#   - persistent handles: a device whose key is at tpm2:handle=0x81000010
#     renews with key rotation three times while another application's
#     signing key sits at 0x81000011 (the handle hwid used to take blindly):
#     that key survives untouched (tpm2_readpublic before and after), no
#     certificate is ever issued for it, each new key goes to a handle the
#     TPM listed as free, and hwid's own old keys are evicted (only the
#     current one and the other application's remain);
#   - an interrupted renewal that recorded 0x81000011 (another program took
#     it after hwid chose it): the next renewal leaves that key alone, says
#     so, and makes its key elsewhere;
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
  rot:
    validity: 1h
    key_types: [ec-p256]
    renewal:
      window: 1.0
      rotate_key: true
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

# another_app_key HANDLE — another program's unrestricted ECC signing key
# (like hwid's), made with tpm2-tools and persisted at HANDLE.
another_app_key() {
        run_ok tpm2_createprimary -C o -c "$T/app-primary.ctx" >/dev/null
        run_ok tpm2_flushcontext -t
        run_ok tpm2_create -C "$T/app-primary.ctx" -G ecc256 -a "fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign" \
                -u "$T/app.pub" -r "$T/app.priv" >/dev/null
        run_ok tpm2_flushcontext -t
        run_ok tpm2_load -C "$T/app-primary.ctx" -u "$T/app.pub" -r "$T/app.priv" -c "$T/app.ctx" >/dev/null
        run_ok tpm2_flushcontext -t
        run_ok tpm2_evictcontrol -C o -c "$T/app.ctx" "$1" >/dev/null
        run_ok tpm2_flushcontext -t
}

# public_at HANDLE — the TPM's name and public key of the object at HANDLE.
public_at() {
        tpm2_readpublic -c "$1" -f pem -o "$T/pub-at.pem" | grep '^name:'
        cat "$T/pub-at.pem"
}

persistent_handles() {
        tpm2_getcap handles-persistent | sed 's/^- //' | grep -v '^0x8101' | sort | tr '\n' ' '
}

# One renewal of DIR $1 with the other application's key at APP: it is
# untouched, and DIR's certificate is not for it.
renew_next_to_app() {
        local d=$1 uri
        run_ok "$HWID" renew --dir "$d" >/dev/null
        check_dir "$d" edge-h
        assert_eq "$(public_at "$APP")" "$APP_PUBLIC" "the other application's key at $APP after a renewal"
        [ "$(cert_pubkey "$d/cert.pem")" != "$(sed -n '/BEGIN/,$p' <<<"$APP_PUBLIC")" ] ||
                fail "a certificate was issued for the other application's key"
        uri=$(cat "$d/key.uri")
        [ "$uri" != "tpm2:handle=$APP" ] || fail "DIR took the other application's handle"
        assert_eq "$(persistent_handles)" "$(printf '%s\n' "$APP" "${uri#tpm2:handle=}" | sort | tr '\n' ' ')" \
                "persistent handles besides the EKs (the other application's, the current key)"
        assert_no_transient
}

test_foreign_handle() {
        local d=$T/edge-h tok i next
        APP=0x81000011
        tok=$(token_new --profile rot)
        expect_exit 0 "enrolled edge-h" --multiline -- env HWID_TOKEN="$tok" "$HWID" join --server "$URL" \
                --ca-hash "$PIN" --key tpm2:handle=0x81000010 --cn edge-h --dir "$d"
        another_app_key "$APP"
        APP_PUBLIC=$(public_at "$APP")
        for i in 1 2 3; do
                renew_next_to_app "$d"
        done
        # An interrupted renewal recorded the handle; another program took it.
        next=$d/gen-$(($(readlink "$d/current" | tr -cd 0-9) + 1))
        mkdir -p "$next"
        echo "tpm2:handle=$APP" >"$next/key.uri"
        run_ok "$HWID" renew --dir "$d" >/dev/null
        assert_contains "$(cat "$T/last.err")" "tpm2:handle=$APP holds a key this device did not make there" \
                "renew's note about the other application's key"
        renew_next_to_app "$d"
}

test_power_cuts
test_object_memory_full
test_foreign_handle
no_private_keys_in "$T"
echo "device-tpm: all checks passed"
