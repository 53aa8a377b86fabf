#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# ca-rollover-offline-root.sh — a rollover of a CA under an offline root
# (hwid ca init --csr / hwid ca import), the root made here with the
# openssl CLI. Proves:
#   - prepare writes the new key's request for the root (signed by the HSM
#     key, CA:TRUE, keyCertSign and cRLSign, the subject " G2") and serves
#     nothing new yet; status says the generation waits for its
#     certificate; activate is refused until it has one;
#   - import refuses, changing nothing, a certificate for another key, one
#     that is no CA, and one that does not chain to the root;
#   - import of the certificate the root signed: GET /ca serves the old
#     intermediate, the root (once), the new intermediate and both links,
#     made by the two HSM keys (openssl verifies NewWithOld with the old
#     intermediate alone, OldWithNew with the new one);
#   - after activate an enrolled leaf verifies with the root and the new
#     intermediate (openssl verify -CAfile root -untrusted new), and names
#     /crl/2, whose CRL the new intermediate signs;
#   - a device joining with the old intermediate's pin after the switch
#     stores old intermediate, root, new intermediate in DIR/ca.pem, and its
#     certificate verifies against it.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

R=$T/root
mkdir -p "$R"
G2_URI="pkcs11:token=ca;object=ca-key-g2?pin-source=file:$T/pin"
# A link sits below the old intermediate: no pathlen:0 (docs/OPERATIONS.md).
INT_EXTS='basicConstraints=critical,CA:TRUE
keyUsage=critical,keyCertSign,cRLSign'

fp() {
        openssl x509 -in "$1" -noout -fingerprint -sha256 | cut -d= -f2
}

certs_in() {
        rm -rf "$2" && mkdir -p "$2"
        awk -v d="$2" '/-----BEGIN CERTIFICATE-----/ { n++ } n { print > (d "/" n ".pem") } END { print n + 0 }' "$1"
}

make_root() {
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$R/$1.key" \
                -subj "/CN=offline $1" -days 3 -addext basicConstraints=critical,CA:TRUE \
                -addext keyUsage=critical,keyCertSign,cRLSign -out "$R/$1.pem" 2>/dev/null ||
                fail "openssl could not make the root $1"
}

sign_int() {
        local root=${4:-root}
        printf '%s\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n' "$3" >"$R/ext"
        openssl x509 -req -in "$1" -CA "$R/$root.pem" -CAkey "$R/$root.key" -CAcreateserial \
                -CAserial "$R/$root.srl" -days 2 -extfile "$R/ext" -out "$2" 2>/dev/null ||
                fail "openssl x509 -req could not sign $1"
}

issued_by() {
        openssl verify -partial_chain -CAfile "$2" "$1" >/dev/null 2>&1
}

served_count() {
        http "$DEV/ca" GET /ca
        expect_status 200 "$DEV/ca"
        certs_in "$DEV/ca.body" "$DEV/ca"
}

setup() {
        softhsm_init ca
        make_root root
        make_root stranger
        PORT=$(free_port)
        URL=https://127.0.0.1:$PORT
        run_ok "$HWID" ca init --key "$(ca_key_uri)" --subject "/CN=hwid intermediate/O=test" --dir "$CA_DIR" \
                --csr >/dev/null
        sign_int "$CA_DIR/ca.csr" "$R/int.pem" "$INT_EXTS"
        run_ok "$HWID" ca import --key "$(ca_key_uri)" --cert "$R/int.pem" --chain "$R/root.pem" --dir "$CA_DIR" \
                --listen "127.0.0.1:$PORT" --http-listen "127.0.0.1:$(free_port)" >/dev/null
        hwidd_start
        PIN=$(run_ok "$HWID" ca hash "$R/int.pem")
        assert_eq "$(served_count)" 2 "certificates at /ca before the rollover"
}

test_prepare() {
        local out text
        out=$(admin ca rollover prepare --key "$G2_URI" --csr "$T/g2.csr")
        assert_contains "$out" "its request for the offline root is in $T/g2.csr" "prepare's output"
        assert_contains "$(openssl req -in "$T/g2.csr" -noout -verify 2>&1)" "verify OK" "the request's signature"
        text=$(openssl req -in "$T/g2.csr" -noout -text | tr -s ' \n' ' ')
        assert_contains "$text" "Subject: CN = hwid intermediate G2, O = test" "the request's subject"
        assert_contains "$text" "X509v3 Basic Constraints: critical CA:TRUE" "the request's CA:TRUE"
        assert_contains "$text" "X509v3 Key Usage: critical Certificate Sign, CRL Sign" "the request's keyUsage"
        assert_contains "$(admin ca rollover status)" "generation 2 waits for its certificate" "status"
        expect_exit 1 "no certificate yet" -- "$HWID" ca rollover activate --config "$CFG"
        sleep 1.5
        assert_eq "$(served_count)" 2 "certificates at /ca while the root has not signed"
}

import_fails() {
        expect_exit 1 "$1" -- "$HWID" ca rollover import --config "$CFG" --cert "$2"
        assert_contains "$(admin ca rollover status)" "generation 2 waits for its certificate" "status after a refusal"
}

test_import() {
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$R/other.key" \
                -subj "/CN=hwid intermediate G2/O=test" -out "$R/other.csr" 2>/dev/null
        sign_int "$R/other.csr" "$R/other.pem" "$INT_EXTS"
        import_fails "is not for the prepared key" "$R/other.pem"
        sign_int "$T/g2.csr" "$R/leafish.pem" $'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature'
        import_fails "not a CA certificate" "$R/leafish.pem"
        sign_int "$T/g2.csr" "$R/strange.pem" "$INT_EXTS" stranger
        import_fails "does not chain" "$R/strange.pem"
        sign_int "$T/g2.csr" "$R/int2.pem" "$INT_EXTS"
        assert_contains "$(admin ca rollover import --cert "$R/int2.pem")" "generation 2 has its certificate" "import"
        sleep 1.5
        assert_eq "$(served_count)" 5 "certificates at /ca after the import"
        assert_eq "$(fp "$DEV/ca/1.pem") $(fp "$DEV/ca/2.pem") $(fp "$DEV/ca/3.pem")" \
                "$(fp "$R/int.pem") $(fp "$R/root.pem") $(fp "$R/int2.pem")" "old, root, new at /ca"
        issued_by "$DEV/ca/4.pem" "$R/int.pem" || fail "NewWithOld does not verify with the old intermediate"
        assert_eq "$(openssl x509 -in "$DEV/ca/4.pem" -noout -pubkey)" "$(openssl x509 -in "$R/int2.pem" -noout -pubkey)" \
                "NewWithOld's key"
        issued_by "$DEV/ca/5.pem" "$R/int2.pem" || fail "OldWithNew does not verify with the new intermediate"
}

test_activate() {
        local text
        admin ca rollover activate >/dev/null
        sleep 1.5
        enroll leaf-2 "$(token_new)"
        expect_status 201 "$DEV/leaf-2"
        verify_leaf "$DEV/leaf-2.pem" -CAfile "$R/root.pem" -untrusted "$R/int2.pem"
        ! openssl verify -CAfile "$R/root.pem" -untrusted "$R/int.pem" "$DEV/leaf-2.pem" >/dev/null 2>&1 ||
                fail "the new leaf verifies with the old intermediate"
        openssl x509 -in "$DEV/leaf-2.pem" -noout -ext crlDistributionPoints | grep -q "/crl/2$" ||
                fail "the new leaf names no /crl/2"
        http "$DEV/crl2" GET /crl/2
        expect_status 200 "$DEV/crl2"
        text=$(openssl crl -inform DER -in "$DEV/crl2.body" -CAfile "$R/int2.pem" -noout 2>&1) || fail "$text"
        assert_contains "$text" "verify OK" "/crl/2 with the new intermediate"
}

test_device() {
        local d=$T/edge-1
        swtpm_init
        expect_exit 0 "enrolled edge-1" --multiline -- env HWID_TOKEN="$(token_new)" "$HWID" join --server "$URL" \
                --ca-hash "$PIN" --key "tpm2:file=$d/device.tss2.pem" --cn edge-1 --dir "$d"
        certs_in "$d/ca.pem" "$T/dca" >/dev/null
        assert_eq "$(for f in "$T"/dca/*.pem; do fp "$f"; done | tr '\n' ' ')" \
                "$(fp "$R/int.pem") $(fp "$R/root.pem") $(fp "$R/int2.pem") " "$d/ca.pem"
        verify_leaf "$d/cert.pem" -CAfile "$d/ca.pem"
        issued_by "$d/cert.pem" "$R/int2.pem" || fail "the device's certificate is not the new intermediate's"
        assert_no_transient
}

setup
test_prepare
test_import
test_activate
test_device
hwidd_stop
echo "ca-rollover-offline-root: OK"
