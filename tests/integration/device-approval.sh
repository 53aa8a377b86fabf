#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# device-approval.sh — hwid join under a profile that needs an admin's
# approval (`manual`, written by hwid ca init), against a real hwidd.
# Proves:
#   - a waiting join: the request appears in `hwid request list` with the
#     fingerprint join printed for the device's key; until approval DIR
#     holds pending.json (0600) and no certificate, and join keeps polling;
#     after `hwid request approve` join exits 0 with a certificate openssl
#     verifies, for a key whose SPKI SHA-256 is that fingerprint;
#   - --no-wait: exit 3 and pending.json; running it again before approval
#     resumes the same request, asks once (exit 3, "still pending", no new
#     request, no token use); after approval the same command without any
#     token collects the certificate (exit 0) and removes pending.json;
#   - a denied request: the next run exits 1 with the admin's reason and
#     writes no certificate;
#   - no transient object is left in the TPM.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"

ca_setup
add_profiles </dev/null
sed -i 's/^  retry_after: .*/  retry_after: 1s/' "$CFG"   # polls come quickly
hwidd_start
PIN=$(run_ok "$HWID" ca hash "$CA_DIR/ca.pem")
swtpm_init

# waiting NAME — "ID SPKI" of NAME's waiting request (empty if none).
waiting() {
        admin request list | awk -v n="$1" '$2 == "pending" && $3 == n { print $1, $NF }'
}

# wait_request NAME — wait (20 s) until NAME has a waiting request; sets REQ, REQ_SPKI.
wait_request() {
        local row
        for _ in $(seq 200); do
                row=$(waiting "$1")
                [ -z "$row" ] || break
                sleep 0.1
        done
        [ -n "$row" ] || fail "no waiting request for $1"
        read -r REQ REQ_SPKI <<<"$row"
}

# spki_of_cert PEM — openssl's SHA-256 of the certificate's SubjectPublicKeyInfo.
spki_of_cert() {
        openssl x509 -in "$1" -noout -pubkey | openssl pkey -pubin -outform DER | sha256sum | cut -d' ' -f1
}

test_waiting_join() {
        local d=$T/edge-1 tok pid rc=0 shown
        tok=$(token_new --profile manual)
        start_bg "$T/join-1.log" env HWID_TOKEN="$tok" "$HWID" join --server "$URL" --ca-hash "$PIN" \
                --key "tpm2:file=$d/device.tss2.pem" --cn edge-1 --dir "$d" --wait-timeout 120
        pid=$BG_PID
        wait_request edge-1
        # The device told its operator the fingerprint the admin must see.
        for _ in $(seq 50); do grep -q "waiting for approval" "$T/join-1.log" && break; sleep 0.1; done
        shown=$(sed -n 's/.*device key fingerprint (SPKI SHA-256): \([0-9a-f]*\).*/\1/p' "$T/join-1.log")
        assert_eq "$shown" "$REQ_SPKI" "fingerprint printed by join vs hwid request list"
        assert_contains "$(cat "$T/join-1.log")" "request $REQ is waiting for approval" "join names the request"
        sleep 2   # a couple of polls
        kill -0 "$pid" 2>/dev/null || fail "join stopped waiting: $(cat "$T/join-1.log")"
        assert_file_mode "$d/pending.json" 600
        [ ! -e "$d/cert.pem" ] || fail "a certificate before approval"
        admin request approve "$REQ" >/dev/null
        wait "$pid" || rc=$?
        assert_eq "$rc" 0 "exit code of the waiting join after approval"
        assert_contains "$(cat "$T/join-1.log")" "enrolled edge-1" "join output"
        check_dir "$d" edge-1
        assert_eq "$(spki_of_cert "$d/cert.pem")" "$REQ_SPKI" "certificate key vs the approved fingerprint"
        [ ! -e "$d/pending.json" ] || fail "pending.json left after enrollment"
        assert_eq "$(token_used "$tok")" 1 "token uses"
        assert_no_transient
}

test_no_wait() {
        local d=$T/edge-2 tok requests
        tok=$(token_new --profile manual)
        expect_exit 3 "not waiting" --multiline -- join_dev "$d" edge-2 "$tok" --no-wait
        wait_request edge-2
        assert_file_mode "$d/pending.json" 600
        [ ! -e "$d/cert.pem" ] || fail "a certificate before approval"
        assert_no_transient
        # Again before approval: the same request, resumed; nothing new.
        requests=$(admin request list --all | wc -l)
        expect_exit 3 "still pending" --multiline -- join_dev "$d" edge-2 "" --no-wait
        assert_contains "$(cat "$T/last.err")" "resuming pending request ${REQ:0:8}" "the second run resumes"
        assert_eq "$(admin request list --all | wc -l)" "$requests" "requests after resuming"
        assert_eq "$(token_used "$tok")" 1 "token uses after resuming"
        admin request approve "$REQ" >/dev/null
        expect_exit 0 "enrolled edge-2" --multiline -- join_dev "$d" edge-2 "" --no-wait
        check_dir "$d" edge-2
        assert_eq "$(spki_of_cert "$d/cert.pem")" "$REQ_SPKI" "certificate key vs the approved fingerprint"
        [ ! -e "$d/pending.json" ] || fail "pending.json left after enrollment"
        assert_no_transient
}

test_denied() {
        local d=$T/edge-3 tok
        tok=$(token_new --profile manual)
        expect_exit 3 "not waiting" --multiline -- join_dev "$d" edge-3 "$tok" --no-wait
        wait_request edge-3
        admin request deny --reason "not on the delivery note" "$REQ" >/dev/null
        expect_exit 1 "not on the delivery note" --multiline -- join_dev "$d" edge-3 "" --no-wait
        [ ! -e "$d/cert.pem" ] || fail "a certificate for a denied request"
        assert_no_transient
}

test_waiting_join
test_no_wait
test_denied
no_private_keys_in "$T"
echo "device-approval: all checks passed"
