#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# ca-rollover-peers.sh — what a CA rollover looks like to the standard
# protocols' own clients: `openssl cmp` (Debian 12's OpenSSL 3.0) and EST
# read with curl and openssl (RFC 9483 §4.3.2, RFC 4210 §5.3.19.15, RFC 7030
# §4.1.3). The certificates are taken apart with openssl asn1parse, not
# with hwid.
# Proves:
#   - before a rollover, genm rootCaKeyUpdate is answered without a value;
#   - after prepare, its RootCaKeyUpdateContent holds newWithNew (the new
#     CA), newWithOld [0] (its key certified by the old CA: openssl
#     verifies it with the old CA alone) and oldWithNew [1] (the old key
#     certified by the new CA), each byte for byte the one GET /ca serves;
#   - EST cacerts (base64 PKCS#7) holds the old CA, the new CA and both
#     links, the same four certificates as GET /ca;
#   - after activate, `openssl cmp` trusting the old CA alone still
#     verifies hwidd's TLS and its signed answers, and an ir gets a
#     certificate of the new CA; caCerts holds the new CA.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=cmp-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cmp-lib.sh"

G2_URI="pkcs11:token=ca;object=ca-key-g2?pin-source=file:$T/pin"
OLD=$CA_DIR/ca.pem
U=$T/update

fp() {
        openssl x509 -in "$1" -noout -fingerprint -sha256 | cut -d= -f2
}

# certs_in FILE DIR — each certificate of FILE as DIR/1.pem, ...; how many.
certs_in() {
        rm -rf "$2" && mkdir -p "$2"
        awk -v d="$2" '/-----BEGIN CERTIFICATE-----/ { n++ } n { print > (d "/" n ".pem") } END { print n + 0 }' "$1"
}

# genm_root OUT — genm rootCaKeyUpdate; the answer in OUT.der.
genm_root() {
        cmp_run "$1" -- -cmd genm -infotype rootCaKeyUpdate -unprotected_requests -ref none -rspout "$1.der"
        cmp_ok "$1"
}

# value_of DER — the offset of rootCaKeyUpdate's infoValue in the genp DER
# (the element after its OID, at the OID's depth), empty when it has none.
value_of() {
        openssl asn1parse -inform DER -in "$1" | awk '
                /:id-it-rootCaKeyUpdate/ { split($1, a, /:d=/); depth = a[2]; found = 1; next }
                found && !done { split($1, b, /:d=/); if (b[2] == depth) print b[1]; done = 1 }'
}

# cert_at DER OFFSET PEM — the element of DER at OFFSET (asn1parse's
# offsets, hl and l of its line) is a certificate: into PEM.
cert_at() {
        local line hl l
        line=$(openssl asn1parse -inform DER -in "$1" | awk -v o="$2" '{ split($1, a, /:/) } a[1] == o && !done { print; done = 1 }')
        hl=$(sed -n 's/.*hl= *\([0-9]*\).*/\1/p' <<<"$line")
        l=$(sed -n 's/.* l= *\([0-9]*\).*/\1/p' <<<"$line")
        [ -n "$hl" ] && [ -n "$l" ] || fail "no element at $2 of $1"
        dd if="$1" of="$3.der" bs=1 skip="$2" count=$((hl + l)) status=none
        openssl x509 -inform DER -in "$3.der" -out "$3" || fail "the element at $2 of $1 is no certificate"
}

# update_certs DER — RootCaKeyUpdateContent's three certificates as
# $U/nwn.pem, $U/nwo.pem ([0]) and $U/own.pem ([1]): each explicit tag's
# content is the element right after it.
update_certs() {
        local off d1
        mkdir -p "$U"
        off=$(value_of "$1")
        [ -n "$off" ] || fail "genp rootCaKeyUpdate has no value"
        openssl asn1parse -inform DER -in "$1" -strparse "$off" -noout -out "$U/content.der" || fail "no value"
        mapfile -t d1 < <(openssl asn1parse -inform DER -in "$U/content.der" | awk '/:d=1 / { split($1, a, /:/); print a[1] " " $0 }')
        assert_eq "${#d1[@]}" 3 "elements of RootCaKeyUpdateContent"
        assert_contains "${d1[0]}" "cons: SEQUENCE" "newWithNew"
        assert_contains "${d1[1]}" "cons: cont [ 0 ]" "newWithOld's tag"
        assert_contains "${d1[2]}" "cons: cont [ 1 ]" "oldWithNew's tag"
        cert_at "$U/content.der" "${d1[0]%% *}" "$U/nwn.pem"
        inner() {
                openssl asn1parse -inform DER -in "$U/content.der" |
                        awk -v o="$1" '{ split($1, a, /:/) } found && !done { print a[1]; done = 1 } a[1] == o { found = 1 }'
        }
        cert_at "$U/content.der" "$(inner "${d1[1]%% *}")" "$U/nwo.pem"
        cert_at "$U/content.der" "$(inner "${d1[2]%% *}")" "$U/own.pem"
}

issued_by() {
        openssl verify -partial_chain -CAfile "$2" "$1" >/dev/null 2>&1
}

test_no_rollover() {
        genm_root "$DEV/root0"
        assert_contains "$(openssl asn1parse -inform DER -in "$DEV/root0.der")" "id-it-rootCaKeyUpdate" "genp"
        [ -z "$(value_of "$DEV/root0.der")" ] || fail "rootCaKeyUpdate has a value without a rollover"
}

test_prepared() {
        admin ca rollover prepare --key "$G2_URI" >/dev/null
        sleep 1.5
        http "$DEV/ca" GET /ca
        assert_eq "$(certs_in "$DEV/ca.body" "$DEV/ca")" 4 "certificates in /ca"
        genm_root "$DEV/root1"
        update_certs "$DEV/root1.der"
        assert_eq "$(fp "$U/nwn.pem")" "$(fp "$DEV/ca/2.pem")" "newWithNew vs the new CA of /ca"
        assert_eq "$(fp "$U/nwo.pem")" "$(fp "$DEV/ca/3.pem")" "newWithOld vs /ca"
        assert_eq "$(fp "$U/own.pem")" "$(fp "$DEV/ca/4.pem")" "oldWithNew vs /ca"
        issued_by "$U/nwo.pem" "$OLD" || fail "newWithOld does not verify with the old CA"
        assert_eq "$(openssl x509 -in "$U/nwo.pem" -noout -pubkey)" "$(openssl x509 -in "$U/nwn.pem" -noout -pubkey)" \
                "newWithOld's key vs newWithNew's"
        issued_by "$U/own.pem" "$U/nwn.pem" || fail "oldWithNew does not verify with the new CA"
        assert_eq "$(openssl x509 -in "$U/own.pem" -noout -pubkey)" "$(openssl x509 -in "$OLD" -noout -pubkey)" \
                "oldWithNew's key vs the old CA's"
        # EST: the same four certificates.
        http "$DEV/cacerts" GET /.well-known/est/cacerts
        expect_status 200 "$DEV/cacerts"
        openssl base64 -d -in "$DEV/cacerts.body" | openssl pkcs7 -inform DER -print_certs -out "$DEV/cacerts.pem" ||
                fail "openssl pkcs7 cannot read cacerts"
        certs_in "$DEV/cacerts.pem" "$DEV/est" >/dev/null
        assert_eq "$(for f in "$DEV"/est/*.pem; do fp "$f"; done | sort)" \
                "$(for f in "$DEV"/ca/*.pem; do fp "$f"; done | sort)" "EST cacerts vs GET /ca"
}

test_activated() {
        local tok
        admin ca rollover activate >/dev/null
        sleep 1.5
        tok=$(token_new)
        cmp_secret "$tok" "$DEV/ir.mac"
        ec_key "$DEV/ir-1.key"
        cmp_run "$DEV/ir" -- -cmd ir -ref "${tok%%.*}" -secret "file:$DEV/ir.mac" -mac hmacWithSHA256 \
                -newkey "$DEV/ir-1.key" -subject "/CN=ir-1" -certout "$DEV/ir-1.pem"
        cmp_ok "$DEV/ir"
        issued_by "$DEV/ir-1.pem" "$U/nwn.pem" || fail "the ir's certificate is not the new CA's"
        ! issued_by "$DEV/ir-1.pem" "$OLD" || fail "the ir's certificate is the old CA's"
        cmp_run "$DEV/cacerts-cmp" -- -cmd genm -infotype caCerts -unprotected_requests -ref none \
                -rspout "$DEV/cacerts-cmp.der"
        cmp_ok "$DEV/cacerts-cmp"
        assert_contains "$(openssl asn1parse -inform DER -in "$DEV/cacerts-cmp.der")" "hwid test CA G2" \
                "the new CA in caCerts"
        genm_root "$DEV/root2"
        update_certs "$DEV/root2.der"
        assert_eq "$(fp "$U/nwn.pem")" "$(fp "$DEV/ca/2.pem")" "newWithNew after activate"
}

ca_setup
hwidd_start
test_no_rollover
test_prepared
test_activated
hwidd_stop
echo "ca-rollover-peers: OK"
