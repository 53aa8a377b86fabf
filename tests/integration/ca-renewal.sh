#!/bin/bash
# ca-renewal.sh — renewal over mutual TLS (curl --cert/--key), revocation
# and the CRL, checked with openssl.
# Profiles added to the generated config: `short` (1h, renewal window 1.0:
# renewable at once) and `rotate` (the same, and a renewal needs a new key).
# Proves:
#   - a renewal authenticated by the current certificate gets 201 and a new
#     certificate (new serial, same identity, verifies); the old one is
#     `superseded` in `hwid cert list` and can no longer renew (401) —
#     except to get the live certificate back when its CSR carries that
#     certificate's key (a lost answer, replayed with 200);
#   - renewal is refused, issuing nothing, when: the CSR names another
#     identity (403), the certificate is not yet in its renewal window
#     (default profile, 403), the profile wants a new key and gets the old
#     one (403), the client certificate comes from another CA (401 or no
#     handshake);
#   - `hwid cert revoke` puts the serial into the CRL served at /crl, whose
#     signature openssl verifies against ca.pem, with the reason; openssl
#     then rejects the certificate with -crl_check; renewal with it is
#     refused (401 revoked).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

# status_of SERIAL — its STATUS column in `hwid cert list --all`.
status_of() {
        cert_rows | awk -v s="$1" '$1 == s { print $2 }'
}

# renewal_csr NAME CN [KEY] — $DEV/NAME.csr for CN, with KEY or a new key.
renewal_csr() {
        if [ -n "${3:-}" ]; then
                openssl req -new -key "$3" -subj "/CN=$2" -out "$DEV/$1.csr"
        else
                make_csr "$1" -subj "/CN=$2"
        fi
}

# refused_renewal OUT CERT KEY CSR STATUS SLUG PART — renewal refused,
# nothing issued.
refused_renewal() {
        local out=$1 before
        before=$(cert_rows)
        renew "$out" "$2" "$3" "$4"
        expect_error "$5" "$6" "$out" "$7"
        assert_eq "$(cert_rows)" "$before" "store after a refused renewal"
}

test_renew() {
        local old new
        enroll rn-1 "$(token_new --profile short)"
        expect_status 201 "$DEV/rn-1"
        old=$(serial_of "$DEV/rn-1.pem")
        renewal_csr rn-1b rn-1 "$DEV/rn-1.key"
        renew "$DEV/rn-1b" "$DEV/rn-1.pem" "$DEV/rn-1.key" "$DEV/rn-1b.csr"
        expect_status 201 "$DEV/rn-1b"
        cp "$DEV/rn-1b.body" "$DEV/rn-1b.pem"
        verify_leaf "$DEV/rn-1b.pem"
        new=$(serial_of "$DEV/rn-1b.pem")
        [ "$new" != "$old" ] || fail "renewal kept the serial $old"
        assert_eq "$(openssl x509 -in "$DEV/rn-1b.pem" -noout -subject -nameopt RFC2253)" "subject=CN=rn-1" \
                "subject of the renewed certificate"
        assert_eq "$(status_of "$old")/$(status_of "$new")" superseded/valid "old/new status in cert list"
        assert_eq "$(admin cert list --identity rn-1 | tail -n +2 | wc -l)" 1 "live certificates of rn-1"
        # The superseded certificate cannot renew again: with the live
        # certificate's key it gets that same certificate back (a lost
        # answer replayed, 200, nothing new issued); with any other key,
        # 401 and nothing issued.
        local before
        before=$(cert_rows)
        renew "$DEV/rn-1-replay" "$DEV/rn-1.pem" "$DEV/rn-1.key" "$DEV/rn-1b.csr"
        expect_status 200 "$DEV/rn-1-replay"
        assert_eq "$(serial_of "$DEV/rn-1-replay.body")" "$new" "replayed certificate"
        assert_eq "$(cert_rows)" "$before" "store after a replay"
        renewal_csr rn-1x rn-1
        refused_renewal "$DEV/rn-1-old" "$DEV/rn-1.pem" "$DEV/rn-1.key" "$DEV/rn-1x.csr" 401 revoked "replaced"
        # A second renewal from the new certificate works (and rotates again).
        renewal_csr rn-1c rn-1
        renew "$DEV/rn-1c" "$DEV/rn-1b.pem" "$DEV/rn-1.key" "$DEV/rn-1c.csr"
        expect_status 201 "$DEV/rn-1c"
        cp "$DEV/rn-1c.body" "$DEV/rn-1c.pem"
        assert_eq "$(status_of "$new")" superseded "status after the second renewal"
        RN_CERT=$DEV/rn-1c.pem
        RN_KEY=$DEV/rn-1c.key
}

test_renew_refused() {
        enroll rn-2 "$(token_new --profile short)"
        expect_status 201 "$DEV/rn-2"
        # A node renews only itself.
        renewal_csr rn-2-as-1 rn-1 "$DEV/rn-2.key"
        refused_renewal "$DEV/rn-2-as-1" "$DEV/rn-2.pem" "$DEV/rn-2.key" "$DEV/rn-2-as-1.csr" 403 forbidden "rn-1"
        # Outside the renewal window (default profile: the last third of 30d).
        enroll rn-3 "$(token_new)"
        expect_status 201 "$DEV/rn-3"
        renewal_csr rn-3b rn-3 "$DEV/rn-3.key"
        refused_renewal "$DEV/rn-3b" "$DEV/rn-3.pem" "$DEV/rn-3.key" "$DEV/rn-3b.csr" 403 renewal_not_open "renewal of 'rn-3' opens at"
        # rotate_key: the same key is refused, a new one accepted.
        enroll rn-4 "$(token_new --profile rotate)"
        expect_status 201 "$DEV/rn-4"
        renewal_csr rn-4b rn-4 "$DEV/rn-4.key"
        refused_renewal "$DEV/rn-4b" "$DEV/rn-4.pem" "$DEV/rn-4.key" "$DEV/rn-4b.csr" 403 forbidden "key"
        renewal_csr rn-4c rn-4
        renew "$DEV/rn-4c" "$DEV/rn-4.pem" "$DEV/rn-4.key" "$DEV/rn-4c.csr"
        expect_status 201 "$DEV/rn-4c"
}

# A certificate for rn-2 from a CA openssl made: hwidd must not take it.
test_foreign_cert() {
        local before
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$DEV/evil-ca.key" \
                -subj "/CN=hwid test CA" -days 1 -out "$DEV/evil-ca.pem" 2>/dev/null
        openssl x509 -req -in "$DEV/rn-2.csr" -CA "$DEV/evil-ca.pem" -CAkey "$DEV/evil-ca.key" \
                -CAcreateserial -CAserial "$DEV/evil.srl" -days 1 -out "$DEV/evil.pem" 2>/dev/null
        renewal_csr rn-2-evil rn-2 "$DEV/rn-2.key"
        before=$(cert_rows)
        renew "$DEV/evil" "$DEV/evil.pem" "$DEV/rn-2.key" "$DEV/rn-2-evil.csr"
        if [ "$CODE" != 000 ]; then
                expect_error 401 unauthenticated "$DEV/evil" "does not verify"
        fi
        assert_eq "$(cert_rows)" "$before" "store after a renewal with a foreign certificate"
}

test_revoke_and_crl() {
        local serial text out
        serial=$(serial_of "$RN_CERT")
        admin cert revoke --reason key-compromise "$serial" >/dev/null
        assert_eq "$(status_of "$serial")" revoked "status after hwid cert revoke"
        http "$DEV/crl" GET /crl
        expect_status 200 "$DEV/crl"
        out=$(openssl crl -inform DER -in "$DEV/crl.body" -CAfile "$CA_DIR/ca.pem" -noout 2>&1)
        assert_eq "$out" "verify OK" "CRL signature against ca.pem"
        text=$(openssl crl -inform DER -in "$DEV/crl.body" -noout -text)
        assert_contains "$text" "Issuer: CN = hwid test CA" "CRL issuer"
        assert_contains "$(grep -A5 "Serial Number: $serial" <<<"$text")" "Key Compromise" "CRL entry of $serial"
        assert_not_contains "$text" "Serial Number: $(serial_of "$DEV/rn-4.pem")" "unrevoked serial in the CRL"
        openssl crl -inform DER -in "$DEV/crl.body" -out "$DEV/crl.pem"
        if out=$(openssl verify -crl_check -CRLfile "$DEV/crl.pem" -CAfile "$CA_DIR/ca.pem" "$RN_CERT" 2>&1); then
                fail "openssl accepts the revoked certificate with the CRL: $out"
        fi
        assert_contains "$out" "certificate revoked" "openssl -crl_check on the revoked certificate"
        verify_leaf "$DEV/rn-2.pem" -crl_check -CRLfile "$DEV/crl.pem" -CAfile "$CA_DIR/ca.pem"
        renewal_csr rn-1d rn-1 "$RN_KEY"
        refused_renewal "$DEV/rn-1d" "$RN_CERT" "$RN_KEY" "$DEV/rn-1d.csr" 401 revoked "revoked"
}

ca_setup
add_profiles <<'EOF'
  short:
    validity: 1h
    renewal:
      window: 1.0
  rotate:
    validity: 1h
    renewal:
      window: 1.0
      rotate_key: true
EOF
hwidd_start
test_renew
test_renew_refused
test_foreign_cert
test_revoke_and_crl
hwidd_stop
echo "ca-renewal: all checks passed"
