#!/bin/bash
# ca-enroll.sh — enrollment with a bootstrap token, seen from the device
# side with curl and openssl only (CA key in SoftHSM2, hwidd on loopback).
# Proves:
#   - hwidd maps libpq on a PostgreSQL store only (pg-suite-ca-enroll), not on SQLite;
#   - an openssl-made CSR (PEM or DER) posted with curl gets 201 and a PEM
#     certificate that `openssl verify -CAfile ca.pem` accepts for client
#     use; it carries the CSR's key and CN, basicConstraints CA:FALSE
#     (critical), keyUsage (critical, digitalSignature only), EKU clientAuth
#     only, an SKI (SHA-1 of the key, RFC 5280 method 1), an AKI equal to the
#     CA's SKI, the CRL distribution point, and exactly the SANs the profile
#     allows; its serial has >= 64 bits; the store holds the same bytes;
#   - the certificate is no CA: openssl refuses a chain through it;
#   - a CSR asking for CA:TRUE/keyCertSign never yields a CA certificate:
#     refused (403, nothing issued) under `ungranted: refuse`, issued without
#     it under `ungranted: drop`; a SAN the profile does not allow: 403;
#   - keys hwid never accepts (P-521, Ed25519, RSA-1024), two CNs, an
#     attribute the profile does not allow, and O = the admin group from a
#     CSR are refused, issuing nothing; RSA-2048 is accepted;
#   - GET /ca, /healthz, /crl, and /v1/identities/NAME (mutual TLS, own
#     identity only).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

# ext CERT NAME — the lines of extension NAME (openssl x509 -ext), joined.
ext() {
        openssl x509 -in "$1" -noout -ext "$2" 2>/dev/null | tr -s ' \n' ' ' | sed 's/ $//'
}

# hexid TEXT — the first colon-separated hex key identifier in TEXT.
hexid() {
        grep -oE '([0-9A-F]{2}:){19}[0-9A-F]{2}' <<<"$1" | head -n 1
}

# check_leaf NAME SANS — the certificate $DEV/NAME.pem, issued for the CSR
# $DEV/NAME.csr, is the leaf described above, with the SAN line SANS.
check_leaf() {
        local name=$1 sans=$2 pem=$DEV/$1.pem ski serial
        verify_leaf "$pem"
        assert_eq "$(openssl x509 -in "$pem" -noout -subject -nameopt RFC2253)" "subject=CN=$name" "subject"
        assert_eq "$(openssl x509 -in "$pem" -noout -issuer -nameopt RFC2253)" "issuer=CN=hwid test CA" "issuer"
        assert_eq "$(openssl x509 -in "$pem" -noout -pubkey)" "$(openssl req -in "$DEV/$name.csr" -noout -pubkey)" \
                "certificate key vs CSR key"
        assert_eq "$(ext "$pem" basicConstraints)" "X509v3 Basic Constraints: critical CA:FALSE" "basicConstraints"
        assert_eq "$(ext "$pem" keyUsage)" "X509v3 Key Usage: critical Digital Signature" "keyUsage"
        assert_eq "$(ext "$pem" extendedKeyUsage)" "X509v3 Extended Key Usage: TLS Web Client Authentication" "EKU"
        assert_eq "$(ext "$pem" crlDistributionPoints)" \
                "X509v3 CRL Distribution Points: Full Name: URI:http://localhost:$HTTP_PORT/crl" "CRL distribution point"
        assert_eq "$(ext "$pem" subjectAltName)" "$sans" "subjectAltName"
        ski=$(openssl x509 -in "$pem" -noout -pubkey | openssl pkey -pubin -outform DER | tail -c 65 |
                sha1sum | cut -c1-40 | tr a-f A-F | sed 's/../&:/g; s/:$//')
        assert_eq "$(hexid "$(ext "$pem" subjectKeyIdentifier)")" "$ski" "SKI (SHA-1 of the public key)"
        assert_eq "$(hexid "$(ext "$pem" authorityKeyIdentifier)")" \
                "$(hexid "$(ext "$CA_DIR/ca.pem" subjectKeyIdentifier)")" "AKI vs the CA's SKI"
        serial=$(serial_of "$pem")
        [ $((${#serial} * 4)) -ge 64 ] || fail "serial $serial has fewer than 64 bits"
        [ "$(admin cert show "$serial" | sed -n '/BEGIN CERTIFICATE/,/END CERTIFICATE/p')" = "$(cat "$pem")" ] ||
                fail "hwid cert show $serial differs from what the client received"
        check_not_a_ca "$pem" "$DEV/$name.key"
}

test_enroll_pem() {
        local tok
        tok=$(token_new)
        enroll dev-01 "$tok" -addext subjectAltName=DNS:dev-01
        expect_status 201 "$DEV/dev-01"
        assert_eq "$(header Content-Type "$DEV/dev-01")" application/x-pem-file "Content-Type of a 201"
        check_leaf dev-01 "X509v3 Subject Alternative Name: DNS:dev-01"
        assert_eq "$(token_used "$tok")" 1 "token uses after one enrollment"
}

# A DER CSR under the lab profile, asking for every SAN type it allows.
test_enroll_der_sans() {
        local tok sans=DNS:dev-02.lab.example,IP:10.1.2.3,URI:spiffe://test/dev-02
        tok=$(token_new --profile lab)
        make_csr dev-02 -addext "subjectAltName=$sans"
        openssl req -in "$DEV/dev-02.csr" -outform DER -out "$DEV/dev-02.der"
        post_csr "$DEV/dev-02" "$tok" "$DEV/dev-02.der"
        expect_status 201 "$DEV/dev-02"
        cp "$DEV/dev-02.body" "$DEV/dev-02.pem"
        check_leaf dev-02 "X509v3 Subject Alternative Name: DNS:dev-02.lab.example, IP Address:10.1.2.3, URI:spiffe://test/dev-02"
}

# refused NAME TOKEN REASON-PART OPENSSL-REQ-ARGS... — a 403 that issues nothing.
refused() {
        local name=$1 tok=$2 part=$3 before
        shift 3
        before=$(store_state "$tok")
        enroll "$name" "$tok" "$@"
        expect_error 403 forbidden "$DEV/$name" "$part"
        assert_eq "$(store_state "$tok")" "$before" "store after the refusal of $name"
}

test_san_refused() {
        local tok
        tok=$(token_new)
        refused dev-03 "$tok" evil.example -addext subjectAltName=DNS:dev-03,DNS:evil.example
        refused dev-04 "$tok" 10.9.9.9 -addext subjectAltName=IP:10.9.9.9
        refused dev-05 "$tok" "" -addext subjectAltName=email:dev-05@example.org
}

CA_EXTS=(-addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign,digitalSignature")

test_ca_true_refused() {
        local tok
        tok=$(token_new)
        refused ca-want-1 "$tok" "" "${CA_EXTS[@]}"
        refused ca-want-2 "$tok" "" -addext basicConstraints=critical,CA:TRUE,pathlen:0
}

test_ca_true_dropped() {
        local tok
        tok=$(token_new --profile lab)
        enroll ca-want-3 "$tok" "${CA_EXTS[@]}"
        expect_status 201 "$DEV/ca-want-3"
        assert_contains "$(openssl req -in "$DEV/ca-want-3.csr" -noout -text)" "CA:TRUE" "the CSR asks for CA:TRUE"
        check_leaf ca-want-3 ""
        assert_eq "$(openssl x509 -in "$DEV/ca-want-3.pem" -noout -ext nameConstraints,certificatePolicies 2>/dev/null)" "" \
                "no other extension copied"
}

# refused_csr NAME TOKEN STATUSES SLUG PART OPENSSL-REQ-ARGS... — a CSR that
# openssl makes from ARGS is refused with one of STATUSES (a regex); an
# empty SLUG takes whichever the answer has (it must have one).
refused_csr() {
        local name=$1 tok=$2 statuses=$3 slug=$4 part=$5 before
        shift 5
        before=$(store_state "$tok")
        openssl req -new -nodes -keyout "$DEV/$name.key" -out "$DEV/$name.csr" "$@" 2>/dev/null ||
                fail "openssl req for $name"
        post_csr "$DEV/$name" "$tok" "$DEV/$name.csr"
        [[ $CODE =~ ^($statuses)$ ]] || fail "$name: HTTP $CODE, expected $statuses: $(cat "$DEV/$name.body")"
        [ -n "$slug" ] || slug=$(json_get "$DEV/$name.body" .error)
        [ -n "$slug" ] || fail "$name: no JSON error slug: $(cat "$DEV/$name.body")"
        expect_error "$CODE" "$slug" "$DEV/$name" "$part"
        assert_eq "$(store_state "$tok")" "$before" "store after the refusal of $name"
}

test_keys_and_names() {
        local tok
        tok=$(token_new --uses 2)
        refused_csr k-p521 "$tok" 400 unsupported_key_type P-521 -newkey ec -pkeyopt ec_paramgen_curve:P-521 -subj /CN=k-p521
        refused_csr k-ed "$tok" 400 unsupported_key_type ED25519 -newkey ed25519 -subj /CN=k-ed
        refused_csr k-rsa1k "$tok" "400|403" "" "1024" -newkey rsa:1024 -subj /CN=k-rsa1k
        refused_csr k-2cn "$tok" 400 bad_csr "CN" -newkey ec -pkeyopt ec_paramgen_curve:P-256 -subj /CN=a/CN=b
        refused_csr k-l "$tok" 403 forbidden "L" -newkey ec -pkeyopt ec_paramgen_curve:P-256 -subj /CN=k-l/L=x
        refused_csr k-adm "$tok" 403 forbidden "admin group" -newkey ec -pkeyopt ec_paramgen_curve:P-256 \
                -subj /CN=k-adm/O=hwid-admins
        openssl req -new -newkey rsa:2048 -nodes -keyout "$DEV/k-rsa.key" -subj /CN=k-rsa -out "$DEV/k-rsa.csr" 2>/dev/null
        post_csr "$DEV/k-rsa" "$tok" "$DEV/k-rsa.csr"
        expect_status 201 "$DEV/k-rsa"
        verify_leaf "$DEV/k-rsa.body"
        assert_eq "$(openssl x509 -in "$DEV/k-rsa.body" -noout -subject -nameopt RFC2253)" "subject=CN=k-rsa" \
                "subject of the RSA certificate"
        assert_eq "$(ext "$DEV/k-rsa.body" keyUsage)" "X509v3 Key Usage: critical Digital Signature" "keyUsage (RSA)"
}

test_read_endpoints() {
        local serial
        http "$DEV/ca" GET /ca
        expect_status 200 "$DEV/ca"
        cmp -s "$DEV/ca.body" "$CA_DIR/ca.pem" || fail "GET /ca is not ca.pem"
        http "$DEV/health" GET /healthz
        expect_status 200 "$DEV/health"
        assert_eq "$(json_get "$DEV/health.body" .status)" ok "/healthz status"
        http "$DEV/crl" GET /crl
        expect_status 200 "$DEV/crl"
        openssl crl -inform DER -in "$DEV/crl.body" -CAfile "$CA_DIR/ca.pem" -noout 2>&1 | grep -qx "verify OK" ||
                fail "the CRL does not verify against ca.pem"
        # Reading an identity needs mutual TLS, and a node reads only its own.
        http "$DEV/id-anon" GET /v1/identities/dev-01
        expect_error 401 unauthenticated "$DEV/id-anon"
        http "$DEV/id-own" GET /v1/identities/dev-01 --cert "$DEV/dev-01.pem" --key "$DEV/dev-01.key"
        expect_status 200 "$DEV/id-own"
        serial=$(serial_of "$DEV/dev-01.pem")
        assert_eq "$(json_get "$DEV/id-own.body" .serial)" "$serial" "serial of dev-01 in /v1/identities"
        assert_eq "$(json_get "$DEV/id-own.body" .status)" valid "status of dev-01"
        http "$DEV/id-other" GET /v1/identities/dev-02 --cert "$DEV/dev-01.pem" --key "$DEV/dev-01.key"
        expect_error 403 forbidden "$DEV/id-other"
}

# A CA configured without TPM attestation says so, for a challenge and
# for a CSR carrying evidence; nothing is spent.
test_no_attestation() {
        local tok
        tok=$(token_new)
        printf '{"ek_cert": "AA==", "ek_public": "AA==", "ak_public": "AA=="}' >"$DEV/att.json"
        http "$DEV/att" POST /v1/attest -H "Authorization: Bearer $tok" -H "Content-Type: application/json" \
                --data-binary "@$DEV/att.json"
        expect_error 403 attestation_failed "$DEV/att" "this CA does not verify TPM attestation"
        make_csr noatt
        printf '{"csr": "%s", "attestation": {"id": "%s", "activated": "AA==", "certify_info": "AA==", ' \
                "$(awk '{ printf "%s\\n", $0 }' "$DEV/noatt.csr")" "$(printf '%032d' 0)" >"$DEV/noatt.json"
        printf '"signature": "AA==", "key_public": "AA=="}}' >>"$DEV/noatt.json"
        http "$DEV/noatt" POST /csr -H "Authorization: Bearer $tok" -H "Content-Type: application/json" \
                --data-binary "@$DEV/noatt.json"
        expect_error 403 attestation_failed "$DEV/noatt" "this CA does not verify TPM attestation"
        assert_eq "$(token_used "$tok")" 0 "token use spent"
}

ca_setup
add_profiles <<'EOF'
  lab:
    validity: 2d
    san:
      dns: ["{cn}.lab.example"]
      ip: [10.0.0.0/8]
      uri: ["spiffe://test/{cn}"]
    ungranted: drop
EOF
sed -i 's/^  audit_only: false$/&\n  admin_group: hwid-admins/' "$CFG"
grep -q '^  admin_group: hwid-admins$' "$CFG" || fail "could not set policy.admin_group"
hwidd_start
# libpq is opened only for a PostgreSQL store (service/store/pg/pq-dl.h): an hwidd on
# SQLite maps neither it nor the Kerberos and LDAP libraries it brings.
if [ -n "${PG_URI:-}" ]; then
        grep -q 'libpq\.so' "/proc/$HWIDD_PID/maps" || fail "hwidd on PostgreSQL has no libpq mapped"
else
        ! grep -qE 'libpq\.so|libkrb5|libldap' "/proc/$HWIDD_PID/maps" || fail "hwidd on SQLite maps libpq"
fi
test_enroll_pem
test_enroll_der_sans
test_san_refused
test_ca_true_refused
test_ca_true_dropped
test_keys_and_names
test_read_endpoints
test_no_attestation
hwidd_stop
no_private_keys_in "$CA_DIR"
echo "ca-enroll: all checks passed"
