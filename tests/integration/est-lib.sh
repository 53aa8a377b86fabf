# shellcheck shell=bash disable=SC2034  # EST is used by the scripts sourcing this
# est-lib.sh — what the EST tests (est-*.sh) share: the path and the checks
# of an EST answer. Sourced after lib.sh and ca-lib.sh; uses the caller's
# $DEV, and http/expect_status/header/verify_leaf from there.

EST=/.well-known/est

# expect_est_cert OUT NAME — a 200 certs-only answer holding NAME's certificate
# for $DEV/NAME.key; the PEM is left in $DEV/NAME.pem.
expect_est_cert() {
        local out=$1 name=$2
        expect_status 200 "$out"
        assert_eq "$(header Content-Type "$out")" "application/pkcs7-mime; smime-type=certs-only" "Content-Type"
        assert_eq "$(header Content-Transfer-Encoding "$out")" base64 "Content-Transfer-Encoding"
        openssl base64 -d -in "$out.body" | openssl pkcs7 -inform DER -print_certs -out "$DEV/$name.pem" ||
                fail "openssl cannot read the PKCS#7 of $name"
        verify_leaf "$DEV/$name.pem"
        assert_eq "$(openssl x509 -in "$DEV/$name.pem" -noout -subject -nameopt RFC2253)" "subject=CN=$name" subject
        assert_eq "$(openssl x509 -in "$DEV/$name.pem" -noout -pubkey)" "$(openssl pkey -in "$DEV/$name.key" -pubout)" \
                "certificate key vs the device key"
}

# expect_est_error STATUS OUT [MESSAGE-PART] — a text/plain error, no certificate.
expect_est_error() {
        local status=$1 out=$2 part=${3:-}
        expect_status "$status" "$out"
        assert_contains "$(header Content-Type "$out")" text/plain "Content-Type of a $status"
        [ -z "$part" ] || assert_contains "$(cat "$out.body")" "$part" "reason of the $status"
        [ "$status" != 401 ] || assert_eq "$(header WWW-Authenticate "$out")" \
                'Basic realm="hwid EST", charset="UTF-8"' "WWW-Authenticate of a 401"
        assert_not_contains "$(cat "$out.body")" "BEGIN CERTIFICATE" "certificate in a $status"
        assert_not_contains "$(header Content-Type "$out")" pkcs7 "PKCS#7 in a $status"
}
