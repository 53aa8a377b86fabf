#!/bin/bash
# install-layout.sh — what `meson install --destdir` lays out, and the units
# it installs.
# Proves:
#   - the installation is exactly: hwid and hwidd, in libexec/hwid hwid-admin
#     (the CA host's commands, which hwid runs: it looks for it there) and
#     certmonger's CA helper, the four man pages,
#     both units in systemd's unit directory (systemd.pc), the sysusers.d
#     and tmpfiles.d entries, bash completion (bash-completion.pc), the
#     agent's /etc/default file, OpenSSL's tpm2 configuration, the docs and
#     the commented example configuration (which hwidd's parser takes) and
#     the example drop-in for certmonger.service (which systemd-analyze
#     verify takes, beside certmonger's unit);
#   - the units name the installed programs; `systemd-analyze verify`
#     passes on both; `systemd-analyze security --offline` scores each
#     at most 2.0;
#   - what hwidd needs stays allowed: the TPM devices, SoftHSM2's token
#     directory, its state directory, TCP and Unix sockets, and the system
#     calls it makes under the filter (setrlimit for RLIMIT_CORE, mlock for
#     PINs, prctl for PR_SET_DUMPABLE);
#   - sysusers.d makes the hwid user a member of tss and softhsm.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

require_tools meson systemd-analyze
ROOT=$T/root
meson install -C "$BUILDDIR" --destdir "$ROOT" --no-rebuild --quiet >"$T/install.log" 2>&1 ||
        fail "meson install: $(tail -n 5 "$T/install.log")"
PREFIX=$(meson introspect "$BUILDDIR" --buildoptions |
        json_get - '.[] | select(.name == "prefix") | .value')
UNITDIR=$(pkg-config --variable=systemdsystemunitdir systemd)
SYSUSERS=$(pkg-config --variable=sysusersdir systemd)
TMPFILES=$(pkg-config --variable=tmpfilesdir systemd)
LIBEXEC=$(meson introspect "$BUILDDIR" --buildoptions |
        json_get - '.[] | select(.name == "libexecdir") | .value')
COMPL=$(pkg-config --define-variable=datadir="$PREFIX/share" --variable=completionsdir bash-completion)

sort >"$T/want" <<EOF
$PREFIX/bin/hwid
$PREFIX/sbin/hwidd
$PREFIX/$LIBEXEC/hwid/certmonger-submit
$PREFIX/$LIBEXEC/hwid/hwid-admin
$PREFIX/share/man/man1/hwid.1
$PREFIX/share/man/man8/hwidd.8
$PREFIX/share/man/man8/hwid-certmonger-submit.8
$PREFIX/share/man/man5/hwidd.yaml.5
$UNITDIR/hwidd.service
$UNITDIR/hwid-agent.service
$SYSUSERS/hwid.conf
$TMPFILES/hwid.conf
$COMPL/hwid
$PREFIX/etc/default/hwid-agent
$PREFIX/etc/hwid/openssl-tpm2.cnf
$PREFIX/share/doc/hwid/ATTESTATION.md
$PREFIX/share/doc/hwid/CMP.md
$PREFIX/share/doc/hwid/CONFIG.md
$PREFIX/share/doc/hwid/DEVICE.md
$PREFIX/share/doc/hwid/EST.md
$PREFIX/share/doc/hwid/HA.md
$PREFIX/share/doc/hwid/OPERATIONS.md
$PREFIX/share/doc/hwid/USING.md
$PREFIX/share/doc/hwid/examples/hwidd.example.yaml
$PREFIX/share/doc/hwid/examples/certmonger-hwid.conf
EOF
(cd "$ROOT" && find . ! -type d | sed 's|^\.||' | sort) >"$T/got"
diff -u "$T/want" "$T/got" >"$T/diff" || fail "meson install laid out other files: $(cat "$T/diff")"
for p in bin/hwid sbin/hwidd "$LIBEXEC/hwid/certmonger-submit" "$LIBEXEC/hwid/hwid-admin"; do
        [ -x "$ROOT$PREFIX/$p" ] || fail "$PREFIX/$p is not executable"
done
assert_eq "$("$ROOT$PREFIX/bin/hwid" --version)" "$("$HWID" --version)" "the installed hwid"
grep -qaF "$PREFIX/$LIBEXEC/hwid/hwid-admin" "$ROOT$PREFIX/bin/hwid" ||
        fail "hwid does not look for hwid-admin where it is installed ($PREFIX/$LIBEXEC/hwid)"
"$ROOT$PREFIX/sbin/hwidd" --config "$ROOT$PREFIX/share/doc/hwid/examples/hwidd.example.yaml" --check \
        >"$T/check.out" 2>&1 || true
assert_not_contains "$(cat "$T/check.out")" "hwidd.example.yaml:" "the example configuration parses"

# The units: the installed programs, verified, scored.
mkdir "$T/units"
for u in hwidd.service hwid-agent.service; do
        f=$ROOT$UNITDIR/$u
        grep -q "^ExecStart=$PREFIX/s\?bin/hwidd\? " "$f" || fail "$u does not run a program of $PREFIX"
        # verify checks that the programs exist: point them at the destdir
        sed "s|^\(Exec[A-Za-z]*=[-@!+]*\)$PREFIX/|\1$ROOT$PREFIX/|" "$f" >"$T/units/$u"
done
MANPATH=$ROOT$PREFIX/share/man systemd-analyze verify "$T/units/hwidd.service" "$T/units/hwid-agent.service" \
        >"$T/verify.out" 2>&1 || fail "systemd-analyze verify: $(cat "$T/verify.out")"
for u in hwidd.service hwid-agent.service; do
        score=$(systemd-analyze security --offline=true "$ROOT$UNITDIR/$u" 2>&1 |
                sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\) .*/\1/p')
        [ -n "$score" ] || fail "systemd-analyze security printed no score for $u"
        awk -v s="$score" 'BEGIN { exit !(s <= 2.0) }' || fail "$u scores $score (more than 2.0)"
        echo "$u: exposure $score"
done

# The certmonger drop-in: systemd takes it beside certmonger's own unit, and
# it puts the installed tpm2 configuration over the system's OpenSSL one.
CM_UNIT=$UNITDIR/certmonger.service
[ -f "$CM_UNIT" ] || CM_UNIT=/lib/systemd/system/certmonger.service
[ -f "$CM_UNIT" ] || fail "no certmonger.service (is certmonger installed?)"
mkdir -p "$T/cm/certmonger.service.d"
cp "$CM_UNIT" "$T/cm/"
cp "$ROOT$PREFIX/share/doc/hwid/examples/certmonger-hwid.conf" "$T/cm/certmonger.service.d/hwid.conf"
systemd-analyze verify "$T/cm/certmonger.service" >"$T/cm.verify" 2>&1 || true
assert_not_contains "$(cat "$T/cm.verify")" "hwid.conf" "systemd-analyze verify of certmonger.service with the drop-in"
echo "NoSuchDirective=1" >>"$T/cm/certmonger.service.d/hwid.conf"   # not vacuous: it reads the drop-in
assert_contains "$(systemd-analyze verify "$T/cm/certmonger.service" 2>&1 || true)" "hwid.conf" \
        "systemd-analyze verify of a drop-in with an unknown directive"
grep -qx "BindReadOnlyPaths=$PREFIX/etc/hwid/openssl-tpm2.cnf:/etc/ssl/openssl.cnf" \
        "$T/cm/certmonger.service.d/hwid.conf" ||
        fail "the drop-in does not bind the installed openssl-tpm2.cnf: $(grep Bind "$T/cm/certmonger.service.d/hwid.conf")"

# What hwidd needs is still allowed.
U=$ROOT$UNITDIR/hwidd.service
for line in "User=hwid" "StateDirectory=hwidd" "DeviceAllow=/dev/tpmrm0 rw" "DeviceAllow=/dev/tpm0 rw" \
        "ReadWritePaths=-/var/lib/softhsm/tokens" "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX"; do
        grep -qx "$line" "$U" || fail "hwidd.service lacks '$line'"
done
# syscalls GROUP — the system calls of a filter group, nested groups expanded.
systemd-analyze syscall-filter 2>/dev/null >"$T/groups"
syscalls() {
        awk -v want="$1" '
                /^@/ { g = $1; next }
                /^ +[@a-z0-9_]/ && g != "" { m[g] = m[g] " " $1 }
                function expand(grp,   n, i, parts) {
                        if (seen[grp]++) return
                        n = split(m[grp], parts, " ")
                        for (i = 1; i <= n; i++)
                                if (parts[i] ~ /^@/) expand(parts[i]); else print parts[i]
                }
                END { expand(want) }' "$T/groups"
}
allowed=$(syscalls @system-service)
denied=$(syscalls @privileged)
[ "$(wc -l <<<"$allowed")" -gt 100 ] || fail "@system-service expanded to $(wc -l <<<"$allowed") system calls"
for sc in setrlimit prlimit64 mlock munlock madvise prctl socket bind listen accept4 connect; do
        grep -qw "$sc" <<<"$allowed" || fail "@system-service does not allow $sc, which hwidd makes"
        ! grep -qw "$sc" <<<"$denied" || fail "~@privileged denies $sc, which hwidd makes"
done
grep -qx "m hwid tss" "$ROOT$SYSUSERS/hwid.conf" || fail "the hwid user is not in tss (the TPM)"
grep -qx "m hwid softhsm" "$ROOT$SYSUSERS/hwid.conf" || fail "the hwid user is not in softhsm"
echo "install-layout: $(wc -l <"$T/want") files laid out as expected"
