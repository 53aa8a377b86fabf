#!/bin/bash
# cmp-enroll.sh — CMP (RFC 9483) against a real hwidd, with Debian 12's
# `openssl cmp` (OpenSSL 3.0) as the client.
# Proves:
#   - ir MAC-protected with a bootstrap token (PasswordBasedMac, senderKID =
#     token id, shared secret the token's secret as printed) gets a
#     certificate for the requested key, confirmed with
#     certConf/pkiConf; the token use is spent; a wrong secret is refused
#     (badMessageCheck) and spends nothing;
#   - p10cr with a CSR; kur signed with the current certificate, for a new
#     key (the old one superseded); rr signed with it: the certificate is in
#     the CRL, and a revoked certificate is refused afterwards (certRevoked);
#   - genm: caCerts holds the CA certificate, certReqTemplate the label's
#     key types, rootCaKeyUpdate answered without an update;
#   - a manual profile: the ir is answered "waiting", the client polls
#     (pollReq/pollRep), an administrator approves, the poll gets the
#     certificate;
#   - refusals with their PKIFailureInfo, nothing changed: a name the
#     profile's cn_pattern refuses and CA:TRUE (badCertTemplate), a second
#     live identity (duplicateCertReq), a token of another profile under a
#     label, a MAC-protected kur (notAuthorized), a signature by a
#     certificate this CA did not issue (badMessageCheck); each counted in
#     hwid_request_errors_total by its reason, as the native API counts it;
#   - the renewal rules for kur and a signed cr (window, rotate_key), a
#     profile's attestation: required (notAuthorized), implicitConfirm, a
#     certConf that rejects the certificate (revoked), no CMP on plain HTTP;
#   - hostile input: truncated DER (400), a replayed request
#     (transactionIdInUse, nothing issued), an unknown protection algorithm
#     (badAlg), an oversize body (413), wrong Content-Type, method, label
#     (more in cmp-hostile.sh);
#   - docs/CMP.md's `CMP=(...)` line survives pasting: the CA's name one word.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=cmp-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cmp-lib.sh"
# shellcheck source=ops-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ops-lib.sh"
require_tools python3

# mac_ir OUT TOKEN NAME KEY [ARGS...] — ir protected with TOKEN's MAC.
mac_ir() {
        local out=$1 tok=$2 name=$3 key=$4
        shift 4
        cmp_secret "$tok" "$DEV/$name.mac"
        cmp_run "$out" -- -cmd ir -ref "${tok%%.*}" -secret "file:$DEV/$name.mac" -mac hmacWithSHA256 \
                -newkey "$key" -subject "/CN=$name" -certout "$DEV/$name.pem" "$@"
}

# docs/CMP.md's CMP=(...) line, pasted into bash: the client's words, the
# CA's name one of them (a string of them split it at its space).
test_doc() {
        local words
        words=$(bash -c "$(grep -m 1 '^CMP=' "$SRCDIR/docs/CMP.md")"'; printf "%s\n" "${CMP[@]}"') ||
                fail "docs/CMP.md's CMP= line does not run in bash"
        grep -qx -- -recipient <<<"$words" || fail "docs/CMP.md's CMP is not one word per argument: $words"
        grep -qx "/CN=hwid CA" <<<"$words" || fail "docs/CMP.md's CMP splits the CA's name: $words"
}

test_ir() {
        local tok
        tok=$(token_new --profile cmp)
        ec_key "$DEV/cmp-1.key"
        # The shared secret is the token's secret as printed, the way every
        # CMP user passes it (docs/CMP.md; the other tests keep it in a file).
        cmp_run "$DEV/ir1" -- -cmd ir -ref "${tok%%.*}" -secret "pass:${tok#*.}" -mac hmacWithSHA256 \
                -newkey "$DEV/cmp-1.key" -subject /CN=cmp-1 -certout "$DEV/cmp-1.pem" \
                -reqout "$DEV/ir1.req,$DEV/ir1.conf"
        cmp_ok "$DEV/ir1"
        assert_contains "$(cat "$DEV/ir1.log")" "received PKICONF" "certConf answered"
        verify_leaf "$DEV/cmp-1.pem"
        assert_eq "$(openssl x509 -in "$DEV/cmp-1.pem" -noout -subject -nameopt RFC2253)" "subject=CN=cmp-1" subject
        assert_eq "$(openssl x509 -in "$DEV/cmp-1.pem" -noout -pubkey)" "$(openssl pkey -in "$DEV/cmp-1.key" -pubout)" \
                "certificate key vs the device key"
        assert_eq "$(token_used "$tok")" 1 "a CMP enrollment spends a token use"
        in_store "$(serial_of "$DEV/cmp-1.pem")" || fail "the CMP certificate is not in the store"
        grep -q "confirm $(serial_of "$DEV/cmp-1.pem"): allow" "$HWIDD_LOG" || fail "no confirmation logged"
}

test_wrong_secret() {
        local tok before
        tok=$(token_new --profile cmp)
        before=$(store_state "$tok")
        ec_key "$DEV/cmp-w.key"
        echo 0000000000000000000000000000000000000000000000000000000000000000 >"$DEV/wrong.mac"
        cmp_run "$DEV/wrong" -- -cmd ir -ref "${tok%%.*}" -secret "file:$DEV/wrong.mac" -mac hmacWithSHA256 \
                -newkey "$DEV/cmp-w.key" -subject /CN=cmp-w
        cmp_refused "$DEV/wrong" badMessageCheck "does not verify"
        # An unknown token id: the same answer.
        cmp_run "$DEV/unknown" -- -cmd ir -ref zzzzzz -secret "file:$DEV/wrong.mac" -mac hmacWithSHA256 \
                -newkey "$DEV/cmp-w.key" -subject /CN=cmp-w
        cmp_refused "$DEV/unknown" badMessageCheck "does not verify"
        # What earlier versions used as the shared secret, and a thief of
        # their store knew: the secret's SHA-256 in hex. No longer a key.
        printf %s "${tok#*.}" | sha256sum | cut -c1-64 >"$DEV/hash.mac"
        cmp_run "$DEV/hash" -- -cmd ir -ref "${tok%%.*}" -secret "file:$DEV/hash.mac" -mac hmacWithSHA256 \
                -newkey "$DEV/cmp-w.key" -subject /CN=cmp-w
        cmp_refused "$DEV/hash" badMessageCheck "does not verify"
        assert_eq "$(store_state "$tok")" "$before" "store after a wrong MAC"
        mac_ir "$DEV/right" "$tok" cmp-w "$DEV/cmp-w.key"
        cmp_ok "$DEV/right"
}

test_p10cr() {
        local tok
        tok=$(token_new --profile cmp)
        make_csr cmp-2
        cmp_secret "$tok" "$DEV/cmp-2.mac"
        cmp_run "$DEV/p10" -- -cmd p10cr -csr "$DEV/cmp-2.csr" -ref "${tok%%.*}" -secret "file:$DEV/cmp-2.mac" \
                -mac hmacWithSHA256 -certout "$DEV/cmp-2.pem"
        cmp_ok "$DEV/p10"
        verify_leaf "$DEV/cmp-2.pem"
        assert_eq "$(token_used "$tok")" 1 "p10cr spends a token use"
}

test_kur_rr() {
        local old new
        ec_key "$DEV/cmp-1b.key"
        cmp_run "$DEV/kur" -- -cmd kur -cert "$DEV/cmp-1.pem" -key "$DEV/cmp-1.key" -newkey "$DEV/cmp-1b.key" \
                -certout "$DEV/cmp-1b.pem"
        cmp_ok "$DEV/kur"
        old=$(serial_of "$DEV/cmp-1.pem")
        new=$(serial_of "$DEV/cmp-1b.pem")
        [ "$old" != "$new" ] || fail "kur returned the old certificate"
        assert_eq "$(openssl x509 -in "$DEV/cmp-1b.pem" -noout -pubkey)" \
                "$(openssl pkey -in "$DEV/cmp-1b.key" -pubout)" "kur certificate key"
        assert_contains "$(cert_rows --identity cmp-1 | awk -v s="$old" '$1 == s')" superseded "the old certificate"
        cmp_run "$DEV/rr" -- -cmd rr -cert "$DEV/cmp-1b.pem" -key "$DEV/cmp-1b.key" -oldcert "$DEV/cmp-1b.pem"
        cmp_ok "$DEV/rr"
        http "$DEV/crl" GET /crl
        expect_status 200 "$DEV/crl"
        openssl crl -inform DER -in "$DEV/crl.body" -noout -text | tr -d ': ' | grep -qi "SerialNumber$new" ||
                fail "the revoked certificate $new is not in the CRL"
        # A revoked certificate is no credential.
        ec_key "$DEV/cmp-1c.key"
        cmp_run "$DEV/kur-revoked" -- -cmd kur -cert "$DEV/cmp-1b.pem" -key "$DEV/cmp-1b.key" -newkey "$DEV/cmp-1c.key"
        cmp_refused "$DEV/kur-revoked" certRevoked "revoked"
        # Another's certificate cannot be revoked with one's own.
        cmp_run "$DEV/rr-other" -- -cmd rr -cert "$DEV/cmp-w.pem" -key "$DEV/cmp-w.key" -oldcert "$DEV/cmp-2.pem"
        cmp_refused "$DEV/rr-other" notAuthorized "only itself"
        in_store "$(serial_of "$DEV/cmp-2.pem")" || fail "cmp-2 lost"
        assert_contains "$(cert_rows --identity cmp-2)" valid "cmp-2 after another's rr"
}

test_genm() {
        local asn
        cmp_run "$DEV/genm" -- -cmd genm -infotype caCerts -unprotected_requests -ref none -rspout "$DEV/genp.der"
        cmp_ok "$DEV/genm"
        asn=$(openssl asn1parse -inform DER -in "$DEV/genp.der" -i)
        assert_contains "$asn" "id-it-caCerts" "genp caCerts"
        assert_contains "$asn" "hwid test CA" "the CA certificate in caCerts"
        cmp_run "$DEV/tmpl" $CMP/p/cmp -- -cmd genm -infotype certReqTemplate -unprotected_requests -ref none \
                -rspout "$DEV/tmpl.der"
        cmp_ok "$DEV/tmpl"
        asn=$(openssl asn1parse -inform DER -in "$DEV/tmpl.der" -i)
        assert_contains "$asn" "id-it-certReqTemplate" "genp certReqTemplate"
        assert_contains "$asn" "prime256v1" "the profile's curve in the template"
        assert_not_contains "$asn" "rsaEncryption" "a key type the profile refuses"
        cmp_run "$DEV/root" -- -cmd genm -infotype rootCaKeyUpdate -unprotected_requests -ref none -rspout "$DEV/root.der"
        cmp_ok "$DEV/root"
        assert_contains "$(openssl asn1parse -inform DER -in "$DEV/root.der" -i)" "id-it-rootCaKeyUpdate" \
                "genp rootCaKeyUpdate"
}

test_manual() {
        local tok pid id i
        tok=$(token_new --profile manual)
        ec_key "$DEV/man-1.key"
        mac_ir "$DEV/man" "$tok" man-1 "$DEV/man-1.key" &
        pid=$!
        for i in $(seq 100); do
                id=$(admin request list | awk '$3 == "man-1" { print $1 }')
                [ -z "$id" ] || break
                sleep 0.2
        done
        [ -n "$id" ] || fail "no pending request for man-1"
        sleep 1
        assert_eq "$(cert_rows --identity man-1 | wc -l)" 0 "certificates while waiting"
        admin request approve "$id" >/dev/null
        wait "$pid"
        RC=0
        cmp_ok "$DEV/man"
        assert_contains "$(cat "$DEV/man.log")" "received POLLREP" "the client polled"
        verify_leaf "$DEV/man-1.pem"
        assert_eq "$(token_used "$tok")" 1 "token uses after approval"
}

test_refusals() {
        local tok before
        tok=$(token_new --profile cmp)
        before=$(store_state "$tok")
        scrape "$DEV/m0"
        ec_key "$DEV/r.key"
        mac_ir "$DEV/name" "$tok" other-1 "$DEV/r.key"
        cmp_refused "$DEV/name" badCertTemplate
        make_csr cmp-ca -addext "basicConstraints=critical,CA:TRUE"
        cmp_secret "$tok" "$DEV/cmp-ca.mac"
        cmp_run "$DEV/ca" -- -cmd p10cr -csr "$DEV/cmp-ca.csr" -ref "${tok%%.*}" -secret "file:$DEV/cmp-ca.mac" \
                -mac hmacWithSHA256
        cmp_refused "$DEV/ca" badCertTemplate "CA"
        mac_ir "$DEV/dup" "$tok" cmp-2 "$DEV/r.key"
        cmp_refused "$DEV/dup" duplicateCertReq "already has a live certificate"
        cmp_run "$DEV/label" $CMP/p/manual -- -cmd ir -ref "${tok%%.*}" -secret "file:$DEV/cmp-ca.mac" \
                -mac hmacWithSHA256 -newkey "$DEV/r.key" -subject /CN=cmp-9
        cmp_refused "$DEV/label" notAuthorized "not for CMP label manual"
        cmp_run "$DEV/mackur" -- -cmd kur -ref "${tok%%.*}" -secret "file:$DEV/cmp-ca.mac" -mac hmacWithSHA256 \
                -oldcert "$DEV/cmp-2.pem" -newkey "$DEV/r.key"
        cmp_refused "$DEV/mackur" notAuthorized "not MAC-protected"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$DEV/self.key" \
                -subj /CN=cmp-9 -days 1 -addext keyUsage=digitalSignature -out "$DEV/self.pem" 2>/dev/null
        cmp_run "$DEV/foreign" -- -cmd cr -cert "$DEV/self.pem" -key "$DEV/self.key" -newkey "$DEV/r.key" \
                -subject /CN=cmp-9
        cmp_refused "$DEV/foreign" badMessageCheck
        assert_eq "$(store_state "$tok")" "$before" "store after every refusal"
        # Counted as the native API counts them, by reason.
        scrape "$DEV/m1"
        assert_eq "$(metric_delta "$DEV/m0" "$DEV/m1" 'hwid_request_errors_total{error="identity_has_certificate"}')" 1 \
                "second live identity refusals counted"
        assert_eq "$(metric_delta "$DEV/m0" "$DEV/m1" 'hwid_request_errors_total{error="forbidden"}')" 4 \
                "refusals by policy counted (name, CA:TRUE, label, MAC-protected kur)"
}

# The renewal rules of /v1/renew hold for kur and a signed cr; the profile's
# attestation rule for a MAC-protected ir; implicitConfirm; a certConf that
# rejects the certificate revokes it; the plain-HTTP listener serves no CMP.
test_rules() {
        local tok before old
        # A signed cr renews like kur: the old certificate is superseded.
        ec_key "$DEV/cmp-2b.key"
        cmp_run "$DEV/cr" -- -cmd cr -cert "$DEV/cmp-2.pem" -key "$DEV/cmp-2.key" -newkey "$DEV/cmp-2b.key" \
                -subject /CN=cmp-2 -certout "$DEV/cmp-2b.pem"
        cmp_ok "$DEV/cr"
        verify_leaf "$DEV/cmp-2b.pem"
        old=$(serial_of "$DEV/cmp-2.pem")
        assert_contains "$(cert_rows --identity cmp-2 | awk -v s="$old" '$1 == s')" superseded "cmp-2 after a signed cr"
        # Before the renewal window opens: notAuthorized, nothing changed.
        tok=$(token_new --profile early)
        ec_key "$DEV/early-1.key"
        mac_ir "$DEV/early" "$tok" early-1 "$DEV/early-1.key" -implicit_confirm
        cmp_ok "$DEV/early"
        # implicitConfirm granted: no certConf, the certificate issued all the same.
        assert_not_contains "$(cat "$DEV/early.log")" "PKICONF" "a certConf after implicitConfirm"
        verify_leaf "$DEV/early-1.pem"
        before=$(store_state "$tok")
        ec_key "$DEV/early-1b.key"
        cmp_run "$DEV/early-kur" -- -cmd kur -cert "$DEV/early-1.pem" -key "$DEV/early-1.key" \
                -newkey "$DEV/early-1b.key"
        cmp_refused "$DEV/early-kur" notAuthorized
        assert_eq "$(store_state "$tok")" "$before" "store after a kur before the window"
        # rotate_key: a kur for the same key is refused, nothing changed.
        tok=$(token_new --profile rot)
        ec_key "$DEV/rot-1.key"
        mac_ir "$DEV/rot" "$tok" rot-1 "$DEV/rot-1.key"
        cmp_ok "$DEV/rot"
        before=$(store_state "$tok")
        cmp_run "$DEV/rot-kur" -- -cmd kur -cert "$DEV/rot-1.pem" -key "$DEV/rot-1.key" -newkey "$DEV/rot-1.key"
        cmp_refused "$DEV/rot-kur" badCertTemplate "new key"
        assert_eq "$(store_state "$tok")" "$before" "store after a kur for the same key"
        # attestation: required — CMP carries no evidence: refused, no use spent.
        tok=$(token_new --profile att)
        before=$(store_state "$tok")
        mac_ir "$DEV/att" "$tok" att-1 "$DEV/rot-1.key"
        cmp_refused "$DEV/att" notAuthorized "attestation"
        assert_eq "$(store_state "$tok")" "$before" "store after an ir for an attestation profile"
        # A certConf that rejects the certificate (the client cannot verify it
        # against what it trusts) revokes it.
        tok=$(token_new --profile cmp)
        ec_key "$DEV/cmp-3.key"
        mac_ir "$DEV/conf" "$tok" cmp-3 "$DEV/cmp-3.key" -out_trusted "$DEV/self.pem"
        [ "$RC" != 0 ] || fail "openssl cmp accepted a certificate it cannot verify"
        assert_contains "$(cert_rows --identity cmp-3)" revoked "a certificate its holder rejected"
        # The plain-HTTP listener does not serve CMP.
        assert_eq "$(curl -sS -o /dev/null -w '%{http_code}' -H 'Content-Type: application/pkixcmp' \
                --data-binary "@$DEV/ir1.req" "http://127.0.0.1:$HTTP_PORT$CMP")" 404 "CMP over plain HTTP"
}

# patched IN OUT — IN with a fresh transactionID, and (with alg) its MAC
# algorithm's OID changed to one nobody knows.
patched() {
        python3 - "$@" <<'PY'
import os, sys
d = bytearray(open(sys.argv[1], 'rb').read())
i = d.find(b'\xa4\x12\x04\x10')
d[i + 4:i + 20] = os.urandom(16)
if len(sys.argv) > 3:
    pbm = bytes.fromhex('2a864886f67d07420d')
    j = d.find(pbm)
    d[j + len(pbm) - 1] = 0x0e
open(sys.argv[2], 'wb').write(bytes(d))
PY
}

test_hostile() {
        local tok before
        tok=$(token_new --profile cmp)
        before=$(store_state "$tok")
        head -c 200 "$DEV/ir1.req" >"$DEV/trunc.der"
        cmp_post "$DEV/trunc" "$DEV/trunc.der"
        expect_status 400 "$DEV/trunc"
        assert_contains "$(cat "$DEV/trunc.body")" "not one DER PKIMessage" "truncated DER"
        # The first ir again, byte for byte: its transactionID is spent.
        cmp_post "$DEV/replay" "$DEV/ir1.req"
        expect_status 200 "$DEV/replay"
        assert_eq "$(header Content-Type "$DEV/replay")" application/pkixcmp "Content-Type of a CMP answer"
        grep -aq "used already" "$DEV/replay.body" || fail "a replayed ir is not refused as such"
        patched "$DEV/ir1.req" "$DEV/alg.der" alg
        cmp_post "$DEV/alg" "$DEV/alg.der"
        expect_status 200 "$DEV/alg"
        grep -aq "protection algorithm not supported" "$DEV/alg.body" || fail "an unknown MAC algorithm is not refused"
        head -c 70000 /dev/urandom >"$DEV/big.der"
        cmp_post "$DEV/big" "$DEV/big.der"
        expect_status 413 "$DEV/big"
        http "$DEV/ct" POST "$CMP" -H "Content-Type: application/octet-stream" --data-binary "@$DEV/ir1.req"
        expect_status 400 "$DEV/ct"
        http "$DEV/get" GET "$CMP"
        expect_status 405 "$DEV/get"
        http "$DEV/nolabel" POST "$CMP/p/nosuch" -H "Content-Type: application/pkixcmp" --data-binary "@$DEV/ir1.req"
        expect_status 404 "$DEV/nolabel"
        assert_eq "$(store_state "$tok")" "$before" "store after hostile input"
        assert_eq "$(cert_rows --identity cmp-1 | wc -l)" 2 "cmp-1's certificates after the replay"
}

ca_setup
add_profiles <<'YAML'
  cmp:
    validity: 30d
    key_types: [ec-p256]
    extended_key_usage: [clientAuth]
    subject:
      allowed_rdns: [CN]
      cn_pattern: "cmp-*"
    renewal:
      window: 1.0
  early:
    validity: 30d
    key_types: [ec-p256]
    renewal:
      window: 0.1
  rot:
    validity: 30d
    key_types: [ec-p256]
    renewal:
      window: 1.0
      rotate_key: true
  att:
    validity: 30d
    key_types: [ec-p256]
    attestation: required
YAML
# A profile may ask for attestation only with EK roots configured; no TPM
# ever attests here, so any CA certificate stands for them.
mkdir -p "$T/ek-roots"
cp "$CA_DIR/ca.pem" "$T/ek-roots/"
{ printf 'attestation:\n  ek_roots: [%s]\n' "$T/ek-roots"; cat "$CFG"; } >"$CFG.new"
mv "$CFG.new" "$CFG"
public_metrics
hwidd_start
test_doc
test_ir
test_wrong_secret
test_p10cr
test_genm
test_refusals
test_kur_rr
test_rules
test_hostile
test_manual
hwidd_stop
echo "cmp-enroll: all checks passed"
