#!/bin/bash
# cmp-device.sh — CMP (RFC 9483) from a device whose keys live in a TPM
# (swtpm), with the stock `openssl cmp` and the tpm2 provider (tpm2-openssl)
# as the client: nothing of hwid on the device side.
# Proves:
#   - p10cr with a CSR that `openssl req` signed in the TPM, MAC-protected
#     with a bootstrap token: the certificate verifies against the CA, holds
#     the TPM key, and the token use is spent;
#   - ir for a key made in the TPM, the CRMF proof of possession signed there
#     by openssl cmp itself;
#   - kur signed with the current TPM key (message protection made in the
#     TPM) for a new TPM key: the new certificate verifies, its public key is
#     the new TPM key's, the old certificate is superseded;
#   - no transient object or session is left in the TPM.
# shellcheck source-path=SCRIPTDIR source=../lib.sh disable=SC2119
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"
# shellcheck source=cmp-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cmp-lib.sh"

require_tools tpm2_getcap tpm2-abrmd dbus-daemon
device_ca <<'EOF'
  cmp:
    validity: 1h
    key_types: [ec-p256]
    extended_key_usage: [clientAuth]
    subject:
      allowed_rdns: [CN]
      cn_pattern: "edge-*"
    renewal:
      window: 1.0
      rotate_key: true
EOF
swtpm_init
# The tpm2 provider first for what it offers (keys, signatures), digests in
# the default provider (tpm2-openssl's advice: the TPM hashes slowly, in
# scarce slots). As docs/CMP.md shows a device doing it.
P=(-provider tpm2 -provider default -propquery '?provider=tpm2,tpm2.digest!=yes')

# tpm_openssl ARGS... — openssl with the tpm2 provider, through tpm2-abrmd.
tpm_openssl() {
        TPM2OPENSSL_TCTI=$TABRMD_TCTI openssl "$@"
}

# tpm_key FILE — a P-256 key made in the TPM, as a TSS2 key file.
tpm_key() {
        tpm_openssl genpkey "${P[@]}" -algorithm EC -pkeyopt group:P-256 -out "$1" ||
                fail "openssl genpkey in the TPM"
        # A key only the TPM can use: every signature with it is made there.
        grep -q '^-----BEGIN TSS2 PRIVATE KEY-----$' "$1" || fail "$1 is not a TSS2 key file"
}

# tpm_pub FILE — the public key of the TPM key FILE (PEM).
tpm_pub() {
        tpm_openssl pkey "${P[@]}" -in "$1" -pubout || fail "openssl pkey of the TPM key $1"
}

# check_cert PEM KEY NAME — PEM verifies against the CA, names NAME, and
# certifies the TPM key KEY.
check_cert() {
        verify_leaf "$1" -CAfile "$CA_DIR/ca.pem"
        assert_eq "$(openssl x509 -in "$1" -noout -subject -nameopt RFC2253)" "subject=CN=$3" "subject of $1"
        assert_eq "$(cert_pubkey "$1")" "$(tpm_pub "$2")" "public key of $1 vs the TPM key"
}

test_p10cr() {
        local tok
        tok=$(token_new --profile cmp)
        tpm_key "$DEV/edge-1.tss2.pem"
        tpm_openssl req "${P[@]}" -new -key "$DEV/edge-1.tss2.pem" -subj /CN=edge-1 -out "$DEV/edge-1.csr" ||
                fail "openssl req with the TPM key"
        cmp_secret "$tok" "$DEV/edge-1.mac"
        TPM2OPENSSL_TCTI=$TABRMD_TCTI cmp_run "$DEV/p10" -- "${P[@]}" -cmd p10cr -csr "$DEV/edge-1.csr" \
                -ref "${tok%%.*}" -secret "file:$DEV/edge-1.mac" -mac hmacWithSHA256 -certout "$DEV/edge-1.pem"
        cmp_ok "$DEV/p10"
        check_cert "$DEV/edge-1.pem" "$DEV/edge-1.tss2.pem" edge-1
        assert_eq "$(token_used "$tok")" 1 "p10cr spends a token use"
}

test_ir_kur() {
        local tok old new
        tok=$(token_new --profile cmp)
        tpm_key "$DEV/edge-2.tss2.pem"
        cmp_secret "$tok" "$DEV/edge-2.mac"
        TPM2OPENSSL_TCTI=$TABRMD_TCTI cmp_run "$DEV/ir" -- "${P[@]}" -cmd ir -newkey "$DEV/edge-2.tss2.pem" \
                -subject /CN=edge-2 -ref "${tok%%.*}" -secret "file:$DEV/edge-2.mac" -mac hmacWithSHA256 \
                -certout "$DEV/edge-2.pem"
        cmp_ok "$DEV/ir"
        check_cert "$DEV/edge-2.pem" "$DEV/edge-2.tss2.pem" edge-2
        assert_eq "$(token_used "$tok")" 1 "ir spends a token use"
        # kur: protected by the current TPM key, the new key's POPO signed in the TPM.
        tpm_key "$DEV/edge-2b.tss2.pem"
        TPM2OPENSSL_TCTI=$TABRMD_TCTI cmp_run "$DEV/kur" -- "${P[@]}" -cmd kur -cert "$DEV/edge-2.pem" \
                -key "$DEV/edge-2.tss2.pem" -newkey "$DEV/edge-2b.tss2.pem" -certout "$DEV/edge-2b.pem"
        cmp_ok "$DEV/kur"
        check_cert "$DEV/edge-2b.pem" "$DEV/edge-2b.tss2.pem" edge-2
        old=$(serial_of "$DEV/edge-2.pem")
        new=$(serial_of "$DEV/edge-2b.pem")
        [ "$old" != "$new" ] || fail "kur returned the old certificate"
        assert_contains "$(cert_rows --identity edge-2 | awk -v s="$old" '$1 == s')" superseded \
                "the old certificate after kur"
}

tabrmd_start
test_p10cr
test_ir_kur
tabrmd_stop
assert_no_transient
hwidd_stop
echo "cmp-device: all checks passed"
