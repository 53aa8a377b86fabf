#!/bin/bash
# shellcheck disable=SC2119  # lib.sh helpers take optional arguments
# attest-enroll.sh — TPM attestation at a real hwidd (issue 12): devices on
# swtpm, enrolled with `hwid join --attest` and, for what a lying device
# would send, attest-client (a second client of the protocol).
# Proves:
#   - an attested join is issued under a profile with `attestation:
#     required`; the certificate names the TPM in a subjectAltName otherName
#     permanentIdentifier (RFC 4043) that `openssl x509 -text` names and
#     python3-cryptography reads as sha256:<hex> of the EK's
#     SubjectPublicKeyInfo (computed here by openssl from the EK certificate
#     tpm2-tools reads from NV); the store records the EK certificate's
#     SHA-256, the EK key's and the AK name (hwid cert show, the store);
#   - refused with 403 attestation_failed, the reason naming the proof that
#     failed, nothing issued and the token unspent: a software key's CSR
#     (openssl req); a TPM of a foreign manufacturer; another TPM's EK
#     certificate (the credential cannot be activated, a guess is wrong);
#     an answer sent twice; a Certify made for another challenge; an AK
#     without `restricted`; a duplicable device key (no fixedTPM); a CSR
#     for another key than the certified one;
#   - the EK allowlist: an listed TPM enrolls without a token, under its
#     name only; a TPM not listed is refused (401); a listed TPM asking for
#     another name is refused (403); one live certificate per identity still
#     holds; hwid ek import (JSON, CSV) adds all or nothing; hwid ek remove;
#     an entry enrolls its name again after a revocation, audited as a
#     `reenroll`;
#   - `optional`: attested certificates are marked, others are issued plain;
#   - a renewal whose new key is attested by another TPM is refused;
#   - a challenge made by one hwidd is answered at another on the same
#     database (single use across restarts and replicas);
#   - no transient object is left in any TPM after any step.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=attest-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/attest-lib.sh"

# Two TPMs of one manufacturer (A, B), and one of another (F).
swtpm_init 2
A=${TCTIS[0]} B=${TCTIS[1]}
manufacturer_roots "$T/ek-roots"
swtpm_init 1
F=${TCTIS[2]}
attest_ca "$T/ek-roots" <<'EOF'
  attested:
    validity: 30d
    subject: {allowed_rdns: [CN]}
    renewal: {window: 1.0, rotate_key: true}
    attestation: required
  opt:
    validity: 30d
    subject: {allowed_rdns: [CN]}
    attestation: optional
  factory:
    validity: 30d
    subject: {allowed_rdns: [CN]}
    approval: manual
    attestation: required
EOF
ek_cert "$A" "$T/ek-a.der"
ek_cert "$B" "$T/ek-b.der"
EK_A=$(ek_pub_sha256 "$T/ek-a.der")
EK_B=$(ek_pub_sha256 "$T/ek-b.der")

# attested_join TCTI DIR NAME [JOIN-ARGS...] — hwid join --attest on that TPM.
attested_join() {
        local tcti=$1 dir=$2 name=$3
        shift 3
        join_dev "$dir" "$name" "${HWID_TOKEN:-}" --tcti "$tcti" --attest "$@"
}

# refused_state TOKEN — what a refusal must leave as it was.
refused_state() {
        echo "certs=$(cert_count) used=$(token_used "$1")"
}

echo "== an attested join is issued; the certificate names the TPM, the store records the EK"
tok=$(token_new --profile attested)
HWID_TOKEN=$tok expect_exit 0 "enrolled dev-a" --multiline -- attested_join "$A" "$T/dev-a" dev-a
check_dir "$T/dev-a" dev-a
assert_no_transient
text=$(openssl x509 -in "$T/dev-a/cert.pem" -noout -text)
assert_contains "$text" "othername: Permanent Identifier::" "openssl names the otherName"
assert_eq "$(permanent_id "$T/dev-a/cert.pem")" "sha256:$EK_A" "permanentIdentifier (python3-cryptography)"
# The same value as openssl parses it out of the extension.
openssl x509 -in "$T/dev-a/cert.pem" -outform der -out "$T/dev-a.der"
assert_contains "$(openssl asn1parse -inform der -in "$T/dev-a.der" -strparse \
        "$(openssl asn1parse -inform der -in "$T/dev-a.der" | awk -F: '/Subject Alternative Name/ { getline;
        sub(/^ */, "", $1); print $1 }')" 2>&1)" "UTF8STRING        :sha256:$EK_A" "permanentIdentifier (openssl asn1parse)"
serial=$(serial_of "$T/dev-a/cert.pem")
show=$(admin cert show "$serial")
assert_contains "$show" "attested: TPM ek-sha256:$EK_A"
assert_contains "$show" "ek-cert-sha256: $(sha256sum <"$T/ek-a.der" | cut -d' ' -f1)"
assert_eq "$(store_sql "SELECT ek_pub_sha256 || ' ' || length(ak_name) FROM certificates
        WHERE serial = '$serial'")" "$EK_A 68" "the store's record (AK name: SHA-256 name, 34 bytes)"
assert_eq "$(token_used "$tok")" 1 "token spent by the attested join"

echo "== malformed requests: 400 invalid_argument naming the field, 413 when too large"
tok=$(token_new --profile attested --uses 9)
# attest_post OUT BODY [CONTENT-TYPE] — POST /v1/attest with the token.
attest_post() {
        printf '%s' "$2" >"$1.in"
        http "$1" POST /v1/attest -H "Authorization: Bearer $tok" -H "Content-Type: ${3:-application/json}" \
                --data-binary "@$1.in"
}
b64a() { base64 -w0 <"$T/ek-a.der"; }
attest_post "$T/m1" '{"ek_cert": "AAAA", "ek_public": "AAAA"'
expect_error 400 invalid_argument "$T/m1" "the attestation request is not one JSON object"
# A member twice: which one would a proxy, a log reader, hwidd believe?
attest_post "$T/m1d" "{\"ek_cert\": \"$(b64a)\", \"ek_public\": \"AAAA\", \"ak_public\": \"AAAA\", \"ek_cert\": \"AAAA\"}"
expect_error 400 invalid_argument "$T/m1d" \
        "the attestation request is not valid JSON: an object names a member twice (line 1, column"
printf '{"csr": "x", "csr": "y"}' >"$T/m1c.in"
http "$T/m1c" POST /csr -H "Authorization: Bearer $tok" -H "Content-Type: application/json" --data-binary "@$T/m1c.in"
expect_error 400 invalid_argument "$T/m1c" "the request body is not valid JSON: an object names a member twice"
attest_post "$T/m2" "{\"ek_cert\": \"$(b64a)\", \"ek_public\": \"AAAA\", \"ak_public\": \"AAAA\", \"x\": \"\"}"
expect_error 400 invalid_argument "$T/m2" "the attestation request: unknown member 'x'"
attest_post "$T/m3" "{\"ek_cert\": \"$(b64a)\", \"ek_public\": \"AAAA\"}"
expect_error 400 invalid_argument "$T/m3" "the attestation request: 'ak_public' is missing"
attest_post "$T/m4" "{\"ek_cert\": \"$(b64a)\", \"ek_public\": \"A-A_\", \"ak_public\": \"AAAA\"}"
expect_error 400 invalid_argument "$T/m4" "the attestation request: 'ek_public' is not base64"
attest_post "$T/m5" "{\"ek_cert\": 7, \"ek_public\": \"AAAA\", \"ak_public\": \"AAAA\"}"
expect_error 400 invalid_argument "$T/m5" "the attestation request: 'ek_cert' must be a string"
attest_post "$T/m6" "{\"ek_cert\": \"$(b64a)\", \"ek_public\": \"AAAA\", \"ak_public\": \"AAAA\"}"
expect_error 400 invalid_argument "$T/m6" "the EK public area is not"
attest_post "$T/m7" "{\"ek_cert\": \"$(head -c 6000 /dev/zero | base64 -w0)\", \"ek_public\": \"AA==\", \"ak_public\": \"AA==\"}"
expect_error 400 invalid_argument "$T/m7" "the attestation request: 'ek_cert' is longer than 4096 bytes"
attest_post "$T/m8" "{\"pad\": \"$(head -c 20000 /dev/zero | tr '\0' x)\"}"
expect_error 413 too_large "$T/m8" "at most 16384 bytes"
attest_post "$T/m9" '{}' application/pkcs10
expect_error 400 invalid_argument "$T/m9" "an attestation request is application/json"
# The CSR body: the same care.
# csr_json OUT BODY — POST /csr, JSON, with the token.
csr_json() {
        printf '%s' "$2" >"$1.in"
        http "$1" POST /csr -H "Authorization: Bearer $tok" -H "Content-Type: application/json" --data-binary "@$1.in"
}
csr_json "$T/c1" '{"csr": "x", "attestation": {"id": "zz"}}'
expect_error 400 invalid_argument "$T/c1" "the request's attestation: 'id' has 2 characters (32 to 32)"
csr_json "$T/c2" '{"attestation": {}}'
expect_error 400 invalid_argument "$T/c2" "the request body: 'csr' (the PEM certificate request) is missing"
# Without a token and without evidence: authentication, as ever.
http "$T/c3" POST /v1/attest -H "Content-Type: application/json" --data-binary "@$T/m6.in"
expect_error 401 unauthenticated "$T/c3" "is not on the CA's EK allowlist, and the request carries no bootstrap token"
assert_eq "$(token_used "$tok")" 0 "no token use spent by malformed requests"
assert_eq "$(store_sql 'SELECT count(*) FROM attest_challenges')" 0 "no challenge made for them"

echo "== refused: a software key's CSR under a profile that requires attestation"
tok=$(token_new --profile attested --uses 9)
before=$(refused_state "$tok")
enroll soft-1 "$tok"
expect_error 403 attestation_failed "$DEV/soft-1" "profile 'attested' requires TPM attestation of the key"
assert_eq "$(refused_state "$tok")" "$before" "nothing issued, no token use spent"

echo "== refused: a TPM of a foreign manufacturer"
HWID_TOKEN=$tok expect_exit 1 "does not chain to a configured TPM manufacturer root" --multiline -- \
        attested_join "$F" "$T/dev-f" dev-f
assert_contains "$(cat "$T/last.err")" "server answered 403"
assert_eq "$(refused_state "$tok")" "$before" "nothing issued for the foreign TPM"
assert_no_transient

echo "== refused: another TPM's EK certificate (copied), answered by this TPM"
mkdir -p "$T/ek-b"
run_ok "$ATTEST_TOOL" ek-export --tcti "$B" --ek rsa-2048 --out "$T/ek-b" >/dev/null
run_ok "$HWID" key create "tpm2:file=$T/a1.pem" --tcti "$A" >/dev/null
out=$(HWID_TOKEN=$tok client "$A" "tpm2:file=$T/a1.pem" dev-x --ek rsa-2048 --ek-from "$T/ek-b" --guess)
assert_contains "$out" "attest: 201" "the CA cannot tell a copied EK certificate from the sender's"
assert_contains "$out" "tpm: the TPM cannot activate the credential: it was made for another EK"
assert_contains "$out" "csr: 403 attestation_failed: the activated secret is wrong"
assert_eq "$(refused_state "$tok")" "$before" "nothing issued for a copied EK certificate"
assert_no_transient

echo "== refused: the same answer twice; a Certify made for another challenge"
out=$(HWID_TOKEN=$tok client "$A" "tpm2:file=$T/a1.pem" dev-x --again)
assert_contains "$out" "csr: 201"
assert_contains "$out" "again: 403 attestation_failed: unknown attestation challenge (already answered"
after_one=$(refused_state "$tok")
out=$(HWID_TOKEN=$tok client "$A" "tpm2:file=$T/a1.pem" dev-y --old-certify)
assert_contains "$out" "csr: 403 attestation_failed: the Certify is over another nonce than this challenge's"
assert_eq "$(refused_state "$tok")" "$after_one" "nothing issued for an old Certify"
assert_no_transient

echo "== refused: an AK without restricted"
run_ok tpm2_createprimary -T "$A" -Q -C e -g sha256 -G ecc256:ecdsa-sha256 \
        -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign' -c "$T/ak.ctx"
run_ok tpm2_readpublic -T "$A" -Q -c "$T/ak.ctx" -f tpmt -o "$T/ak-unrestricted.pub"
run_ok tpm2_flushcontext -T "$A" -t
out=$(HWID_TOKEN=$tok client "$A" "tpm2:file=$T/a1.pem" dev-z --ak-public "$T/ak-unrestricted.pub")
assert_contains "$out" "attest: 403 attestation_failed: the AK is not a restricted signing key fixed to its TPM: it lacks restricted"
assert_eq "$(refused_state "$tok")" "$after_one" "nothing issued for an unrestricted AK"
assert_no_transient

echo "== refused: a duplicable device key (no fixedTPM)"
run_ok "$ATTEST_TOOL" dup-key --tcti "$A" --out "$T/dup.pem"
HWID_TOKEN=$tok expect_exit 1 "it lacks fixedTPM" --multiline -- join_dev "$T/dev-dup" dev-dup "$tok" \
        --tcti "$A" --attest --key "tpm2:file=$T/dup.pem"
assert_eq "$(refused_state "$tok")" "$after_one" "nothing issued for a duplicable key"
assert_no_transient

echo "== refused: a CSR for another key than the certified one"
run_ok "$HWID" key create "tpm2:file=$T/a2.pem" --tcti "$A" >/dev/null
out=$(HWID_TOKEN=$tok client "$A" "tpm2:file=$T/a1.pem" dev-w --csr-key "tpm2:file=$T/a2.pem")
assert_contains "$out" "csr: 403 attestation_failed: the CSR's key is not the certified TPM key"
assert_eq "$(refused_state "$tok")" "$after_one" "nothing issued for another key's CSR"
assert_no_transient

echo "== the EK allowlist: enrollment by EK, without a token"
admin ek add --ek-cert "$T/ek-b.der" --cn dev-b --profile attested >/dev/null
assert_contains "$(admin ek list)" "dev-b"
assert_contains "$(admin ek list)" "$EK_B"
expect_exit 1 "already on the EK allowlist" -- "$HWID" ek add --config "$CFG" --ek-cert "$T/ek-b.der" --cn dev-b2
expect_exit 2 "needs --cn and one of --ek-cert or --ek-sha256" -- "$HWID" ek add --config "$CFG" \
        --ek-sha256 "$EK_B" --cn x --ek-cert "$T/ek-b.der"
ek_cert "$F" "$T/ek-f.der"
expect_exit 1 "cannot attest with this CA: the EK certificate does not chain" -- \
        "$HWID" ek add --config "$CFG" --ek-cert "$T/ek-f.der" --cn dev-f
certs=$(cert_count)
# Another name than its own: refused.
expect_exit 1 "the EK allowlist lists this TPM as 'dev-b'; it cannot enroll 'dev-b-other'" --multiline -- \
        attested_join "$B" "$T/dev-b-other" dev-b-other
assert_contains "$(cat "$T/last.err")" "server answered 403"
# Its own name: issued, recorded as enrolled by its EK.
expect_exit 0 "enrolled dev-b" --multiline -- attested_join "$B" "$T/dev-b" dev-b
assert_contains "$(cat "$T/last.err")" "no token: the TPM must be on the CA's EK allowlist"
HWID_TCTI=$B check_dir "$T/dev-b" dev-b
assert_eq "$(permanent_id "$T/dev-b/cert.pem")" "sha256:$EK_B" "the EK-enrolled certificate names its TPM"
assert_eq "$(store_sql "SELECT count(*) FROM audit WHERE actor = 'ek:dev-b' AND action = 'enroll'
        AND outcome = 'allow'")" 1 "audited as enrolled by the EK"
# One live certificate per identity still holds.
expect_exit 1 "dev-b already has a live certificate" --multiline -- attested_join "$B" "$T/dev-b2" dev-b
# A TPM not on the list, without a token: refused.
expect_exit 1 "is not on the CA's EK allowlist, and the request carries no bootstrap token" --multiline -- \
        attested_join "$A" "$T/dev-a2" dev-a2
assert_contains "$(cat "$T/last.err")" "server answered 401"
assert_eq "$(cert_count)" $((certs + 1)) "one certificate issued by EK, none for the refusals"
# Removed: no longer enrolls.
run_ok "$HWID" cert revoke --config "$CFG" --identity dev-b >/dev/null
admin ek remove "sha256:$EK_B" >/dev/null
expect_exit 1 "not on the CA's EK allowlist" --multiline -- attested_join "$B" "$T/dev-b3" dev-b
assert_no_transient

echo "== hwid ek import: all or nothing"
b64() { base64 -w0 <"$1"; }
printf '{"devices": [{"cn": "dev-b", "profile": "attested", "ek_cert": "%s"},\n {"cn": "dev-f", "ek_cert": "%s"}]}\n' \
        "$(b64 "$T/ek-b.der")" "$(b64 "$T/ek-f.der")" >"$T/manifest.json"
expect_exit 1 "devices[1] cannot attest with this CA" -- "$HWID" ek import --config "$CFG" "$T/manifest.json"
assert_not_contains "$(admin ek list)" "dev-b"
printf '# from the factory line\ncn,profile,ek_pub_sha256\ndev-b,attested,%s\n' "$EK_B" >"$T/manifest.csv"
assert_contains "$(admin ek import "$T/manifest.csv")" "1 TPM added"
printf 'cn,ek_pub_sha256\n"dev-q",%s\n' "$EK_A" >"$T/bad.csv"
expect_exit 1 "dev-b is already on the EK allowlist" -- "$HWID" ek import --config "$CFG" "$T/manifest.csv"
expect_exit 1 "bad.csv:2: quoted fields are not supported" -- "$HWID" ek import --config "$CFG" "$T/bad.csv"
expect_exit 0 "enrolled dev-b" --multiline -- attested_join "$B" "$T/dev-b4" dev-b
# Its certificate was revoked: the entry brought it back, audited as such.
assert_contains "$(store_sql "SELECT actor || ' ' || reason FROM audit WHERE action = 'reenroll' AND target = 'dev-b'")" \
        "ek:dev-b issued under profile attested: re-enrollment by TPM attestation without a token: rule ek-allowlist, \
EK sha256:$EK_B, last certificate $(serial_of "$T/dev-b/cert.pem") (profile attested) revoked (unspecified)"
assert_no_transient

echo "== optional: attested certificates are marked, others issued plain"
tok=$(token_new --profile opt --uses 2)
HWID_TOKEN=$tok expect_exit 0 "enrolled dev-o1" --multiline -- attested_join "$A" "$T/dev-o1" dev-o1
assert_eq "$(permanent_id "$T/dev-o1/cert.pem")" "sha256:$EK_A" "optional: marked"
enroll soft-o "$tok"
expect_status 201 "$DEV/soft-o"
assert_not_contains "$(openssl x509 -in "$DEV/soft-o.pem" -noout -text)" "Permanent Identifier"
assert_contains "$(admin cert show "$(serial_of "$DEV/soft-o.pem")")" "attested: no"
assert_no_transient

echo "== manual approval keeps what the attestation proved until issuance"
tok=$(token_new --profile factory)
HWID_TOKEN=$tok expect_exit 3 "not waiting" --multiline -- attested_join "$A" "$T/dev-m" dev-m --no-wait
req=$(admin request list | awk 'NR == 2 { print $1 }')
admin request approve "$req" >/dev/null
expect_exit 0 "enrolled dev-m" --multiline -- join_dev "$T/dev-m" dev-m "" --tcti "$A" --attest
assert_eq "$(permanent_id "$T/dev-m/cert.pem")" "sha256:$EK_A" "approved later, still the TPM's"
assert_no_transient

echo "== refused: a renewal whose new key is attested by another TPM"
run_ok "$HWID" key create "tpm2:file=$T/b-new.pem" --tcti "$B" >/dev/null
out=$(client "$B" "tpm2:file=$T/b-new.pem" dev-a --cert "$T/dev-a/cert.pem" \
        --cert-key "$(cat "$T/dev-a/key.uri")" --cert-tcti "$A")
assert_contains "$out" "csr: 403 attestation_failed: the key of 'dev-a' is attested in another TPM"
assert_eq "$(store_sql "SELECT status FROM certificates WHERE serial = '$serial'")" valid \
        "the certificate is not superseded"
# The same TPM: renewed, attested, the same EK.
run_ok "$HWID" key create "tpm2:file=$T/a-new.pem" --tcti "$A" >/dev/null
out=$(client "$A" "tpm2:file=$T/a-new.pem" dev-a --cert "$T/dev-a/cert.pem" \
        --cert-key "$(cat "$T/dev-a/key.uri")" --cert-tcti "$A" --out "$T/dev-a-renewed.pem")
assert_contains "$out" "csr: 201"
assert_eq "$(permanent_id "$T/dev-a-renewed.pem")" "sha256:$EK_A" "renewed in the same TPM"
assert_no_transient

echo "== a challenge made by one hwidd, answered at another on the same database"
PORT2=$(free_port)
sed "s/^listen: .*/listen: \"127.0.0.1:$PORT2\"/; s/^http_listen: .*//" "$CFG" >"$CA_DIR/hwidd-2.yaml"
start_bg "$T/hwidd-2.log" "$HWIDD" --config "$CA_DIR/hwidd-2.yaml"
wait_for_port "$PORT2" 20 "$BG_PID"
tok=$(token_new --profile attested --uses 2)
out=$(HWID_TOKEN=$tok client "$A" "tpm2:file=$T/a1.pem" dev-r --csr-server "https://127.0.0.1:$PORT2" --again)
assert_contains "$out" "attest: 201"
assert_contains "$out" "csr: 201"
assert_contains "$out" "again: 403 attestation_failed: unknown attestation challenge"
assert_no_transient

hwidd_stop
echo "attest-enroll: all checks passed"
