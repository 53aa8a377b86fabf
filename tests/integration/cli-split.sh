#!/bin/bash
# cli-split.sh — hwid, the device's program, holds no CA, and hands the CA
# host's commands to hwid-admin (docs/OPERATIONS.md, "hwid and hwid-admin").
# Proves:
#   - hwid links neither SQLite nor libpq (ldd), and defines no symbol that
#     a library of service/ or policy/ defines (nm: no store, issuer, CA,
#     configuration, policy code), nor calls sqlite3_* or PQ*; hwid-admin
#     does hold the store and the CA core (the check is not vacuous);
#   - hwid hands hwid-admin the command line exactly as typed (argv, one
#     by one), for the offline operations (ca init, ca import, ca
#     token-key, ca backup, ca restore, store migrate, audit verify) and
#     for an admin command with --config or without an operator identity;
#     never for a remote one (--dir, --cert/--key), a device command, a
#     usage error (exit 2, said by hwid) or --help; the environment goes
#     along (a token in HWID_TOKEN, never in argv);
#   - without hwid-admin ($HWID_ADMIN unset, none beside hwid, none
#     installed), such a command fails with one line naming the package
#     hwidd, exit 1; beside hwid (a build tree) it is found;
#   - the admin commands on the CA host go through the admin API in
#     process, as admin:<login>: a change is audited under that name, a
#     read is not (as when they worked on the store themselves), a refusal
#     is told in full; nothing opens the CA key (a configuration whose CA
#     key cannot be opened still lists and creates tokens), and only token
#     creation needs the token key.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

require_tools nm ldd strings

echo "== hwid holds no CA"
libs=$(ldd "$HWID")
assert_not_contains "$libs" "libsqlite3" "hwid's libraries"
assert_not_contains "$libs" "libpq" "hwid's libraries"
# Every global symbol a library of the CA side defines (service/'s rooms,
# policy/), but hwidd's main().
mapfile -t CA_LIBS < <(find "$BUILDDIR/service" "$BUILDDIR/policy" -name '*.a' | sort)
[ ${#CA_LIBS[@]} -ge 10 ] || fail "only ${#CA_LIBS[@]} libraries of service/ and policy/ in $BUILDDIR"
nm --defined-only -g "${CA_LIBS[@]}" 2>/dev/null | awk 'NF == 3 && $3 != "main" { print $3 }' | sort -u >"$T/ca-symbols"
[ "$(wc -l <"$T/ca-symbols")" -gt 500 ] || fail "the CA side defines only $(wc -l <"$T/ca-symbols") symbols"
# defined PROGRAM — the global symbols PROGRAM defines.
defined() { nm --defined-only -g "$1" | awk 'NF == 3 { print $3 }' | sort -u; }
defined "$HWID" >"$T/hwid-symbols"
both=$(comm -12 "$T/ca-symbols" "$T/hwid-symbols")
[ -z "$both" ] || fail "hwid holds code of the CA side: $(head -n 20 <<<"$both" | tr '\n' ' ')"
calls=$(nm "$HWID" | grep -E ' U (sqlite3_|PQ)' || true)
[ -z "$calls" ] || fail "hwid calls SQLite or libpq: $calls"
# Not vacuous: hwid-admin holds the store and the CA core.
defined "$HWID_ADMIN" >"$T/admin-symbols"
for sym in store_open ca_service_new_host ca_call admin_route_host config_load; do
        grep -qx "$sym" "$T/admin-symbols" || fail "hwid-admin does not define $sym"
        grep -qx "$sym" "$T/ca-symbols" || fail "the CA side's libraries do not define $sym"
done

echo "== what hwid hands to hwid-admin, as typed"
cat >"$T/recorder" <<EOF
#!/bin/bash
{ printf '%s\n' "\$@"; echo "HWID_TOKEN=\${HWID_TOKEN:-}"; } >"$T/handed"
exit 7
EOF
chmod +x "$T/recorder"
# handed ARGS... — hwid ARGS... runs the recorder (exit 7) with ARGS exactly.
handed() {
        local rc=0
        rm -f "$T/handed"
        HWID_ADMIN=$T/recorder HWID_TOKEN=abcdef.0123456789abcdef "$HWID" "$@" >"$T/last.out" 2>"$T/last.err" || rc=$?
        [ -f "$T/handed" ] || fail "hwid $* did not run hwid-admin (exit $rc): $(cat "$T/last.err")"
        assert_eq "$rc" 7 "exit code of hwid $* (hwid-admin's)"
        assert_eq "$(head -n -1 "$T/handed")" "$(printf '%s\n' "$@")" "the arguments hwid-admin got for hwid $*"
        assert_eq "$(tail -n 1 "$T/handed")" "HWID_TOKEN=abcdef.0123456789abcdef" "the environment of hwid-admin"
}
# kept ARGS... — hwid ARGS... does not run hwid-admin.
kept() {
        rm -f "$T/handed"
        HWID_ADMIN=$T/recorder "$HWID" "$@" >"$T/last.out" 2>"$T/last.err" || true
        [ ! -f "$T/handed" ] || fail "hwid $* ran hwid-admin: $(cat "$T/handed")"
}
handed ca init --key "pkcs11:token=x;object=y" --subject "/CN=a b" --dir "$T/x y"
handed ca import --help
handed ca token-key --config "$T/c.yaml"
handed ca backup --config "$T/c.yaml" --out "$T/b.db"
handed ca restore --from "$T/b.db"
handed store migrate --config "$T/c.yaml" --to "postgresql://h/db"
handed audit verify --config "$T/c.yaml"
handed token create --config "$T/c.yaml" --profile default --ttl 1h --description "two words"
handed token create --server https://ca.example:8443
handed token list
handed cert revoke --config "$T/c.yaml" --reason key-compromise 0A:0B
handed ek import -c "$T/c.yaml" "$T/m.csv"
handed identity release --config="$T/c.yaml" edge-1
kept token list --dir "$T/nothing-here"
assert_contains "$(cat "$T/last.err")" "$T/nothing-here" "a remote command's own error"
kept cert list --cert "$T/op.pem" --key "pkcs11:token=op" --server https://ca.example:8443 --ca-hash "sha256:$(printf '%064d' 0)"
kept token create --count 5
assert_contains "$(cat "$T/last.err")" "--count and --out go together" "hwid's usage error"
kept token list --config "$T/c.yaml" --dir "$T/d"
assert_contains "$(cat "$T/last.err")" "--config is for the CA host" "hwid's usage error"
kept request approve --config "$T/c.yaml"
kept token create --help
assert_contains "$(cat "$T/last.out")" "Usage: hwid token create" "hwid token create --help, by hwid"
kept ca hash --help
kept key create --help
kept --help

echo "== without hwid-admin"
mkdir "$T/bin"
cp "$HWID" "$T/bin/hwid"
INSTALLED=$(strings -n 8 "$HWID" | grep -E '^/.*/hwid/hwid-admin$' | head -n 1)
[ -n "$INSTALLED" ] || fail "hwid names no installed hwid-admin"
if [ ! -e "$INSTALLED" ]; then
        expect_exit 1 "install the package hwidd there" -- env -u HWID_ADMIN "$T/bin/hwid" ca init --help
        assert_contains "$(cat "$T/last.err")" "hwid: ca init runs on the CA host" "the missing hwid-admin"
        assert_contains "$(cat "$T/last.err")" "$INSTALLED" "where hwid looked"
        expect_exit 1 "install the package hwidd there" -- env -u HWID_ADMIN "$T/bin/hwid" token list --config "$T/c.yaml"
        assert_contains "$(cat "$T/last.err")" "--dir DIR, or --cert FILE --key URI" "the remote form offered"
        expect_exit 1 "" -- env -u HWID_ADMIN "$T/bin/hwid" token list
        assert_eq "$(cat "$T/last.out")" "" "output of a command hwid could not hand over"
else
        echo "($INSTALLED is installed here: its absence is not checked)"
fi
# Beside hwid, as in the build tree.
cp "$T/recorder" "$T/bin/hwid-admin"
rm -f "$T/handed"
rc=0
env -u HWID_ADMIN "$T/bin/hwid" audit verify --config "$T/c.yaml" || rc=$?
assert_eq "$rc" 7 "exit code of hwid-admin beside hwid"
assert_eq "$(head -n 3 "$T/handed" | tr '\n' ' ')" "audit verify --config " "hwid-admin beside hwid"

echo "== on the CA host: the admin API in process, as admin:$(id -un)"
ca_setup
rows() { sqlite3 "$CA_DIR/hwid.db" "SELECT count(*) FROM audit"; }
before=$(rows)
admin token list >/dev/null
admin cert list --all >/dev/null
admin request list --all >/dev/null
admin audit list >/dev/null
admin ek list >/dev/null
admin identity list >/dev/null
expect_exit 1 "no certificate 0BAD" -- "$HWID" cert show --config "$CFG" 0bad
assert_eq "$(rows)" "$before" "audit records of the host's reads"
TOK=$(token_new --description "made on the host")
assert_eq "$(sqlite3 "$CA_DIR/hwid.db" "SELECT actor || ' ' || outcome FROM audit WHERE action = 'token.create'
        AND target = '${TOK%%.*}'")" "admin:$(id -un) allow" "the token's audit record"
run_ok "$HWID" token revoke --config "$CFG" "${TOK%%.*}" >/dev/null
assert_eq "$(sqlite3 "$CA_DIR/hwid.db" "SELECT actor FROM audit WHERE action = 'token.revoke'")" "admin:$(id -un)" \
        "the revocation's audit record"
expect_exit 1 "there is no profile 'nope'" -- "$HWID" token create --config "$CFG" --profile nope
# Nothing opens the CA key: its URI names a token that does not exist.
sed 's|^  key: .*|  key: "pkcs11:token=no-such-token;object=ca-key"|' "$CFG" >"$CA_DIR/nokey.yaml"
grep -q 'no-such-token' "$CA_DIR/nokey.yaml" || fail "the CA key's line was not replaced"
assert_contains "$(run_ok "$HWID" token list --config "$CA_DIR/nokey.yaml")" "${TOK%%.*}" "tokens without the CA key"
assert_contains "$(run_ok "$HWID" token create --config "$CA_DIR/nokey.yaml")" "token: " "a token without the CA key"
# Only token creation needs the token key.
grep -v '^  token_key:' "$CFG" >"$CA_DIR/notoken.yaml"
run_ok "$HWID" token list --config "$CA_DIR/notoken.yaml" >/dev/null
expect_exit 1 "token_key" -- "$HWID" token create --config "$CA_DIR/notoken.yaml"
echo "cli-split: all checks passed"
