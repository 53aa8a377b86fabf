#!/bin/bash
# est-enroll.sh — EST (RFC 7030) against a real hwidd, with curl and openssl
# only, as an operator would by hand.
# Proves:
#   - GET cacerts is application/pkcs7-mime, Content-Transfer-Encoding:
#     base64, and `openssl pkcs7 -print_certs` finds the CA certificate in it;
#   - GET csrattrs (label = profile) parses with `openssl asn1parse` and names
#     the profile's key types, curves and subjectAltName; without a label or
#     client certificate it is 204;
#   - simpleenroll with HTTP Basic (token id / secret), the CSR as base64 with
#     CRLF line breaks, gets 200 certs-only PKCS#7 holding a certificate for
#     the CSR's key that openssl verifies; the token is spent for POST /csr too,
#     and one live certificate per identity holds across both protocols;
#   - a manual profile answers 202 + Retry-After; after `hwid request approve`
#     the same POST gets the certificate (RFC 7030 §4.2.3), once;
#   - errors: no or wrong credentials 401 + WWW-Authenticate, base64 that is
#     not, DER or PEM instead of base64, a wrong Content-Type, a CSR the policy
#     refuses (403 with the reason), an oversize body (413), an unknown label
#     (404), a label that is not the token's profile (403): nothing issued,
#     no token use spent; serverkeygen is 501 and says why.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=est-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/est-lib.sh"

# b64_crlf CSR OUT — the DER of CSR as base64 with CRLF line breaks, as EST sends it.
b64_crlf() {
        openssl req -in "$1" -outform DER | openssl base64 -e | sed 's/$/\r/' >"$2"
}

# basic TOKEN — curl's --user for a token <id>.<secret>.
basic() {
        echo "${1%%.*}:${1#*.}"
}

# est_post OUT PATH TOKEN FILE [CURL-ARGS...] — POST an EST body (TOKEN empty: no credentials).
est_post() {
        local out=$1 path=$2 tok=$3 file=$4 auth=()
        shift 4
        [ -z "$tok" ] || auth=(--user "$(basic "$tok")")
        http "$out" POST "$EST$path" "${auth[@]}" -H "Content-Type: application/pkcs10" --data-binary "@$file" "$@"
}

test_cacerts() {
        http "$DEV/cacerts" GET "$EST/cacerts"
        expect_status 200 "$DEV/cacerts"
        assert_eq "$(header Content-Type "$DEV/cacerts")" application/pkcs7-mime "cacerts Content-Type"
        assert_eq "$(header Content-Transfer-Encoding "$DEV/cacerts")" base64 "cacerts Content-Transfer-Encoding"
        openssl base64 -d -in "$DEV/cacerts.body" | openssl pkcs7 -inform DER -print_certs -out "$DEV/cacerts.pem" ||
                fail "openssl pkcs7 cannot read cacerts"
        assert_eq "$(openssl x509 -in "$DEV/cacerts.pem" -noout -fingerprint -sha256)" \
                "$(openssl x509 -in "$CA_DIR/ca.pem" -noout -fingerprint -sha256)" "the CA certificate in cacerts"
        http "$DEV/cacerts-label" GET "$EST/manual/cacerts"
        expect_status 200 "$DEV/cacerts-label"
}

test_csrattrs() {
        local asn
        http "$DEV/attrs" GET "$EST/default/csrattrs"
        expect_status 200 "$DEV/attrs"
        assert_eq "$(header Content-Type "$DEV/attrs")" application/csrattrs "csrattrs Content-Type"
        asn=$(openssl base64 -d -in "$DEV/attrs.body" | openssl asn1parse -inform DER) ||
                fail "openssl asn1parse cannot read csrattrs"
        for want in id-ecPublicKey prime256v1 secp384r1 rsaEncryption ecdsa-with-SHA256 \
                sha256WithRSAEncryption "Extension Request" "X509v3 Subject Alternative Name"; do
                assert_contains "$asn" "$want" "csrattrs of profile default"
        done
        http "$DEV/attrs-manual" GET "$EST/manual/csrattrs"
        expect_status 200 "$DEV/attrs-manual"
        asn=$(openssl base64 -d -in "$DEV/attrs-manual.body" | openssl asn1parse -inform DER)
        assert_not_contains "$asn" "Extension Request" "csrattrs of a profile without SAN rules"
        http "$DEV/attrs-none" GET "$EST/csrattrs"
        expect_status 204 "$DEV/attrs-none"
}

test_enroll() {
        local tok=$1
        make_csr est-1
        b64_crlf "$DEV/est-1.csr" "$DEV/est-1.b64"
        grep -q $'\r$' "$DEV/est-1.b64" || fail "the test body has no CRLF"
        est_post "$DEV/est-1" /simpleenroll "$tok" "$DEV/est-1.b64"
        expect_est_cert "$DEV/est-1" est-1
        assert_eq "$(token_used "$tok")" 1 "an EST enrollment spends a token use"
        in_store "$(serial_of "$DEV/est-1.pem")" || fail "the EST certificate is not in the store"
        # The spent token is spent for the native API as well.
        enroll est-2 "$tok"
        expect_error 401 bad_token "$DEV/est-2" "used up"
        # One live certificate per identity, whichever protocol asks.
        make_csr est-1 # a new key for the same name
        post_csr "$DEV/est-1-native" "$(token_new)" "$DEV/est-1.csr"
        expect_error 409 identity_has_certificate "$DEV/est-1-native"
        local tok2
        tok2=$(token_new)
        make_csr nat-1
        post_csr "$DEV/nat-1" "$tok2" "$DEV/nat-1.csr"
        expect_status 201 "$DEV/nat-1"
        tok2=$(token_new)
        make_csr nat-1
        b64_crlf "$DEV/nat-1.csr" "$DEV/nat-1.b64"
        est_post "$DEV/nat-1-est" /default/simpleenroll "$tok2" "$DEV/nat-1.b64"
        expect_est_error 409 "$DEV/nat-1-est" "already has a live certificate"
        assert_eq "$(token_used "$tok2")" 0 "a refused EST enrollment spends no token use"
}

test_approval() {
        local tok id
        tok=$(token_new --profile manual --uses 2)
        make_csr man-1
        b64_crlf "$DEV/man-1.csr" "$DEV/man-1.b64"
        est_post "$DEV/man-1" /manual/simpleenroll "$tok" "$DEV/man-1.b64"
        expect_status 202 "$DEV/man-1"
        assert_eq "$(header Retry-After "$DEV/man-1")" 5 "Retry-After of a 202"
        assert_contains "$(cat "$DEV/man-1.body")" "pending approval" "202 body"
        assert_eq "$(cert_rows --identity man-1 | wc -l)" 0 "certificates after a 202"
        # Asking again before the approval: still 202, and no second request.
        est_post "$DEV/man-1b" /manual/simpleenroll "$tok" "$DEV/man-1.b64"
        expect_status 202 "$DEV/man-1b"
        assert_eq "$(admin request list | tail -n +2 | wc -l)" 1 "pending requests after asking twice"
        assert_eq "$(token_used "$tok")" 1 "token uses after asking twice"
        id=$(admin request list | awk '$3 == "man-1" { print $1 }')
        admin request approve "$id" >/dev/null
        est_post "$DEV/man-1c" /manual/simpleenroll "$tok" "$DEV/man-1.b64"
        expect_est_cert "$DEV/man-1c" man-1
        est_post "$DEV/man-1d" /manual/simpleenroll "$tok" "$DEV/man-1.b64"
        expect_status 200 "$DEV/man-1d"
        assert_eq "$(cert_rows --identity man-1 | wc -l)" 1 "certificates after asking again"
        assert_eq "$(token_used "$tok")" 1 "token uses after the approval"
}

test_errors() {
        local tok before
        tok=$(token_new)
        make_csr bad-1
        b64_crlf "$DEV/bad-1.csr" "$DEV/bad-1.b64"
        before=$(store_state "$tok")
        est_post "$DEV/e-none" /simpleenroll "" "$DEV/bad-1.b64"
        expect_est_error 401 "$DEV/e-none"
        est_post "$DEV/e-wrong" /simpleenroll "${tok%%.*}.wrongsecretwrongsecret00" "$DEV/bad-1.b64"
        expect_est_error 401 "$DEV/e-wrong" "unknown bootstrap token"
        http "$DEV/e-garbled" POST "$EST/simpleenroll" -H "Authorization: Basic !!!" \
                -H "Content-Type: application/pkcs10" --data-binary "@$DEV/bad-1.b64"
        expect_est_error 401 "$DEV/e-garbled" "Basic credentials"
        printf 'MIIB%%%%not*base64\r\n' >"$DEV/bad.b64"
        est_post "$DEV/e-b64" /simpleenroll "$tok" "$DEV/bad.b64"
        expect_est_error 400 "$DEV/e-b64" "not base64"
        openssl req -in "$DEV/bad-1.csr" -outform DER -out "$DEV/bad-1.der"
        est_post "$DEV/e-der" /simpleenroll "$tok" "$DEV/bad-1.der"
        expect_est_error 400 "$DEV/e-der" "binary (DER?)"
        est_post "$DEV/e-pem" /simpleenroll "$tok" "$DEV/bad-1.csr"
        expect_est_error 400 "$DEV/e-pem" "the body is PEM"
        # DER inside PEM armour, base64 of the PEM text: a CSR it is not.
        openssl base64 -e -in "$DEV/bad-1.csr" >"$DEV/pem.b64"
        est_post "$DEV/e-pemb64" /simpleenroll "$tok" "$DEV/pem.b64"
        expect_est_error 400 "$DEV/e-pemb64"
        http "$DEV/e-ct" POST "$EST/simpleenroll" --user "$(basic "$tok")" -H "Content-Type: application/json" \
                --data-binary "@$DEV/bad-1.b64"
        expect_est_error 400 "$DEV/e-ct" "application/pkcs10"
        make_csr bad-2 -addext "basicConstraints=critical,CA:TRUE"
        b64_crlf "$DEV/bad-2.csr" "$DEV/bad-2.b64"
        est_post "$DEV/e-policy" /simpleenroll "$tok" "$DEV/bad-2.b64"
        expect_est_error 403 "$DEV/e-policy" "CA"
        head -c 70000 /dev/zero | tr '\0' 'A' >"$DEV/big.b64"
        est_post "$DEV/e-big" /simpleenroll "$tok" "$DEV/big.b64"
        expect_status 413 "$DEV/e-big"
        est_post "$DEV/e-label" /nosuch/simpleenroll "$tok" "$DEV/bad-1.b64"
        expect_est_error 404 "$DEV/e-label" "no EST label nosuch"
        est_post "$DEV/e-label2" /manual/simpleenroll "$tok" "$DEV/bad-1.b64"
        expect_est_error 403 "$DEV/e-label2" "not for EST label manual"
        est_post "$DEV/e-keygen" /serverkeygen "$tok" "$DEV/bad-1.b64"
        expect_est_error 501 "$DEV/e-keygen" "never leave"
        http "$DEV/e-method" GET "$EST/simpleenroll"
        expect_est_error 405 "$DEV/e-method"
        assert_eq "$(store_state "$tok")" "$before" "store after every refusal"
        assert_eq "$(cert_rows --identity bad-1 | wc -l)" 0 "certificates of bad-1"
        # Still good for a well-formed request.
        est_post "$DEV/bad-1" /default/simpleenroll "$tok" "$DEV/bad-1.b64"
        expect_est_cert "$DEV/bad-1" bad-1
}

ca_setup
hwidd_start
test_cacerts
test_csrattrs
test_enroll "$(token_new)"
test_approval
test_errors
hwidd_stop
echo "est-enroll: all checks passed"
