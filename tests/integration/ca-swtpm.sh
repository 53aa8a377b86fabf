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
#   - the token key (ca.token_key) is a keyedHash HMAC key in the same TPM,
#     in tokens.tss2.pem (a TSS2 key blob), fixedTPM|fixedParent|
#     sensitiveDataOrigin as the TPM reports it; tokens are made while
#     hwidd is stopped (the TPM serves one program at a time) and enroll;
#     the store keeps only their nonce; an unknown token id costs the TPM
#     no command, a token the first time it is checked one TPM2_HMAC, and
#     after that none, for a wrong secret of it too (hwidd remembers it:
#     service/ca/token-memo.h), while a wrong secret of a token never
#     checked costs one (swtpm's command log);
#   - a token key at a persistent handle (hwid ca token-key --key
#     tpm2:handle=...) works as well: tokens made with it enroll;
#   - `hwid token create` works while hwidd runs (the swtpm TCTI connects
#     for each command, so programs take turns); while another program
#     holds the TPM (a client stuck halfway through a command), it fails
#     within seconds with a clear error instead of waiting for ever, and
#     leaves nothing in the TPM;
#   - after hwidd stops, the TPM holds no transient objects or sessions
#     (invariant 5).
# shellcheck source-path=SCRIPTDIR source=../lib.sh disable=SC2119
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=ops-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ops-lib.sh"
# shellcheck source=tpm-log-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/tpm-log-lib.sh"

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
        check_token_key
}

# The token key next to the CA key: a key blob in the CA's directory, the
# TPM's own HMAC key, and nothing left loaded.
check_token_key() {
        local out
        assert_contains "$(head -n 1 "$CA_DIR/tokens.tss2.pem")" "-----BEGIN TSS2 PRIVATE KEY-----" "token key blob"
        grep -qx "  token_key: \"tpm2:file=$CA_DIR/tokens.tss2.pem\"" "$CFG" ||
                fail "hwidd.yaml names no token key in the TPM: $(grep token_key "$CFG")"
        out=$(admin ca token-key)
        assert_contains "$out" "custody: fixedTPM=yes fixedParent=yes sensitiveDataOrigin=yes userWithAuth=yes sign=yes \
decrypt=no restricted=no noDA=yes" "the token key's attributes as the TPM reports them"
        assert_contains "$out" "names it (ca.token_key)" "hwid ca token-key on the TPM CA"
        assert_no_transient
}

# hmacs_since LINE — the TPM2_HMAC commands in the TPM's log after LINE.
hmacs_since() {
        commands_since 0 "$1" | grep -cx HMAC || true
}

# What a token costs the TPM: nothing for an unknown id, one HMAC for a
# token never checked, none for one checked before (TOK, remembered).
test_token_costs() {
        local mark fresh
        fresh=$(token_new)
        mark=$(log_lines 0)
        enroll tpm-unknown "zz9zz9.$(openssl rand -hex 12)"
        expect_error 401 bad_token "$DEV/tpm-unknown" "unknown bootstrap token"
        assert_eq "$(hmacs_since "$mark")" 0 "TPM2_HMAC commands for an unknown token id"
        enroll tpm-wrong "${fresh%%.*}.$(openssl rand -hex 12)"
        expect_error 401 bad_token "$DEV/tpm-wrong" "unknown bootstrap token"
        assert_eq "$(hmacs_since "$mark")" 1 "TPM2_HMAC commands for a known id never checked, a wrong secret"
        enroll tpm-wrong-known "${TOK%%.*}.$(openssl rand -hex 12)"
        expect_error 401 bad_token "$DEV/tpm-wrong-known" "unknown bootstrap token"
        assert_eq "$(hmacs_since "$mark")" 1 "TPM2_HMAC commands for a wrong secret of a token checked before"
}

# Beside hwidd, a token is made and enrolls; a TPM another program holds
# (swtpm serves one connection at a time, and this one stops halfway
# through a command) gets the clear error in CLI_TPM_WAIT seconds.
test_token_create_while_serving() {
        local rc=0 out port=${HWID_TCTI##*port=}
        enroll tpm-beside "$(token_new --profile short)" -addext "subjectAltName=DNS:tpm-beside"
        expect_status 201 "$DEV/tpm-beside"
        exec 3<>"/dev/tcp/127.0.0.1/$port"
        printf '\x80\x01' >&3 # the first two bytes of a command's header
        out=$(timeout 60 "$HWID" token create --config "$CFG" --profile short 2>&1) || rc=$?
        exec 3>&-
        assert_eq "$rc" 1 "exit code of hwid token create while the TPM is held ($out)"
        assert_contains "$out" "the TPM did not answer in 10 s" "hwid token create while the TPM is held"
        assert_contains "$out" "stop it first" "hwid token create while the TPM is held"
}

test_enroll_several() {
        local i mark
        mark=$(log_lines 0)
        for i in 1 2 3 4 5; do
                enroll "tpm-dev-$i" "$TOK" -addext "subjectAltName=DNS:tpm-dev-$i"
                expect_status 201 "$DEV/tpm-dev-$i"
                verify_leaf "$DEV/tpm-dev-$i.pem"
                in_store "$(serial_of "$DEV/tpm-dev-$i.pem")" || fail "tpm-dev-$i's certificate is not in the store"
        done
        assert_eq "$(openssl x509 -in "$DEV/tpm-dev-1.pem" -noout -ext subjectAltName | tail -n 1 | tr -d ' ')" \
                DNS:tpm-dev-1 "SAN"
        assert_eq "$(hmacs_since "$mark")" 1 "TPM2_HMAC commands for 5 enrollments with one token (remembered)"
        assert_eq "$(store_sql "SELECT length(nonce) FROM tokens WHERE id = '${TOK%%.*}' AND secret_hash IS NULL")" 32 \
                "what the store keeps of the token"
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

# A token key at a persistent handle instead of the key file: made by
# hwid ca token-key, named in hwidd.yaml, used by hwid and hwidd.
test_token_key_at_handle() {
        local out line
        out=$(admin ca token-key --key tpm2:handle=0x81000100)
        assert_contains "$out" "created the token key tpm2:handle=0x81000100" "hwid ca token-key at a handle"
        assert_contains "$out" "fixedTPM=yes fixedParent=yes sensitiveDataOrigin=yes" "its attributes"
        line=$(grep '^  token_key: ' <<<"$out") || fail "hwid ca token-key printed no line to add: $out"
        assert_eq "$line" '  token_key: "tpm2:handle=0x81000100"' "the line to add"
        sed -i "s|^  token_key: .*|$line|" "$CFG"
        TOK=$(token_new --profile short)
        hwidd_start
        enroll tpm-at-handle "$TOK" -addext "subjectAltName=DNS:tpm-at-handle"
        expect_status 201 "$DEV/tpm-at-handle"
        enroll tpm-at-handle-2 "${TOK%%.*}.$(openssl rand -hex 12)"
        expect_error 401 bad_token "$DEV/tpm-at-handle-2" "unknown bootstrap token"
        hwidd_stop
}

require_tools tpm2_getcap
swtpm_init --log
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
TOK=$(token_new --profile short --uses 7) # while hwidd is stopped: it will hold the TPM
assert_no_transient
hwidd_start
http "$T/ready" GET /readyz
expect_status 200 "$T/ready"
assert_eq "$(json_get "$T/ready.body" '"\(.checks.ca_key.ok) \(.checks.tls_key.ok)"')" "true true" "/readyz with TPM keys"
test_enroll_several
test_crl_and_renew
test_token_costs
test_token_create_while_serving
# 1 readiness probe + 5 enrollments + 1 renewal + 1 CRL, each one CA signature.
scrape "$T/m"
[ "$(metric "$T/m" 'hwid_sign_duration_seconds_count{key="ca",backend="tpm2"}')" -ge 8 ] ||
        fail "CA signatures in the TPM: $(grep 'key="ca"' "$T/m.body")"
assert_eq "$(metric "$T/m" 'hwid_sign_errors_total{key="ca",backend="tpm2"}')" 0 "CA signatures the TPM failed"
[ "$(metric "$T/m" 'hwid_sign_duration_seconds_count{key="tls",backend="tpm2"}')" -ge 8 ] ||
        fail "TLS signatures in the TPM: $(grep 'key="tls"' "$T/m.body")"
hwidd_stop
assert_no_transient
test_token_key_at_handle
assert_no_transient
no_private_keys_in "$T/tpm" "$CA_DIR"
echo "ca-swtpm: all checks passed"
