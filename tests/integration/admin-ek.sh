#!/bin/bash
# shellcheck disable=SC2119  # lib.sh helpers take optional arguments
# admin-ek.sh — the EK allowlist of TPM attestation through the admin API
# (GET/POST /v1/admin/ek, POST /v1/admin/ek/{name|hash}/remove), with the
# operators' keys in SoftHSM2, devices on swtpm and a real hwidd. Proves:
#   - `hwid ek add --dir` as an admin puts a TPM on the list by its EK
#     certificate or its EK public key hash, as the CA host's `hwid ek list`
#     then shows; the TPM enrolls with `hwid join --attest` and no token,
#     its certificate naming its EK; `hwid ek remove --dir` takes it off
#     and it can no longer enroll; `hwid ek import --dir` sends a factory
#     manifest (CSV or JSON) whole and adds all of it or, with one entry
#     that cannot attest, nothing;
#   - `hwid ek list --dir` as an auditor equals the CA host's list;
#   - every other role gets 403 naming its role, the action and the roles
#     that may (ek.add, ek.import, ek.remove: admin; ek.list: admin or
#     auditor),
#     the list unchanged and a `deny` audit record with the same reason;
#     allowed actions are audited with the actor;
#   - an admin's bad entries change nothing: an EK certificate of a foreign
#     manufacturer (400, "cannot attest with this CA"), a TPM or a name
#     already listed (409), an unknown profile, and with curl as the peer an
#     unknown field, both or neither of ek_cert/ek_pub_sha256, ek_cert not
#     base64 (400 naming them); removing what is not listed is 404;
#   - no TPM is left with a transient object.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=attest-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/attest-lib.sh"
# shellcheck source=policy-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/policy-lib.sh"
# shellcheck source=admin-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/admin-lib.sh"

# Two TPMs of one manufacturer (A, B), one of another (F).
swtpm_init 2
A=${TCTIS[0]} B=${TCTIS[1]}
manufacturer_roots "$T/ek-roots"
swtpm_init 1
F=${TCTIS[2]}
softhsm_init ops 4321
attest_ca "$T/ek-roots" < <(operator_profiles; cat <<'EOF'
  attested:
    validity: 1h
    subject: {allowed_rdns: [CN]}
    attestation: required
EOF
)
ek_cert "$A" "$T/ek-a.der"
ek_cert "$B" "$T/ek-b.der"
ek_cert "$F" "$T/ek-f.der"
EK_A=$(ek_pub_sha256 "$T/ek-a.der")
EK_B=$(ek_pub_sha256 "$T/ek-b.der")

op_join op-admin ops-admin
op_join op-approver ops-approver
op_join op-station ops-provisioner
op_join op-auditor ops-auditor
op_join node-1 default
declare -A WHO=([admin]=op-admin [approver]=op-approver [provisioner]=op-station [auditor]=op-auditor
        [node]=node-1)

# remote NAME CMD [ARGS...] — hwid ek CMD as operator NAME; exit code in RC.
remote() {
        RC=0
        as "$1" ek "$2" "${@:3}" >"$T/last.out" 2>"$T/last.err" || RC=$?
}

# attested_join TCTI DIR NAME — hwid join --attest without a token.
attested_join() {
        join_dev "$2" "$3" "" --tcti "$1" --attest
}

echo "== an admin adds a TPM by its EK certificate; it enrolls without a token"
remote op-admin add --cn dev-a --profile attested --ek-cert "$T/ek-a.der"
[ "$RC" = 0 ] || fail "the admin cannot add an EK: $(cat "$T/last.err")"
assert_contains "$(cat "$T/last.out")" "EK sha256:$EK_A may enroll dev-a (profile attested)" "ek add's report"
list=$(admin ek list)
assert_contains "$list" "dev-a"
assert_contains "$list" "$EK_A"
assert_contains "$list" "$(sha256sum <"$T/ek-a.der" | cut -d' ' -f1)" "the EK certificate's hash"
expect_audit admin:op-admin ek.add dev-a allow "profile attested, EK sha256:$EK_A"
expect_exit 0 "enrolled dev-a" --multiline -- attested_join "$A" "$T/dev-a" dev-a
assert_eq "$(permanent_id "$T/dev-a/cert.pem")" "sha256:$EK_A" "the certificate names the listed TPM"

echo "== an admin adds a TPM by its EK public key hash"
remote op-admin add --cn dev-b --profile attested --ek-sha256 "sha256:$EK_B"
[ "$RC" = 0 ] || fail "the admin cannot add an EK by hash: $(cat "$T/last.err")"
assert_contains "$(admin ek list)" "$EK_B"

echo "== an auditor lists the allowlist as the CA host sees it"
remote op-auditor list
[ "$RC" = 0 ] || fail "the auditor cannot list: $(cat "$T/last.err")"
assert_eq "$(cat "$T/last.out")" "$(admin ek list)" "remote ek list"
expect_audit auditor:op-auditor ek.list - allow "2 entries"

echo "== every other role: 403 with the reason, nothing changed, audited"
# refused ROLE ACTION NEED TARGET CMD [ARGS...]
refused() {
        local role=$1 action=$2 need=$3 target=$4 name=${WHO[$1]} before msg
        shift 4
        before=$(admin ek list)
        remote "$name" "$@"
        [ "$RC" = 1 ] || fail "$role may not $action, but got exit $RC: $(cat "$T/last.out" "$T/last.err")"
        msg=$(sed -n 's/^hwid: server answered 403: //p' "$T/last.err")
        assert_eq "$msg" "$role '$name' may not perform '$action': it needs the $need role" "reason of $role on $action"
        assert_eq "$(admin ek list)" "$before" "the allowlist after $role was refused $action"
        expect_audit "$role:$name" "$action" "$target" deny "$msg"
}
printf 'cn,profile,ek_pub_sha256\nx-1,attested,%s\n' "$(printf 'ef%.0s' {1..32})" >"$T/x.csv"
for role in approver provisioner auditor node; do
        refused "$role" ek.add admin - add --cn "x-$role" --profile attested --ek-cert "$T/ek-b.der"
        refused "$role" ek.import admin - import "$T/x.csv"
        refused "$role" ek.remove admin dev-a remove dev-a
done
for role in approver provisioner node; do
        refused "$role" ek.list "admin or auditor" - list
done

echo "== an admin's bad entries change nothing"
before=$(admin ek list)
remote op-admin add --cn dev-f --profile attested --ek-cert "$T/ek-f.der"
assert_eq "$RC" 1 "exit code for a foreign EK"
assert_contains "$(cat "$T/last.err")" "server answered 400: the EK certificate cannot attest with this CA" \
        "reason for a foreign EK"
assert_contains "$(cat "$T/last.err")" "does not chain to a configured TPM manufacturer root" "why"
remote op-admin add --cn dev-a2 --profile attested --ek-cert "$T/ek-a.der"
assert_contains "$(cat "$T/last.err")" "server answered 409: the EK of dev-a2" "the same TPM twice"
remote op-admin add --cn dev-a --profile attested --ek-sha256 "$(printf 'ab%.0s' {1..32})"
assert_contains "$(cat "$T/last.err")" "server answered 409: dev-a is already on the EK allowlist" "the same name twice"
remote op-admin add --cn dev-n --profile nope --ek-sha256 "$(printf 'cd%.0s' {1..32})"
assert_contains "$(cat "$T/last.err")" "server answered 400: dev-n: no profile 'nope'" "an unknown profile"
# The API with curl as an admin whose key openssl made.
enrolled op-admin-raw "$(token_new --profile ops-admin)"
api() {
        http "$DEV/api" POST /v1/admin/ek --cert "$DEV/op-admin-raw.pem" --key "$DEV/op-admin-raw.key" \
                -H "Content-Type: application/json" --data-binary "$1"
}
api '{"cn": "q", "ek_pub_sha256": "'"$EK_A"'", "secret": 1}'
expect_error 400 invalid_argument "$DEV/api"
assert_contains "$(json_msg "$DEV/api")" 'unknown field "secret"' "an unknown field named"
api '{"cn": "q"}'
expect_error 400 invalid_argument "$DEV/api"
assert_contains "$(json_msg "$DEV/api")" 'needs "cn" and one of "ek_cert" (base64) or "ek_pub_sha256"' "no EK"
api '{"cn": "q", "ek_pub_sha256": "'"$EK_A"'", "ek_cert": "AAAA"}'
expect_error 400 invalid_argument "$DEV/api"
assert_contains "$(json_msg "$DEV/api")" 'needs "cn" and one of' "two EKs"
api '{"cn": "q", "ek_cert": "not base64!"}'
expect_error 400 invalid_argument "$DEV/api"
assert_contains "$(json_msg "$DEV/api")" '"ek_cert" is not base64' "not base64"
api '{"cn": "q", "ek_pub_sha256": "12ab"}'
expect_error 400 invalid_argument "$DEV/api" "an EK public key hash is 64 hex digits"
assert_eq "$(admin ek list)" "$before" "the allowlist after bad entries"
assert_contains "$(audit_reasons admin:op-admin ek.add - deny)" \
        "the EK certificate cannot attest with this CA: the EK certificate does not chain" "the foreign EK's deny record"

echo "== an admin removes a TPM: it can no longer enroll"
expect_exit 0 "enrolled dev-b" --multiline -- attested_join "$B" "$T/dev-b" dev-b
remote op-admin remove "sha256:$EK_B"
[ "$RC" = 0 ] || fail "the admin cannot remove an EK: $(cat "$T/last.err")"
assert_contains "$(cat "$T/last.out")" "$EK_B removed from the EK allowlist"
assert_not_contains "$(admin ek list)" "dev-b"
expect_audit admin:op-admin ek.remove "$EK_B" allow "taken off the EK allowlist"
run_ok "$HWID" cert revoke --config "$CFG" --identity dev-b >/dev/null
expect_exit 1 "not on the CA's EK allowlist" --multiline -- attested_join "$B" "$T/dev-b2" dev-b
remote op-admin remove dev-b
assert_eq "$RC" 1 "exit code for removing what is not listed"
assert_contains "$(cat "$T/last.err")" "server answered 404" "removing what is not listed"
remote op-admin remove dev-a
[ "$RC" = 0 ] || fail "the admin cannot remove an EK by name: $(cat "$T/last.err")"
assert_eq "$(admin ek list | tail -n +2)" "" "the allowlist after the removals"

echo "== an admin imports a factory manifest: all entries or none"
b64() { base64 -w0 <"$1"; }
printf '{"devices": [{"cn": "line-a", "profile": "attested", "ek_cert": "%s"},\n {"cn": "line-f", "ek_cert": "%s"}]}\n' \
        "$(b64 "$T/ek-a.der")" "$(b64 "$T/ek-f.der")" >"$T/bad.json"
remote op-admin import "$T/bad.json"
assert_eq "$RC" 1 "exit code for a manifest with a foreign EK"
assert_contains "$(cat "$T/last.err")" "server answered 400: the manifest: devices[1] cannot attest with this CA" \
        "reason for a manifest with a foreign EK"
assert_eq "$(admin ek list | tail -n +2)" "" "the allowlist after a refused manifest"
printf '# line 3\ncn,profile,ek_pub_sha256\nline-a,attested,%s\nline-b,attested,%s\n' "$EK_A" "$EK_B" >"$T/line.csv"
remote op-admin import "$T/line.csv"
[ "$RC" = 0 ] || fail "the admin cannot import a manifest: $(cat "$T/last.err")"
assert_eq "$(cat "$T/last.out")" "2 TPMs added to the EK allowlist from $T/line.csv" "import's report"
list=$(admin ek list)
assert_contains "$list" "line-a"
assert_contains "$list" "$EK_B"
expect_audit admin:op-admin ek.import - allow "2 entries"
remote op-admin import "$T/line.csv"
assert_contains "$(cat "$T/last.err")" "server answered 409: line-a is already on the EK allowlist" "the same manifest twice"
expect_exit 0 "enrolled line-b" --multiline -- attested_join "$B" "$T/line-b" line-b
assert_no_transient

hwidd_stop
echo "admin-ek: all checks passed"
