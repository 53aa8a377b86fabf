#!/bin/bash
# ocsp-rollover.sh — after a CA rollover (`hwid ca rollover prepare`,
# `activate`: docs/OPERATIONS.md), each CA generation answers OCSP for its
# own certificates, signed by its own key; `openssl ocsp` verifies each
# answer against that generation's CA certificate alone.
# Proves:
#   - a leaf of generation 1 (issued before the rollover) and one of
#     generation 2 (after) each get `good`, verified against their own CA
#     certificate, and not against the other generation's alone;
#   - a certID naming generation 2 with generation 1's serial (and the
#     other way round) gets `unknown`: that CA never issued it;
#   - a revocation of the generation-1 leaf shows at once in generation 1's
#     answer; both leaves name the same responder (ca.ocsp_url).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=policy-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/policy-lib.sh"
# shellcheck source=ocsp-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ocsp-lib.sh"

G2_URI="pkcs11:token=ca;object=ca-key-g2?pin-source=file:$T/pin"

# ask_gen OUT CA CERT [ARGS...] — openssl ocsp about CERT (or 0xSERIAL)
# issued by CA, the answer verified against CA alone.
ask_gen() {
        local out=$1 ca=$2 cert=$3 what=(-cert "$3")
        shift 3
        [[ $cert != 0x* ]] || what=(-serial "$cert")
        OCSP_RC=0
        openssl ocsp -issuer "$ca" "${what[@]}" -url "$PLAIN" -CAfile "$ca" -respout "$out.der" "$@" \
                >"$out.out" 2>"$out.err" || OCSP_RC=$?
}

ca_setup
PLAIN=http://127.0.0.1:$HTTP_PORT/ocsp
hwidd_start
enrolled old "$(token_new)"
admin ca rollover prepare --key "$G2_URI" >/dev/null
admin ca rollover activate >/dev/null
sleep 1.5 # every replica switches at its next tick (once a second)
http "$DEV/ca" GET /ca
expect_status 200 "$DEV/ca"
awk -v d="$DEV" '/BEGIN CERTIFICATE/ { n++ } n == 1 { print > (d "/g2.pem") }' "$DEV/ca.body"
assert_contains "$(openssl x509 -in "$DEV/g2.pem" -noout -subject)" "G2" "the active CA after activate"
enrolled new "$(token_new)"
openssl verify -CAfile "$DEV/g2.pem" "$DEV/new.pem" >/dev/null 2>&1 || fail "the new leaf is not generation 2's"
assert_eq "$(openssl x509 -in "$DEV/new.pem" -noout -ocsp_uri)" "$(openssl x509 -in "$DEV/old.pem" -noout -ocsp_uri)" \
        "the responder both generations' leaves name"

ask_gen "$DEV/g1" "$CA_DIR/ca.pem" "$DEV/old.pem"
assert_eq "$(ocsp_status "$DEV/g1")" good "generation 1's leaf, verified against generation 1"
ask_gen "$DEV/g2" "$DEV/g2.pem" "$DEV/new.pem"
assert_eq "$(ocsp_status "$DEV/g2")" good "generation 2's leaf, verified against generation 2"
# Each answer is its own generation's: the other CA alone does not verify it.
openssl ocsp -respin "$DEV/g1.der" -CAfile "$DEV/g2.pem" >/dev/null 2>"$DEV/x1.err" &&
        fail "generation 1's answer verifies against generation 2 alone"
assert_contains "$(cat "$DEV/x1.err")" "Response Verify Failure" "generation 1's answer against generation 2"
openssl ocsp -respin "$DEV/g2.der" -CAfile "$CA_DIR/ca.pem" >/dev/null 2>"$DEV/x2.err" &&
        fail "generation 2's answer verifies against generation 1 alone"
assert_contains "$(cat "$DEV/x2.err")" "Response Verify Failure" "generation 2's answer against generation 1"

ask_gen "$DEV/c1" "$DEV/g2.pem" "0x$(serial_of "$DEV/old.pem")"
assert_eq "$(ocsp_status "$DEV/c1")" unknown "generation 1's serial asked of generation 2"
ask_gen "$DEV/c2" "$CA_DIR/ca.pem" "0x$(serial_of "$DEV/new.pem")"
assert_eq "$(ocsp_status "$DEV/c2")" unknown "generation 2's serial asked of generation 1"

admin cert revoke "$(serial_of "$DEV/old.pem")" >/dev/null
ask_gen "$DEV/r1" "$CA_DIR/ca.pem" "$DEV/old.pem"
assert_eq "$(ocsp_status "$DEV/r1")" revoked "generation 1's leaf, revoked"
ask_gen "$DEV/r2" "$DEV/g2.pem" "$DEV/new.pem"
assert_eq "$(ocsp_status "$DEV/r2")" good "generation 2's leaf after generation 1's was revoked"
hwidd_stop
echo "ocsp-rollover: each CA generation answers for its own certificates"
