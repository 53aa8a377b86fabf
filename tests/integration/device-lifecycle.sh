#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# device-lifecycle.sh — a device's whole life with the real binaries: hwid
# join (key made in swtpm) ⇒ hwid renew ⇒ hwid cert revoke --identity on
# the CA ⇒ renewal refused ⇒ hwid join again with a new token.
# Proves:
#   - join writes a certificate that openssl verifies against the CA, for
#     the key the TPM holds (hwid key show), and a second join is a no-op
#     that needs no token and issues nothing;
#   - renew gets a new serial into a new generation; the store marks the
#     old certificate superseded and holds one valid certificate;
#   - after revocation, hwid renew exits 4 saying "bootstrap again", marks
#     DIR (needs-bootstrap), and hwid agent exits 4 at once with the same
#     advice (with journald priorities <6>/<3> under JOURNAL_STREAM); DIR
#     still holds the old certificate and its key, untouched;
#   - join with a new token then starts over by itself (no need to remove
#     DIR): new serial, new key (the revoked identity's key is deleted, not
#     reused), generation 1 again, marker gone; renewal works again;
#   - the agent respects the server's renewal window: with --renew-at 0.1 on
#     a profile whose window is the last third, "next renewal at" is when
#     the window opens (GET /v1/identities renew_after), not at 10%; SIGTERM
#     stops it with exit 0;
#   - no transient object is left in the TPM; no file holds a private key.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"

device_ca <<'EOF'
  device:
    validity: 1h
    key_types: [ec-p256]
    renewal:
      window: 1.0
EOF
swtpm_init
D=$T/edge-1

# store_status SERIAL — the status column of `hwid cert list --all`.
store_status() {
        cert_rows | awk -v s="$1" '$1 == s { print }' | grep -oE '\b(valid|revoked|superseded)\b' | head -n 1
}

valid_count() {
        cert_rows --identity "$1" | grep -cw valid || true
}

test_join() {
        local tok rows
        tok=$(token_new --profile device)
        expect_exit 0 "enrolled edge-1" --multiline -- join_dev "$D" edge-1 "$tok"
        check_dir "$D" edge-1
        assert_eq "$(readlink "$D/current")" gen-1 "generation after join"
        SERIAL1=$(dir_serial "$D")
        in_store "$SERIAL1" || fail "the certificate of edge-1 is not in the store"
        assert_no_transient
        # Again, without a token: nothing to do, nothing issued.
        rows=$(cert_rows | wc -l)
        expect_exit 0 "already enrolled" --multiline -- join_dev "$D" edge-1 ""
        assert_eq "$(dir_serial "$D")" "$SERIAL1" "serial after a second join"
        assert_eq "$(cert_rows | wc -l)" "$rows" "certificates in the store after a second join"
}

test_renew() {
        run_ok "$HWID" renew --dir "$D" >"$T/renew.out"
        assert_contains "$(cat "$T/renew.out")" "renewed: generation 2" "hwid renew output"
        SERIAL2=$(dir_serial "$D")
        [ "$SERIAL2" != "$SERIAL1" ] || fail "renewal kept serial $SERIAL1"
        check_dir "$D" edge-1
        assert_eq "$(readlink "$D/current")" gen-2 "generation after renew"
        [ ! -e "$D/gen-1" ] || fail "gen-1 left behind after a successful renewal"
        assert_eq "$(store_status "$SERIAL1")" superseded "store status of the renewed certificate"
        assert_eq "$(store_status "$SERIAL2")" valid "store status of the new certificate"
        assert_eq "$(valid_count edge-1)" 1 "valid certificates for edge-1"
        assert_no_transient
}

test_revoked() {
        local before
        admin cert revoke --identity edge-1 --reason key-compromise >/dev/null
        assert_eq "$(store_status "$SERIAL2")" revoked "store status after hwid cert revoke"
        before=$(cert_rows | wc -l)
        expect_exit 4 "bootstrap again: run hwid join with a new token" -- "$HWID" renew --dir "$D"
        assert_contains "$(cat "$T/last.err")" revoked "hwid renew's reason"
        assert_eq "$(grep -o "bootstrap again" "$T/last.err" | wc -l)" 1 "advice in hwid renew's message: $(cat "$T/last.err")"
        [ -s "$D/needs-bootstrap" ] || fail "renew did not mark $D as needing a new bootstrap"
        expect_exit 4 "bootstrap again: run hwid join with a new token" --multiline -- \
                "$HWID" agent --dir "$D" --renew-at 0.5
        # Refused, the agent first tries to come back by attestation
        # (device-reenroll), which this CA refuses too.
        assert_eq "$(grep -c . "$T/last.err")" 4 "agent log lines (start, trying to come back, refused, the refusal)"
        assert_eq "$(grep -o "bootstrap again" "$T/last.err" | wc -l)" 1 "advice in the agent's message: $(cat "$T/last.err")"
        # Under systemd (JOURNAL_STREAM set) each line carries its priority.
        expect_exit 4 "" --multiline -- env JOURNAL_STREAM=8:1 "$HWID" agent --dir "$D"
        assert_eq "$(cut -c1-3 "$T/last.err" | tr '\n' ' ')" "<6> <5> <4> <3> " \
                "journald priorities (info, notice, warning, error)"
        expect_exit 4 "" --multiline -- "$HWID" agent --dir "$D" --no-reenroll
        assert_eq "$(grep -c . "$T/last.err")" 2 "agent log lines with --no-reenroll (start, the refusal)"
        assert_eq "$(cert_rows | wc -l)" "$before" "certificates after refused renewals"
        # Nothing on the device was touched by the refusals.
        assert_eq "$(dir_serial "$D")" "$SERIAL2" "serial in DIR after the refusals"
        check_dir "$D" edge-1
        assert_no_transient
}

test_join_again() {
        local tok old_key old_uri serial3
        old_key=$(cert_pubkey "$D/cert.pem")
        old_uri=$(cat "$D/key.uri")
        tok=$(token_new --profile device)
        expect_exit 0 "starting over" --multiline -- join_dev "$D" edge-1 "$tok"
        assert_contains "$(cat "$T/last.err")" "enrolled edge-1" "join output after starting over"
        check_dir "$D" edge-1
        serial3=$(dir_serial "$D")
        [ "$serial3" != "$SERIAL2" ] && [ "$serial3" != "$SERIAL1" ] || fail "join again reused a serial"
        [ "$(cert_pubkey "$D/cert.pem")" != "$old_key" ] || fail "join again reused the revoked identity's key"
        # The same --key URI names a new key now: the old one was deleted.
        assert_eq "$(cat "$D/key.uri")" "$old_uri" "key URI after starting over"
        assert_eq "$(readlink "$D/current")" gen-1 "generation after starting over"
        [ ! -e "$D/needs-bootstrap" ] || fail "needs-bootstrap left after a new enrollment"
        [ "$(find "$D" -maxdepth 1 -name 'gen-*' | wc -l)" = 1 ] || fail "old generations left: $(ls "$D")"
        assert_eq "$(store_status "$serial3")" valid "store status of the new identity"
        assert_eq "$(valid_count edge-1)" 1 "valid certificates for edge-1"
        run_ok "$HWID" renew --dir "$D" >/dev/null
        check_dir "$D" edge-1
        assert_no_transient
}

# The default profile renews in the last third of the lifetime only.
test_agent_window() {
        local d=$T/edge-2 tok line at nb na life want rc=0
        tok=$(token_new --profile default)
        expect_exit 0 "enrolled" --multiline -- join_dev "$d" edge-2 "$tok"
        start_bg "$T/agent-window.log" "$HWID" agent --dir "$d" --renew-at 0.1 --jitter 0
        for _ in $(seq 100); do
                grep -q "next renewal at" "$T/agent-window.log" && break
                sleep 0.1
        done
        line=$(grep "next renewal at" "$T/agent-window.log") || fail "the agent announced no renewal"
        kill -TERM "$BG_PID"
        wait "$BG_PID" || rc=$?
        assert_eq "$rc" 0 "agent exit code after SIGTERM"
        assert_contains "$(cat "$T/agent-window.log")" "stopping" "agent log after SIGTERM"
        at=${line#*next renewal at }
        at=$(date -u -d "${at%% *}" +%s)
        nb=$(date -u -d "$(openssl x509 -in "$d/cert.pem" -noout -startdate | cut -d= -f2)" +%s)
        na=$(date -u -d "$(openssl x509 -in "$d/cert.pem" -noout -enddate | cut -d= -f2)" +%s)
        life=$((na - nb))
        want=$((na - life * 3333 / 10000))     # profile default: window 0.3333
        [ $((at - want)) -ge -2 ] && [ $((at - want)) -le 2 ] ||
                fail "agent plans renewal at $at, the server's window opens at $want ($line)"
        assert_no_transient
}

test_join
test_renew
test_revoked
test_join_again
test_agent_window
no_private_keys_in "$T"
echo "device-lifecycle: all checks passed"
