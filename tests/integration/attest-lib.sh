# shellcheck shell=bash disable=SC2034  # variables used by the scripts sourcing this
# attest-lib.sh — helpers shared by the attest-*.sh tests (TPM attestation
# against a real hwidd, devices on swtpm). Sourced after tests/lib.sh;
# brings in device-lib.sh (and ca-lib.sh) for the CA and the devices.
#
# The EK certificates and their hashes are read with tpm2-tools and
# openssl, never with hwid: hwid's view is what is under test.

# shellcheck source-path=SCRIPTDIR source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"

require_tools tpm2_nvread tpm2_createprimary tpm2_readpublic tpm2_flushcontext openssl
: "${ATTEST_TOOL:=$BUILDDIR/tests/attest-tool}"
: "${ATTEST_CLIENT:=$BUILDDIR/tests/attest-client}"
[ -x "$ATTEST_TOOL" ] || fail "attest-tool not built: $ATTEST_TOOL"
[ -x "$ATTEST_CLIENT" ] || fail "attest-client not built: $ATTEST_CLIENT"
export TSS2_LOG=all+NONE

# attest_ca ROOTS_DIR — device_ca (CA, generated profiles plus those on
# stdin, hwidd running, PIN) with TPM attestation: attestation.ek_roots
# is ROOTS_DIR, what a deployment installs of its TPM vendors' EK CAs.
attest_ca() {
        local roots=$1
        ca_setup
        add_profiles
        { printf 'attestation:\n  ek_roots: [%s]\n' "$roots"; cat "$CFG"; } >"$CFG.new"
        mv "$CFG.new" "$CFG"
        hwidd_start
        PIN=$(run_ok "$HWID" ca hash "$CA_DIR/ca.pem")
}

# manufacturer_roots DIR — the EK CA of the swtpms of $SWTPM_DIR (its
# local CA: root and intermediate) copied into DIR.
manufacturer_roots() {
        mkdir -p "$1"
        cp "$SWTPM_DIR/localca/swtpm-localca-rootca-cert.pem" "$SWTPM_DIR/localca/issuercert.pem" "$1/"
}

# ek_cert TCTI OUT — the TPM's RSA EK certificate (DER), read by tpm2-tools.
ek_cert() {
        run_ok tpm2_nvread -T "$1" -C 0x01c00002 -o "$2" 0x01c00002 2>/dev/null
}

# ek_pub_sha256 DER — hex SHA-256 of the certificate's SubjectPublicKeyInfo.
ek_pub_sha256() {
        openssl x509 -inform der -in "$1" -noout -pubkey | openssl pkey -pubin -outform der | sha256sum | cut -d' ' -f1
}

# cert_count — certificates in the store, every status.
cert_count() {
        store_sql 'SELECT count(*) FROM certificates'
}

# client TCTI KEY CN [ATTEST-CLIENT-ARGS...] — attest-client against hwidd,
# output (one line per HTTP answer) on stdout; the token, if any, from
# $HWID_TOKEN.
client() {
        local tcti=$1 key=$2 cn=$3
        shift 3
        run_ok "$ATTEST_CLIENT" --server "$URL" --ca "$CA_DIR/ca.pem" --tcti "$tcti" --key "$key" --cn "$cn" "$@"
}

# permanent_id PEM — the identifierValue of the certificate's
# permanentIdentifier otherName, as python3-cryptography reads it (nothing
# if it has none).
permanent_id() {
        /usr/bin/python3 - "$1" <<'PY'
import sys
from cryptography import x509
cert = x509.load_pem_x509_certificate(open(sys.argv[1], "rb").read())
try:
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
except x509.ExtensionNotFound:
    sys.exit(0)
for name in san.get_values_for_type(x509.OtherName):
    if name.type_id.dotted_string != "1.3.6.1.5.5.7.8.3":
        continue
    v = name.value  # PermanentIdentifier ::= SEQUENCE { identifierValue UTF8String OPTIONAL, ... }
    assert v[0] == 0x30 and v[1] == len(v) - 2 and v[2] == 0x0c, v.hex()
    print(v[4:4 + v[3]].decode("utf-8"))
PY
}
