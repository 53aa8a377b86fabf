#!/bin/bash
# bench/compare.sh — hwidd's issuance rate, two versions side by side:
#
#   bench/compare.sh REV_A REV_B [--clients N] [--rounds R] [--duration S]
#                    [--quick] [--keep DIR]
#
# Builds each revision (any git revision: a commit, a branch, main) in
# release (--buildtype=release -Dbench=true -Db_sanitize=none) from a
# `git worktree add --detach` checkout in a temporary directory, and sets
# up for each its own CA in a SoftHSM2 token with that revision's own
# `hwid ca init`, its own many-use bootstrap token and its own hwidd on
# 127.0.0.1, configured as bench/run.sh section 1 does.  Both hwidd run
# at once but only one is loaded at a time: after a warm-up run of each,
# R rounds of A then B (A, B, A, B, ...), each run N clients
# (bench/load --mode hwid, keep-alive HTTPS, CSRs made beforehand, CNs
# of its own) for S seconds.  One load generator, REV_B's, loads both:
# only the server differs.  Prints every run's rate (with its p50, p99,
# failed requests, hwidd's CPU per issuance from /proc and the load
# average), then each revision's median rate and B's median as a
# percentage of A's.
#
#   --clients N    clients (connections) per run; default 16
#   --rounds R     runs of each revision; default 3
#   --duration S   seconds per run; default 20
#   --quick        1 round of 3 s (unless given): to try the script, not for numbers
#   --keep DIR     keep the builds in DIR (DIR/build-<commit>) and reuse them
#                  on the next call; without it they go with the temporary directory
#
# Exit status: 0 if B's median rate is at least 95% of A's (no
# regression), 1 if it is below, or if any request failed; 2 if it could
# not measure (usage, build, set-up).
# The temporary directory is under $BENCH_TMPDIR (default /var/tmp: on a
# disk, because hwidd's commits must reach it).  The worktrees are
# removed (git worktree remove --force) and every process started is
# stopped by PID when it exits, pass or fail.  Numbers are worth
# comparing only from an otherwise idle machine; the load average is
# printed at the start, per run and at the end.
set -euo pipefail

SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLK_TCK=$(getconf CLK_TCK)
CLIENTS=16
ROUNDS=
DUR=
QUICK=0
KEEP_DIR=
THRESHOLD=95
REVS=()

usage() { awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; }
usage_error() { echo "compare.sh: $* (see --help)" >&2; exit 2; }
posint() { [[ $2 =~ ^[1-9][0-9]*$ ]] || usage_error "$1 wants a positive whole number, not '$2'"; }

while [ $# -gt 0 ]; do
        case "$1" in
        -h|--help) usage; exit 0 ;;
        --quick) QUICK=1; shift ;;
        --clients|--rounds|--duration|--keep)
                [ $# -ge 2 ] || usage_error "$1 wants a value"
                case "$1" in
                --clients) posint "$1" "$2"; CLIENTS=$2 ;;
                --rounds) posint "$1" "$2"; ROUNDS=$2 ;;
                --duration) posint "$1" "$2"; DUR=$2 ;;
                --keep) KEEP_DIR=$2 ;;
                esac
                shift 2 ;;
        -*) usage_error "unknown option $1" ;;
        *) REVS+=("$1"); shift ;;
        esac
done
[ ${#REVS[@]} = 2 ] || usage_error "two revisions wanted, REV_A and REV_B"
if [ $QUICK = 1 ]; then
        ROUNDS=${ROUNDS:-1}; DUR=${DUR:-3}
else
        ROUNDS=${ROUNDS:-3}; DUR=${DUR:-20}
fi
REV_A=$(git -C "$SRCDIR" rev-parse --verify --quiet "${REVS[0]}^{commit}") || usage_error "no such revision ${REVS[0]}"
REV_B=$(git -C "$SRCDIR" rev-parse --verify --quiet "${REVS[1]}^{commit}") || usage_error "no such revision ${REVS[1]}"

W=$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/hwid-compare.XXXXXX")
PIDS=()       # processes to stop at exit
WORKTREES=()  # git worktrees to remove at exit

# --- plumbing (as bench/run.sh's) -------------------------------------------------

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FAILED: $*"; exit 2; }
# shellcheck source-path=SCRIPTDIR source=bench-lib.sh
source "$SRCDIR/bench/bench-lib.sh"

cleanup() {
        local rc=$? pid i alive wt
        set +e
        for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null; done
        for ((i = 0; i < 30; i++)); do
                alive=0
                for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
                [ $alive = 0 ] && break
                sleep 0.1
        done
        for pid in "${PIDS[@]}"; do
                kill -KILL "$pid" 2>/dev/null
                wait "$pid" 2>/dev/null
        done
        for wt in "${WORKTREES[@]}"; do
                git -C "$SRCDIR" worktree remove --force "$wt" || log "could not remove the worktree $wt"
        done
        if [ $rc -eq 2 ]; then
                log "work directory kept: $W"
        else
                rm -rf "$W"
        fi
        exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM



# median NUMBER... — the middle one (the mean of the middle two).
median() {
        printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { printf "%.1f", NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}




# --- build -------------------------------------------------------------------------

# build SHA — a release build of commit SHA in $BUILDS/build-SHA (hwidd,
# hwid, hwid-admin where the revision has it, bench/load), from a worktree.
build() {
        local sha=$1 b=$BUILDS/build-$1 src=$W/src-$1 targets=(hwidd:executable hwid:executable load:executable)
        if [ -f "$b/.compare-built" ]; then
                log "${sha:0:10}: reusing the build in $b"
                return 0
        fi
        rm -rf "$b"
        log "${sha:0:10}: worktree $src, release build in $b"
        WORKTREES+=("$src")
        git -C "$SRCDIR" worktree add --detach "$src" "$sha" >"$W/worktree-$sha.log" 2>&1 ||
                { cat "$W/worktree-$sha.log" >&2; die "git worktree add $sha"; }
        meson setup "$b" "$src" --buildtype=release -Dbench=true -Db_sanitize=none \
                >"$W/meson-setup-$sha.log" 2>&1 || { tail -30 "$W/meson-setup-$sha.log" >&2; die "meson setup $sha"; }
        # On newer revisions hwid hands `ca init` and `token create` to
        # hwid-admin, which it finds beside itself in the build tree.
        meson introspect --targets "$b" | grep -q '"name": "hwid-admin"' && targets+=(hwid-admin:executable)
        meson compile -C "$b" "${targets[@]}" >"$W/meson-compile-$sha.log" 2>&1 ||
                { tail -30 "$W/meson-compile-$sha.log" >&2; die "build $sha"; }
        touch "$b/.compare-built"
}

# --- one CA and hwidd per revision (bench/run.sh, section 1) ------------------------

# setup NAME SHA — NAME's CA in a SoftHSM2 token of its own, its config,
# a bootstrap token of 1,000,000 uses, its hwidd started; PID[NAME],
# URL[NAME], DIR[NAME].
declare -A PID URL DIR SHA
setup() {
        local name=$1 sha=$2 d=$W/$1 b=$BUILDS/build-$2 port cfg
        local -x SOFTHSM2_CONF=$d/softhsm/softhsm2.conf
        log "$name (${sha:0:10}): CA in SoftHSM2 (its own hwid ca init), hwidd"
        bench_softhsm_token "$d"
        port=$(free_port)
        "$b/cli/hwid" ca init --key "pkcs11:token=ca;object=ca-key?pin-source=file:$d/pin" \
                --subject "/CN=hwid bench CA $name" --dir "$d/ca" \
                --listen "127.0.0.1:$port" --http-listen "127.0.0.1:$(free_port)" >"$d/ca-init.log" 2>&1 ||
                { cat "$d/ca-init.log" >&2; die "$name: hwid ca init"; }
        cfg=$d/ca/hwidd.yaml
        bench_tune_config "$cfg"
        (umask 077; "$b/cli/hwid" token create --config "$cfg" --uses 1000000 --ttl 2d |
                awk '/^token:/ { print $2 }' >"$d/token")
        [ -s "$d/token" ] || die "$name: no bootstrap token"
        "$b/service/hwidd" --config "$cfg" >"$d/hwidd.log" 2>&1 </dev/null &
        PID[$name]=$!
        PIDS+=("${PID[$name]}")
        wait_port "$port" "${PID[$name]}"
        URL[$name]=https://127.0.0.1:$port
        DIR[$name]=$d
        SHA[$name]=$sha
        curl -sf --cacert "$d/ca/ca.pem" "${URL[$name]}/healthz" >/dev/null || die "$name: hwidd does not answer /healthz"
}

# --- the runs ------------------------------------------------------------------------

# run NAME PREFIX SECONDS — one load run against NAME's hwidd (CNs
# PREFIX-<i>); RUN_OUT is load's line, RUN_CPU hwidd's µs per issuance.
run() {
        local name=$1 prefix=$2 secs=$3 t0 n cap=$(($3 * 6000))
        t0=$(cpu_ticks "${PID[$name]}")
        RUN_OUT=$(HWID_TOKEN=$(cat "${DIR[$name]}/token") "$LOAD" --mode hwid --url "${URL[$name]}" \
                --cacert "${DIR[$name]}/ca/ca.pem" --connections "$CLIENTS" --requests "$cap" \
                --duration "$secs" --prefix "$prefix" 2>>"$W/load-errors.log") ||
                die "load against $name: $(tail -3 "$W/load-errors.log")"
        # While the load made its CSRs hwidd was idle: its CPU is the run's.
        n=$(kv requests "$RUN_OUT")
        RUN_CPU=$(calc "($(cpu_ticks "${PID[$name]}") - $t0) * 1000000 / $CLK_TCK / ($n > 0 ? $n : 1)")
        [ "$n" -lt "$cap" ] || log "warning: $name's run sent every CSR it had ($cap) before $secs s"
}

main() {
        local a=$REV_A b=$REV_B r name
        ulimit -n "$(ulimit -Hn)"
        if [ -n "$KEEP_DIR" ]; then
                mkdir -p "$KEEP_DIR"
                BUILDS=$(cd "$KEEP_DIR" && pwd)
        else
                BUILDS=$W
        fi
        log "A = ${REVS[0]} = $a; B = ${REVS[1]} = $b; work directory $W"
        build "$a"
        [ "$b" = "$a" ] || build "$b"
        LOAD=$BUILDS/build-$b/bench/load
        LOAD_START=$(loadavg)
        log "load average at the start: $LOAD_START ($(cut -d' ' -f1-3 /proc/loadavg))"
        setup A "$a"
        setup B "$b"
        for name in A B; do
                run "$name" "w$name" "$(( DUR < 3 ? DUR : 3 ))"
                log "warm-up $name: $(kv rate "$RUN_OUT")/s (not counted)"
        done
        declare -A RATES=() ERRORS=([A]=0 [B]=0)
        printf '%-6s %-4s %-10s %10s %8s %8s %7s %12s %6s\n' round rev commit "rate /s" "p50 ms" "p99 ms" errors "CPU µs/iss" load
        for ((r = 1; r <= ROUNDS; r++)); do
                for name in A B; do
                        run "$name" "r$r$name" "$DUR"
                        RATES[$name]+=" $(kv rate "$RUN_OUT")"
                        ERRORS[$name]=$((ERRORS[$name] + $(kv errors "$RUN_OUT")))
                        printf '%-6s %-4s %-10s %10s %8s %8s %7s %12.0f %6s\n' "$r/$ROUNDS" "$name" "${SHA[$name]:0:10}" \
                                "$(kv rate "$RUN_OUT")" "$(kv p50_ms "$RUN_OUT")" "$(kv p99_ms "$RUN_OUT")" \
                                "$(kv errors "$RUN_OUT")" "$RUN_CPU" "$(loadavg)"
                done
        done
        # shellcheck disable=SC2086 # the rates are words
        MED_A=$(median ${RATES[A]}) MED_B=$(median ${RATES[B]})
        RATIO=$(awk -v a="$MED_A" -v b="$MED_B" 'BEGIN { printf "%.1f", (a > 0 ? 100 * b / a : 0) }')
        echo
        echo "A ${REVS[0]} ($a): median $MED_A/s (runs:${RATES[A]}), failed requests ${ERRORS[A]}"
        echo "B ${REVS[1]} ($b): median $MED_B/s (runs:${RATES[B]}), failed requests ${ERRORS[B]}"
        echo "B/A: $RATIO% at $CLIENTS clients, $ROUNDS × $DUR s each; load average $LOAD_START at the start, $(loadavg) at the end"
        if [ $((ERRORS[A] + ERRORS[B])) -gt 0 ]; then
                echo "FAIL: requests failed"
                return 1
        fi
        if awk -v r="$RATIO" -v t="$THRESHOLD" 'BEGIN { exit !(r >= t) }'; then
                echo "PASS: B is at least $THRESHOLD% of A"
        else
                echo "FAIL: B is below $THRESHOLD% of A"
                return 1
        fi
}

main
