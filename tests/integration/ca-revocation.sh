#!/bin/bash
# ca-revocation.sh — revocation reaches everything it should, against a real
# hwidd (CA key in SoftHSM2), seen with curl and checked with openssl.
# Proves:
#   - `hwid cert revoke --identity X` revokes every unexpired certificate of
#     X: the live one and the generations renewals superseded (same key), so
#     the CRL holds them all and `openssl verify -crl_check` refuses a
#     superseded generation; a second run finds nothing to revoke (exit 1);
#   - a key-compromise revocation of one certificate blocks its key: every
#     unexpired certificate of that key (an older generation, another
#     identity) is revoked with it, and no enrollment (any identity, any
#     token) nor renewal (any node) gets the key certified again, even
#     re-encoded with a compressed point: 403 key_blocked naming the
#     reason, nothing issued, no token use spent.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

# csr_with_key NAME CN KEY — $DEV/NAME.csr for CN with the existing KEY.
csr_with_key() {
        openssl req -new -key "$3" -subj "/CN=$2" -out "$DEV/$1.csr" 2>/dev/null || fail "openssl req for $1"
}

# renewed NAME CERT KEY CSR — a renewal that must give 201; $DEV/NAME.pem.
renewed() {
        renew "$DEV/$1" "$2" "$3" "$4"
        expect_status 201 "$DEV/$1"
        cp "$DEV/$1.body" "$DEV/$1.pem"
}

# crl_pem — GET /crl into $DEV/crl.pem (checked against ca.pem).
crl_pem() {
        http "$DEV/crl" GET /crl
        expect_status 200 "$DEV/crl"
        openssl crl -inform DER -in "$DEV/crl.body" -out "$DEV/crl.pem"
        assert_eq "$(openssl crl -in "$DEV/crl.pem" -CAfile "$CA_DIR/ca.pem" -noout 2>&1)" "verify OK" "CRL signature"
}

# expect_revoked_by_crl PEM — openssl refuses PEM with the current CRL.
expect_revoked_by_crl() {
        local out
        if out=$(openssl verify -crl_check -CRLfile "$DEV/crl.pem" -CAfile "$CA_DIR/ca.pem" "$1" 2>&1); then
                fail "openssl accepts $1 with the CRL: $out"
        fi
        assert_contains "$out" "certificate revoked" "openssl -crl_check on $1"
}

# Three generations of r-1 with one key: enrolled, renewed, renewed again.
test_revoke_identity() {
        local out s
        enrolled_r1=$(token_new --profile quick)
        enroll r-1 "$enrolled_r1"
        expect_status 201 "$DEV/r-1"
        csr_with_key r-1b r-1 "$DEV/r-1.key"
        renewed r-1b "$DEV/r-1.pem" "$DEV/r-1.key" "$DEV/r-1b.csr"
        renewed r-1c "$DEV/r-1b.pem" "$DEV/r-1.key" "$DEV/r-1b.csr"
        # The superseded generations are good certificates to a relying party.
        verify_leaf "$DEV/r-1.pem"
        out=$(admin cert revoke --identity r-1 --reason cessation-of-operation)
        assert_contains "$out" "3 certificates of r-1 revoked" "hwid cert revoke --identity"
        for s in r-1 r-1b r-1c; do
                assert_eq "$(cert_rows | awk -v x="$(serial_of "$DEV/$s.pem")" '$1 == x { print $2 }')" revoked \
                        "status of $s"
        done
        crl_pem
        for s in r-1 r-1b r-1c; do
                assert_contains "$(openssl crl -in "$DEV/crl.pem" -noout -text)" \
                        "Serial Number: $(serial_of "$DEV/$s.pem")" "CRL entry of $s"
                expect_revoked_by_crl "$DEV/$s.pem"
        done
        expect_exit 1 "no unexpired certificate" -- "$HWID" cert revoke --config "$CFG" --identity r-1
}

# k-1 (two generations) and k-2 share key K; k-1's live certificate is
# revoked for key compromise.
test_key_compromise() {
        local tok before text
        tok=$(token_new --profile quick --uses 6)
        enroll k-1 "$tok"
        expect_status 201 "$DEV/k-1"
        csr_with_key k-1b k-1 "$DEV/k-1.key"
        renewed k-1b "$DEV/k-1.pem" "$DEV/k-1.key" "$DEV/k-1b.csr"
        csr_with_key k-2 k-2 "$DEV/k-1.key"
        post_csr "$DEV/k-2" "$tok" "$DEV/k-2.csr"
        expect_status 201 "$DEV/k-2"
        cp "$DEV/k-2.body" "$DEV/k-2.pem"
        enroll other "$tok"
        expect_status 201 "$DEV/other"

        admin cert revoke --reason key-compromise "$(serial_of "$DEV/k-1b.pem")" >/dev/null
        crl_pem
        text=$(openssl crl -in "$DEV/crl.pem" -noout -text)
        for s in k-1 k-1b k-2; do
                assert_contains "$(grep -A4 "Serial Number: $(serial_of "$DEV/$s.pem")" <<<"$text")" "Key Compromise" \
                        "CRL entry of $s (same key)"
                expect_revoked_by_crl "$DEV/$s.pem"
        done
        verify_leaf "$DEV/other.pem" -crl_check -CRLfile "$DEV/crl.pem" -CAfile "$CA_DIR/ca.pem"

        before=$(store_state "$tok")
        csr_with_key k-3 k-3 "$DEV/k-1.key"
        post_csr "$DEV/k-3" "$tok" "$DEV/k-3.csr"
        expect_error 403 key_blocked "$DEV/k-3" "revoked as compromised"
        post_csr "$DEV/k-3b" "$(token_new --profile manual)" "$DEV/k-3.csr"
        expect_error 403 key_blocked "$DEV/k-3b" "revoked as compromised"
        # The blocked key is a key, not an encoding: spelt with a compressed
        # point (another SubjectPublicKeyInfo, another SHA-256) it is blocked too.
        openssl ec -in "$DEV/k-1.key" -conv_form compressed -out "$DEV/k-1c.key" 2>/dev/null
        csr_with_key k-3c k-3c "$DEV/k-1c.key"
        openssl req -in "$DEV/k-3c.csr" -noout -text | grep -A1 'pub:' | tail -n 1 | grep -qE '^ +0[23]:' ||
                fail "openssl did not make a CSR with a compressed point"
        post_csr "$DEV/k-3c" "$tok" "$DEV/k-3c.csr"
        expect_error 403 key_blocked "$DEV/k-3c" "revoked as compromised"
        csr_with_key other-k other "$DEV/k-1.key"
        renew "$DEV/other-k" "$DEV/other.pem" "$DEV/other.key" "$DEV/other-k.csr"
        expect_error 403 key_blocked "$DEV/other-k" "$(serial_of "$DEV/k-1b.pem")"
        csr_with_key other-kc other "$DEV/k-1c.key"
        renew "$DEV/other-kc" "$DEV/other.pem" "$DEV/other.key" "$DEV/other-kc.csr"
        expect_error 403 key_blocked "$DEV/other-kc" "$(serial_of "$DEV/k-1b.pem")"
        assert_eq "$(store_state "$tok")" "$before" "store and token after the refusals"
        assert_eq "$(admin request list --all | tail -n +2)" "" "requests after the refusals"
}

ca_setup
add_profiles <<'EOF'
  quick:
    validity: 1h
    renewal:
      window: 1.0
EOF
hwidd_start
test_revoke_identity
test_key_compromise
hwidd_stop
echo "ca-revocation: all checks passed"
