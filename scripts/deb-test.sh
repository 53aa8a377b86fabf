#!/bin/bash
# deb-test.sh — build hwid's Debian packages (debian/) from this tree,
# check them with lintian (no error), install them on this machine and use
# them: hwid --version, hwidd --check on a fresh hwid ca init (SoftHSM2),
# hwid token create --config there (hwid hands it to hwidd's hwid-admin),
# man hwid, the units enabled, every documentation path they name there.
# The package hwid depends on no database library and its hwid links none;
# without hwidd, hwid says a CA host's command needs it.
# Purges them at the end and checks what is left (--keep: leaves them).
# Run as root on Debian 12 (docs/OPERATIONS.md, "The Debian packages").
# --build-only: build and lintian, no install. CI (.ci/run) runs it whole.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
SRC=$PWD
KEEP=0 INSTALL=1
for a in "$@"; do
        case $a in
        --keep) KEEP=1 ;;
        --build-only) INSTALL=0 ;;
        *) echo "usage: $0 [--keep] [--build-only]" >&2; exit 2 ;;
        esac
done

log() { echo "deb-test: $*" >&2; }
# The package build runs no tests (debian/rules) and needs no debug symbol
# packages here; both cores.
export DEB_BUILD_OPTIONS=${DEB_BUILD_OPTIONS:-nocheck noautodbgsym parallel=$(nproc)}
W=$(mktemp -d "${TMPDIR:-/tmp}/hwid-deb.XXXXXX")
cleanup() {
        if [ "$INSTALL" = 1 ] && [ "$KEEP" = 0 ]; then
                apt-get purge -y -q hwid hwidd >/dev/null 2>&1 || true
        fi
        rm -rf "$W"
}
trap cleanup EXIT

# The tree as git knows it (tracked files, with their changes), nothing else:
# no build directories.
mkdir "$W/hwid-0.1.0"
git ls-files -z | tar --null -T - -cf - | tar -xf - -C "$W/hwid-0.1.0"

log "dpkg-buildpackage -b"
start=$(date +%s)
(cd "$W/hwid-0.1.0" && dpkg-buildpackage -b -us -uc) >"$W/build.log" 2>&1 ||
        { tail -n 40 "$W/build.log"; log "the package build failed"; exit 1; }
log "built in $(($(date +%s) - start)) s: $(cd "$W" && ls ./*.deb | tr '\n' ' ')"

log "lintian (errors fail)"
lintian --fail-on error --suppress-tags bad-distribution-in-changes-file "$W"/hwid_*.changes | tee "$W/lintian.log"

# Configuration files are conffiles.
dpkg-deb --ctrl-tarfile "$W"/hwid_0.1.0_*.deb | tar -xOf - ./conffiles >"$W/conffiles"
for f in /etc/default/hwid-agent /etc/hwid/openssl-tpm2.cnf; do
        grep -qx "$f" "$W/conffiles" || { log "$f is not a conffile"; exit 1; }
done

log "the package hwid: no database or CA library"
depends=$(dpkg-deb -f "$W"/hwid_0.1.0_*.deb Depends)
log "hwid depends on: $depends"
if grep -qE 'libsqlite3|libpq' <<<"$depends"; then log "the package hwid depends on a database library"; exit 1; fi
dpkg-deb -x "$W"/hwid_0.1.0_*.deb "$W/hwid-files"
needed=$(readelf -d "$W/hwid-files/usr/bin/hwid" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
if grep -qE 'libsqlite3|libpq' <<<"$needed"; then log "hwid links a database library: $needed"; exit 1; fi
[ ! -e "$W/hwid-files/usr/libexec/hwid/hwid-admin" ] || { log "the package hwid holds hwid-admin"; exit 1; }
dpkg-deb -c "$W"/hwidd_0.1.0_*.deb >"$W/hwidd.files"
grep -q '\./usr/libexec/hwid/hwid-admin$' "$W/hwidd.files" ||
        { log "the package hwidd has no /usr/libexec/hwid/hwid-admin"; exit 1; }
[ "$INSTALL" = 1 ] || { log "built (not installed)"; exit 0; }

log "apt-get install"
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$W"/hwid_0.1.0_*.deb "$W"/hwidd_0.1.0_*.deb \
        >"$W/install.log" 2>&1 || { tail -n 20 "$W/install.log"; exit 1; }
hwid --version
man -P cat hwid | grep -q "hwid join" || { log "man hwid has no hwid join"; exit 1; }
man -w hwidd.yaml >/dev/null && man -w hwidd >/dev/null
# certmonger's CA helper, its page and the example drop-in for certmonger.service.
[ "$(/usr/libexec/hwid/certmonger-submit --version)" = "$(hwid --version)" ] ||
        { log "no certmonger helper in /usr/libexec/hwid"; exit 1; }
man -w hwid-certmonger-submit >/dev/null
grep -q '^BindReadOnlyPaths=/etc/hwid/openssl-tpm2.cnf:/etc/ssl/openssl.cnf$' \
        /usr/share/doc/hwid/examples/certmonger-hwid.conf || { log "the certmonger drop-in names other paths"; exit 1; }
getent passwd hwid >/dev/null || { log "no hwid user (sysusers.d)"; exit 1; }
id -nG hwid | grep -qw tss || { log "hwid is not in tss"; exit 1; }
[ -d /var/lib/hwidd ] || { log "no /var/lib/hwidd (tmpfiles.d)"; exit 1; }
for u in hwidd.service hwid-agent.service; do
        [ -L "/etc/systemd/system/multi-user.target.wants/$u" ] || { log "$u is not enabled"; exit 1; }
done

log "every documentation path the units and man pages name is installed"
for f in $(sed -n 's|^Documentation=||p' /lib/systemd/system/hwidd.service /lib/systemd/system/hwid-agent.service |
        tr ' ' '\n' | sed -n 's|^file://||p'); do
        [ -f "$f" ] || { log "a unit's Documentation= names $f, which no package installed"; exit 1; }
done
for p in hwid hwidd hwidd.yaml hwid-certmonger-submit; do
        for f in $(MANWIDTH=200 man -P cat "$p" 2>/dev/null | grep -o '/usr/share/doc/[^ )]*' | sed 's/[.,;]$//' | sort -u); do
                [ -e "$f" ] || { log "$p's man page names $f, which no package installed"; exit 1; }
        done
done
[ -f /usr/share/doc/hwid/examples/hwidd.example.yaml ] && [ -f /usr/share/doc/hwid/OPERATIONS.md ] ||
        { log "the example configuration or the docs are not where the pages name them"; exit 1; }

log "hwid ca init on SoftHSM2, then hwidd --check"
export SOFTHSM2_CONF=$W/softhsm2.conf
mkdir "$W/tokens"
echo "directories.tokendir = $W/tokens" >"$SOFTHSM2_CONF"
(umask 077 && echo 1234 >"$W/pin")  # a PIN file others may read is refused
softhsm2-util --init-token --free --label ca --so-pin 5678 --pin 1234 >/dev/null
hwid ca init --key "pkcs11:token=ca;object=ca-key?pin-source=file:$W/pin" --subject "/CN=deb-test CA" \
        --dir "$W/ca" >/dev/null
hwidd --config "$W/ca/hwidd.yaml" --check
log "hwid token create --config on the CA host: through hwid-admin"
hwid token create --config "$W/ca/hwidd.yaml" --description deb-test >"$W/token.out"
grep -q '^token: [a-z0-9]\{6\}\.' "$W/token.out" || { log "hwid token create printed no token"; exit 1; }
hwid token list --config "$W/ca/hwidd.yaml" | grep -q default || { log "hwid token list lists no token"; exit 1; }
[ "$KEEP" = 0 ] || { log "OK (installed)"; exit 0; }

log "without hwidd: hwid says a CA host's command needs it"
apt-get purge -y -q hwidd >"$W/purge-hwidd.log" 2>&1 || { tail -n 20 "$W/purge-hwidd.log"; exit 1; }
rc=0
hwid token list --config "$W/ca/hwidd.yaml" >"$W/nohost.out" 2>"$W/nohost.err" || rc=$?
[ "$rc" = 1 ] && grep -q 'install the package hwidd' "$W/nohost.err" ||
        { log "hwid token list --config without hwidd: exit $rc, $(cat "$W/nohost.err")"; exit 1; }
hwid --version >/dev/null

log "apt-get purge (hwidd went above): what it leaves (docs/OPERATIONS.md, \"What apt-get purge leaves behind\")"
apt-get purge -y -q hwid >"$W/purge.log" 2>&1 || { tail -n 20 "$W/purge.log"; exit 1; }
for f in /etc/default/hwid-agent /etc/hwid/openssl-tpm2.cnf /usr/share/doc/hwid/OPERATIONS.md \
        /etc/systemd/system/multi-user.target.wants/hwidd.service; do
        [ ! -e "$f" ] || { log "$f is still there after the purge"; exit 1; }
done
[ -d /var/lib/hwidd ] && getent passwd hwid >/dev/null ||
        { log "the purge removed the store's directory or the hwid user, which OPERATIONS.md says it leaves"; exit 1; }
log "OK"
