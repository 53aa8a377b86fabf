#!/bin/bash
# shellcheck disable=SC2119  # lib.sh helpers take optional arguments
# device-jws.sh — hwid jws sign / verify against an independent JOSE
# implementation, python3-jwcrypto (Debian), in both directions.
# Devices (keys in swtpm, joined with hwid join): EC P-256, EC P-384 and
# RSA-2048. Software keys (openssl, enrolled with a token) for jwcrypto.
# Proves:
#   - `hwid jws sign` makes a compact JWS, signed in the TPM (no transient
#     object left), that jwcrypto verifies with the device certificate's
#     public key alone: ES256, ES384, RS256 after the key; x5c is the leaf
#     (the device's certificate) and its chain, each signed by the next;
#     x5t#S256 and x5t are the leaf's SHA-256 and SHA-1 thumbprints (RFC
#     7515 §4.1.8, §4.1.7); a JWT carries iss = the device's
#     identity, iat and exp = iat + --ttl, and the --claims given; a raw
#     --payload (file or standard input) is signed byte for byte;
#   - a JWS jwcrypto signs (ES256 and RS256) with a software key whose
#     certificate hwidd issued verifies with `hwid jws verify --ca ca.pem`,
#     which prints the alg, the signer and the claims;
#   - `hwid jws verify` refuses, exit 1 with one line naming why: a payload
#     or header changed after signing, another CA, a certificate issued by
#     another CA even with ours in x5c, an expired certificate, an expired
#     JWT, a revoked certificate with --crl (accepted without it, and with
#     the CRL from before the revocation), alg none, HS256, an alg that is
#     not the key's (RS256 or ES384 on a P-256 key), an x5t#S256 or an x5t
#     of another certificate (x5t alone, the leaf's, is accepted), crit,
#     an iss that is not the signer, garbage;
#   - `hwid jws sign` refuses an identity marked for bootstrap or whose
#     certificate has expired, claims that set iss/iat/exp, and --payload
#     with --claims.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"

jose_peer

# short: certificates that expire during the test.
device_ca <<'EOF'
  short:
    validity: 1m
    key_types: [ec-p256]
EOF
swtpm_init
J=$T/jws
mkdir -p "$J"

# jws_verify OUT ARGS... — hwid jws verify (must succeed), JSON in OUT.
jws_verify() {
        local out=$1
        shift
        run_ok "${CLOCK[@]}" "$HWID" jws verify --ca "$CA_DIR/ca.pem" "$@" >"$out"
}

# refused TOKEN-FILE REASON [ARGS...] — hwid jws verify refuses, exit 1, one
# line "hwid: JWS refused: ..." holding REASON; nothing on stdout.
refused() {
        local tok=$1 why=$2
        shift 2
        expect_exit 1 "hwid: JWS refused: " -- "${CLOCK[@]}" "$HWID" jws verify --ca "$CA_DIR/ca.pem" --token "$tok" "$@"
        assert_contains "$(cat "$T/last.err")" "$why" "why $(basename "$tok") is refused"
        [ ! -s "$T/last.out" ] || fail "hwid jws verify printed a result for the refused $(basename "$tok")"
}

# peer_sign OUT KEY ALG PAYLOAD CERTS... [--header JSON] — jwcrypto signs.
peer_sign() {
        local out=$1
        shift
        "$PY" "$PEER" sign "$@" >"$out" || fail "jwcrypto could not sign $out"
}

# sw_identity NAME [OPENSSL-REQ-ARGS...] — a software key enrolled with a
# token: $DEV/NAME.key, $DEV/NAME.pem.
sw_identity() {
        local name=$1
        shift
        enroll "$name" "$(token_new "${TOKEN_ARGS[@]}")" "$@"
        expect_status 201 "$DEV/$name"
}
TOKEN_ARGS=()

# A short-lived software identity first: it must have expired by the end.
TOKEN_ARGS=(--profile short)
sw_identity sw-old
TOKEN_ARGS=()
printf '{"iss":"sw-old","aud":"billing","exp":%s}' $(($(date +%s) + 3600)) >"$J/old.claims"
peer_sign "$J/old.jws" "$DEV/sw-old.key" ES256 "$J/old.claims" "$DEV/sw-old.pem" "$CA_DIR/ca.pem"
OLD_EXPIRES=$(date -u -d "$(openssl x509 -in "$DEV/sw-old.pem" -noout -enddate | cut -d= -f2)" +%s)
# And a device whose certificate expires too (it signs until then).
expect_exit 0 "enrolled" --multiline -- join_dev "$T/dev-old" dev-old "$(token_new --profile short)"
"$HWID" jws sign --dir "$T/dev-old" >"$J/dev-old.jws" || fail "hwid jws sign with dev-old"

# device_signs NAME TYPE ALG — join a device, sign a JWT, jwcrypto and hwid verify it.
device_signs() {
        local name=$1 type=$2 alg=$3 d=$T/$1 tok
        tok=$(token_new)
        expect_exit 0 "enrolled" --multiline -- join_dev "$d" "$name" "$tok" --type "$type"
        "$HWID" jws sign --dir "$d" --claims '{"aud":"billing","n":7}' --ttl 2m >"$J/$name.jws" ||
                fail "hwid jws sign with $name"
        assert_no_transient
        "$PY" "$PEER" verify "$J/$name.jws" "$d/cert.pem" "$alg" >"$J/$name.payload" ||
                fail "jwcrypto refuses the $alg JWS of $name"
        jws_verify "$J/$name.out" --token "$J/$name.jws"
        assert_eq "$(json_get "$J/$name.out" '"\(.alg) \(.signer.identity) \(.claims.iss) \(.claims.aud) \(.claims.n)"')" \
                "$alg $name $name billing 7" "what hwid jws verify says of $name's JWT"
        assert_eq "$(json_get "$J/$name.out" '.claims.exp - .claims.iat')" 120 "exp - iat with --ttl 2m"
        assert_eq "$(json_get "$J/$name.out" .signer.serial)" "$(dir_serial "$d")" "signer serial"
        # The signature is over the claims jwcrypto saw.
        assert_eq "$(json_get "$J/$name.out" .claims.iat)" \
                "$(b64url_decode "$(cat "$J/$name.payload")" | json_get - .iat)" "iat seen by jwcrypto"
}

test_device_signs() {
        device_signs dev-ec ec-p256 ES256
        device_signs dev-384 ec-p384 ES384
        device_signs dev-rsa rsa-2048 RS256
}

test_raw_payload() {
        local d=$T/dev-ec
        head -c 3000 /dev/urandom >"$J/blob"
        "$HWID" jws sign --dir "$d" --payload "$J/blob" >"$J/blob.jws" || fail "hwid jws sign --payload"
        "$HWID" jws sign --dir "$T/dev-rsa" --payload - <"$J/blob" >"$J/blob-rsa.jws" || fail "hwid jws sign --payload -"
        assert_no_transient
        "$PY" "$PEER" verify "$J/blob.jws" "$d/cert.pem" ES256 >"$J/blob.b64" || fail "jwcrypto refuses the raw JWS"
        assert_eq "$(cat "$J/blob.b64")" "$(basenc --base64url <"$J/blob" | tr -d '\n=')" "payload jwcrypto saw"
        "$PY" "$PEER" verify "$J/blob-rsa.jws" "$T/dev-rsa/cert.pem" RS256 >/dev/null || fail "jwcrypto: RS256 raw"
        jws_verify "$J/blob.out" --token "$J/blob.jws" --payload-out "$J/blob.back"
        cmp -s "$J/blob" "$J/blob.back" || fail "--payload-out differs from what was signed"
        assert_eq "$(json_get "$J/blob.out" '"\(has("claims")) \(has("payload_base64url"))"')" "false true" \
                "raw payload output"
}

test_peer_signs() {
        sw_identity sw-ec
        openssl req -new -newkey rsa:2048 -nodes -keyout "$DEV/sw-rsa.key" -subj /CN=sw-rsa -out "$DEV/sw-rsa.csr" 2>/dev/null
        post_csr "$DEV/sw-rsa" "$(token_new)" "$DEV/sw-rsa.csr"
        expect_status 201 "$DEV/sw-rsa"
        cp "$DEV/sw-rsa.body" "$DEV/sw-rsa.pem"
        for n in ec rsa; do
                printf '{"iss":"sw-%s","aud":"billing","exp":%s}' $n $(($(date +%s) + 600)) >"$J/sw-$n.claims"
        done
        peer_sign "$J/sw-ec.jws" "$DEV/sw-ec.key" ES256 "$J/sw-ec.claims" "$DEV/sw-ec.pem" "$CA_DIR/ca.pem"
        peer_sign "$J/sw-rsa.jws" "$DEV/sw-rsa.key" RS256 "$J/sw-rsa.claims" "$DEV/sw-rsa.pem"
        jws_verify "$J/sw-ec.out" --token - <"$J/sw-ec.jws"
        assert_eq "$(json_get "$J/sw-ec.out" '"\(.alg) \(.signer.identity) \(.claims.aud)"')" "ES256 sw-ec billing" \
                "hwid jws verify of jwcrypto's ES256"
        jws_verify "$J/sw-rsa.out" --token "$J/sw-rsa.jws"
        assert_eq "$(json_get "$J/sw-rsa.out" '"\(.alg) \(.signer.identity)"')" "RS256 sw-rsa" \
                "hwid jws verify of jwcrypto's RS256"
}

test_tampering() {
        local tok=$J/sw-ec.jws other=$J/other
        printf '{"iss":"sw-ec","aud":"payroll","exp":%s}' $(($(date +%s) + 600)) >"$J/evil.claims"
        "$PY" "$PEER" forge "$tok" '{}' "$J/evil.claims" >"$J/t-payload.jws"
        refused "$J/t-payload.jws" "the signature does not verify"
        "$PY" "$PEER" forge "$tok" '{"kid":"x"}' >"$J/t-header.jws"
        refused "$J/t-header.jws" "the signature does not verify"
        "$PY" "$PEER" forge "$J/dev-ec.jws" '{}' "$J/evil.claims" >"$J/t-dev.jws"
        refused "$J/t-dev.jws" "the signature does not verify"
        # Another CA, and a leaf of another CA presented with ours in x5c.
        mkdir -p "$other"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$other/ca.key" \
                -subj "/CN=hwid test CA" -days 1 -out "$other/ca.pem" 2>/dev/null
        expect_exit 1 "JWS refused: the signer's certificate (/CN=sw-ec) does not chain to the CA" -- \
                "$HWID" jws verify --ca "$other/ca.pem" --token "$tok"
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$other/leaf.key" \
                -subj /CN=sw-ec -out "$other/leaf.csr" 2>/dev/null
        openssl x509 -req -in "$other/leaf.csr" -CA "$other/ca.pem" -CAkey "$other/ca.key" -CAcreateserial \
                -days 1 -out "$other/leaf.pem" 2>/dev/null
        peer_sign "$J/t-ca.jws" "$other/leaf.key" ES256 "$J/sw-ec.claims" "$other/leaf.pem" "$CA_DIR/ca.pem"
        refused "$J/t-ca.jws" "(/CN=sw-ec) does not chain to the CA: certificate signature failure"
}

test_algorithms() {
        local tok=$J/sw-ec.jws
        "$PY" "$PEER" forge "$tok" '{"alg":"none"}' | sed 's/\.[^.]*$/./' >"$J/a-none.jws"
        refused "$J/a-none.jws" "alg 'none' (an unsigned token) is never accepted"
        "$PY" "$PEER" forge "$tok" '{"alg":"HS256"}' >"$J/a-hs.jws"
        refused "$J/a-hs.jws" "alg 'HS256' is not accepted"
        "$PY" "$PEER" forge "$tok" '{"alg":"RS256"}' >"$J/a-rs.jws"
        refused "$J/a-rs.jws" "alg RS256 does not match the signer's key, which signs ES256"
        "$PY" "$PEER" forge "$J/dev-ec.jws" '{"alg":"ES384"}' >"$J/a-384.jws"
        refused "$J/a-384.jws" "alg ES384 does not match the signer's key, which signs ES256"
        "$PY" "$PEER" forge "$J/sw-rsa.jws" '{"alg":"ES256"}' >"$J/a-es.jws"
        refused "$J/a-es.jws" "alg ES256 does not match the signer's key, which signs RS256"
}

test_header_rules() {
        local thumb
        # A valid signature over a header whose thumbprint names another certificate.
        thumb=$(openssl x509 -in "$CA_DIR/ca.pem" -outform DER | openssl dgst -sha256 -binary | basenc --base64url | tr -d '=\n')
        peer_sign "$J/h-x5t.jws" "$DEV/sw-ec.key" ES256 "$J/sw-ec.claims" "$DEV/sw-ec.pem" \
                --header "{\"x5t#S256\":\"$thumb\"}"
        refused "$J/h-x5t.jws" "x5t#S256 does not match the certificate in x5c[0]"
        # x5t (SHA-1) alone, the leaf's: accepted; another certificate's: refused.
        thumb=$(openssl x509 -in "$DEV/sw-ec.pem" -outform DER | openssl dgst -sha1 -binary | basenc --base64url | tr -d '=\n')
        peer_sign "$J/h-x5t1.jws" "$DEV/sw-ec.key" ES256 "$J/sw-ec.claims" "$DEV/sw-ec.pem" \
                --header "{\"x5t#S256\":null,\"x5t\":\"$thumb\"}"
        jws_verify "$J/h-x5t1.out" --token "$J/h-x5t1.jws"
        thumb=$(openssl x509 -in "$CA_DIR/ca.pem" -outform DER | openssl dgst -sha1 -binary | basenc --base64url | tr -d '=\n')
        peer_sign "$J/h-x5t2.jws" "$DEV/sw-ec.key" ES256 "$J/sw-ec.claims" "$DEV/sw-ec.pem" \
                --header "{\"x5t#S256\":null,\"x5t\":\"$thumb\"}"
        refused "$J/h-x5t2.jws" "x5t does not match the certificate in x5c[0]"
        peer_sign "$J/h-crit.jws" "$DEV/sw-ec.key" ES256 "$J/sw-ec.claims" "$DEV/sw-ec.pem" \
                --header '{"b64":true,"crit":["b64"]}'
        refused "$J/h-crit.jws" "critical extensions (crit)"
        peer_sign "$J/h-nox5c.jws" "$DEV/sw-ec.key" ES256 "$J/sw-ec.claims" "$DEV/sw-ec.pem" --header '{"x5c":[]}'
        refused "$J/h-nox5c.jws" "x5c holds 0 certificates"
        printf '{"iss":"dev-ec","aud":"billing"}' >"$J/iss.claims"
        peer_sign "$J/h-iss.jws" "$DEV/sw-ec.key" ES256 "$J/iss.claims" "$DEV/sw-ec.pem"
        refused "$J/h-iss.jws" "the issuer claim 'dev-ec' is not the signer 'sw-ec'"
        echo "abc.def" >"$J/garbage.jws"
        refused "$J/garbage.jws" "not a compact JWS"
        sed 's/\./=./' "$J/sw-ec.jws" >"$J/padded.jws"
        refused "$J/padded.jws" "base64url alphabet"
}

test_revoked() {
        local serial
        sw_identity sw-rev
        printf '{"iss":"sw-rev"}' >"$J/rev.claims"
        peer_sign "$J/rev.jws" "$DEV/sw-rev.key" ES256 "$J/rev.claims" "$DEV/sw-rev.pem"
        http "$J/crl-before" GET /crl
        expect_status 200 "$J/crl-before"
        jws_verify "$J/rev.out" --token "$J/rev.jws" --crl "$J/crl-before.body"
        serial=$(serial_of "$DEV/sw-rev.pem")
        admin cert revoke "$serial" >/dev/null
        http "$J/crl-after" GET /crl
        expect_status 200 "$J/crl-after"
        refused "$J/rev.jws" "the signer's certificate (/CN=sw-rev) is revoked (in the CRL)" --crl "$J/crl-after.body"
        openssl crl -inform DER -in "$J/crl-after.body" -out "$J/crl-after.pem"
        refused "$J/rev.jws" "is revoked" --crl "$J/crl-after.pem"
        # Without a CRL, revocation is not checked (and says nothing else is wrong).
        jws_verify "$J/rev-nocrl.out" --token "$J/rev.jws"
        # A CRL of another CA is no CRL for ours.
        : >"$J/other/index"
        printf '[ca]\ndefault_ca = c\n[c]\ndatabase = %s\ndefault_md = sha256\ndefault_crl_days = 1\n' \
                "$J/other/index" >"$J/other/ca.cnf"
        openssl ca -gencrl -config "$J/other/ca.cnf" -keyfile "$J/other/ca.key" -cert "$J/other/ca.pem" \
                -out "$J/other.crl" 2>"$J/other/gencrl.err" || fail "openssl ca -gencrl: $(cat "$J/other/gencrl.err")"
        refused "$J/rev.jws" "the CRL cannot be used for the CA" --crl "$J/other.crl"
}

# Time passes on the test's clock (test_clock), for hwid jws alone.
test_expired() {
        test_clock
        "${CLOCK[@]}" "$HWID" jws sign --dir "$T/dev-ec" --ttl 1s >"$J/short.jws" || fail "hwid jws sign --ttl 1s"
        clock_advance 2
        refused "$J/short.jws" "the token expired at" --leeway 0s
        jws_verify "$J/short.out" --token "$J/short.jws" --leeway 30s
        clock_past "$OLD_EXPIRES"
        clock_past "$(date -u -d "$(openssl x509 -in "$T/dev-old/cert.pem" -noout -enddate | cut -d= -f2)" +%s)"
        refused "$J/old.jws" "the signer's certificate (/CN=sw-old) has expired"
        refused "$J/dev-old.jws" "the signer's certificate (/CN=dev-old) has expired"
        # An expired identity signs nothing.
        expect_exit 1 "the certificate has expired: renew it (hwid renew) or join again" -- \
                "${CLOCK[@]}" "$HWID" jws sign --dir "$T/dev-old"
        assert_no_transient
}

test_sign_refusals() {
        local d=$T/dev-ec
        expect_exit 1 "the claims may not set 'iss'" -- "$HWID" jws sign --dir "$d" --claims '{"iss":"someone-else"}'
        expect_exit 1 "is not one JSON object" -- "$HWID" jws sign --dir "$d" --claims '[1]'
        expect_exit 2 "takes no --claims" -- "$HWID" jws sign --dir "$d" --payload "$J/blob" --claims '{}'
        expect_exit 2 "needs --dir" -- "$HWID" jws sign
        expect_exit 2 "needs --ca" -- "$HWID" jws verify --token "$J/dev-ec.jws"
        echo "revoked for the test" >"$d/needs-bootstrap"
        expect_exit 1 "can no longer renew" -- "$HWID" jws sign --dir "$d"
        rm "$d/needs-bootstrap"
        "$HWID" jws sign --help | grep -q -- "--ttl" || fail "hwid jws sign --help lacks --ttl"
        "$HWID" jws verify --help | grep -q -- "--payload-out" || fail "hwid jws verify --help lacks --payload-out"
        assert_no_transient
}

test_device_signs
test_raw_payload
test_peer_signs
test_tampering
test_algorithms
test_header_rules
test_revoked
test_sign_refusals
test_expired
no_private_keys_in "$CA_DIR" "$T/dev-ec" "$T/dev-384" "$T/dev-rsa" "$T/dev-old"
echo "device-jws: all checks passed"
