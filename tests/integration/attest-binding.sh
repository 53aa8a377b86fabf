#!/bin/bash
# shellcheck disable=SC2119  # lib.sh helpers take optional arguments
# attest-binding.sh — a name is bound to the TPM that attested it (issue 36;
# docs/ATTESTATION.md "A name is bound to its TPM"): devices on swtpm with
# hwid join --attest, a real hwidd, operators' keys in SoftHSM2. Proves:
#   - the first certificate of a name recording a TPM attestation binds
#     the name to that TPM, in the store (hwid identity list, on the CA
#     host and as an auditor through the admin API);
#   - after a revocation, another TPM attesting with a valid token is
#     refused (403, naming the binding and `hwid identity release NAME`),
#     and so is a token enrollment without attestation (openssl's CSR):
#     nothing issued, no token use spent, no request held for approval
#     under a manual profile; another TPM on the EK allowlist for the name
#     is refused at its challenge (none made, no key made);
#   - after an expiry, the same;
#   - the binding survives a restart of hwidd;
#   - `hwid identity release` of a name bound to nothing: exit 1 naming it,
#     on the CA host and remotely (404); an auditor may not release (403,
#     audited); --help;
#   - released remotely by an admin (audited with the TPM it was bound
#     to), the other TPM enrolls the name, by its EK entry, and the name is
#     bound to it: the first TPM is refused now; released on the CA host
#     (audited as the local admin), the other TPM enrolls the expired name
#     with a token;
#   - no TPM is left with a transient object.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=attest-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/attest-lib.sh"
# shellcheck source=policy-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/policy-lib.sh"
# shellcheck source=admin-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/admin-lib.sh"

test_clock     # hwidd's and the devices': an expiry comes when the test says
swtpm_init 2
A=${TCTIS[0]} B=${TCTIS[1]}
manufacturer_roots "$T/ek-roots"
softhsm_init ops 4321
attest_ca "$T/ek-roots" < <(operator_profiles; cat <<'EOF'
  bound:
    validity: 1m
    subject: {allowed_rdns: [CN]}
    attestation: optional
  held:
    validity: 1m
    subject: {allowed_rdns: [CN]}
    attestation: optional
    approval: manual
EOF
)
ek_cert "$A" "$T/ek-a.der"
ek_cert "$B" "$T/ek-b.der"
EK_A=$(ek_pub_sha256 "$T/ek-a.der")
EK_B=$(ek_pub_sha256 "$T/ek-b.der")
op_join op-admin ops-admin
op_join op-auditor ops-auditor

# attested_join TCTI DIR NAME [TOKEN [JOIN-ARGS...]] — hwid join --attest
# (no token: by EK).
attested_join() {
        join_dev "$2" "$3" "${4:-}" --tcti "$1" --attest "${@:5}"
}

# binding NAME — "EK SERIAL" of NAME's binding in the store, as the store
# spells it (nothing when unbound).
binding() {
        store_sql "SELECT ek_pub_sha256 || ' ' || serial FROM identity_bindings WHERE lower(identity) = lower('$1')"
}

# refused_binding TCTI NAME BOUND_EK [TOKEN [JOIN-ARGS...]] — hwid join
# --attest of NAME on that TPM is refused for NAME's binding to BOUND_EK,
# nothing issued, the token (if any) unspent.
refused_binding() {
        local certs used=""
        REFUSED=$((${REFUSED:-0} + 1))
        certs=$(cert_count)
        [ -z "${4:-}" ] || used=$(token_used "$4")
        expect_exit 1 "$2 is bound to the TPM that attested it (EK sha256:$3" --multiline -- \
                attested_join "$1" "$T/refused-$REFUSED" "$2" "${4:-}" "${@:5}"
        assert_contains "$(cat "$T/last.err")" "server answered 403" "status of $2's refusal"
        assert_contains "$(cat "$T/last.err")" "only that TPM enrolls it until an admin releases it (a replaced \
TPM or board): hwid identity release $2" "the release named in $2's refusal"
        assert_eq "$(cert_count)" "$certs" "certificates after $2 was refused"
        [ -z "${4:-}" ] || assert_eq "$(token_used "$4")" "$used" "token uses after $2 was refused"
}

echo "== the first attested certificate binds the name to its TPM"
TOK=$(token_new --profile bound --uses 20)
expect_exit 0 "enrolled edge-2" --multiline -- attested_join "$A" "$T/edge-2" edge-2 "$TOK"
expect_exit 0 "enrolled edge-1" --multiline -- attested_join "$A" "$T/edge-1" edge-1 "$TOK"
S1=$(dir_serial "$T/edge-1")
S2=$(dir_serial "$T/edge-2")
assert_eq "$(binding edge-1)" "$EK_A $S1" "edge-1's binding"
assert_eq "$(binding edge-2)" "$EK_A $S2" "edge-2's binding"
# Without attestation, nothing binds.
enroll soft-1 "$TOK"
expect_status 201 "$DEV/soft-1"
assert_eq "$(binding soft-1)" "" "soft-1's binding"
list=$(admin identity list)
assert_contains "$list" "edge-1"
assert_contains "$list" "$S1"
assert_contains "$list" "$EK_A"
assert_not_contains "$list" "soft-1"
RC=0
as op-auditor identity list >"$T/list.out" 2>"$T/list.err" || RC=$?
assert_eq "$RC" 0 "exit code of the auditor's identity list: $(cat "$T/list.err")"
assert_eq "$(cat "$T/list.out")" "$list" "hwid identity list remotely and on the CA host"
expect_audit auditor:op-auditor identity.list - allow "2 bound"

echo "== revoked: another TPM, with a valid token, is refused; a token without attestation too"
admin cert revoke --identity edge-1 --reason superseded >/dev/null
refused_binding "$B" edge-1 "$EK_A" "$TOK"
# Under manual approval, refused before any request is held for an admin.
refused_binding "$B" edge-1 "$EK_A" "$(token_new --profile held)" --no-wait
assert_eq "$(admin request list --all | tail -n +2)" "" "requests held for approval"
before=$(token_used "$TOK")
enroll edge-1 "$TOK"
expect_error 403 forbidden "$DEV/edge-1" "edge-1 is bound to the TPM that attested it (EK sha256:$EK_A, since \
certificate $S1), and this enrollment records no attestation by it"
assert_eq "$(token_used "$TOK")" "$before" "token uses after a software key was refused"
assert_contains "$(audit_reasons "token:${TOK%%.*}" enroll - deny)" "edge-1 is bound to the TPM" \
        "the refusals audited"
# On the EK allowlist for edge-1, without a token: refused before any challenge is made.
admin ek add --cn edge-1 --profile bound --ek-cert "$T/ek-b.der" >/dev/null
refused_binding "$B" edge-1 "$EK_A"
# The device asks for its challenge before it makes its key: no key, no challenge.
[ ! -e "$T/refused-$REFUSED/device.tss2.pem" ] || fail "a challenge was made for a TPM bound elsewhere"
assert_eq "$(store_sql 'SELECT count(*) FROM attest_challenges')" 0 "challenges waiting"
assert_no_transient

echo "== expired: the same"
clock_past "$(store_sql "SELECT max(not_after) FROM certificates WHERE identity = 'edge-2'")"
refused_binding "$B" edge-2 "$EK_A" "$TOK"

echo "== the binding survives a restart of hwidd"
hwidd_stop
hwidd_start
refused_binding "$B" edge-1 "$EK_A" "$TOK"
assert_eq "$(binding edge-1)" "$EK_A $S1" "edge-1's binding after the restart"

echo "== hwid identity release: a name bound to nothing; who may release"
expect_exit 1 "nobody is not bound to a TPM" -- "$HWID" identity release --config "$CFG" nobody
expect_exit 1 "server answered 404: nobody is not bound to a TPM" -- as op-admin identity release nobody
expect_exit 1 "server answered 403: auditor 'op-auditor' may not perform 'identity.release': it needs the admin \
role" -- as op-auditor identity release edge-1
expect_audit auditor:op-auditor identity.release edge-1 deny \
        "auditor 'op-auditor' may not perform 'identity.release': it needs the admin role"
expect_exit 2 "needs the NAME to release" -- "$HWID" identity release --config "$CFG"
assert_contains "$("$HWID" identity release --help)" "Usage: hwid identity release"
assert_eq "$(binding edge-1)" "$EK_A $S1" "edge-1's binding after the refused releases"

echo "== released by an admin (remotely): the other TPM enrolls edge-1, and edge-1 is bound to it"
RC=0
as op-admin identity release edge-1 >"$T/rel.out" 2>"$T/rel.err" || RC=$?
assert_eq "$RC" 0 "exit code of the admin's release: $(cat "$T/rel.err")"
assert_contains "$(cat "$T/rel.out")" "edge-1 released from the TPM with EK sha256:$EK_A (bound since certificate $S1"
expect_audit admin:op-admin identity.release edge-1 allow \
        "released from the TPM with EK sha256:$EK_A (bound since certificate $S1)"
assert_eq "$(binding edge-1)" "" "edge-1's binding after its release"
expect_exit 0 "enrolled edge-1" --multiline -- attested_join "$B" "$T/edge-1b" edge-1
HWID_TCTI=$B check_dir "$T/edge-1b" edge-1
assert_eq "$(permanent_id "$T/edge-1b/cert.pem")" "sha256:$EK_B" "the new certificate names the new TPM"
assert_eq "$(binding edge-1)" "$EK_B $(dir_serial "$T/edge-1b")" "edge-1's binding to the new TPM"
admin cert revoke --identity edge-1 >/dev/null
refused_binding "$A" edge-1 "$EK_B" "$TOK"

echo "== released on the CA host: the other TPM enrolls the expired edge-2 with a token"
out=$(admin identity release edge-2)
assert_contains "$out" "edge-2 released from the TPM with EK sha256:$EK_A (bound since certificate $S2"
expect_audit "admin:$(id -un)" identity.release edge-2 allow \
        "released from the TPM with EK sha256:$EK_A (bound since certificate $S2)"
expect_exit 0 "enrolled edge-2" --multiline -- attested_join "$B" "$T/edge-2b" edge-2 "$TOK"
assert_eq "$(binding edge-2)" "$EK_B $(dir_serial "$T/edge-2b")" "edge-2's binding to the new TPM"
assert_no_transient

hwidd_stop
echo "attest-binding: all checks passed"
