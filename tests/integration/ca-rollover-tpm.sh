#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# ca-rollover-tpm.sh — a rollover of a CA whose key is in a TPM (swtpm),
# as docs/OPERATIONS.md describes it: the new key a TPM key file made by
# `hwid ca rollover prepare` in the same TPM while hwidd serves (the swtpm
# TCTI connects for each command), opened by hwidd at its next tick.
# Proves: the new key file is a TSS2 blob (no PEM private key anywhere);
# hwidd serves the new CA and its links without a restart; after activate
# an enrollment is signed by the new key in the TPM (openssl verifies it
# with the new CA alone), /readyz's ca_key check has the new key sign, and
# the TPM holds no transient object once hwidd stops.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

require_tools tpm2_getcap
swtpm_init
mkdir -p "$T/tpm"
PORT=$(free_port)
URL=https://127.0.0.1:$PORT
run_ok "$HWID" ca init --key "tpm2:file=$T/tpm/ca.tss2.pem" --tcti "$HWID_TCTI" --subject "/CN=hwid TPM CA" \
        --dir "$CA_DIR" --listen "127.0.0.1:$PORT" --http-listen "127.0.0.1:$(free_port)" >/dev/null
TOK=$(token_new --uses 3) # while hwidd is stopped
hwidd_start
enroll before-1 "$TOK"
expect_status 201 "$DEV/before-1"

out=$(admin ca rollover prepare --key "tpm2:file=$T/tpm/ca-g2.tss2.pem")
assert_contains "$out" "created the new CA key tpm2:file=$T/tpm/ca-g2.tss2.pem" "prepare's output"
assert_contains "$(head -n 1 "$T/tpm/ca-g2.tss2.pem")" "-----BEGIN TSS2 PRIVATE KEY-----" "the new key blob"
no_private_keys_in "$T/tpm" "$CA_DIR"
for _ in $(seq 50); do
        http "$T/ca" GET /ca
        [ "$(grep -c 'BEGIN CERTIFICATE' "$T/ca.body")" = 4 ] && break
        sleep 0.2
done
assert_eq "$(grep -c 'BEGIN CERTIFICATE' "$T/ca.body")" 4 "certificates at /ca after prepare"
awk '/-----BEGIN CERTIFICATE-----/ { n++ } n == 2' "$T/ca.body" >"$T/new.pem"
assert_eq "$(TPM2OPENSSL_TCTI=$HWID_TCTI openssl pkey -provider tpm2 -provider default -in "$T/tpm/ca-g2.tss2.pem" \
        -pubout)" "$(openssl x509 -in "$T/new.pem" -noout -pubkey)" "the new CA's key vs the TPM's"

admin ca rollover activate >/dev/null
sleep 1.5
enroll after-1 "$TOK"
expect_status 201 "$DEV/after-1"
openssl verify -partial_chain -CAfile "$T/new.pem" "$DEV/after-1.pem" >/dev/null ||
        fail "the certificate after activate is not signed by the new key in the TPM"
! openssl verify -partial_chain -CAfile "$CA_DIR/ca.pem" "$DEV/after-1.pem" >/dev/null 2>&1 ||
        fail "the certificate after activate is the old CA's"
http "$T/ready" GET /readyz
expect_status 200 "$T/ready"
assert_contains "$(cat "$T/ready.body")" '"ca_key":{"ok":true}' "/readyz with the new TPM key"
hwidd_stop
assert_no_transient
echo "ca-rollover-tpm: OK"
