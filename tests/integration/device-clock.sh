#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# device-clock.sh — a wrong clock is not a revocation. Clocks are moved for
# real with libfaketime (wrong_clock in lib.sh): hwidd's, to be behind the
# device's certificate (the CA's clock behind, or a device certificate from
# a CA whose clock was ahead), and the device's, to be ahead of its
# certificate's end. Certificates live an hour (profile `device`); hwidd
# backdates notBefore and allows client certificates its clock_skew (5m).
# Proves:
#   - hwidd's clock 20 minutes behind: hwidd refuses the certificate as not
#     yet valid; hwid renew exits 1 (not 4), its one error line names the
#     certificate's start, the server's clock (20 minutes behind this
#     device's) and this device's, says it is not a revocation; DIR is not
#     marked needs-bootstrap and keeps its certificate; hwid join (no token)
#     still finds it enrolled;
#   - the agent, in the same case, retries with backoff ("failed (attempt
#     2)") instead of stopping, and renews (--once: exit 0) as soon as
#     hwidd's clock is right again; no needs-bootstrap;
#   - a needs-bootstrap marker in DIR (as an earlier hwid wrote for such a
#     refusal) is cleared by the next successful renewal, after which hwid
#     join (no token) finds DIR enrolled and keeps its key and certificate;
#   - the device's clock ahead of its certificate's end, within the skew
#     allowance (--clock-skew, default 5m): hwid join finds DIR enrolled;
#     beyond it: hwid join counts the identity expired, and without a token
#     refuses, changing nothing; hwid renew with its clock past the
#     certificate's end still renews (hwidd, whose clock is right, decides);
#   - a new certificate valid only later than the device's clock allows
#     (hwidd's clock ahead) is kept, with a warning to check the clocks;
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

# hwidd_clock OFFSET — hwidd started again, its clock off by OFFSET ("": right).
hwidd_clock() {
        hwidd_stop
        if [ -z "$1" ]; then
                hwidd_start
                return
        fi
        _HWIDD_RUNS=$((_HWIDD_RUNS + 1))
        HWIDD_LOG=$T/hwidd.$_HWIDD_RUNS.log
        wrong_clock "$1"
        start_bg "$HWIDD_LOG" "${WRONG_CLOCK[@]}" "$HWIDD" --config "$CFG"
        HWIDD_PID=$BG_PID
        wait_for_port "$PORT" 20 "$HWIDD_PID"
}

no_marker() {
        [ ! -e "$D/needs-bootstrap" ] || fail "$1 marked $D needs-bootstrap: $(cat "$D/needs-bootstrap")"
}

# still_enrolled — hwid join without a token finds DIR enrolled, unchanged.
still_enrolled() {
        local serial uri
        serial=$(dir_serial "$D")
        uri=$(cat "$D/key.uri")
        expect_exit 0 "already enrolled" --multiline -- "${@}" "$HWID" join --server "$URL" --ca-hash "$PIN" \
                --key "tpm2:file=$D/device.tss2.pem" --cn edge-1 --dir "$D"
        assert_eq "$(dir_serial "$D")" "$serial" "serial after hwid join on an enrolled DIR"
        assert_eq "$(cat "$D/key.uri")" "$uri" "key after hwid join on an enrolled DIR"
        check_dir "$D" edge-1
}

test_join() {
        local tok
        tok=$(token_new --profile device)
        expect_exit 0 "enrolled edge-1" --multiline -- join_dev "$D" edge-1 "$tok"
        check_dir "$D" edge-1
}

test_ca_clock_behind() {
        local serial line server device
        serial=$(dir_serial "$D")
        hwidd_clock -20m
        expect_exit 1 "a clock is wrong, which is not a revocation" --multiline -- "$HWID" renew --dir "$D"
        line=$(grep '^hwid: ' "$T/last.err") || fail "hwid renew printed no error line: $(cat "$T/last.err")"
        assert_not_contains "$line" "bootstrap again" "hwid renew's error for a clock problem"
        server=$(sed -n "s/.*the server's clock reads \([0-9T:Z-]*\),.*/\1/p" <<<"$line")
        device=$(sed -n "s/.*this device's \([0-9T:Z-]*\):.*/\1/p" <<<"$line")
        [ -n "$server" ] && [ -n "$device" ] || fail "hwid renew names not both clocks: $line"
        server=$(date -u -d "$server" +%s)
        device=$(date -u -d "$device" +%s)
        [ $((device - server)) -ge 1140 ] && [ $((device - server)) -le 1260 ] ||
                fail "the clocks hwid renew names are $((device - server))s apart, not 20 minutes: $line"
        assert_contains "$line" "valid from $(date -u -d "$(openssl x509 -in "$D/cert.pem" -noout -startdate | cut -d= -f2)" \
                +%Y-%m-%dT%H:%M:%SZ)" "the certificate's start in hwid renew's error"
        no_marker "hwid renew"
        assert_eq "$(dir_serial "$D")" "$serial" "serial after the refused renewal"
        still_enrolled
        assert_no_transient
}

test_agent_retries() {
        local rc=0 deadline agent
        start_bg "$T/agent.log" "$HWID" agent --dir "$D" --renew-at 0.001 --jitter 0 --min-backoff 1s \
                --max-backoff 2s --once
        agent=$BG_PID
        deadline=$((SECONDS + 40))
        until grep -qE "renewal of edge-1 failed \(attempt 2\): .*a clock is wrong" "$T/agent.log"; do
                [ $SECONDS -lt $deadline ] || fail "the agent did not retry: $(cat "$T/agent.log")"
                _lib_is_alive "$agent" || fail "the agent stopped: $(tail -n 3 "$T/agent.log")"
                sleep 0.2
        done
        assert_contains "$(cat "$T/agent.log")" "retrying in" "the agent's log while hwidd's clock is wrong"
        no_marker "the agent"
        hwidd_clock ""
        deadline=$((SECONDS + 30))
        while _lib_is_alive "$agent"; do
                [ $SECONDS -lt $deadline ] || fail "the agent did not renew once hwidd's clock was right: $(tail -n 3 "$T/agent.log")"
                sleep 0.2
        done
        wait "$agent" || rc=$?
        assert_eq "$rc" 0 "agent exit code (--once) after renewing"
        assert_contains "$(cat "$T/agent.log")" "edge-1 renewed" "the agent's log"
        no_marker "the agent"
        check_dir "$D" edge-1
        assert_no_transient
}

test_marker_cleared() {
        echo "server answered 401: client certificate has expired: bootstrap again with a new token" \
                >"$D/needs-bootstrap"
        run_ok "$HWID" renew --dir "$D" >/dev/null
        no_marker "a successful renewal left the marker: hwid renew"
        still_enrolled
        assert_no_transient
}

test_device_clock_ahead() {
        local before
        # 62 minutes ahead: past the certificate's end, within the 5m allowance.
        wrong_clock +62m
        still_enrolled "${WRONG_CLOCK[@]}"
        # 70 minutes ahead: expired by this clock; without a token nothing changes.
        before=$(find "$D" -printf '%P %s\n' | sort)
        wrong_clock +70m
        expect_exit 1 "a new bootstrap token is needed" --multiline -- "${WRONG_CLOCK[@]}" "$HWID" join \
                --server "$URL" --ca-hash "$PIN" --key "tpm2:file=$D/device.tss2.pem" --cn edge-1 --dir "$D"
        assert_contains "$(cat "$T/last.err")" "nothing was changed" "hwid join without a token on an expired DIR"
        assert_eq "$(find "$D" -printf '%P %s\n' | sort)" "$before" "DIR after hwid join refused"
        # hwidd, whose clock is right, renews a certificate this clock calls expired.
        run_ok "${WRONG_CLOCK[@]}" "$HWID" renew --dir "$D" >/dev/null
        no_marker "hwid renew with the device's clock ahead"
        check_dir "$D" edge-1
        assert_no_transient
}

test_certificate_from_the_future() {
        # notBefore: hwidd's clock (10m ahead) less its 5m backdating.
        hwidd_clock +10m
        run_ok "$HWID" renew --dir "$D" --clock-skew 1m >/dev/null
        assert_contains "$(cat "$T/last.err")" "ahead of this device's clock: check the clocks" \
                "hwid renew's warning about a certificate valid only later"
        # Kept: it verifies once its time has come.
        verify_leaf "$D/cert.pem" -CAfile "$CA_DIR/ca.pem" -attime $(($(date +%s) + 600))
        hwidd_clock ""
        assert_no_transient
}

test_join
test_ca_clock_behind
test_agent_retries
test_marker_cleared
test_device_clock_ahead
test_certificate_from_the_future
no_private_keys_in "$T"
echo "device-clock: all checks passed"
