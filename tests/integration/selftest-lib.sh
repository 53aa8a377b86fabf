#!/bin/bash
# shellcheck disable=SC2016,SC2119  # child snippets expand in the child; helpers take optional args
# selftest-lib.sh — tests the test helpers themselves (tests/lib.sh and
# swtpm/swtpm-start|stop): every other integration test relies on them, so
# each helper must pass on good input and FAIL on bad input.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

# child NAME — run the script read from stdin in a fresh bash that sources
# lib.sh (so its fail/exit does not end this test). Sets CHILD_RC; its
# output is in $T/NAME.out and $T/NAME.err. CHILD_KEEP_TMP=1 and
# CHILD_ALLOW_SKIP=1 set KEEP_TMP / HWID_ALLOW_SKIP for the child.
child() {
        local name=$1
        {
                echo 'source "$SRCDIR/tests/lib.sh"'
                cat
        } >"$T/$name.sh"
        CHILD_RC=0
        # The outer 2>/dev/null mutes bash's "Killed" notice for a child
        # that is killed on purpose.
        # KEEP_TMP and HWID_ALLOW_SKIP are the child's own (CHILD_*), not
        # whatever the person running this test has set.
        { KEEP_TMP=${CHILD_KEEP_TMP:-0} HWID_ALLOW_SKIP=${CHILD_ALLOW_SKIP:-0} \
                bash "$T/$name.sh" >"$T/$name.out" 2>"$T/$name.err" </dev/null; } 2>/dev/null ||
                CHILD_RC=$?
}

# child_rc NAME CODE — after child(): it exited CODE (else show its stderr).
child_rc() {
        if [ "$CHILD_RC" != "$2" ]; then
                echo "--- stderr of child $1 ---" >&2
                cat "$T/$1.err" >&2
                fail "child $1 exited $CHILD_RC, expected $2"
        fi
}

# child_must_fail NAME EXPECTED_STDERR — after child(): it failed (exit 1)
# and said why.
child_must_fail() {
        child_rc "$1" 1
        assert_contains "$(cat "$T/$1.err")" "$2" "$1 error message"
}

wait_gone() {
        local pid=$1 i
        for ((i = 0; i < 50; i++)); do
                _lib_is_alive "$pid" || return 0
                sleep 0.1
        done
        fail "process $pid still alive"
}

test_assertions() {
        assert_eq a a
        assert_contains "hello world" "lo w"
        assert_not_contains "hello world" "secret"
        touch "$T/f" && chmod 640 "$T/f"
        assert_file_mode "$T/f" 640
        assert_file_mode "$T/f" 0640

        child eq <<<'assert_eq a b "values differ"'
        child_must_fail eq "values differ: 'a' != 'b'"
        child contains <<<'assert_contains "abc" "x" "needle"'
        child_must_fail contains "needle: 'x' not found"
        child notcontains <<<'assert_not_contains "pin=1234" "1234" "pin leaked"'
        child_must_fail notcontains "pin leaked"
        child mode <<<'touch "$T/g"; chmod 644 "$T/g"; assert_file_mode "$T/g" 600'
        child_must_fail mode "has mode 644, expected 600"
        child failing_cmd <<<'false'
        child_must_fail failing_cmd "command exited 1"
        # The failing line is named, so a log reader finds it.
        assert_contains "$(cat "$T/eq.err")" "eq.sh:2"
}

test_expect_exit() {
        expect_exit 1 "boom" -- sh -c 'echo out; echo "error: boom" >&2; exit 1'
        assert_eq "$(cat "$T/last.out")" out "stdout captured"
        expect_exit 0 "" -- true
        expect_exit 2 "usage" --multiline -- sh -c 'printf "usage: x\n  more\n" >&2; exit 2'

        child wrong_code <<<'expect_exit 1 "" -- sh -c "exit 3"'
        child_must_fail wrong_code "exit code 3, expected 1"
        child succeeded <<<'expect_exit 1 "" -- true'
        child_must_fail succeeded "exit code 0, expected 1"
        child no_msg <<<'expect_exit 1 "boom" -- sh -c "echo other >&2; exit 1"'
        child_must_fail no_msg "stderr lacks 'boom'"
        child two_lines <<<'expect_exit 1 "boom" -- sh -c "printf \"boom\nmore\n\" >&2; exit 1"'
        child_must_fail two_lines "stderr has 2 non-empty lines"
        child silent <<<'expect_exit 1 "" -- sh -c "exit 1"'
        child_must_fail silent "stderr has 0 non-empty lines"
        child bad_usage <<<'expect_exit 1 "" true'
        child_must_fail bad_usage "usage: expect_exit"

        local out
        out=$(run_ok echo hi)
        assert_eq "$out" hi "run_ok passes stdout through"
        child run_fail <<<'run_ok sh -c "echo why >&2; exit 4"'
        child_must_fail run_fail "exit code 4"
        assert_contains "$(cat "$T/run_fail.err")" "why" "run_ok shows stderr"
}

# The EXIT trap must kill tracked processes and remove $T, on success and
# on failure; KEEP_TMP=1 keeps $T.
test_exit_trap() {
        local pid tdir
        child trap_ok <<<'sleep 1000 & track_pid $!; echo "$! $T"'
        child_rc trap_ok 0
        read -r pid tdir <"$T/trap_ok.out"
        wait_gone "$pid"
        [ ! -e "$tdir" ] || fail "child's \$T $tdir not removed"

        child trap_fail <<'EOF'
start_bg "$T/server.log" sh -c 'echo marker-in-log; exec sleep 1000'
echo "$BG_PID"
sleep 0.2
fail "on purpose"
EOF
        child_must_fail trap_fail "on purpose"
        wait_gone "$(cat "$T/trap_fail.out")"
        assert_contains "$(cat "$T/trap_fail.err")" "marker-in-log" "tracked log shown on failure"

        CHILD_KEEP_TMP=1 child keep <<<'echo "$T"'
        child_rc keep 0
        tdir=$(cat "$T/keep.out")
        [ -d "$tdir" ] || fail "KEEP_TMP=1 did not keep $tdir"
        rm -rf "$tdir"
}

test_skip_rules() {
        child hw_missing <<<'require_tools hwid-no-such-tool'
        child_must_fail hw_missing "missing hwid-no-such-tool"
        CHILD_ALLOW_SKIP=1 child hw_skip <<<'require_tools hwid-no-such-tool'
        child_rc hw_skip 77     # HWID_ALLOW_SKIP=1 turns missing hardware into a skip
}

test_ports() {
        local p q
        p=$(free_port)
        q=$(free_port)
        [ "$p" != "$q" ] || fail "free_port handed out $p twice"
        start_bg "$T/s_server.log" openssl s_server -accept "127.0.0.1:$p" -nocert -quiet
        wait_for_port "$p" 10 "$BG_PID"
        child dead_server <<<'sh -c "exit 0" & wait_for_port "$(free_port)" 10 $!'
        child_must_fail dead_server "exited before listening"
}

# Two tests side by side never get the same port from free_port (each
# holds what it was given until it exits): 14 ports each out of 32 would
# almost surely overlap if each only checked that nothing listened yet.
# Each holds its ports until both have theirs. Their claims go with them:
# a third then gets 24 of the 32.
test_ports_side_by_side() {
        local snippet dup a b
        snippet='export HWID_TEST_PORT_BASE=31000 HWID_TEST_PORT_COUNT=64
for i in $(seq 14); do free_port; done
touch "'$T'/side.$BASHPID"
for i in $(seq 300); do [ "$(ls "'$T'"/side.* | wc -l)" -lt 2 ] || break; sleep 0.1; done'
        child side_a <<<"$snippet" &
        a=$!
        child side_b <<<"$snippet" &
        b=$!
        wait "$a" "$b"
        assert_eq "$(sort -u "$T/side_a.out" | wc -l) $(sort -u "$T/side_b.out" | wc -l)" "14 14" \
                "ports handed to each of two tests side by side"
        dup=$(sort "$T/side_a.out" "$T/side_b.out" | uniq -d | paste -sd' ')
        [ -z "$dup" ] || fail "free_port handed $dup to two tests at once"
        child side_c <<<'export HWID_TEST_PORT_BASE=31000 HWID_TEST_PORT_COUNT=64
for i in $(seq 24); do free_port; done'
        child_rc side_c 0
}

# HWID_TEST_PORT_BASE / HWID_TEST_PORT_COUNT move every port a test uses:
# swtpm-start's (lower half) and free_port's (upper half).
test_port_range() {
        child range <<'EOF'
export HWID_TEST_PORT_BASE=30000 HWID_TEST_PORT_COUNT=1000
for i in $(seq 20); do
        p=$(free_port)
        [ "$p" -ge 30500 ] && [ "$p" -lt 31000 ] || fail "free_port handed out $p, outside 30500-30999"
done
swtpm_init 2
for t in "${TCTIS[@]}"; do
        p=${t##*port=}
        [ "$p" -ge 30000 ] && [ $((p + 1)) -lt 30500 ] || fail "swtpm listens on $p, outside 30000-30499"
done
assert_no_transient
EOF
        child_rc range 0
        child bad_range <<<'HWID_TEST_PORT_BASE=65000 free_port'
        child_must_fail bad_range "must give a range"
        expect_exit 2 "must give a range" -- env HWID_TEST_PORT_BASE=80 "$SRCDIR/swtpm/swtpm-start" --dir "$T/badports"
        [ ! -e "$T/badports" ] || fail "swtpm-start created its directory despite a bad port range"
}

test_softhsm() {
        softhsm_init ca 1234 5678
        softhsm_init dev 4321 8765
        [ -f "$SOFTHSM_MODULE" ] || fail "SOFTHSM_MODULE $SOFTHSM_MODULE missing"
        assert_eq "$SOFTHSM2_CONF" "$T/softhsm/softhsm2.conf"
        assert_file_mode "$T/pin" 600
        assert_eq "$(cat "$T/pin")" 4321 "\$T/pin holds the latest token's PIN"
        assert_eq "$(cat "$T/softhsm/ca.pin")" 1234
        local slots
        slots=$(run_ok pkcs11-tool --module "$SOFTHSM_MODULE" -L)
        assert_contains "$slots" "token label        : ca"
        assert_contains "$slots" "token label        : dev"
        # Each PIN opens its own token.
        run_ok pkcs11-tool --module "$SOFTHSM_MODULE" --token-label dev \
                --login --pin 4321 -O >/dev/null
        child dup_label <<<'softhsm_init x; softhsm_init x'
        child_must_fail dup_label "token 'x' already exists"
}

# The EK certificate must come from the test's private local CA.
check_ek_cert() {
        local tcti=$1 ca=$SWTPM_DIR/localca
        tpm2_nvread -T "$tcti" -C o 0x1c00002 -o "$T/ek.der" 2>/dev/null ||
                fail "no RSA EK certificate in NV on $tcti"
        openssl x509 -inform DER -in "$T/ek.der" -out "$T/ek.pem"
        run_ok openssl verify -partial_chain -CAfile "$ca/issuercert.pem" "$T/ek.pem" >/dev/null
}

test_swtpm() {
        local i
        swtpm_init 2
        assert_eq "${#TCTIS[@]}" 2 "two TCTIs"
        [ "${TCTIS[0]}" != "${TCTIS[1]}" ] || fail "both TPMs on one port"
        assert_eq "$HWID_TCTI" "${TCTIS[0]}"
        assert_eq "$(cat "$SWTPM_DIR/tcti.list")" "$(printf '%s\n' "${TCTIS[@]}")"
        [ -s "$SWTPM_DIR/localca/signkey.pem" ] || fail "local CA not under $SWTPM_DIR"
        check_ek_cert "${TCTIS[0]}"
        check_ek_cert "${TCTIS[1]}"

        assert_no_transient
        # A leaked transient object must be caught, naming TPM and handle.
        run_ok tpm2_createprimary -T "${TCTIS[1]}" -C o -c "$T/p.ctx" >/dev/null
        child leak <<<"assert_no_transient '${TCTIS[0]}' '${TCTIS[1]}'"
        child_must_fail leak "TPM ${TCTIS[1]} left with handles: handles-transient: 0x80000000"
        run_ok tpm2_flushcontext -T "${TCTIS[1]}" -t
        # So must a session left in the TPM.
        run_ok tpm2_startauthsession -T "${TCTIS[0]}" -S "$T/s.ctx"
        child session <<<"assert_no_transient '${TCTIS[0]}'"
        child_must_fail session "TPM ${TCTIS[0]} left with handles: handles-saved-session"
        run_ok tpm2_flushcontext -T "${TCTIS[0]}" -s
        assert_no_transient

        # The EXIT trap stops a child test's swtpms (by PID), and its
        # watchdog goes too.
        local pid watchdog tdir
        child swtpm_child <<<'swtpm_init 1; echo "$(cat "$SWTPM_DIR/tpm0/swtpm.pid") $_LIB_WATCHDOG"'
        child_rc swtpm_child 0
        read -r pid watchdog <"$T/swtpm_child.out"
        wait_gone "$pid"
        wait_gone "$watchdog"

        # A test killed outright (meson's timeout ends with SIGKILL) runs no
        # trap: the watchdog must still stop its swtpms and remove its $T.
        child swtpm_killed <<<'swtpm_init 1; echo "$(cat "$SWTPM_DIR/tpm0/swtpm.pid") $T"; kill -KILL $$'
        child_rc swtpm_killed 137
        read -r pid tdir <"$T/swtpm_killed.out"
        wait_gone "$pid"
        for ((i = 0; i < 30; i++)); do
                [ -e "$tdir" ] || break
                sleep 0.1
        done
        [ ! -e "$tdir" ] || fail "watchdog did not remove $tdir"
}

# libfaketime's semaphore and shared memory, left behind by a process
# killed on the test clock, are swept once their process is gone; a live
# one's stay (a later process given the dead one's PID would otherwise die
# at its start: "shm_open failed: File exists").
test_faketime_sweep() {
        local live dead
        test_clock
        "${CLOCK[@]}" sleep 60 &
        live=$!
        "${CLOCK[@]}" sleep 60 &
        dead=$!
        for _ in $(seq 50); do
                [ -e "/dev/shm/faketime_shm_$live" ] && [ -e "/dev/shm/faketime_shm_$dead" ] && break
                sleep 0.1
        done
        [ -e "/dev/shm/faketime_shm_$dead" ] || fail "libfaketime made no shared memory for pid $dead"
        kill -KILL "$dead"
        wait "$dead" 2>/dev/null || true
        [ -e "/dev/shm/faketime_shm_$dead" ] || fail "a killed process's shared memory went by itself"
        _lib_faketime_sweep
        [ ! -e "/dev/shm/faketime_shm_$dead" ] || fail "the sweep left a dead process's shared memory"
        [ ! -e "/dev/shm/sem.faketime_sem_$dead" ] || fail "the sweep left a dead process's semaphore"
        [ -e "/dev/shm/faketime_shm_$live" ] || fail "the sweep took a live process's shared memory"
        kill -TERM "$live"
        wait "$live" 2>/dev/null || true
        _lib_faketime_sweep
}

test_no_private_keys() {
        mkdir -p "$T/keys"
        printf -- '-----BEGIN TSS2 PRIVATE KEY-----\nAA==\n-----END TSS2 PRIVATE KEY-----\n' \
                >"$T/keys/device.tss2.pem"
        no_private_keys_in "$T/keys"
        # The swtpm local CA's keys are fixtures, not hwid's: ignored.
        no_private_keys_in "$T"
        local kind
        for kind in "" "EC " "RSA " "ENCRYPTED "; do
                mkdir -p "$T/bad"
                printf -- '-----BEGIN %sPRIVATE KEY-----\nAA==\n' "$kind" >"$T/bad/k.pem"
                child "badkey${kind% }" <<<"no_private_keys_in '$T/bad'"
                child_must_fail "badkey${kind% }" "unwrapped private key(s) in: $T/bad/k.pem"
        done
}

test_assertions
test_expect_exit
test_exit_trap
test_skip_rules
test_ports
test_ports_side_by_side
test_port_range
test_softhsm
test_swtpm
test_no_private_keys
test_faketime_sweep
echo "selftest-lib: all checks passed"
