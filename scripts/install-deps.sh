#!/bin/bash
# install-deps.sh — install every Debian 12 package hwid needs to build, test
# and run its demo. Safe to run repeatedly: when everything is installed it
# does no network work at all (no apt-get update).
set -euo pipefail

PACKAGES=(
        # build
        meson ninja-build pkg-config gcc clang libclang-rt-14-dev
        # the layering test (tests/check-rooms.py)
        python3 binutils
        # the tests' JSON reader (json_get in tests/lib.sh)
        jq
        # libraries
        libssl-dev libtss2-dev libp11-kit-dev libmicrohttpd-dev
        libgnutls28-dev libsqlite3-dev libcurl4-openssl-dev libyaml-dev libpq-dev
        libjson-c-dev libjansson-dev
        # runtime, test peers and tools
        openssl tpm2-openssl tpm2-tools p11-kit sqlite3 curl softhsm2 postgresql
        # a TPM resource manager for openssl's tpm2 provider in a TLS handshake (est-device)
        tpm2-abrmd libtss2-tcti-tabrmd0 dbus-daemon
        swtpm swtpm-tools opensc iproute2 procps golang-cfssl valgrind strace
        faketime
        # bench/run.sh's native profile (section 8)
        linux-perf
        python3-jwcrypto python3-cryptography
        # promtool, which checks /metrics (ops-*.sh tests)
        prometheus
        # man pages (pandoc), bash completion, systemd's pkg-config and
        # systemd-analyze for the units (install-*.sh tests)
        pandoc bash-completion systemd man-db
        # relying parties using a device identity (docs/USING.md, using-tpm)
        mosquitto mosquitto-clients nginx-light
        # the Debian packages (scripts/deb-test.sh, in CI too)
        build-essential debhelper dpkg-dev lintian
        # certmonger with hwid's CA helper (docs/USING.md, certmonger.sh);
        # modutil and certutil for its NSS databases
        certmonger libnss3-tools
)

log() { echo "install-deps: $*" >&2; }

is_installed() {
        [ "$(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null)" = installed ]
}

main() {
        local p missing=()
        command -v dpkg-query >/dev/null 2>&1 || {
                log "dpkg-query not found: this script supports Debian 12 (bookworm) only"
                exit 1
        }
        for p in "${PACKAGES[@]}"; do
                is_installed "$p" || missing+=("$p")
        done
        if [ ${#missing[@]} -eq 0 ]; then
                log "all ${#PACKAGES[@]} packages already installed"
                exit 0
        fi
        log "missing: ${missing[*]}"
        if [ "$(id -u)" -ne 0 ]; then
                log "must run as root to install them (try: sudo $0)"
                exit 1
        fi
        export DEBIAN_FRONTEND=noninteractive
        log "apt-get update"
        apt-get update -q
        log "installing ${#missing[@]} package(s)"
        apt-get install -y -q --no-install-recommends "${missing[@]}" </dev/null
        for p in "${missing[@]}"; do
                is_installed "$p" || { log "$p still not installed"; exit 1; }
        done
        log "done"
}

main "$@"
