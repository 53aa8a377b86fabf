#!/bin/bash
# test.sh — the one command that tests hwid (README, CI): installs missing
# dependencies, builds with AddressSanitizer + UBSan and -Werror in
# build-asan/ (clang) and runs every test; then builds again with gcc's
# sanitizers in build-gcc/ and runs the unit tests and the smoke test
# there. Extra arguments go to `meson test` (e.g. a test name); with them
# only build-asan runs, unless HWID_TEST_GCC=1 (then build-gcc runs the
# same tests too). HWID_TEST_GCC=0 never runs build-gcc. Exit code:
# non-zero if any run failed. HWID_TEST_JOBS: tests at a time (default 6).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD=build-asan
# clang, so that the libFuzzer targets build and run (briefly) as tests too.
OPTS=("-Db_sanitize=address,undefined" -Db_lundef=false -Dwerror=true -Dfuzz=true --buildtype=debug)

# gcc's AddressSanitizer sees what clang's does not: clang keeps a compound
# literal alive to the end of its function, gcc ends it with its block (C11
# 6.5.2.5), so only gcc reports a pointer to one used after an if's branch
# (stack-use-after-scope, on by default with gcc's -fsanitize=address; it
# aborted the first `hwid ca init`, issue 21).
GCC_BUILD=build-gcc
GCC_OPTS=("-Db_sanitize=address,undefined" -Dwerror=true -Dbench=false --buildtype=debug)
# Without test names: the unit tests and the smoke suite (tests/meson.build:
# a CA made by hwid ca init, devices on swtpm joining, renewing, attesting).
GCC_TESTS=(--suite unit --suite smoke)
# Tests at a time: most of them mostly wait (for hwidd, a TPM, a renewal),
# so more than the two cores; free_port's claims and swtpm-start keep them
# apart. Those that measure against the CPU run alone (tests/meson.build's
# exclusive_tests), and the longest start first (test_priority).
JOBS=${HWID_TEST_JOBS:-6}

# phase NAME CMD... — CMD, then one line "phase NAME: N s" (.ci/run lists
# these lines again at its end, so a CI log shows where the time went).
phase() {
        local name=$1 start=$SECONDS rc=0
        shift
        "$@" || rc=$?
        echo "phase $name: $((SECONDS - start)) s"
        return $rc
}

phase install-deps scripts/install-deps.sh

# setup DIR OPTS... — an existing build dir is reconfigured so that these
# options always apply.
# shellcheck disable=SC2317  # called through phase
setup() {
        local dir=$1
        shift
        if [ -f "$dir/meson-private/coredata.dat" ]; then
                meson setup --reconfigure "$dir" "$@"
        else
                meson setup "$dir" "$@"
        fi
}

CC=clang phase "$BUILD-setup" setup "$BUILD" "${OPTS[@]}"
phase "$BUILD-compile" meson compile -C "$BUILD"

# Stop at the first sanitizer report, with a stack; leaks count as errors.
# Options already in the environment come last, so they win.
export ASAN_OPTIONS="halt_on_error=1:print_stacktrace=1:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

# One PostgreSQL cluster for the run, a database in it for each test that
# needs one (tests/pg-cluster.sh, tests/integration/pg-lib.sh); stopped at
# the end, pass or fail. Without it (not root), each makes a cluster.
# shellcheck disable=SC2317  # the EXIT trap's
pg_cluster_stop() {
        [ -z "${HWID_TEST_PG_DIR:-}" ] || tests/pg-cluster.sh stop "$HWID_TEST_PG_DIR"
}
trap pg_cluster_stop EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
if [ "$(id -u)" = 0 ] && pg=$(tests/pg-cluster.sh start); then
        eval "$pg"
        export HWID_TEST_PG_DIR HWID_TEST_PG_PORT
fi

rc=0
phase "$BUILD-test" meson test -C "$BUILD" --print-errorlogs --num-processes "$JOBS" "$@" || rc=$?

gcc_run=${HWID_TEST_GCC:-auto}
[ "$gcc_run" != auto ] || { [ $# -eq 0 ] && gcc_run=1 || gcc_run=0; }
if [ "$gcc_run" = 1 ]; then
        [ $# -eq 0 ] || GCC_TESTS=("$@")
        echo "== $GCC_BUILD: gcc's AddressSanitizer + UBSan: ${GCC_TESTS[*]}"
        CC=gcc phase "$GCC_BUILD-setup" setup "$GCC_BUILD" "${GCC_OPTS[@]}"
        phase "$GCC_BUILD-compile" meson compile -C "$GCC_BUILD"
        # A pointer to a local used after its function returned, too.
        ASAN_OPTIONS="detect_stack_use_after_return=1:$ASAN_OPTIONS" \
                phase "$GCC_BUILD-test" meson test -C "$GCC_BUILD" --print-errorlogs --num-processes "$JOBS" "${GCC_TESTS[@]}" || rc=$?
fi
exit $rc
