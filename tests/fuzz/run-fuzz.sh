#!/bin/bash
# Runs a libFuzzer target for a bounded number of inputs, starting from the
# seed corpus in the source tree; new inputs go to a scratch directory so
# the source tree is never written.
set -euo pipefail
exe=$1 seeds=$2 runs=${3:-20000}
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
"$exe" -runs="$runs" -max_len=4096 -timeout=10 "$scratch" "$seeds"
