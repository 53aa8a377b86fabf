#!/bin/bash
# ca-offline-root.sh — the offline-root path: hwid's CA is an intermediate
# under a root made with the openssl CLI in $T (standing in for an offline
# root). Proves:
#   - `hwid ca init --csr` writes ca.csr, signed by the HSM key, asking for
#     CA:TRUE and keyCertSign/cRLSign, and nothing else (no CA, no config);
#   - `hwid ca import` refuses, with one clear line and writing nothing, a
#     certificate for another key, a certificate that is not a CA, and a
#     chain file whose root did not sign it;
#   - `hwid ca import` of the certificate the root signed succeeds; hwidd
#     serves intermediate + root at GET /ca; a client that trusts only the
#     root reaches hwidd over TLS; an enrolled leaf verifies with
#     `openssl verify -CAfile root.pem -untrusted int.pem` (and not without
#     the intermediate), its AKI being the intermediate's SKI;
#   - client certificates are trusted under hwid's CA certificate only: a
#     sibling intermediate under the same root (even one named like hwid's)
#     mints a leaf with a victim's serial and O=<admin_group>; it verifies
#     with openssl against the root, yet hwidd answers 401 with the reason
#     to GET /v1/identities/<victim>, GET /metrics and POST /v1/renew, and
#     issues nothing; nor is the root itself (in hwidd's chain) a client
#     trust anchor: a leaf it signs with the victim's serial is 401 too;
#   - a client certificate must be byte for byte the one recorded under its
#     serial: a record that differs (here: rewritten in the database) is 401;
#   - the role is the record's: a node certificate (CN alone) reads
#     /metrics once its record says admin, and not before or after.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

R=$T/root       # the offline root's files
mkdir -p "$R"

# make_root NAME — a self-signed root CA $R/NAME.pem with key $R/NAME.key.
make_root() {
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$R/$1.key" \
                -subj "/CN=offline $1" -days 3 -addext basicConstraints=critical,CA:TRUE \
                -addext keyUsage=critical,keyCertSign,cRLSign -out "$R/$1.pem" 2>/dev/null ||
                fail "openssl could not make the root $1"
}

# sign_int CSR OUT EXTS — the root signs CSR with the extensions EXTS.
sign_int() {
        printf '%s\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n' "$3" >"$R/ext"
        openssl x509 -req -in "$1" -CA "$R/root.pem" -CAkey "$R/root.key" -CAcreateserial \
                -CAserial "$R/root.srl" -days 2 -extfile "$R/ext" -out "$2" 2>/dev/null ||
                fail "openssl x509 -req could not sign $1"
}

INT_EXTS='basicConstraints=critical,CA:TRUE,pathlen:0
keyUsage=critical,keyCertSign,cRLSign'

test_init_csr() {
        local text
        run_ok "$HWID" ca init --key "$(ca_key_uri)" --subject "/CN=hwid intermediate/O=test" \
                --dir "$CA_DIR" --csr >"$T/init.out"
        [ -s "$CA_DIR/ca.csr" ] || fail "hwid ca init --csr wrote no ca.csr"
        for f in ca.pem hwidd.yaml hwid.db; do
                [ ! -e "$CA_DIR/$f" ] || fail "hwid ca init --csr wrote $f"
        done
        assert_contains "$(openssl req -in "$CA_DIR/ca.csr" -noout -verify 2>&1)" "verify OK" "ca.csr signature"
        text=$(openssl req -in "$CA_DIR/ca.csr" -noout -text)
        assert_contains "$text" "Subject: CN = hwid intermediate, O = test" "ca.csr subject"
        assert_contains "$(tr -s ' \n' ' ' <<<"$text")" "X509v3 Basic Constraints: critical CA:TRUE" "ca.csr CA:TRUE"
        assert_contains "$(tr -s ' \n' ' ' <<<"$text")" "X509v3 Key Usage: critical Certificate Sign, CRL Sign" \
                "ca.csr keyUsage"
}

# import_fails REASON CERT CHAIN — hwid ca import refuses and writes nothing.
import_fails() {
        expect_exit 1 "$1" -- "$HWID" ca import --key "$(ca_key_uri)" --cert "$2" --chain "$3" \
                --dir "$CA_DIR" --listen "127.0.0.1:$PORT"
        for f in ca.pem ca-chain.pem hwidd.yaml tls.pem; do
                [ ! -e "$CA_DIR/$f" ] || fail "a refused hwid ca import wrote $f"
        done
}

test_import_refused() {
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$R/other.key" \
                -subj "/CN=hwid intermediate/O=test" -out "$R/other.csr" 2>/dev/null
        sign_int "$R/other.csr" "$R/other-int.pem" "$INT_EXTS"
        import_fails "is not for the key" "$R/other-int.pem" "$R/root.pem"
        sign_int "$CA_DIR/ca.csr" "$R/leafish.pem" 'basicConstraints=critical,CA:FALSE
keyUsage=critical,digitalSignature'
        import_fails "not a CA certificate" "$R/leafish.pem" "$R/root.pem"
        sign_int "$CA_DIR/ca.csr" "$R/int.pem" "$INT_EXTS"
        import_fails "does not chain" "$R/int.pem" "$R/stranger.pem"
}

test_import() {
        local served
        run_ok "$HWID" ca import --key "$(ca_key_uri)" --cert "$R/int.pem" --chain "$R/root.pem" \
                --dir "$CA_DIR" --listen "127.0.0.1:$PORT" --http-listen "127.0.0.1:$(free_port)" >"$T/import.out"
        assert_eq "$(openssl x509 -in "$CA_DIR/ca.pem" -outform DER | sha256sum)" \
                "$(openssl x509 -in "$R/int.pem" -outform DER | sha256sum)" "ca.pem is the signed intermediate"
        grep -q '^  chain: ca-chain.pem$' "$CFG" || fail "the generated config serves no chain"
        sed -i 's/^  audit_only: false$/&\n  admin_group: hwid-admins/' "$CFG"
        grep -q '^  admin_group: hwid-admins$' "$CFG" || fail "could not set policy.admin_group"
        hwidd_start
        http "$DEV/ca" GET /ca
        expect_status 200 "$DEV/ca"
        served=$(grep -c 'BEGIN CERTIFICATE' "$DEV/ca.body")
        assert_eq "$served" 2 "certificates served at /ca"
        assert_eq "$(openssl x509 -in "$DEV/ca.body" -noout -subject -nameopt RFC2253)" \
                "subject=O=test,CN=hwid intermediate" "first certificate at /ca"
        sed -n '/END CERTIFICATE/,$p' "$DEV/ca.body" | sed 1d >"$DEV/ca-2.pem"
        cmp -s <(openssl x509 -in "$DEV/ca-2.pem" -outform DER) <(openssl x509 -in "$R/root.pem" -outform DER) ||
                fail "the second certificate at /ca is not the root"
        http "$DEV/health" GET /healthz
        expect_status 200 "$DEV/health"
}

test_enroll_under_root() {
        local out
        enroll leaf-1 "$(token_new)" -addext subjectAltName=DNS:leaf-1
        expect_status 201 "$DEV/leaf-1"
        verify_leaf "$DEV/leaf-1.pem" -CAfile "$R/root.pem" -untrusted "$R/int.pem"
        if out=$(openssl verify -CAfile "$R/root.pem" "$DEV/leaf-1.pem" 2>&1); then
                fail "the leaf verifies without its intermediate: $out"
        fi
        assert_eq "$(openssl x509 -in "$DEV/leaf-1.pem" -noout -issuer -nameopt RFC2253)" \
                "issuer=O=test,CN=hwid intermediate" "issuer of the leaf"
        assert_eq "$(openssl x509 -in "$DEV/leaf-1.pem" -noout -ext authorityKeyIdentifier | tail -n 1 | tr -d ' ')" \
                "$(openssl x509 -in "$R/int.pem" -noout -ext subjectKeyIdentifier | tail -n 1 | tr -d ' ')" \
                "leaf AKI vs intermediate SKI"
}

# A sibling intermediate of hwid's, under the same root and with the same
# name, mints a certificate with leaf-1's serial and the admin group's O.
test_sibling_impersonation() {
        local serial before
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$R/sib.key" \
                -subj "/CN=hwid intermediate/O=test" -out "$R/sib.csr" 2>/dev/null
        sign_int "$R/sib.csr" "$R/sib.pem" "$INT_EXTS"
        serial=$(serial_of "$DEV/leaf-1.pem")
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$DEV/evil.key" \
                -subj "/CN=leaf-1/O=hwid-admins" -out "$DEV/evil.csr" 2>/dev/null
        printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n' \
                >"$R/leaf-ext"
        openssl x509 -req -in "$DEV/evil.csr" -CA "$R/sib.pem" -CAkey "$R/sib.key" -set_serial "0x$serial" \
                -days 1 -extfile "$R/leaf-ext" -out "$DEV/evil-leaf.pem" 2>/dev/null || fail "could not mint the forgery"
        assert_eq "$(serial_of "$DEV/evil-leaf.pem")" "$serial" "serial of the forgery"
        verify_leaf "$DEV/evil-leaf.pem" -CAfile "$R/root.pem" -untrusted "$R/sib.pem"
        cat "$DEV/evil-leaf.pem" "$R/sib.pem" >"$DEV/evil.pem" # the client sends its chain along
        before=$(cert_rows)

        http "$DEV/evil-id" GET /v1/identities/leaf-1 --cert "$DEV/evil.pem" --key "$DEV/evil.key"
        expect_error 401 unauthenticated "$DEV/evil-id" "does not verify against this CA"
        assert_not_contains "$(cat "$DEV/evil-id.body")" '"serial"' "identity given to the forgery"
        http "$DEV/evil-metrics" GET /metrics --cert "$DEV/evil.pem" --key "$DEV/evil.key"
        expect_error 401 unauthenticated "$DEV/evil-metrics" "does not verify against this CA"
        openssl req -new -key "$DEV/evil.key" -subj /CN=leaf-1 -out "$DEV/evil-renew.csr" 2>/dev/null
        renew "$DEV/evil-renew" "$DEV/evil.pem" "$DEV/evil.key" "$DEV/evil-renew.csr"
        expect_error 401 unauthenticated "$DEV/evil-renew" "does not verify against this CA"
        assert_eq "$(cert_rows)" "$before" "certificates after the forgery's requests"
        # The root itself (a member of hwidd's chain, served at /ca) is no
        # client trust anchor either: a leaf it signs with leaf-1's serial.
        openssl x509 -req -in "$DEV/evil.csr" -CA "$R/root.pem" -CAkey "$R/root.key" -set_serial "0x$serial" \
                -days 1 -extfile "$R/leaf-ext" -out "$DEV/root-leaf.pem" 2>/dev/null || fail "could not mint the root's leaf"
        verify_leaf "$DEV/root-leaf.pem" -CAfile "$R/root.pem"
        http "$DEV/root-id" GET /v1/identities/leaf-1 --cert "$DEV/root-leaf.pem" --key "$DEV/evil.key"
        expect_error 401 unauthenticated "$DEV/root-id" "does not verify against this CA"
        http "$DEV/root-metrics" GET /metrics --cert "$DEV/root-leaf.pem" --key "$DEV/evil.key"
        expect_error 401 unauthenticated "$DEV/root-metrics" "does not verify against this CA"
        # The genuine holder still reads its own identity.
        http "$DEV/leaf-1-id" GET /v1/identities/leaf-1 --cert "$DEV/leaf-1.pem" --key "$DEV/leaf-1.key"
        expect_status 200 "$DEV/leaf-1-id"
}

# A record that is not the certificate shown (the database says serial S
# is some other certificate): the serial alone identifies no one.
test_record_mismatch() {
        local serial
        enroll leaf-2 "$(token_new)"
        expect_status 201 "$DEV/leaf-2"
        http "$DEV/leaf-2-id" GET /v1/identities/leaf-2 --cert "$DEV/leaf-2.pem" --key "$DEV/leaf-2.key"
        expect_status 200 "$DEV/leaf-2-id"
        serial=$(serial_of "$DEV/leaf-2.pem")
        sqlite3 "$CA_DIR/hwid.db" "UPDATE certificates SET der = (SELECT der FROM certificates WHERE
                identity = 'hwidd') WHERE serial = '$serial'"
        http "$DEV/leaf-2-id" GET /v1/identities/leaf-2 --cert "$DEV/leaf-2.pem" --key "$DEV/leaf-2.key"
        expect_error 401 unauthenticated "$DEV/leaf-2-id" "is not the certificate this CA issued with that serial"
}

# The role is the record's, never read from the certificate shown: leaf-1
# (subject CN=leaf-1 alone) is a node and may not read /metrics; once its
# record says admin, the same certificate may.
test_role_from_record() {
        local serial
        serial=$(serial_of "$DEV/leaf-1.pem")
        http "$DEV/leaf-1-metrics" GET /metrics --cert "$DEV/leaf-1.pem" --key "$DEV/leaf-1.key"
        expect_error 403 forbidden "$DEV/leaf-1-metrics" "needs the admin role"
        sqlite3 "$CA_DIR/hwid.db" "UPDATE certificates SET role = 'admin' WHERE serial = '$serial'"
        http "$DEV/leaf-1-metrics" GET /metrics --cert "$DEV/leaf-1.pem" --key "$DEV/leaf-1.key"
        expect_status 200 "$DEV/leaf-1-metrics"
        assert_contains "$(cat "$DEV/leaf-1-metrics.body")" "hwid_" "metrics read by the record's admin"
        sqlite3 "$CA_DIR/hwid.db" "UPDATE certificates SET role = 'node' WHERE serial = '$serial'"
        http "$DEV/leaf-1-metrics" GET /metrics --cert "$DEV/leaf-1.pem" --key "$DEV/leaf-1.key"
        expect_error 403 forbidden "$DEV/leaf-1-metrics" "needs the admin role"
}

softhsm_init ca
PORT=$(free_port)
URL=https://127.0.0.1:$PORT
CACERT=$R/root.pem      # devices trust the offline root only
make_root root
make_root stranger
test_init_csr
test_import_refused
test_import
test_enroll_under_root
test_sibling_impersonation
test_record_mismatch
test_role_from_record
hwidd_stop
no_private_keys_in "$CA_DIR"
echo "ca-offline-root: all checks passed"
