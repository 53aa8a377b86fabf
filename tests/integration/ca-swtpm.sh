#!/bin/bash
# ca-swtpm.sh — the CA with its key (and hwidd's TLS key) in a TPM: swtpm,
# reached through --tcti / the config's tcti. Proves:
#   - `hwid ca init --key tpm2:file=...` writes a self-signed CA that openssl
#     accepts as a CA, for the key in the TPM (read back by the tpm2 OpenSSL
#     provider), and TSS2 key blobs (wrapped by the TPM), no PEM private
#     key; it leaves the TPM with no transient objects or sessions;
#   - hwidd serves over TLS signed in the TPM; several enrollments made with
#     curl get certificates openssl verifies against ca.pem (signed in the
#     TPM), the CRL verifies, and a renewal over mutual TLS works;
#   - /readyz has both TPM keys sign (200, every check passed);
#   - /metrics (promtool check metrics) times the TPM's signatures under
#     backend "tpm2": a CA signature for each certificate, the CRL and the
#     readiness probe, none failed, and the TLS key's handshakes;
#   - after hwidd stops, the TPM holds no transient objects or sessions
#     (invariant 5).
# shellcheck source-path=SCRIPTDIR source=../lib.sh disable=SC2119
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=ops-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ops-lib.sh"

ca_setup_tpm() {
        PORT=$(free_port)
        URL=https://127.0.0.1:$PORT
        run_ok "$HWID" ca init --key "tpm2:file=$T/tpm/ca.tss2.pem" --tcti "$HWID_TCTI" \
                --subject "/CN=hwid test CA" --dir "$CA_DIR" --listen "127.0.0.1:$PORT" \
                --http-listen "127.0.0.1:$(free_port)" >"$T/ca-init.out"
        assert_contains "$(head -n 1 "$T/tpm/ca.tss2.pem")" "-----BEGIN TSS2 PRIVATE KEY-----" "CA key blob"
        assert_contains "$(head -n 1 "$CA_DIR/tls.tss2.pem")" "-----BEGIN TSS2 PRIVATE KEY-----" "TLS key blob"
        assert_contains "$(cat "$CFG")" "tcti: \"$HWID_TCTI\"" "tcti in the generated config"
        verify_leaf "$CA_DIR/ca.pem" -purpose any -CAfile "$CA_DIR/ca.pem"
        assert_contains "$(openssl x509 -in "$CA_DIR/ca.pem" -noout -ext basicConstraints)" "CA:TRUE" "the root is a CA"
        assert_eq "$(TPM2OPENSSL_TCTI=$HWID_TCTI openssl pkey -provider tpm2 -provider default \
                -in "$T/tpm/ca.tss2.pem" -pubout)" "$(openssl x509 -in "$CA_DIR/ca.pem" -noout -pubkey)" \
                "public key of the TPM's CA key vs ca.pem"
        no_private_keys_in "$T/tpm" "$CA_DIR"
        assert_no_transient
}

test_enroll_several() {
        local tok i
        tok=$(token_new --profile short --uses 5)
        for i in 1 2 3 4 5; do
                enroll "tpm-dev-$i" "$tok" -addext "subjectAltName=DNS:tpm-dev-$i"
                expect_status 201 "$DEV/tpm-dev-$i"
                verify_leaf "$DEV/tpm-dev-$i.pem"
                in_store "$(serial_of "$DEV/tpm-dev-$i.pem")" || fail "tpm-dev-$i's certificate is not in the store"
        done
        assert_eq "$(openssl x509 -in "$DEV/tpm-dev-1.pem" -noout -ext subjectAltName | tail -n 1 | tr -d ' ')" \
                DNS:tpm-dev-1 "SAN"
}

test_crl_and_renew() {
        local out
        make_csr tpm-dev-1b -subj /CN=tpm-dev-1
        renew "$DEV/renew" "$DEV/tpm-dev-1.pem" "$DEV/tpm-dev-1.key" "$DEV/tpm-dev-1b.csr"
        expect_status 201 "$DEV/renew"
        verify_leaf "$DEV/renew.body"
        admin cert revoke "$(serial_of "$DEV/tpm-dev-2.pem")" >/dev/null
        http "$DEV/crl" GET /crl
        expect_status 200 "$DEV/crl"
        out=$(openssl crl -inform DER -in "$DEV/crl.body" -CAfile "$CA_DIR/ca.pem" -noout 2>&1)
        assert_eq "$out" "verify OK" "the CRL signed in the TPM"
        assert_contains "$(openssl crl -inform DER -in "$DEV/crl.body" -noout -text)" \
                "Serial Number: $(serial_of "$DEV/tpm-dev-2.pem")" "revoked serial in the CRL"
}

require_tools tpm2_getcap
swtpm_init
mkdir -p "$T/tpm"
ca_setup_tpm
add_profiles <<'EOF'
  short:
    validity: 1h
    san:
      dns: ["{cn}"]
    renewal:
      window: 1.0
EOF
public_metrics
hwidd_start
http "$T/ready" GET /readyz
expect_status 200 "$T/ready"
assert_contains "$(cat "$T/ready.body")" '"ca_key":{"ok":true},"tls_key":{"ok":true}' "/readyz with TPM keys"
test_enroll_several
test_crl_and_renew
# 1 readiness probe + 5 enrollments + 1 renewal + 1 CRL, each one CA signature.
scrape "$T/m"
[ "$(metric "$T/m" 'hwid_sign_duration_seconds_count{key="ca",backend="tpm2"}')" -ge 8 ] ||
        fail "CA signatures in the TPM: $(grep 'key="ca"' "$T/m.body")"
assert_eq "$(metric "$T/m" 'hwid_sign_errors_total{key="ca",backend="tpm2"}')" 0 "CA signatures the TPM failed"
[ "$(metric "$T/m" 'hwid_sign_duration_seconds_count{key="tls",backend="tpm2"}')" -ge 8 ] ||
        fail "TLS signatures in the TPM: $(grep 'key="tls"' "$T/m.body")"
hwidd_stop
assert_no_transient
no_private_keys_in "$T/tpm" "$CA_DIR"
echo "ca-swtpm: all checks passed"
