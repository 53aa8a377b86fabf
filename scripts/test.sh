#!/bin/bash
# test.sh — the one command that tests hwid (README, CI): installs missing
# dependencies, builds with AddressSanitizer + UBSan and -Werror in
# build-asan/, and runs every test. Extra arguments go to `meson test`
# (e.g. a test name). Exit code: meson test's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

BUILD=build-asan
# clang, so that the libFuzzer targets build and run (briefly) as tests too.
OPTS=("-Db_sanitize=address,undefined" -Db_lundef=false -Dwerror=true -Dfuzz=true --buildtype=debug)
export CC=clang

scripts/install-deps.sh

# An existing build dir is reconfigured so these options always apply.
if [ -f "$BUILD/meson-private/coredata.dat" ]; then
        meson setup --reconfigure "$BUILD" "${OPTS[@]}"
else
        meson setup "$BUILD" "${OPTS[@]}"
fi
meson compile -C "$BUILD"

# Stop at the first sanitizer report, with a stack; leaks count as errors.
# Options already in the environment come last, so they win.
export ASAN_OPTIONS="halt_on_error=1:print_stacktrace=1:detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"

rc=0
meson test -C "$BUILD" --print-errorlogs --num-processes 2 "$@" || rc=$?
exit $rc
