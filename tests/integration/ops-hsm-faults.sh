#!/bin/bash
# ops-hsm-faults.sh — lost PKCS#11 sessions and logins that SoftHSM2 cannot
# be made to report itself, injected into a running hwidd by the fault shim
# (tests/p11-fault-shim.c, HWID_SHIM_CONTROL) in front of SoftHSM2, for the
# CA key only (hwidd's TLS key on the same token signs on). Proves, for
# CKR_SESSION_HANDLE_INVALID, CKR_SESSION_CLOSED, CKR_DEVICE_REMOVED,
# CKR_TOKEN_NOT_PRESENT and CKR_USER_NOT_LOGGED_IN:
#   - one failure: the module is reinitialised, the token found again and
#     logged in, and the request in flight retried once: 201, the shim's
#     fault consumed (so it was hit), a recovery counted;
#   - two failures in a row: that request gets 503 hsm_unavailable, having
#     spent no token use and stored nothing; the next one is issued;
# and, with SoftHSM2's own answer:
#   - every session of the slot closed inside SoftHSM2 (an HSM restarted,
#     its login gone): recovered, 201;
#   - a lasting fault: 503 for each request and /readyz 503 naming ca_key;
#     once it ends, issued again and ready, without a restart.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=ops-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ops-lib.sh"

: "${HWID_P11_SHIM:=$BUILDDIR/tests/p11-fault-shim.so}"
[ -f "$HWID_P11_SHIM" ] || fail "fault shim not built: $HWID_P11_SHIM"
HWID_SHIM_TARGET=$(_lib_find_softhsm_module) || missing_hardware "the SoftHSM2 module libsofthsm2.so"
export HWID_SHIM_TARGET
export HWID_SHIM_CONTROL=$T/shim.ctl
RECOVERED='hwid_hsm_recoveries_total{result="recovered"}'

# fault LINE — what the shim does from now on (written atomically).
fault() {
        echo "$1" >"$HWID_SHIM_CONTROL.new"
        mv "$HWID_SHIM_CONTROL.new" "$HWID_SHIM_CONTROL"
}

# fault_left — how many more calls the current fault will hit.
fault_left() {
        awk '{ print ($1 == "fail") ? $3 : $2 }' "$HWID_SHIM_CONTROL"
}

ca_setup --key "pkcs11:token=ca;object=ca-key?module-path=$HWID_P11_SHIM&pin-source=file:$T/pin"
grep -q "module-path=$HWID_P11_SHIM" "$CFG" || fail "the CA key is not loaded through the shim"
public_metrics
hwidd_start
PID=$HWIDD_PID
TOK=$(token_new --uses 30)

for code in 0xb3 0xb0 0x32 0xe0 0x101; do
        scrape "$T/m-$code"
        fault "fail $code 1 ca-key"
        enroll "once-$code" "$TOK"
        expect_status 201 "$DEV/once-$code"
        verify_leaf "$DEV/once-$code.pem"
        assert_eq "$(fault_left)" 0 "the fault $code was hit"
        scrape "$T/n-$code"
        assert_eq "$(metric_delta "$T/m-$code" "$T/n-$code" "$RECOVERED")" 1 "recoveries after $code"

        fault "fail $code 2 ca-key"
        state=$(store_state "$TOK")
        enroll "twice-$code" "$TOK"
        expect_error 503 hsm_unavailable "$DEV/twice-$code" "token 'ca' is unavailable"
        assert_eq "$(fault_left)" 0 "both faults $code were hit (the request was retried once)"
        assert_eq "$(store_state "$TOK")" "$state" "what a 503 after $code left"
        enroll "twice-$code" "$TOK"
        expect_status 201 "$DEV/twice-$code"
done

# SoftHSM2 itself loses every session of the slot, and with them the login.
scrape "$T/m-reset"
fault "reset 1 ca-key"
enroll reset "$TOK"
expect_status 201 "$DEV/reset"
assert_eq "$(fault_left)" 0 "the reset happened"
scrape "$T/n-reset"
assert_eq "$(metric_delta "$T/m-reset" "$T/n-reset" "$RECOVERED")" 1 "recoveries after the reset"

# A lasting fault, then its end.
fault "fail 0xe0 100000 ca-key"
enroll lasting "$TOK"
expect_error 503 hsm_unavailable "$DEV/lasting"
sleep 1.1
ready "$T/r1"
expect_status 503 "$T/r1"
assert_eq "$(check_of "$T/r1" ca_key)" false "/readyz ca_key during the fault"
assert_eq "$(check_of "$T/r1" tls_key)" true "/readyz tls_key during the fault"
fault "fail 0xe0 0 ca-key"
enroll lasting "$TOK"
expect_status 201 "$DEV/lasting"
sleep 1.1
ready "$T/r2"
expect_status 200 "$T/r2"
assert_eq "$HWIDD_PID" "$PID" "hwidd was not restarted"
hwidd_stop
echo "ok"
