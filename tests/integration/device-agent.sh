#!/bin/bash
# device-agent.sh — hwid agent keeps a short-lived identity renewed,
# unattended, through a CA outage, a TPM restart and kill -9.
# Certificates live one minute (profile `fast`: validity 1m, window 1.0,
# rotate_key), the agent renews at 10% (+5% jitter) of the lifetime.
# Proves:
#   - unattended: at least 3 renewals in a row, each with a new serial and a
#     new key, while DIR/cert.pem, read again and again meanwhile, always
#     verifies against the CA; "next renewal at ... (in Ns)" is logged; the
#     store holds one valid certificate, the older ones superseded; SIGTERM
#     ends the agent with exit 0;
#   - hwidd stopped: renewals fail and are retried (logged, with backoff),
#     the certificate in DIR stays good; hwidd started again: the agent
#     renews within the backoff cap, without being restarted;
#   - the TPM stopped (swtpm killed, then started again on the same state):
#     renewals fail with the TPM unreachable, then succeed once it is back;
#   - kill -9 of an agent that renews back to back, at random moments, ten
#     times: after every kill DIR holds a certificate that openssl verifies,
#     whose public key is the one the TPM holds at DIR/key.uri; the agent,
#     started again, keeps renewing (ends with a successful --once) — except
#     for the known gap described at test_kill9 (counted, re-bootstrapped);
#   - no transient object is left in the TPM after a clean stop; no file
#     holds a private key.
# swtpm has no resource manager: a process killed by SIGKILL leaves its
# loaded objects in the TPM (the kernel's /dev/tpmrm0 flushes them for a
# real device), so the kill loop flushes them as the resource manager would.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"

require_tools tpm2_flushcontext
device_ca <<'EOF'
  fast:
    validity: 1m
    key_types: [ec-p256]
    renewal:
      window: 1.0
      rotate_key: true
EOF
swtpm_init
D=$T/edge-1
AGENT_ARGS=(--dir "$D" --renew-at 0.1 --jitter 0.05 --min-backoff 1s --max-backoff 4s --verbose)

# agent_start LOG [ARGS...] — the agent in the background; AGENT_PID.
agent_start() {
        local log=$1
        shift
        start_bg "$log" "$HWID" agent "${AGENT_ARGS[@]}" "$@"
        AGENT_PID=$BG_PID
}

# agent_stop — SIGTERM; the agent must exit 0.
agent_stop() {
        local rc=0
        kill -TERM "$AGENT_PID"
        wait "$AGENT_PID" || rc=$?
        assert_eq "$rc" 0 "agent exit code after SIGTERM"
}

# wait_log FILE PATTERN COUNT TIMEOUT — until FILE has COUNT lines matching
# PATTERN (grep -E); meanwhile DIR/cert.pem must verify every time it is read.
wait_log() {
        local file=$1 pat=$2 count=$3 timeout=$4 deadline
        deadline=$((SECONDS + timeout))
        until [ "$(grep -cE "$pat" "$file")" -ge "$count" ]; do
                [ $SECONDS -lt $deadline ] || fail "after ${timeout}s, fewer than $count '$pat' in $file"
                _lib_is_alive "$AGENT_PID" || fail "the agent exited: $(tail -n 5 "$file")"
                check_cert_file
                sleep 0.3
        done
        check_cert_file
}

# check_cert_file — a snapshot of DIR/cert.pem verifies and names edge-1.
# (A reader can catch the old generation's file as it is removed: then it
# reads again, as any reader would; what it reads must always be good.)
check_cert_file() {
        cat "$D/cert.pem" >"$T/snap.pem" 2>/dev/null || cat "$D/cert.pem" >"$T/snap.pem"
        verify_leaf "$T/snap.pem"
        SEEN[$(serial_of "$T/snap.pem")]=1
}

generation() {
        local g
        g=$(readlink "$D/current")
        echo "${g#gen-}"
}

test_unattended() {
        local tok gen0 rows valid
        tok=$(token_new --profile fast)
        expect_exit 0 "enrolled edge-1" --multiline -- join_dev "$D" edge-1 "$tok"
        gen0=$(generation)
        agent_start "$T/agent-1.log"
        wait_log "$T/agent-1.log" "edge-1 renewed: generation [0-9]+, valid until .*, new key" 3 60
        agent_stop
        assert_contains "$(cat "$T/agent-1.log")" "stopping" "agent log after SIGTERM"
        [ "$(grep -cE 'next renewal at [0-9T:Z-]+ \(in [0-9]+s\)' "$T/agent-1.log")" -ge 3 ] ||
                fail "the agent did not announce its renewals: $(cat "$T/agent-1.log")"
        [ "$(generation)" -ge $((gen0 + 3)) ] || fail "generation $(generation) after 3 renewals from $gen0"
        [ ${#SEEN[@]} -ge 4 ] || fail "only ${#SEEN[@]} distinct serials seen in DIR/cert.pem: ${!SEEN[*]}"
        check_dir "$D" edge-1
        rows=$(cert_rows --identity edge-1)
        valid=$(grep -w valid <<<"$rows") || fail "no valid certificate for edge-1"
        assert_eq "$(wc -l <<<"$valid")" 1 "valid certificates for edge-1"
        assert_contains "$valid" "$(dir_serial "$D")" "the valid certificate is DIR's"
        [ "$(grep -cw superseded <<<"$rows")" -ge 3 ] || fail "renewed certificates not superseded: $rows"
        assert_no_transient
}

test_outage() {
        local renewed
        agent_start "$T/agent-2.log"
        wait_log "$T/agent-2.log" "next renewal at" 1 15
        hwidd_stop
        wait_log "$T/agent-2.log" "renewal of edge-1 failed \(attempt 2\)" 1 40
        assert_contains "$(cat "$T/agent-2.log")" "retrying in" "agent log during the outage"
        renewed=$(grep -c "edge-1 renewed" "$T/agent-2.log" || true)
        hwidd_start
        wait_log "$T/agent-2.log" "edge-1 renewed" $((renewed + 1)) 15
        agent_stop
        check_dir "$D" edge-1
        assert_no_transient
}

# Kill this test's swtpm (like a TPM reset) and start it again, with the
# same state and port, once the agent has failed to reach it.
test_tpm_restart() {
        local pidfile pid args renewed
        pidfile=$(ls "$SWTPM_DIR"/tpm*/swtpm.pid)
        pid=$(cat "$pidfile")
        mapfile -d '' args <"/proc/$pid/cmdline"
        agent_start "$T/agent-3.log"
        wait_log "$T/agent-3.log" "next renewal at" 1 15
        kill -TERM "$pid"
        while _lib_is_alive "$pid"; do sleep 0.1; done
        wait_log "$T/agent-3.log" "renewal of edge-1 failed \(attempt [0-9]+\): cannot reach the TPM" 1 40
        renewed=$(grep -c "edge-1 renewed" "$T/agent-3.log" || true)
        "${args[@]}" </dev/null >"$T/swtpm-restart.err" 2>&1 || fail "swtpm restart: $(cat "$T/swtpm-restart.err")"
        wait_log "$T/agent-3.log" "edge-1 renewed" $((renewed + 1)) 20
        agent_stop
        check_dir "$D" edge-1
        assert_no_transient
}

# What the kernel's resource manager does when a TPM client dies.
flush_dead_client() {
        run_ok tpm2_flushcontext -t
        run_ok tpm2_flushcontext -l
        run_ok tpm2_flushcontext -s
}

# A renewal the server committed whose answer never reached the disk (kill
# -9, power loss, a lost response) leaves DIR with the superseded
# certificate, which hwidd then refuses ("replaced by a newer one"): the
# device must bootstrap again, and the admin must first revoke the orphan
# certificate (one live certificate per identity). That is a known gap of
# hwidd (it does not replay a renewal whose answer was lost); until it is
# closed the test recovers as an operator would, and counts it. With
# HWID_STRICT_REPLAY=1 the first occurrence fails the test.
GAP=0
# agent_ended RC LOG — an agent that stopped by itself: only that gap.
agent_ended() {
        local rc=$1 log=$2 tok
        [ "$rc" = 4 ] && grep -q "replaced by a newer one" "$log" ||
                fail "the agent exited $rc by itself: $(tail -n 3 "$log")"
        [ "${HWID_STRICT_REPLAY:-0}" != 1 ] || fail "known gap: $(tail -n 1 "$log")"
        GAP=$((GAP + 1))
        assert_contains "$(cat "$log")" "bootstrap again: run hwid join with a new token" "agent advice"
        check_dir "$D" edge-1    # still consistent, just superseded
        # The certificate the device never stored is live: it must go first.
        admin cert revoke --identity edge-1 >/dev/null
        tok=$(token_new --profile fast)
        expect_exit 0 "starting over" --multiline -- join_dev "$D" edge-1 "$tok"
}

test_kill9() {
        local i gen0 rc mid=0
        gen0=$(generation)
        for ((i = 1; i <= 10; i++)); do
                # Renew back to back: due 1% into the lifetime.
                start_bg "$T/kill-$i.log" "$HWID" agent --dir "$D" --renew-at 0.01 --jitter 0 --min-backoff 1s \
                        --max-backoff 2s --verbose
                sleep "$((RANDOM % 20 / 10)).$((RANDOM % 10))"
                rc=0
                if _lib_is_alive "$BG_PID"; then
                        kill -KILL "$BG_PID"
                        wait "$BG_PID" || rc=$?
                        assert_eq "$rc" 137 "exit status of the killed agent (run $i)"
                        # Between asking for a certificate and storing it?
                        tail -n 1 "$T/kill-$i.log" | grep -q 'asking .* to renew' && mid=$((mid + 1))
                        flush_dead_client
                        check_dir "$D" edge-1
                else
                        wait "$BG_PID" || rc=$?
                        agent_ended "$rc" "$T/kill-$i.log"
                fi
        done
        echo "kill -9: $mid kills between request and answer; $GAP known-gap re-bootstraps;" \
                "generation $gen0 -> $(generation)" >&2
        # Started again, it carries on.
        rc=0
        "$HWID" agent --dir "$D" --renew-at 0.01 --jitter 0 --once 2>"$T/after-kill.log" || rc=$?
        if [ "$rc" != 0 ]; then
                agent_ended "$rc" "$T/after-kill.log"
                run_ok "$HWID" agent --dir "$D" --renew-at 0.01 --jitter 0 --once 2>"$T/after-kill.log"
        fi
        assert_contains "$(cat "$T/after-kill.log")" "edge-1 renewed" "renewal after the kill loop"
        check_dir "$D" edge-1
        assert_no_transient
}

declare -A SEEN=()
test_unattended
test_outage
test_tpm_restart
test_kill9
no_private_keys_in "$T"
echo "device-agent: all checks passed"
