#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# device-tpm-cut.sh — hwid join when the TPM goes away in the middle of it:
# the swtpm is killed (SIGKILL, a power cut) or its connection lost at a
# chosen TPM command, by tpm-cut.py standing between hwid and the real
# swtpm. Proves:
#   - swtpm killed at the CSR's TPM2_Sign: the join exits 1 saying the TPM
#     went away (not ESYS's "Function called in the wrong order"), DIR
#     holds no identity; once the TPM is back, the same join enrolls;
#   - the connection lost at the join's final TPM2_FlushContext (the swtpm
#     keeps running, the key still loaded in it): the join enrolls, and
#     says that the key may still be loaded, with its handle and how to
#     flush it -- never that nothing is left; the TPM does hold that one
#     object, and nothing once it is flushed;
#   - nothing is left loaded after the other runs.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"

require_tools python3 tpm2_getcap tpm2_flushcontext

TPM2_CC_SIGN=0x15d
TPM2_CC_FLUSH_CONTEXT=0x165

device_ca </dev/null
swtpm_init
TPM_DIR=$SWTPM_DIR/tpm0
mapfile -d '' SWTPM_ARGS <"/proc/$(tr -cd '0-9' <"$TPM_DIR/swtpm.pid")/cmdline"

# proxy_port — a free port P whose P+1 is free too (a swtpm: TCTI's control port).
proxy_port() {
        local p i
        for ((i = 0; i < 50; i++)); do
                p=$(free_port)
                if ! _lib_port_listening $((p + 1)) && ! grep -qx $((p + 1)) "$T/.ports"; then
                        echo $((p + 1)) >>"$T/.ports"
                        echo "$p"
                        return 0
                fi
        done
        fail "no pair of free ports"
}

# cut_at CC N ACTION — tpm-cut.py in front of the swtpm, cutting at the
# Nth command CC (kill or drop); CUT_TCTI reaches the TPM through it.
cut_at() {
        local port
        port=$(proxy_port)
        CUT_LOG=$T/cut.$1.$3.log
        start_bg "$T/cut.out" python3 "$SRCDIR/tests/integration/tpm-cut.py" "$port" "$(cat "$TPM_DIR/port")" \
                "$1" "$2" "$3" "$TPM_DIR/swtpm.pid" "$CUT_LOG"
        CUT_PID=$BG_PID
        wait_for_port $((port + 1)) 10 "$CUT_PID"
        CUT_TCTI="swtpm:host=127.0.0.1,port=$port"
}

cut_stop() {
        kill "$CUT_PID"
        wait "$CUT_PID" 2>/dev/null || true
}

# swtpm_back — the killed swtpm started again on its state (as after a power cut).
swtpm_back() {
        "${SWTPM_ARGS[@]}" </dev/null >"$TPM_DIR/restart.err" 2>&1 || fail "swtpm restart: $(cat "$TPM_DIR/restart.err")"
        wait_for_port "$(cat "$TPM_DIR/port")" 10
}

# join_cut DIR NAME — hwid join through the cut (a fresh token); its
# output in $T/last.out and $T/last.err, exit status in RC.
join_cut() {
        local tok
        tok=$(token_new)
        RC=0
        join_dev "$1" "$2" "$tok" --tcti "$CUT_TCTI" >"$T/last.out" 2>"$T/last.err" || RC=$?
        cut_stop
        grep -qx cut "$CUT_LOG" || fail "the TPM was never cut: $(tr '\n' ' ' <"$CUT_LOG")"
}

# transients — the TPM's transient handles, one line, sorted.
transients() {
        tpm2_getcap handles-transient | tr -d -- '- ' | sort | tr '\n' ' ' | sed 's/ $//'
}

# rejoin DIR NAME — the same join straight to the TPM: enrolls.
rejoin() {
        expect_exit 0 "enrolled $2" --multiline -- join_dev "$1" "$2" "$(token_new)"
        check_dir "$1" "$2"
        assert_no_transient
}

# join_killed DIR NAME CC N — a join through a cut that kills the swtpm at
# the Nth command CC: it exits 1, never with ESYS's "wrong order", and
# leaves no identity in DIR; its stderr in ERR. The swtpm is started again.
join_killed() {
        cut_at "$3" "$4" kill
        join_cut "$1" "$2"
        ERR=$(cat "$T/last.err")
        swtpm_back
        assert_eq "$RC" 1 "exit status of a join whose TPM died at its command $3 (#$4)"
        assert_not_contains "$ERR" "wrong order" "ESYS's BAD_SEQUENCE in the message"
        [ ! -e "$1/cert.pem" ] || fail "a failed join left $1/cert.pem"
}

# The power goes as the CSR is signed (the device key held loaded).
test_killed_at_sign() {
        local d=$T/edge-1
        join_killed "$d" edge-1 $TPM2_CC_SIGN 1
        assert_contains "$ERR" "hwid: the TPM cannot sign with key file $d/device.tss2.pem: the TPM at $CUT_TCTI went away"
        # The held key's flush could not be sent: said, not passed over.
        assert_contains "$ERR" "warning: the TPM at $CUT_TCTI went away before hwid flushed 0x8000000"
        assert_eq "$(transients)" "" "transient objects after the power cut"
        rejoin "$d" edge-1
}

# The power goes when the parent key is flushed, right after the device
# key was made: every later command used to fail with ESYS's "Function
# called in the wrong order".
test_killed_at_first_flush() {
        join_killed "$T/edge-2" edge-2 $TPM2_CC_FLUSH_CONTEXT 1
        assert_contains "$ERR" "hwid: the TPM at $CUT_TCTI went away and cannot be reached again"
        # The parent, whose flush was lost, and the device key, held loaded
        # on the connection that went away: both named.
        assert_contains "$ERR" "went away before hwid flushed 0x80000000: it may still hold that object unless it restarted since"
        assert_contains "$ERR" "warning: the TPM at $CUT_TCTI went away before hwid flushed 0x80000001"
        rejoin "$T/edge-2" edge-2
}

# The connection is lost at the join's very last command, the device key's
# flush: the TPM keeps running, the key loaded in it.
test_final_flush_lost() {
        local d=$T/edge-3 err left
        cut_at $TPM2_CC_FLUSH_CONTEXT 2 drop
        join_cut "$d" edge-3
        err=$(cat "$T/last.err")
        assert_eq "$(tail -n 1 "$CUT_LOG")" cut "the cut FlushContext is the join's last TPM command"
        assert_eq "$RC" 0 "exit status of a join that lost its final flush (it enrolled)"
        assert_contains "$err" "enrolled edge-3"
        check_dir "$d" edge-3
        left=$(transients)
        [[ $left =~ ^0x800000[0-9a-f]{2}$ ]] || fail "the TPM holds '$left', expected the device key alone"
        assert_contains "$err" "warning: the TPM at $CUT_TCTI went away before hwid flushed $left: it may still hold that object unless it restarted since"
        assert_contains "$err" "tpm2_flushcontext $left"
        run_ok tpm2_flushcontext "$left"
        assert_no_transient
}

test_killed_at_sign
test_killed_at_first_flush
test_final_flush_lost
echo "device-tpm-cut: all checks passed"
