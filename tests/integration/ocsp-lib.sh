# shellcheck shell=bash disable=SC2034  # variables used by the scripts sourcing this
# ocsp-lib.sh — helpers shared by the ocsp*.sh tests: the stock `openssl
# ocsp` client asks hwidd's responder and verifies every answer against
# the CA certificate. Sourced after tests/lib.sh and ca-lib.sh.

OCSP_PEER=$SRCDIR/tests/integration/ocsp-peer.py

# ocsp_config [KEY: VALUE]... — the lines given go into the limits: block
# of $CFG (the OCSP responder's budgets).
ocsp_config() {
        local line
        for line in "$@"; do
                sed -i "s/^limits:\$/&\n  $line/" "$CFG"
        done
}

# ocsp_ask OUT URL CERT [OPENSSL-OCSP-ARGS...] — `openssl ocsp` asks URL
# (http:// or https://) about CERT (a PEM file, or 0xSERIAL), issued by
# $ISSUER (default ca.pem), and verifies the answer against ca.pem (on the
# test's clock, if it has one). Its stdout in OUT.out, stderr in OUT.err,
# the answer's DER in OUT.der; OCSP_RC its exit status.
ocsp_ask() {
        local out=$1 url=$2 cert=$3 what=(-cert "$3")
        shift 3
        [[ $cert != 0x* ]] || what=(-serial "$cert")
        OCSP_RC=0
        "${CLOCK[@]}" openssl ocsp -issuer "${ISSUER:-$CA_DIR/ca.pem}" "${what[@]}" -url "$url" \
                -CAfile "$CA_DIR/ca.pem" -respout "$out.der" "$@" >"$out.out" 2>"$out.err" || OCSP_RC=$?
}

# ocsp_status OUT — what `openssl ocsp` said of the certificate ("good",
# "revoked", "unknown"), once it verified the answer ("Response verify OK")
# and found the nonce it sent, if it sent one, echoed.
ocsp_status() {
        [ "$OCSP_RC" = 0 ] || fail "openssl ocsp exit $OCSP_RC: $(cat "$1.out" "$1.err")"
        assert_contains "$(cat "$1.err")" "Response verify OK" "openssl ocsp's verification"
        assert_not_contains "$(cat "$1.err")" "WARNING" "openssl ocsp's warnings"
        sed -n 's/^[^[:space:]].*: \(good\|revoked\|unknown\)$/\1/p' "$1.out"
}

# ocsp_nonce_status OUT REQ — the certificate's status ("good", ...) in
# the answer OUT.body to the request REQ (with a nonce), once openssl
# verified it against ca.pem and found REQ's nonce echoed. (With -cert,
# openssl would make a request of its own, with another nonce.)
ocsp_nonce_status() {
        "${CLOCK[@]}" openssl ocsp -respin "$1.body" -reqin "$2" -CAfile "$CA_DIR/ca.pem" -resp_text \
                >"$1.out" 2>"$1.err" || fail "openssl ocsp -respin -reqin: $(cat "$1.out" "$1.err")"
        assert_contains "$(cat "$1.err")" "Response verify OK" "openssl ocsp's verification"
        assert_not_contains "$(cat "$1.err")" "WARNING" "openssl ocsp's warnings"
        sed -n 's/^ *Cert Status: //p' "$1.out"
}

# ocsp_post OUT URL FILE [CURL-ARGS...] — POST FILE (a DER request) to URL
# with curl; CODE, OUT.body, OUT.hdr.
ocsp_post() {
        local out=$1 url=$2 file=$3
        shift 3
        CODE=$(curl -sS --max-time 30 -k -o "$out.body" -D "$out.hdr" -w '%{http_code}' \
                -H "Content-Type: application/ocsp-request" --data-binary "@$file" "$@" "$url" 2>"$out.err") || true
}

# ocsp_get OUT URL FILE [CURL-ARGS...] — GET URL/<base64 of FILE>, the
# base64 URL-encoded (RFC 6960 A.1); CODE, OUT.body, OUT.hdr.
ocsp_get() {
        local out=$1 url=$2 file=$3 b64
        shift 3
        b64=$(base64 -w0 "$file" | sed 's|+|%2B|g; s|/|%2F|g; s|=|%3D|g')
        CODE=$(curl -sS --max-time 30 -k -o "$out.body" -D "$out.hdr" -w '%{http_code}' "$@" "$url/$b64" \
                2>"$out.err") || true
}

# ocsp_response_status OUT — the responseStatus of the answer in OUT.body
# as openssl reads it ("successful", "malformedrequest", "trylater", ...).
ocsp_response_status() {
        local text
        text=$(openssl ocsp -respin "$1.body" -resp_text -noverify 2>&1) || true
        sed -n 's/^Responder Error: \([a-z]*\) .*/\1/p; s/^ *OCSP Response Status: \([a-z]*\) .*/\1/p' <<<"$text" |
                head -n 1
}

# ocsp_malformed OUT STATUS — the last request was refused with HTTP
# STATUS and the unsigned malformedRequest.
ocsp_malformed() {
        expect_status "$2" "$1"
        assert_contains "$(header Content-Type "$1")" "application/ocsp-response" "Content-Type of the refusal"
        assert_eq "$(ocsp_response_status "$1")" "malformedrequest" "OCSP status of the refusal"
}

# ocsp_request OUT CERT [OPENSSL-OCSP-ARGS...] — a DER request about CERT
# (PEM file or 0xSERIAL) issued by ca.pem, made by openssl, into OUT.
ocsp_request() {
        local out=$1 cert=$2 what=(-cert "$2")
        shift 2
        [[ $cert != 0x* ]] || what=(-serial "$cert")
        openssl ocsp -issuer "${ISSUER:-$CA_DIR/ca.pem}" "${what[@]}" -reqout "$out" "$@" >/dev/null 2>"$out.err" ||
                fail "openssl ocsp -reqout: $(cat "$out.err")"
}
