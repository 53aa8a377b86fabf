#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# ca-rollover.sh — a CA rollover with a fleet that follows by itself
# (docs/OPERATIONS.md, "Rolling the CA over"; docs/DEVICE.md). The CA key
# and the new key are in SoftHSM2, every device key in a TPM of its own
# (swtpm); openssl and curl check what hwid serves and what the devices
# store.
# Proves:
#   - prepare: the new CA (a subject of its own, " G2") and two link
#     certificates are served in GET /ca at once, after the active CA;
#     openssl verifies NewWithOld with the old CA and OldWithNew with the
#     new, each certifying the other CA's key; refused: the same subject,
#     a PIN in the key URI, a second prepare;
#   - three devices with `hwid agent` running renew through the whole
#     rollover with no new token (the tokens' uses unchanged): after
#     prepare each adopts the new CA by its link (DIR/ca.pem: both), and
#     after activate each ends with a certificate of the new key, which
#     openssl verifies against the device's own DIR/ca.pem and not against
#     the old CA alone;
#   - activate: hwidd switches within seconds without a restart; /ca
#     starts with the new CA; every new certificate names /crl/2;
#   - a device offline through prepare and activate renews afterwards
#     (hwid renew): its certificate is the new CA's, DIR/ca.pem both;
#   - hwid join with the old pin after activate: enrolled, DIR/ca.pem both;
#   - hwidd's TLS chain verifies for a client trusting the new CA alone and
#     for one trusting the old CA alone (curl);
#   - both CRLs, each on both listeners, each verified by openssl with its
#     own CA only: a generation-1 certificate revoked after the switch is in
#     /crl and not in /crl/2, a generation-2 one the other way round;
#   - metrics: hwid_ca_not_after_seconds of both generations and states;
#     status: both generations, their unexpired certificates, what next;
#   - retire: refused while generation 1 has unexpired certificates
#     (naming how many), then with --force: /crl is gone (404), /ca holds
#     the new CA alone; each step is in the audit log.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"

# shellcheck source=ops-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ops-lib.sh"

FLEET=3
ca_setup
add_profiles <<'EOF'
  fast:
    validity: 1m
    key_types: [ec-p256]
    renewal:
      window: 1.0
  long:
    validity: 1h
    key_types: [ec-p256]
    renewal:
      window: 1.0
EOF
public_metrics
hwidd_start
PIN=$(run_ok "$HWID" ca hash "$CA_DIR/ca.pem")
swtpm_init $((FLEET + 2))
OLD=$CA_DIR/ca.pem
NEW=$T/new-ca.pem
G2_URI="pkcs11:token=ca;object=ca-key-g2?pin-source=file:$T/pin"
AGENT_ARGS=(--renew-at 0.1 --jitter 0.05 --min-backoff 1s --max-backoff 4s --verbose)

# certs_in FILE DIR — each certificate of FILE as DIR/1.pem, DIR/2.pem...;
# prints how many.
certs_in() {
        rm -rf "$2" && mkdir -p "$2"
        awk -v d="$2" '/-----BEGIN CERTIFICATE-----/ { n++ } n { print > (d "/" n ".pem") } END { print n + 0 }' "$1"
}

fp() {
        openssl x509 -in "$1" -noout -fingerprint -sha256 | cut -d= -f2
}

pubkey_of() {
        openssl x509 -in "$1" -noout -pubkey
}

subject_of() {
        openssl x509 -in "$1" -noout -subject -nameopt RFC2253 | sed 's/^subject=//'
}

issuer_of() {
        openssl x509 -in "$1" -noout -issuer -nameopt RFC2253 | sed 's/^issuer=//'
}

# device I — its directory.
dev() {
        echo "$T/edge-$1"
}

join_on() {
        local i=$1 tok=$2
        shift 2
        HWID_TOKEN=$tok "$HWID" join --server "$URL" --ca-hash "$PIN" --tcti "${TCTIS[$i]}" \
                --key "tpm2:file=$(dev "$i")/device.tss2.pem" --cn "edge-$i" --dir "$(dev "$i")" "$@"
}

agent_start() {
        start_bg "$T/agent-$1.log" "$HWID" agent --dir "$(dev "$1")" --tcti "${TCTIS[$1]}" "${AGENT_ARGS[@]}"
        AGENTS[$1]=$BG_PID
}

# renewed_count I — renewals the agent of device I has logged.
renewed_count() {
        grep -c "edge-$1 renewed" "$T/agent-$1.log" || true
}

# wait_renewals N — each agent renews N more times (60 s at most).
wait_renewals() {
        local want=() i deadline=$((SECONDS + 60))
        for ((i = 0; i < FLEET; i++)); do want[i]=$(($(renewed_count "$i") + $1)); done
        for ((i = 0; i < FLEET; i++)); do
                until [ "$(renewed_count "$i")" -ge "${want[i]}" ]; do
                        [ $SECONDS -lt $deadline ] || fail "agent $i: fewer than ${want[i]} renewals: $(tail -n 5 "$T/agent-$i.log")"
                        _lib_is_alive "${AGENTS[$i]}" || fail "agent $i exited: $(tail -n 5 "$T/agent-$i.log")"
                        sleep 0.3
                done
        done
}

# issued_by CERT CA — openssl verifies CERT with CA alone.
issued_by() {
        openssl verify -partial_chain -CAfile "$2" "$1" >/dev/null 2>&1
}

crl_fetch() {
        curl -sS -f --max-time 20 -o "$2" "http://127.0.0.1:$HTTP_PORT$1" || fail "GET $1 on the plain listener"
}

# wait_served N — until GET /ca holds N certificates (5 s at most), in
# $T/ca1/.
wait_served() {
        local deadline=$((SECONDS + 5))
        until http "$T/ca1" GET /ca && [ "$CODE" = 200 ] && [ "$(certs_in "$T/ca1.body" "$T/ca1")" = "$1" ]; do
                [ $SECONDS -lt $deadline ] || fail "GET /ca: not $1 certificates after 5 s"
                sleep 0.2
        done
}

test_before() {
        local i out
        TOK=$(token_new --profile fast --uses "$FLEET")
        for ((i = 0; i < FLEET; i++)); do
                expect_exit 0 "enrolled edge-$i" --multiline -- join_on "$i" "$TOK"
                agent_start "$i"
        done
        LONG_TOK=$(token_new --profile long --uses 2)
        expect_exit 0 "enrolled edge-$FLEET" --multiline -- join_on "$FLEET" "$LONG_TOK"
        enroll old-1 "$LONG_TOK"
        expect_status 201 "$DEV/old-1"
        USED=$(token_used "$TOK")/$(token_used "$LONG_TOK")
        TOKENS=$(admin token list | tail -n +2 | wc -l)
        wait_renewals 1
        out=$(admin ca rollover status)
        assert_contains "$out" "nothing to do: the active CA (generation 1)" "status before a rollover"
}

test_prepare() {
        local n out
        expect_exit 2 "pin-source" -- "$HWID" ca rollover prepare --config "$CFG" \
                --key "pkcs11:token=ca;object=ca-key-g2?pin-value=1234"
        expect_exit 1 "a subject of its own" -- "$HWID" ca rollover prepare --config "$CFG" --key "$G2_URI" \
                --subject "/CN=hwid test CA"
        out=$(admin ca rollover prepare --key "$G2_URI")
        assert_contains "$out" "generation 2 prepared" "prepare's output"
        expect_exit 1 "is prepared already" -- "$HWID" ca rollover prepare --config "$CFG" --key "$G2_URI"
        # hwidd reads the store's generations once a second.
        wait_served 4
        assert_eq "$(fp "$T/ca1/1.pem")" "$(fp "$OLD")" "the active CA first in /ca"
        cp "$T/ca1/2.pem" "$NEW"
        assert_eq "$(subject_of "$NEW")" "CN=hwid test CA G2" "the new CA's subject"
        openssl verify -CAfile "$NEW" "$NEW" >/dev/null || fail "the new CA is not self-signed"
        # NewWithOld: the new key, certified by the old CA.
        issued_by "$T/ca1/3.pem" "$OLD" || fail "NewWithOld does not verify with the old CA"
        assert_eq "$(pubkey_of "$T/ca1/3.pem")" "$(pubkey_of "$NEW")" "NewWithOld's key"
        ! issued_by "$T/ca1/3.pem" "$NEW" || fail "NewWithOld verifies with the new CA"
        # OldWithNew: the old key, certified by the new CA.
        issued_by "$T/ca1/4.pem" "$NEW" || fail "OldWithNew does not verify with the new CA"
        assert_eq "$(pubkey_of "$T/ca1/4.pem")" "$(pubkey_of "$OLD")" "OldWithNew's key"
        assert_eq "$(subject_of "$T/ca1/4.pem")" "CN=hwid test CA" "OldWithNew's subject"
}

# The agents renew: each adopts the new CA by its link, its certificate
# still the old CA's (not activated yet).
test_adopt() {
        local i d
        wait_renewals 1
        for ((i = 0; i < FLEET; i++)); do
                d=$(dev "$i")
                assert_contains "$(cat "$T/agent-$i.log")" "adopted 1 new CA" "agent $i's log"
                assert_eq "$(certs_in "$d/ca.pem" "$T/dca")" 2 "CAs in $d/ca.pem"
                assert_eq "$(fp "$T/dca/1.pem")$(fp "$T/dca/2.pem")" "$(fp "$OLD")$(fp "$NEW")" "$d/ca.pem"
                issued_by "$d/cert.pem" "$OLD" || fail "$d/cert.pem is not the old CA's before activate"
        done
}

test_activate() {
        local out i d deadline
        out=$(admin ca rollover activate)
        assert_contains "$out" "generation 2 is the active CA" "activate's output"
        deadline=$((SECONDS + 10))
        until grep -q "generation 2 signs" "$HWIDD_LOG"; do
                [ $SECONDS -lt $deadline ] || fail "hwidd did not switch: $(tail -n 5 "$HWIDD_LOG")"
                sleep 0.2
        done
        http "$T/ca2" GET /ca
        certs_in "$T/ca2.body" "$T/ca2" >/dev/null
        assert_eq "$(fp "$T/ca2/1.pem")" "$(fp "$NEW")" "the new CA first in /ca after activate"
        wait_renewals 2
        for ((i = 0; i < FLEET; i++)); do
                d=$(dev "$i")
                verify_leaf "$d/cert.pem" -CAfile "$d/ca.pem"
                issued_by "$d/cert.pem" "$NEW" || fail "$d/cert.pem is not the new CA's"
                ! issued_by "$d/cert.pem" "$OLD" || fail "$d/cert.pem verifies with the old CA"
                openssl x509 -in "$d/cert.pem" -noout -ext crlDistributionPoints | grep -q "/crl/2$" ||
                        fail "$d/cert.pem names no /crl/2"
        done
        assert_eq "$(token_used "$TOK")/$(token_used "$LONG_TOK")" "$USED" "token uses after the rollover"
        assert_eq "$(admin token list | tail -n +2 | wc -l)" "$TOKENS" "tokens after the rollover"
}

test_offline_and_old_pin() {
        local d=$(dev "$FLEET") j=$((FLEET + 1))
        issued_by "$d/cert.pem" "$OLD" || fail "the offline device's certificate is not the old CA's"
        expect_exit 0 "adopted 1 new CA" --multiline -- "$HWID" renew --dir "$d" --tcti "${TCTIS[$FLEET]}"
        issued_by "$d/cert.pem" "$NEW" || fail "the offline device did not get the new CA's certificate"
        verify_leaf "$d/cert.pem" -CAfile "$d/ca.pem"
        assert_eq "$(certs_in "$d/ca.pem" "$T/dca")" 2 "CAs of the device that was offline"
        # A factory image with the old pin, after the switch.
        expect_exit 0 "enrolled edge-$j" --multiline -- join_on "$j" "$(token_new --profile long)"
        assert_eq "$(certs_in "$(dev "$j")/ca.pem" "$T/dca")" 2 "CAs of the device that joined with the old pin"
        assert_eq "$(fp "$T/dca/1.pem")" "$(fp "$OLD")" "the pinned CA first"
        issued_by "$(dev "$j")/cert.pem" "$NEW" || fail "the old pin's device has no new CA's certificate"
}

test_tls() {
        CACERT=$NEW http "$T/tls-new" GET /ca
        expect_status 200 "$T/tls-new"
        CACERT=$OLD http "$T/tls-old" GET /ca
        expect_status 200 "$T/tls-old"
}

# crl_has CRL CA SERIAL — CRL verifies with CA alone; whether it lists SERIAL.
crl_has() {
        local text
        text=$(openssl crl -inform DER -in "$1" -CAfile "$2" -noout -text 2>&1) || fail "openssl crl $1: $text"
        assert_contains "$text" "verify OK" "$1 with its own CA"
        grep -q "Serial Number: $3\$" <<<"$text"
}

test_crls() {
        local old_serial new_serial
        old_serial=$(serial_of "$DEV/old-1.pem")
        new_serial=$(dir_serial "$(dev $((FLEET + 1)))")
        admin cert revoke "$old_serial" --reason key-compromise >/dev/null
        admin cert revoke "$new_serial" >/dev/null
        crl_fetch /crl "$T/g1.crl"
        crl_fetch /crl/2 "$T/g2.crl"
        crl_has "$T/g1.crl" "$OLD" "$old_serial" || fail "the old CRL lacks $old_serial"
        ! crl_has "$T/g1.crl" "$OLD" "$new_serial" || fail "the old CRL lists a new certificate"
        crl_has "$T/g2.crl" "$NEW" "$new_serial" || fail "the new CRL lacks $new_serial"
        ! crl_has "$T/g2.crl" "$NEW" "$old_serial" || fail "the new CRL lists an old certificate"
        ! openssl crl -inform DER -in "$T/g2.crl" -CAfile "$OLD" -noout 2>/dev/null || fail "/crl/2 verifies with the old CA"
        http "$T/crl-tls" GET /crl/2
        expect_status 200 "$T/crl-tls"
        cmp -s "$T/crl-tls.body" "$T/g2.crl" || crl_has "$T/crl-tls.body" "$NEW" "$new_serial" ||
                fail "/crl/2 over TLS"
        http "$T/crl-9" GET /crl/9
        expect_status 404 "$T/crl-9"
}

not_after_of() {
        date -d "$(openssl x509 -in "$1" -noout -enddate | cut -d= -f2)" +%s
}

test_status_metrics() {
        local out
        out=$(admin ca rollover status)
        assert_contains "$(grep '^1 ' <<<"$out")" "previous" "status of generation 1"
        assert_contains "$(grep '^2 ' <<<"$out")" "active" "status of generation 2"
        assert_contains "$out" "next: devices move to generation 2 as they renew; generation 1 still has" "status"
        scrape "$T/m"
        assert_eq "$(metric "$T/m" 'hwid_ca_not_after_seconds{generation="1",state="previous"}')" \
                "$(not_after_of "$OLD")" "generation 1's notAfter in /metrics"
        assert_eq "$(metric "$T/m" 'hwid_ca_not_after_seconds{generation="2",state="active"}')" \
                "$(not_after_of "$NEW")" "generation 2's notAfter in /metrics"
        out=$(admin audit list)
        assert_contains "$out" "ca.rollover.prepare" "the audit log"
        assert_contains "$out" "ca.rollover.activate" "the audit log"
}

# ca.expiry_warning longer than the active CA's life: /readyz stays ready
# and says so, and so does hwidd's log at start.
test_warning() {
        sed -i 's/^ca:$/&\n  expiry_warning: 36500d/' "$CFG"
        grep -q '^  expiry_warning: 36500d$' "$CFG" || fail "could not set ca.expiry_warning in $CFG"
        hwidd_stop
        hwidd_start
        ready "$T/r"
        expect_status 200 "$T/r"
        assert_contains "$(cat "$T/r.body")" "the active CA (generation 2) expires on" "/readyz's warning"
        assert_contains "$(cat "$HWIDD_LOG")" "in less than 36500 days: roll the CA over" "hwidd's log at start"
}

test_retire() {
        local out
        expect_exit 1 "still has" -- "$HWID" ca rollover retire --config "$CFG"
        out=$(admin ca rollover retire --force)
        assert_contains "$out" "retired generation 1, leaving" "retire --force's output"
        sleep 2
        http "$T/crl1" GET /crl
        expect_status 404 "$T/crl1"
        http "$T/ca3" GET /ca
        assert_eq "$(certs_in "$T/ca3.body" "$T/ca3")" 1 "certificates in /ca after retire"
        assert_contains "$(admin audit list)" "ca.rollover.retire" "the audit log"
}

declare -A AGENTS=()
test_before
test_prepare
test_adopt
test_activate
test_offline_and_old_pin
test_tls
test_crls
test_status_metrics
test_retire
test_warning
for ((i = 0; i < FLEET; i++)); do kill -TERM "${AGENTS[$i]}"; wait "${AGENTS[$i]}" || fail "agent $i exit code"; done
hwidd_stop
assert_no_transient
echo "ca-rollover: OK"
