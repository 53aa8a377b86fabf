#!/bin/bash
# ops-hsm-recovery.sh — the HSM comes back without a restart, with SoftHSM2
# producing the fault itself: a token's directory is taken away under a
# running hwidd (the token removed) and put back (reinserted). The CA key
# is on token 'ca', hwidd's TLS key on token 'tls'. Proves:
#   - while the CA token is gone, enrollment answers 503 hsm_unavailable
#     (never a certificate), spends no token use and stores nothing;
#     /readyz answers 503 naming ca_key and token_key, both on that token
#     (store and tls_key still pass);
#     what needs no signature (GET /ca) still works;
#   - once the directory is back, the same hwidd (same PID) reopens the
#     token, logs in again, finds the CA key and the token key (the HMAC
#     key bootstrap tokens are checked with) again and issues — the device
#     that got 503 enrolls with the same token; /readyz is 200 again; every
#     certificate issued before is still there and verifies;
#   - the TLS token taken away: no TLS handshake succeeds (no request can
#     be answered at all); put back, handshakes and requests work again;
#   - the recoveries and failed signatures show in /metrics.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=ops-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ops-lib.sh"

TOKENS=$T/softhsm/tokens
AWAY=$T/away
mkdir -p "$AWAY"

# enroll_until_201 NAME TOKEN — enroll again and again (10 s at most)
# until it is issued; 503 meanwhile is the only other answer allowed.
enroll_until_201() {
        local i
        for i in $(seq 100); do
                enroll "$1" "$2"
                [ "$CODE" = 201 ] && return
                expect_error 503 hsm_unavailable "$DEV/$1"
                sleep 0.1
        done
        fail "$1 still not enrolled 10 s after the token came back"
}

# The token 'tls' first: the one directory there is its own.
softhsm_init tls
TLS_DIR=$(ls "$TOKENS")
ca_setup --tls-key "pkcs11:token=tls;object=tls-key?pin-source=file:$T/softhsm/tls.pin"
CA_TOKDIR=
for d in "$TOKENS"/*; do
        [ "$(basename "$d")" = "$TLS_DIR" ] || CA_TOKDIR=$d
done
TLS_DIR=$TOKENS/$TLS_DIR
if [ ! -d "$CA_TOKDIR" ] || [ ! -d "$TLS_DIR" ]; then
        fail "token directories not found"
fi
grep -q 'token=tls' "$CFG" || fail "hwidd's TLS key is not on token 'tls'"
public_metrics
hwidd_start
PID=$HWIDD_PID
TOK=$(token_new --uses 5)

enroll before "$TOK"
expect_status 201 "$DEV/before"
ready "$T/r0"
expect_status 200 "$T/r0"

# --- the CA token removed ----------------------------------------------------
mv "$CA_TOKDIR" "$AWAY/ca"
state=$(store_state "$TOK")
for i in 1 2 3; do
        enroll "during-$i" "$TOK"
        expect_error 503 hsm_unavailable "$DEV/during-$i" "token 'ca'"
        sleep 0.4
done
assert_eq "$(store_state "$TOK")" "$state" "what the refused enrollments left"
sleep 1.1 # past /readyz's cached verdict
ready "$T/r1"
expect_status 503 "$T/r1"
assert_eq "$(json_get "$T/r1.body" .error)" not_ready "/readyz error"
assert_contains "$(json_get "$T/r1.body" .message)" "ca_key" "/readyz message"
assert_eq "$(json_get "$T/r1.body" .failed)" '["ca_key","token_key"]' "/readyz names what failed (both keys are on token 'ca')"
assert_eq "$(check_of "$T/r1" ca_key)" false "/readyz ca_key"
assert_eq "$(check_of "$T/r1" tls_key)" true "/readyz tls_key"
assert_eq "$(check_of "$T/r1" store)" true "/readyz store"
http "$T/ca" GET /ca
expect_status 200 "$T/ca"

# --- put back: the same hwidd issues again -------------------------------------
mv "$AWAY/ca" "$CA_TOKDIR"
enroll_until_201 during-1 "$TOK"
verify_leaf "$DEV/during-1.pem"
_lib_is_alive "$PID" || fail "hwidd died"
assert_eq "$HWIDD_PID" "$PID" "hwidd was not restarted"
sleep 1.1
ready "$T/r2"
expect_status 200 "$T/r2"
verify_leaf "$DEV/before.pem"
in_store "$(serial_of "$DEV/before.pem")" || fail "the certificate from before the outage is gone"
assert_eq "$(token_used "$TOK")" 2 "token uses: one before, one after (none for the 503s)"

# --- the TLS token removed: no handshake; back: served again ---------------------
mv "$TLS_DIR" "$AWAY/tls"
http "$T/c1" GET /ca
assert_eq "$CODE" 000 "an answer without the TLS key"
sleep 1.1
mv "$AWAY/tls" "$TLS_DIR"
for _ in $(seq 100); do
        http "$T/c2" GET /ca
        [ "$CODE" = 200 ] && break
        sleep 0.1
done
expect_status 200 "$T/c2"
enroll after "$TOK"
expect_status 201 "$DEV/after"

scrape "$T/m"
[ "$(metric "$T/m" 'hwid_hsm_recoveries_total{result="recovered"}')" -ge 2 ] ||
        fail "recoveries: $(grep hwid_hsm_recoveries "$T/m.body")"
[ "$(metric "$T/m" 'hwid_hsm_recoveries_total{result="failed"}')" -ge 1 ] ||
        fail "failed recoveries: $(grep hwid_hsm_recoveries "$T/m.body")"
# The enrollments stopped at their token's HMAC (the token key is on the
# CA's token too): the CA key's failed signatures are /readyz's.
[ "$(metric "$T/m" 'hwid_sign_errors_total{key="ca",backend="pkcs11"}')" -ge 1 ] ||
        fail "CA sign errors: $(grep hwid_sign_errors "$T/m.body")"
assert_eq "$HWIDD_PID" "$PID" "hwidd was not restarted"
hwidd_stop
echo "ok"
