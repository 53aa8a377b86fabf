#!/bin/bash
# demo.sh — install missing dependencies, build hwid in build/, then run the
# end-to-end demo (demo/demo.sh) against swtpm and SoftHSM2.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

scripts/install-deps.sh

if [ ! -f build/meson-private/coredata.dat ]; then
        meson setup build
fi
meson compile -C build

if [ ! -f demo/demo.sh ]; then
        echo "demo.sh: built ./build; demo/demo.sh does not exist yet" >&2
        exit 0
fi
export SRCDIR=$PWD BUILDDIR=$PWD/build
exec bash demo/demo.sh "$@"
