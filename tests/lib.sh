# shellcheck shell=bash
# tests/lib.sh — sourced by every integration test (bash).
#
#   source "$(dirname "$0")/../lib.sh"
#
# Gives the test strict mode, a private temporary directory $T, SoftHSM2
# tokens and swtpm instances of its own, assertions, and an EXIT trap that
# kills every process the test registered (by PID, never by name), stops its
# swtpms and removes $T — whether the test passes or fails.
#
# Hardware (swtpm, SoftHSM2) is required: when a tool is missing the test
# fails, because CI installs everything and nothing may skip there. With
# HWID_ALLOW_SKIP=1 it exits 77 instead, which meson reports as a skip.
#
# Note on subshells: fail() exits the current shell. Inside $(...) or (...)
# that is the subshell only; set -e then stops the test at the assignment
# (but not inside `local x=$(...)`, which hides the status — declare first).

set -euo pipefail
set -E                  # ERR trap also fires inside functions

# --- environment ------------------------------------------------------------

_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
: "${SRCDIR:=$(cd "$_LIB_DIR/.." && pwd)}"

_lib_default_builddir() {
        local d
        for d in "$SRCDIR/build" "$SRCDIR/build-asan"; do
                [ -d "$d" ] && { echo "$d"; return; }
        done
        echo "$SRCDIR/build"
}

# First existing candidate, else the first one (so errors name a real path).
_lib_default_bin() {
        local c
        for c in "$@"; do
                [ -x "$c" ] && { echo "$c"; return; }
        done
        echo "$1"
}

: "${BUILDDIR:=$(_lib_default_builddir)}"
: "${HWID:=$(_lib_default_bin "$BUILDDIR/cli/hwid" "$BUILDDIR/hwid")}"
: "${HWIDD:=$(_lib_default_bin "$BUILDDIR/service/hwidd" "$BUILDDIR/hwidd")}"
export SRCDIR BUILDDIR HWID HWIDD

# A test must never reach the developer's real TPM or HSM by accident: only
# the instances this library starts are configured.
unset HWID_TCTI TPM2TOOLS_TCTI TPM2OPENSSL_TCTI SOFTHSM2_CONF

TEST_NAME=$(basename "$0" .sh)
T=$(mktemp -d "${TMPDIR:-/tmp}/hwid-test.$TEST_NAME.XXXXXX")

_LIB_PID=$BASHPID       # the cleanup runs in the test's own shell only
_PIDS=()                # processes to kill at exit
_LOGS=()                # files whose tail helps when the test fails
_SWTPM_DIRS=()          # swtpm-start directories to stop at exit
TCTIS=()                # TCTI strings of every swtpm started, in order

# --- cleanup ----------------------------------------------------------------

# Prints where the test is: the first stack frame outside this file.
_lib_where() {
        local i
        for ((i = 1; i < ${#BASH_SOURCE[@]}; i++)); do
                if [ "${BASH_SOURCE[$i]}" != "${BASH_SOURCE[0]}" ]; then
                        echo "  at ${BASH_SOURCE[$i]}:${BASH_LINENO[$((i - 1))]}"
                        return
                fi
        done
}

_lib_on_err() {
        local rc=$1 line=$2 cmd=$3
        echo "FAIL: command exited $rc at ${BASH_SOURCE[1]:-$0}:$line: $cmd" >&2
}
trap '_lib_on_err $? $LINENO "$BASH_COMMAND"' ERR

_lib_is_alive() {
        local state
        state=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
        [ -n "$state" ] && [ "$state" != Z ]  # a zombie is as good as gone
}

# TERM every tracked process, KILL what is left after 3 s, reap our children.
_lib_kill_tracked() {
        local pid i alive
        [ ${#_PIDS[@]} -gt 0 ] || return 0
        for pid in "${_PIDS[@]}"; do
                _lib_is_alive "$pid" && kill -TERM "$pid" 2>/dev/null
        done
        for ((i = 0; i < 30; i++)); do
                alive=0
                for pid in "${_PIDS[@]}"; do
                        _lib_is_alive "$pid" && alive=1
                done
                [ $alive = 0 ] && break
                sleep 0.1
        done
        for pid in "${_PIDS[@]}"; do
                if _lib_is_alive "$pid"; then
                        echo "lib.sh: pid $pid ignored TERM; killing" >&2
                        kill -KILL "$pid" 2>/dev/null
                fi
                wait "$pid" 2>/dev/null  # reap it if it is our child
        done
}

_lib_stop_swtpms() {
        local d
        for d in "${_SWTPM_DIRS[@]}"; do
                [ -d "$d" ] && "$SRCDIR/swtpm/swtpm-stop" "$d"
        done
}

_lib_dump_logs() {
        local f
        for f in "${_LOGS[@]}"; do
                [ -f "$f" ] || continue
                echo "----- last 40 lines of $f -----" >&2
                tail -n 40 "$f" >&2
        done
        [ ${#_LOGS[@]} -eq 0 ] || echo "----- end of logs -----" >&2
}

_lib_on_exit() {
        local rc=$?
        [ "$BASHPID" = "$_LIB_PID" ] || return 0
        set +eu
        trap - ERR
        # swtpms first: they left our process group (daemons), so they are
        # the only thing that outlives meson's KILL of the group on timeout.
        _lib_stop_swtpms
        if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then
                echo "$TEST_NAME: FAILED (exit $rc)" >&2
                _lib_dump_logs
        fi
        _lib_kill_tracked
        [ "${_LIB_FAKETIME_USED:-0}" = 0 ] || _lib_faketime_sweep
        _lib_port_release
        if [ "${KEEP_TMP:-0}" = 1 ]; then
                echo "$TEST_NAME: kept $T" >&2
        else
                rm -rf "$T"
        fi
        kill "$_LIB_WATCHDOG" 2>/dev/null
        exit $rc
}
trap _lib_on_exit EXIT
# Turn signals (meson's timeout sends TERM) into an exit so cleanup runs.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# Safety net for when the cleanup above cannot run (SIGKILL; meson sends it
# 0.5 s after TERM on a timeout): a watchdog in its own session waits for
# this shell to die, then stops the swtpms and removes $T. Its output goes to
# /dev/null so that it does not hold meson's pipes open.
_lib_start_watchdog() {
        # shellcheck disable=SC2016  # expanded by the watchdog's shell
        setsid bash -c '
                while kill -0 "$1" 2>/dev/null; do sleep 1; done
                for d in "$2"/swtpm*/; do
                        [ -d "$d" ] && "$3/swtpm/swtpm-stop" "$d"
                done
                [ "$4" = 1 ] || rm -rf "$2"
        ' lib-watchdog "$_LIB_PID" "$T" "$SRCDIR" "${KEEP_TMP:-0}" \
                </dev/null >/dev/null 2>&1 &
        _LIB_WATCHDOG=$!
}
_lib_start_watchdog

# --- process and log tracking ----------------------------------------------

# track_pid PID... — kill these at exit (TERM, then KILL).
track_pid() {
        _PIDS+=("$@")
}

# track_log FILE... — show the tail of these if the test fails.
track_log() {
        _LOGS+=("$@")
}

# start_bg LOG CMD... — run CMD in the background, stdout+stderr to LOG;
# tracks both; the PID is left in $BG_PID.
start_bg() {
        local log=$1
        shift
        # The log exists before we return: the background job opens it
        # only once it runs, and callers read it at once.
        : >"$log"
        "$@" >>"$log" 2>&1 </dev/null &
        BG_PID=$!
        track_pid "$BG_PID"
        track_log "$log"
}

# --- assertions ---------------------------------------------------------------

# fail MSG — end the test with MSG and where it happened.
fail() {
        echo "FAIL: $*" >&2
        _lib_where >&2
        exit 1
}

# assert_eq A B MSG — A and B must be the same string.
assert_eq() {
        [ "$1" = "$2" ] || fail "${3:-assert_eq}: '$1' != '$2'"
}

# assert_contains HAYSTACK NEEDLE MSG — NEEDLE must occur in HAYSTACK.
assert_contains() {
        [[ $1 == *"$2"* ]] ||
                fail "${3:-assert_contains}: '$2' not found in:"$'\n'"$(head -n 40 <<<"$1")"
}

# assert_not_contains HAYSTACK NEEDLE MSG — NEEDLE must not occur (secrets).
assert_not_contains() {
        [[ $1 != *"$2"* ]] || fail "${3:-assert_not_contains}: '$2' found where it must not be"
}

# assert_file_mode FILE MODE — octal permission bits, e.g. 600 or 0600.
assert_file_mode() {
        local actual
        [ -e "$1" ] || fail "$1 does not exist"
        actual=$(stat -c %a "$1")
        [ $((8#$actual)) -eq $((8#$2)) ] || fail "$1 has mode $actual, expected $2"
}

_lib_show_last() {
        echo "--- stdout ---" >&2
        head -n 40 "$T/last.out" >&2
        echo "--- stderr ---" >&2
        head -n 40 "$T/last.err" >&2
        echo "--------------" >&2
}

# expect_exit CODE STDERR_SUBSTRING [--multiline] -- CMD...
# Runs CMD (stdout to $T/last.out, stderr to $T/last.err). Fails unless it
# exits CODE and stderr contains the substring (empty: anything). A failing
# CMD must explain itself in exactly one non-empty stderr line, unless
# --multiline is given.
expect_exit() {
        local want=$1 needle=$2 multiline=0 rc=0 cmd lines
        shift 2
        [ "${1:-}" = --multiline ] && { multiline=1; shift; }
        if [ "${1:-}" != -- ] || [ $# -lt 2 ]; then
                fail "usage: expect_exit CODE STDERR_SUBSTRING [--multiline] -- CMD..."
        fi
        shift
        cmd=$(printf '%q ' "$@")
        "$@" >"$T/last.out" 2>"$T/last.err" || rc=$?
        if [ "$rc" != "$want" ]; then
                _lib_show_last
                fail "$cmd: exit code $rc, expected $want"
        fi
        if [ -n "$needle" ] && ! grep -qF -- "$needle" "$T/last.err"; then
                _lib_show_last
                fail "$cmd: stderr lacks '$needle'"
        fi
        if [ "$want" != 0 ] && [ $multiline = 0 ]; then
                lines=$(grep -c '[^[:space:]]' "$T/last.err" || true)
                if [ "$lines" != 1 ]; then
                        _lib_show_last
                        fail "$cmd: stderr has $lines non-empty lines, expected one error line"
                fi
        fi
}

# run_ok CMD... — CMD must succeed; its stdout passes through (so
# out=$(run_ok ...) works), its stderr is shown (in full on failure).
run_ok() {
        local rc=0
        "$@" 2>"$T/last.err" || rc=$?
        if [ $rc -ne 0 ]; then
                echo "--- stderr of failed command ---" >&2
                cat "$T/last.err" >&2
                fail "$(printf '%q ' "$@"): exit code $rc"
        fi
        cat "$T/last.err" >&2
}

# json_get FILE|JSON|- FILTER — the one JSON reader of the tests: FILTER (jq:
# .a.b, .list[0], .list | length, "\(.a) \(.b)") applied to a JSON
# document, named by its file, given as the text itself (it starts with {
# or [), or read from standard input (-; one document after another is
# fine). Strings print as they are (no quotes, escapes undone), every other
# value as JSON (null, true, 12, {...}), each result on a line of its own.
# A document that is not JSON fails (exit status non-zero, a message).
json_get() {
        local src=$1 filter=$2
        [ $# = 2 ] || fail "usage: json_get FILE|JSON|- FILTER"
        if [ "$src" = - ]; then
                jq -rc "$filter"
        elif [[ $src =~ ^[[:space:]]*[\{\[] ]]; then
                jq -rc "$filter" <<<"$src"
        else
                jq -rc "$filter" <"$src"
        fi
}

# b64url_decode TEXT — the bytes TEXT encodes in base64url (RFC 4648 §5),
# padded or not (a JWS's parts).
b64url_decode() {
        local s=${1//-/+}
        s=${s//_//}
        while [ $((${#s} % 4)) != 0 ]; do s+='='; done
        base64 -d <<<"$s"
}

# no_private_keys_in DIR... — no file may hold an unwrapped PEM private key.
# TSS2 PRIVATE KEY blobs are fine: they are wrapped by the TPM. The swtpm
# local CA's own keys (test fixtures under $T/swtpm*/localca) are ignored.
no_private_keys_in() {
        local d f sd hits=()
        for d in "$@"; do
                [ -d "$d" ] || fail "no_private_keys_in: $d is not a directory"
                while IFS= read -r f; do
                        for sd in "${_SWTPM_DIRS[@]}"; do
                                [[ $f == "$sd/localca/"* ]] && continue 2
                        done
                        hits+=("$f")
                done < <(grep -rlaE -D skip -- \
                        '-----BEGIN (EC |RSA |DSA |ENCRYPTED |OPENSSH |)PRIVATE KEY-----' "$d" || true)
        done
        [ ${#hits[@]} -eq 0 ] || fail "unwrapped private key(s) in: ${hits[*]}"
}

# --- tools and hardware -------------------------------------------------------

# missing_hardware WHAT — the rule for absent hardware emulation: fail (CI
# must never skip), or skip with exit 77 when HWID_ALLOW_SKIP=1.
missing_hardware() {
        if [ "${HWID_ALLOW_SKIP:-0}" = 1 ]; then
                echo "SKIP: $TEST_NAME needs $*" >&2
                exit 77
        fi
        fail "missing $*: run scripts/install-deps.sh (or set HWID_ALLOW_SKIP=1 to skip)"
}

# require_tools TOOL... — every TOOL must be on PATH (else missing_hardware).
require_tools() {
        local t missing=()
        for t in "$@"; do
                command -v "$t" >/dev/null 2>&1 || missing+=("$t")
        done
        [ ${#missing[@]} -eq 0 ] || missing_hardware "${missing[*]}"
}

# --- clocks -------------------------------------------------------------------

# _lib_faketime — sets _LIB_FAKETIME to the words that run a command under
# libfaketime, the rest of its settings to follow (FAKETIME=... or a file).
# Only the wall clock moves. ASan's allocator must not read the clock:
# libfaketime, initialising inside that read, would deadlock on the
# allocator's lock; and gcc's ASan, a shared library, would refuse to come
# after libfaketime.
_LIB_FAKETIME_ASAN=allocator_release_to_os_interval_ms=-1:verify_asan_link_order=0
_lib_faketime() {
        local lib
        lib=$(compgen -G '/usr/lib/*/faketime/libfaketimeMT.so.1' | head -n 1) ||
                missing_hardware "libfaketime (package faketime)"
        _LIB_FAKETIME=(env "LD_PRELOAD=$lib" FAKETIME_DONT_FAKE_MONOTONIC=1)
        _LIB_FAKETIME_USED=1
        _lib_faketime_sweep
}

# _lib_faketime_sweep — libfaketime (0.9.10) makes a semaphore and a shared
# memory object named by its process's PID (/dev/shm/sem.faketime_sem_PID,
# /dev/shm/faketime_shm_PID) and removes them only when that process exits
# normally. One killed leaves them behind, and a later process given the
# same PID then dies at its start ("shm_open failed: File exists"). Removes
# those whose process is gone; a live one's are left alone.
_lib_faketime_sweep() {
        local f pid
        for f in /dev/shm/faketime_shm_* /dev/shm/sem.faketime_sem_*; do
                [ -e "$f" ] || continue
                pid=${f##*_}
                [[ $pid =~ ^[0-9]+$ ]] || continue
                kill -0 "$pid" 2>/dev/null || rm -f "$f"
        done
}

# wrong_clock OFFSET — sets WRONG_CLOCK to the words that run a command with
# its clock off by OFFSET ("-10m", "+2h": libfaketime's FAKETIME), e.g.
#   start_bg "$log" "${WRONG_CLOCK[@]}" "$HWIDD" --config "$CFG"
# (env execs the command: its PID is the one tracked).
wrong_clock() {
        _lib_faketime
        # shellcheck disable=SC2034  # used by the tests
        WRONG_CLOCK=("${_LIB_FAKETIME[@]}" "ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}$_LIB_FAKETIME_ASAN"
                "FAKETIME=$1")
}

# The test's clock: time passes for the processes started on it when the
# test says so, instead of the test waiting for it (a certificate's expiry,
# a renewal window, the agent's next renewal). test_clock sets CLOCK to the
# words that run a command on it (libfaketime reading its offset from
# $T/clock at every call), e.g.
#   start_bg "$log" "${CLOCK[@]}" "$HWIDD" --config "$CFG"
# and exports the ASAN_OPTIONS that such a process needs. Until test_clock
# is called, CLOCK is empty: the real clock. clock_advance and clock_past
# move it forward for every process on it at once; clock_wake wakes one
# that sleeps until a moment. The moves must stay below the CA's backdating
# (clock_skew, 5 minutes by default) in all, so that what it issues on the
# test's clock is valid on the real one too. File times do not move with
# it: a file written on it has the real time (libfaketime shifts what
# stat() says, but not stat64(), which hwid calls).
CLOCK=()
test_clock() {
        _lib_faketime
        echo +0 >"$T/clock"
        CLOCK=("${_LIB_FAKETIME[@]}" "FAKETIME_TIMESTAMP_FILE=$T/clock" FAKETIME_NO_CACHE=1)
        export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}$_LIB_FAKETIME_ASAN
}

# clock_offset — how far the test's clock is ahead of the real one (s).
clock_offset() {
        local o
        [ ${#CLOCK[@]} -gt 0 ] || { echo 0; return; }
        o=$(cat "$T/clock")
        echo "${o#+}"
}

# clock_now — the test's clock, in seconds since the epoch.
clock_now() {
        echo $(($(date +%s) + $(clock_offset)))
}

# clock_advance SECONDS — the test's clock moves forward (a new file put in
# place with rename: a process never reads half of it).
clock_advance() {
        [ ${#CLOCK[@]} -gt 0 ] || fail "clock_advance: no test_clock"
        echo "+$(($(clock_offset) + $1))" >"$T/clock.new"
        mv -f "$T/clock.new" "$T/clock"
}

# clock_past EPOCH — the test's clock moves to one second past EPOCH, if it
# is not there yet.
clock_past() {
        local d
        d=$(($1 + 1 - $(clock_now)))
        [ "$d" -le 0 ] || clock_advance "$d"
}

# clock_nudge PID — PID, if it sleeps until a moment of the wall clock
# (hwid agent between two renewals), reads the clock again and acts on it:
# a stop and a continue end such a wait early (EINTR, signal(7)). Only while
# it sleeps in a timed wait (the kernel's wchan says where it waits), since
# other system calls could be cut short too.
clock_nudge() {
        local where
        where=$(cat "/proc/$1/wchan" 2>/dev/null) || where=
        case $where in
        *sigtimedwait* | *nanosleep*) kill -STOP "$1" 2>/dev/null && kill -CONT "$1" 2>/dev/null ;;
        esac
        return 0
}

# clock_wake PID FILE PATTERN [TIMEOUT_S=20] — clock_nudge PID again and
# again (it may have read the clock just before it moved) until FILE has a
# line matching PATTERN (grep -E).
clock_wake() {
        local pid=$1 file=$2 pat=$3 timeout=${4:-20} deadline
        deadline=$((SECONDS + timeout))
        until grep -qE "$pat" "$file"; do
                [ $SECONDS -lt $deadline ] || fail "after ${timeout}s, no '$pat' in $file: $(tail -n 5 "$file")"
                _lib_is_alive "$pid" || fail "$file: the process exited: $(tail -n 5 "$file")"
                clock_nudge "$pid"
                sleep 0.1
        done
}

# --- ports --------------------------------------------------------------------

_lib_port_listening() {
        [ -n "$(ss -Hltn "( sport = :$1 )" 2>/dev/null)" ]
}

# The test port range: HWID_TEST_PORT_COUNT (default 22528) ports from
# HWID_TEST_PORT_BASE (default 10240), i.e. 10240-32767, below the kernel's
# ephemeral ports. swtpm/swtpm-start takes its lower half, free_port the
# upper half. Give two CI jobs sharing a host different ranges.
_lib_port_range() {
        local base=${HWID_TEST_PORT_BASE:-10240} count=${HWID_TEST_PORT_COUNT:-22528}
        if ! [[ $base =~ ^[1-9][0-9]{0,4}$ && $count =~ ^[1-9][0-9]{0,4}$ ]] || [ "$base" -lt 1024 ] ||
                [ "$count" -lt 64 ] || [ $((base + count)) -gt 65536 ]; then
                fail "HWID_TEST_PORT_BASE ($base) and HWID_TEST_PORT_COUNT ($count) must give a range" \
                        "of at least 64 ports within 1024-65535"
        fi
        echo "$((base + count / 2)) $((count - count / 2))"
}

# Ports that free_port handed out are claimed until their test exits, in
# a directory every test on the machine shares (a file per port holding the
# test's PID, written under a lock): two tests running side by side could
# otherwise both be given a port nobody listened on yet, and the second
# to bind it fail with "address in use". A claim whose test is gone
# (killed before its cleanup) is taken over.  One directory per user: a
# test that cannot use it claims nothing, as before.
_LIB_PORT_CLAIMS=${TMPDIR:-/tmp}/hwid-test-ports.$EUID

# _lib_ports_locked CMD... — CMD under the claims' lock, its status; 0
# without a usable claims directory (nothing is claimed then).
_lib_ports_locked() {
        local fd rc
        mkdir -p "$_LIB_PORT_CLAIMS" 2>/dev/null && { exec {fd}>>"$_LIB_PORT_CLAIMS/.lock"; } 2>/dev/null || return 0
        flock "$fd"
        rc=0
        "$@" || rc=$?
        exec {fd}>&-
        return $rc
}

# _lib_port_take PORT — (under the lock) PORT for this test, unless a test
# that is alive holds it.
_lib_port_take() {
        local f=$_LIB_PORT_CLAIMS/$1 owner
        owner=$(cat "$f" 2>/dev/null) || owner=
        [ -z "$owner" ] || ! _lib_is_alive "$owner" || return 1
        echo "$_LIB_PID" >"$f"
}

# _lib_port_drop_all — (under the lock) this test's claims go.
_lib_port_drop_all() {
        local p
        while read -r p; do
                [ "$(cat "$_LIB_PORT_CLAIMS/$p" 2>/dev/null)" != "$_LIB_PID" ] || rm -f "$_LIB_PORT_CLAIMS/$p"
        done <"$T/.ports"
}

# _lib_port_claim PORT — true when this test now holds PORT.
_lib_port_claim() {
        _lib_ports_locked _lib_port_take "$1"
}

# _lib_port_release — this test's claims go (at its exit).
_lib_port_release() {
        [ -f "$T/.ports" ] || return 0
        _lib_ports_locked _lib_port_drop_all
}

# free_port — print a loopback TCP port nobody listens on, from the upper
# half of the test port range (above the ports swtpm-start uses), claimed
# for this test until it exits; ports already handed out in this test are
# not reused (recorded in a file, since free_port usually runs in $(...)).
free_port() {
        local p i first span
        require_tools ss flock
        read -r first span < <(_lib_port_range) || fail "free_port: no port range"
        touch "$T/.ports"
        for ((i = 0; i < 200; i++)); do
                p=$((first + (RANDOM * 32768 + RANDOM) % span))
                grep -qx "$p" "$T/.ports" && continue
                _lib_port_listening "$p" && continue
                _lib_port_claim "$p" || continue
                echo "$p" >>"$T/.ports"
                echo "$p"
                return 0
        done
        fail "free_port: no free port found"
}

# wait_for_port PORT [TIMEOUT_S=10] [PID] — wait until something listens on
# PORT; with PID, fail at once if that process dies first.
wait_for_port() {
        local port=$1 timeout=${2:-10} pid=${3:-} deadline
        deadline=$((SECONDS + timeout))
        until _lib_port_listening "$port"; do
                if [ -n "$pid" ] && ! _lib_is_alive "$pid"; then
                        fail "process $pid exited before listening on port $port"
                fi
                [ $SECONDS -lt $deadline ] || fail "nothing listens on port $port after ${timeout}s"
                sleep 0.05
        done
}

# --- SoftHSM2 -----------------------------------------------------------------

_lib_find_softhsm_module() {
        local c
        for c in "${SOFTHSM_MODULE:-}" \
                /usr/lib/*-linux-gnu*/softhsm/libsofthsm2.so \
                /usr/lib/softhsm/libsofthsm2.so \
                /usr/lib64/softhsm/libsofthsm2.so \
                /usr/lib64/pkcs11/libsofthsm2.so \
                /usr/local/lib/softhsm/libsofthsm2.so; do
                [ -n "$c" ] && [ -f "$c" ] && { echo "$c"; return 0; }
        done
        return 1
}

# softhsm_init [LABEL=ca] [PIN=1234] [SO_PIN=5678] — a fresh token in a
# SoftHSM2 store private to this test. Exports SOFTHSM2_CONF and
# SOFTHSM_MODULE; writes the PIN to $T/pin (latest token; mode 0600) and to
# $T/softhsm/LABEL.pin. Call again with another label for more tokens.
softhsm_init() {
        local label=${1:-ca} pin=${2:-1234} so_pin=${3:-5678}
        local dir=$T/softhsm
        require_tools softhsm2-util
        SOFTHSM_MODULE=$(_lib_find_softhsm_module) ||
                missing_hardware "the SoftHSM2 module libsofthsm2.so"
        export SOFTHSM_MODULE
        if [ ! -f "$dir/softhsm2.conf" ]; then
                mkdir -p "$dir/tokens"
                cat >"$dir/softhsm2.conf" <<EOF
directories.tokendir = $dir/tokens
objectstore.backend = file
log.level = ERROR
slots.removable = false
EOF
        fi
        export SOFTHSM2_CONF=$dir/softhsm2.conf
        [ ! -e "$dir/$label.pin" ] || fail "softhsm_init: token '$label' already exists"
        softhsm2-util --init-token --free --label "$label" \
                --pin "$pin" --so-pin "$so_pin" >"$dir/init-$label.log" 2>&1 || {
                cat "$dir/init-$label.log" >&2
                fail "softhsm2-util could not initialize token '$label'"
        }
        (umask 077 && printf '%s' "$pin" >"$dir/$label.pin" && printf '%s' "$pin" >"$T/pin")
        chmod 600 "$T/pin" "$dir/$label.pin"
}

# --- swtpm --------------------------------------------------------------------

# swtpm_init [--log] [N=1] — start N software TPMs (EK + EK certificate)
# under $T/swtpm (then $T/swtpm1, ... on later calls). Appends their TCTI
# strings to TCTIS; exports HWID_TCTI=${TCTIS[0]} (and TPM2TOOLS_TCTI, so
# tpm2-tools in tests talk to it too) and SWTPM_DIR (latest directory; its
# localca/ holds the EK issuer). --log records every TPM command in
# $SWTPM_DIR/tpmI/swtpm.log.
swtpm_init() {
        local opts=() n dir out
        [ "${1:-}" = --log ] && { opts+=(--log); shift; }
        n=${1:-1}
        require_tools swtpm swtpm_setup swtpm_localca tpm2_getcap ss
        dir=$T/swtpm
        [ ${#_SWTPM_DIRS[@]} -eq 0 ] || dir=$T/swtpm${#_SWTPM_DIRS[@]}
        _SWTPM_DIRS+=("$dir")   # before starting: a half start is stopped too
        out=$("$SRCDIR/swtpm/swtpm-start" --count "$n" --dir "$dir" "${opts[@]}" \
                2>"$T/swtpm-start.err") || {
                cat "$T/swtpm-start.err" >&2
                fail "swtpm-start could not start $n TPM(s)"
        }
        mapfile -t -O ${#TCTIS[@]} TCTIS <<<"$out"
        export HWID_TCTI=${TCTIS[0]}
        export TPM2TOOLS_TCTI=$HWID_TCTI
        export SWTPM_DIR=$dir
}

# swtpm_power_cut [I=0] — a power cut: TPM I of $SWTPM_DIR is killed with
# SIGKILL (no TPM2_Shutdown, as when the power goes) and started again on
# the same state and port. swtpm's startup-clear flag then sends
# TPM2_Startup, as a booting machine's firmware does.
swtpm_power_cut() {
        local d=$SWTPM_DIR/tpm${1:-0} pid args
        pid=$(tr -cd '0-9' <"$d/swtpm.pid")
        [ -n "$pid" ] && _lib_is_alive "$pid" || fail "swtpm_power_cut: tpm${1:-0} is not running"
        mapfile -d '' args <"/proc/$pid/cmdline"
        kill -KILL "$pid"
        while _lib_is_alive "$pid"; do sleep 0.05; done
        "${args[@]}" </dev/null >"$d/restart.err" 2>&1 || fail "swtpm restart: $(cat "$d/restart.err")"
        wait_for_port "$(cat "$d/port")" 10
}

# assert_no_transient [TCTI...] — each TPM (default: every one started) has
# no transient objects and no loaded or saved sessions left (invariant 5:
# swtpm has no resource manager, so leaks pile up until TPM_RC_OBJECT_MEMORY).
assert_no_transient() {
        local tctis=("$@") tcti cap out left
        [ $# -gt 0 ] || tctis=("${TCTIS[@]}")
        [ ${#tctis[@]} -gt 0 ] || fail "assert_no_transient: no TPM started"
        for tcti in "${tctis[@]}"; do
                left=
                for cap in handles-transient handles-loaded-session handles-saved-session; do
                        # swtpm serves one client at a time: a holder that
                        # never lets go would hang us, hence the timeout.
                        out=$(timeout 10 tpm2_getcap -T "$tcti" "$cap" 2>&1) ||
                                fail "tpm2_getcap $cap on TPM $tcti failed (busy or down?): $out"
                        [ -z "$out" ] || left+=" $cap:$(tr -d '\n-' <<<"$out")"
                done
                [ -z "$left" ] || fail "TPM $tcti left with handles:$left"
        done
}
