#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# device-agent.sh — hwid agent keeps a short-lived identity renewed,
# unattended, through a CA outage, a TPM restart and kill -9.
# Certificates live one minute (profile `fast`: validity 1m, window 1.0,
# rotate_key), the agent renews at 10% (+5% jitter) of the lifetime: on the
# test's clock (test_clock in lib.sh), which hwidd and the device share and
# which the test moves to each renewal the agent planned.
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
#   - SIGTERM while renewals run back to back: exit 0 after "stopping", and
#     every request sent got its renewal stored (none abandoned midway);
#   - kill -9 of an agent that renews back to back, at random moments up
#     to 0.1 s after it sent a request, 8 times: after every kill DIR holds
#     a certificate that openssl verifies, whose public key is the one the
#     TPM holds at DIR/key.uri; started again, the agent keeps renewing;
#   - crash points, deterministically: `hwid renew` killed (strace injects
#     SIGKILL) at every mkdir, fsync, rename, symlink, unlink, unlinkat and
#     rmdir of a renewal in turn (20+ points): DIR is consistent after each,
#     the next renewal succeeds, and one interrupted after it stored its new
#     generation is finished by the next run ("taking generation");
#   - a renewal committed by the CA whose answer never reached the disk is
#     replayed: the agent never has to bootstrap again;
#   - no transient object is left in the TPM after a clean stop; no file
#     holds a private key.
# swtpm has no resource manager: a process killed by SIGKILL leaves its
# loaded objects in the TPM (the kernel's /dev/tpmrm0 flushes them for a
# real device), so after a kill the test flushes them as the resource
# manager would.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"

require_tools tpm2_flushcontext strace
test_clock
device_ca <<'EOF'
  fast:
    validity: 1m
    key_types: [ec-p256]
    renewal:
      window: 1.0
      rotate_key: true
EOF
# The agent counts a certificate's life from its arrival in DIR when
# notBefore is earlier (backdated by clock_skew); a file's time is on the
# real clock, not the test's (test_clock): with no backdating here,
# notBefore is the moment of issue on the test's clock, and counts.
hwidd_stop
echo "clock_skew: 0s" >>"$CFG"
hwidd_start
swtpm_init
D=$T/edge-1
AGENT_ARGS=(--dir "$D" --renew-at 0.1 --jitter 0.05 --min-backoff 1s --max-backoff 4s --verbose)

# agent_start LOG [ARGS...] — the agent in the background; AGENT_PID.
agent_start() {
        local log=$1
        shift
        start_bg "$log" "${CLOCK[@]}" "$HWID" agent "${AGENT_ARGS[@]}" "$@"
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
# With WAKE=1, the agent is woken meanwhile to read the clock (clock_nudge).
wait_log() {
        local file=$1 pat=$2 count=$3 timeout=$4 deadline
        deadline=$((SECONDS + timeout))
        until [ "$(grep -cE "$pat" "$file")" -ge "$count" ]; do
                [ $SECONDS -lt $deadline ] || fail "after ${timeout}s, fewer than $count '$pat' in $file"
                _lib_is_alive "$AGENT_PID" || fail "the agent exited: $(tail -n 5 "$file")"
                check_cert_file
                [ "${WAKE:-0}" = 0 ] || clock_nudge "$AGENT_PID"
                sleep 0.1
        done
        check_cert_file
}

# to_renewal FILE N — the test's clock moves to the moment of the agent's
# Nth plan in FILE ("next renewal at ... (in Ns)"), once it has made it.
to_renewal() {
        local in
        wait_log "$1" "next renewal at" "$2" 15
        in=$(grep -E "next renewal at" "$1" | sed -n "$2s/.*(in \([0-9]*\)s)\$/\1/p")
        [[ $in =~ ^[0-9]+$ ]] || fail "plan $2 of the agent: $(grep "next renewal at" "$1")"
        clock_advance "$in"
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
        local tok gen0 rows valid n
        tok=$(token_new --profile fast)
        expect_exit 0 "enrolled edge-1" --multiline -- join_dev "$D" edge-1 "$tok"
        gen0=$(generation)
        agent_start "$T/agent-1.log"
        for n in 1 2 3; do
                to_renewal "$T/agent-1.log" "$n"
                WAKE=1 wait_log "$T/agent-1.log" "edge-1 renewed: generation [0-9]+, valid until .*, new key" "$n" 20
        done
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
        to_renewal "$T/agent-2.log" 1
        WAKE=1 wait_log "$T/agent-2.log" "renewal of edge-1 failed \(attempt 2\)" 1 40
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
        to_renewal "$T/agent-3.log" 1
        WAKE=1 wait_log "$T/agent-3.log" "renewal of edge-1 failed \(attempt [0-9]+\): cannot reach the TPM" 1 40
        renewed=$(grep -c "edge-1 renewed" "$T/agent-3.log" || true)
        "${args[@]}" </dev/null >"$T/swtpm-restart.err" 2>&1 || fail "swtpm restart: $(cat "$T/swtpm-restart.err")"
        wait_log "$T/agent-3.log" "edge-1 renewed" $((renewed + 1)) 20
        agent_stop
        check_dir "$D" edge-1
        assert_no_transient
}

# SIGTERM while renewing back to back: the renewal under way finishes,
# then the agent stops (exit 0); no request is left without its answer.
test_sigterm_mid_renewal() {
        local rc=0 gen0 deadline
        gen0=$(generation)
        start_bg "$T/term.log" "${CLOCK[@]}" "$HWID" agent --dir "$D" --renew-at 0.01 --jitter 0 --verbose
        deadline=$((SECONDS + 20))
        until [ "$(grep -c 'asking .* to renew' "$T/term.log")" -ge 2 ]; do
                [ $SECONDS -lt $deadline ] || fail "the agent sent no second request: $(cat "$T/term.log")"
                sleep 0.01
        done
        kill -TERM "$BG_PID"
        wait "$BG_PID" || rc=$?
        assert_eq "$rc" 0 "agent exit code after SIGTERM during renewals"
        assert_eq "$(tail -n 2 "$T/term.log" | sed 's/.*hwid agent: //' | tr '\n' '|')" \
                "received Terminated|stopping|" "the agent's last words"
        assert_eq "$(grep -c 'edge-1 renewed' "$T/term.log")" "$(grep -c 'asking .* to renew' "$T/term.log")" \
                "renewals finished vs requests sent"
        assert_eq "$(generation)" $((gen0 + $(grep -c 'edge-1 renewed' "$T/term.log"))) "generation after the renewals"
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
# -9, power loss, a lost response) must not lock the device out: the next
# run reuses the key it recorded for that renewal and hwidd hands the same
# certificate back.  So an agent never stops by itself here.
agent_ended() {
        local rc=$1 log=$2
        fail "the agent exited $rc by itself: $(tail -n 3 "$log")"
}

KILLS=8
KILL_WINDOW_MS=${KILL_WINDOW_MS:-100}
test_kill9() {
        local i gen0 rc deadline mid=0
        gen0=$(generation)
        for ((i = 1; i <= KILLS; i++)); do
                # Renew back to back (due 1% into the lifetime); kill at a
                # random moment shortly after a request went out, where the
                # answer is received and stored.
                start_bg "$T/kill-$i.log" "${CLOCK[@]}" "$HWID" agent --dir "$D" --renew-at 0.01 --jitter 0 --min-backoff 1s \
                        --max-backoff 2s --verbose
                deadline=$((SECONDS + 10))
                while [ "$(grep -c 'asking .* to renew' "$T/kill-$i.log")" -lt $((1 + i % 3)) ] &&
                        [ $SECONDS -lt $deadline ] && _lib_is_alive "$BG_PID"; do
                        sleep 0.01
                done
                sleep "0.$(printf %03d $((RANDOM % KILL_WINDOW_MS)))"
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
        echo "kill -9: $mid kills between request and answer;" \
                "$(cat "$T"/kill-*.log | grep -c 'taking generation' || true) interrupted renewals finished" \
                "on restart; generation $gen0 -> $(generation)" >&2
        # Started again, it carries on.
        rc=0
        "${CLOCK[@]}" "$HWID" agent --dir "$D" --renew-at 0.01 --jitter 0 --once 2>"$T/after-kill.log" || rc=$?
        if [ "$rc" != 0 ]; then
                agent_ended "$rc" "$T/after-kill.log"
                run_ok "${CLOCK[@]}" "$HWID" agent --dir "$D" --renew-at 0.01 --jitter 0 --once 2>"$T/after-kill.log"
        fi
        assert_contains "$(cat "$T/after-kill.log")" "edge-1 renewed" "renewal after the kill loop"
        check_dir "$D" edge-1
        assert_no_transient
}

# Every file-system step of a renewal, in turn, is where the process dies:
# strace kills `hwid renew` at the Nth call of each mutating syscall
# (SIGKILL injected at syscall entry), for N = 1, 2, ... until a renewal
# gets through. After each death DIR must be consistent, and the next
# renewal must succeed (finishing the interrupted one where it stored its
# generation, or replaying a renewal whose answer was lost).
test_crash_points() {
        local sc n rc points=0 adopted=0
        for sc in mkdir fsync rename symlink unlink unlinkat rmdir; do
                for ((n = 1; ; n++)); do
                        rc=0
                        # (in a subshell, whose stderr takes bash's "Killed")
                        (ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 strace -f -qq -o /dev/null \
                                -e trace="$sc" -e inject="$sc:signal=KILL:when=$n" \
                                "${CLOCK[@]}" "$HWID" renew --dir "$D" >/dev/null 2>"$T/crash.log"
                                exit $?) 2>/dev/null || rc=$?
                        [ "$rc" != 0 ] || break
                        assert_eq "$rc" 137 "hwid renew killed at $sc #$n: $(tail -n 1 "$T/crash.log")"
                        points=$((points + 1))
                        flush_dead_client
                        check_dir "$D" edge-1
                        rc=0
                        "${CLOCK[@]}" "$HWID" renew --dir "$D" >/dev/null 2>"$T/recover.log" || rc=$?
                        if [ "$rc" != 0 ]; then
                                agent_ended "$rc" "$T/recover.log"
                        fi
                        grep -q "taking generation" "$T/recover.log" && adopted=$((adopted + 1))
                        check_dir "$D" edge-1
                done
        done
        echo "crash points: $points; $adopted interrupted renewals finished" >&2
        [ "$points" -ge 15 ] || fail "only $points crash points in a renewal"
        [ "$adopted" -ge 1 ] || fail "no interrupted renewal was finished by the next one"
        assert_no_transient
}

declare -A SEEN=()
test_unattended
test_outage
test_tpm_restart
test_sigterm_mid_renewal
test_kill9
test_crash_points
no_private_keys_in "$T"
echo "device-agent: all checks passed"
