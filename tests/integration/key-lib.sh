# shellcheck shell=bash disable=SC2034  # constants used by the scripts sourcing this
# key-lib.sh — helpers shared by the key-*.sh tests (hwid key create|show,
# hwid csr on SoftHSM2 and swtpm). Sourced after tests/lib.sh.
#
# Every check here reads the device or the file back with a tool that is not
# hwid (pkcs11-tool, tpm2-tools, the openssl CLI and its tpm2 provider), and
# compares what it finds with what `hwid key show` reports.

# The four key types hwid supports, and the signature algorithm openssl
# names in a CSR signed by each.
KEY_TYPES=(ec-p256 ec-p384 rsa-2048 rsa-3072)
declare -A SIG_ALG=(
        [ec-p256]=ecdsa-with-SHA256
        [ec-p384]=ecdsa-with-SHA384
        [rsa-2048]=sha256WithRSAEncryption
        [rsa-3072]=sha256WithRSAEncryption
)
declare -A KEY_BITS=([ec-p256]=256 [ec-p384]=384 [rsa-2048]=2048 [rsa-3072]=3072)

# The custody lines `hwid key show` must print for keys hwid created.
P11_CUSTODY="custody: sensitive=yes always-sensitive=yes extractable=no never-extractable=yes local=yes value-readable=no"
TPM_CUSTODY="custody: fixedTPM=yes fixedParent=yes sensitiveDataOrigin=yes userWithAuth=yes sign=yes decrypt=no restricted=no noDA=yes"
# fixedTPM (0x2) | fixedParent (0x10) | sensitiveDataOrigin (0x20)
TPMA_CUSTODY=0x32

require_tools openssl

# --- reading hwid's output ----------------------------------------------------

# field NAME FILE — the value of the "NAME: value" line in FILE.
field() {
        sed -n "s/^$1: //p" "$2"
}

# pem_block FILE — the PEM public key in FILE (key show output, openssl output).
pem_block() {
        sed -n '/^-----BEGIN PUBLIC KEY-----$/,/^-----END PUBLIC KEY-----$/p' "$1"
}

# show_key URI OUT — `hwid key show URI` into OUT; it must succeed.
show_key() {
        run_ok "$HWID" key show "$1" >"$2"
}

# create_key URI TYPE OUT [ARGS...] — `hwid key create`; checks what it prints.
create_key() {
        local uri=$1 type=$2 out=$3
        shift 3
        run_ok "$HWID" key create "$uri" --type "$type" "$@" >"$out"
        assert_contains "$(cat "$out")" "created $type key $uri" "key create output"
        [[ $(field spki-sha256 "$out") =~ ^[0-9a-f]{64}$ ]] || fail "key create printed no spki-sha256"
}

# check_show SHOW TYPE CREATE_OUT — key show's type line and fingerprint agree
# with what create printed, and the fingerprint is the SHA-256 of the DER
# SubjectPublicKeyInfo of the PEM it shows (computed by openssl).
check_show() {
        local show=$1 type=$2 created=$3 spki
        assert_eq "$(field type "$show")" "$type (${KEY_BITS[$type]} bits)" "key show type"
        assert_eq "$(field spki-sha256 "$show")" "$(field spki-sha256 "$created")" "spki-sha256 create vs show"
        spki=$(pem_block "$show" | openssl pkey -pubin -outform DER | sha256sum | cut -d' ' -f1)
        assert_eq "$(field spki-sha256 "$show")" "$spki" "spki-sha256 vs openssl's SHA-256 of the SPKI"
}

# check_csr URI TYPE SHOW NAME — hwid csr with URI; openssl verifies the
# signature, and the CSR carries the subject, SANs and the public key that
# key show (output in SHOW) reports.
check_csr() {
        local uri=$1 type=$2 show=$3 name=$4 csr=$T/$4.csr text
        run_ok "$HWID" csr --key "$uri" --subject "/CN=$name/O=acme" \
                --san "dns:$name.example,uri:spiffe://acme/$name" --out "$csr"
        openssl req -verify -noout -in "$csr" 2>"$T/verify.out" ||
                fail "openssl req -verify refuses $csr: $(cat "$T/verify.out")"
        assert_eq "$(openssl req -in "$csr" -noout -pubkey)" "$(pem_block "$show")" "CSR public key vs key show"
        assert_eq "$(openssl req -in "$csr" -noout -subject -nameopt RFC2253)" "subject=O=acme,CN=$name" "CSR subject"
        text=$(openssl req -in "$csr" -noout -text)
        assert_contains "$text" "Signature Algorithm: ${SIG_ALG[$type]}" "CSR signature algorithm"
        assert_contains "$text" "DNS:$name.example, URI:spiffe://acme/$name" "CSR subjectAltName"
}

# --- PKCS#11 (SoftHSM2) --------------------------------------------------------

# p11 ARGS... — pkcs11-tool logged in to the test's own throwaway token
# ($P11_TOKEN, PIN $P11_PIN: test fixtures, so on the command line is fine).
p11() {
        pkcs11-tool --module "$SOFTHSM_MODULE" --token-label "$P11_TOKEN" \
                --login --pin "$P11_PIN" "$@" 2>/dev/null
}

# p11_objects — every object on the token, as pkcs11-tool lists it: the
# snapshot "nothing changed" is checked against.
p11_objects() {
        p11 --list-objects
}

# p11_attr TYPE LABEL NAME — the value pkcs11-tool lists as "NAME:" for the
# object of TYPE (privkey, pubkey, secrkey) labelled LABEL, read from the
# token (not from hwid).
p11_attr() {
        p11 --list-objects --type "$1" | awk -v label="$2" -v name="$3:" '
                function flush() { if (l == label) print v; l = v = "" }
                / Object;/ { flush() }
                $1 == "label:" { l = $0; sub(/^ *label: */, "", l) }
                $1 == name { v = $0; sub(/^ *[^ ]+ */, "", v) }
                END { flush() }'
}

# p11_count TYPE LABEL — how many objects of TYPE labelled LABEL the token holds.
p11_count() {
        p11 --list-objects --type "$1" | grep -cx " *label: *$2" || true
}

# p11_token_pubkey LABEL TYPE — the public key of the public-key object
# LABEL as the token holds it, in the form pem_pub_value prints.
p11_token_pubkey() {
        local point
        case $2 in
        ec-*)   # OpenSC 0.23 cannot read EC P-384 public keys: use CKA_EC_POINT
                point=$(p11_attr pubkey "$1" EC_POINT)
                [[ $point == 04* ]] || fail "no DER CKA_EC_POINT for '$1': '$point'"
                echo "${point:4}" ;;  # the point inside the OCTET STRING
        rsa-*)
                p11 --read-object --type pubkey --label "$1" -o "$T/p11pub.der" >/dev/null ||
                        fail "pkcs11-tool cannot read the public key '$1'"
                openssl pkey -pubin -inform DER -in "$T/p11pub.der" | pem_pub_value ;;
        esac
}

# pem_pub_value — on stdin a PEM public key; prints its EC point or RSA
# modulus in hex (as openssl decodes it).
pem_pub_value() {
        openssl pkey -pubin -noout -text 2>/dev/null | awk '
                /^(pub|Modulus):/ { p = 1; next }
                /^[^ ]/ { p = 0 }
                p { gsub(/[ :]/, ""); printf "%s", $0 }
                END { print "" }' | sed 's/^00//'
}

# --- TPM (swtpm) ----------------------------------------------------------------

# tpm_persistent — the TPM's persistent handles (tpm2-tools).
tpm_persistent() {
        tpm2_getcap handles-persistent
}

# tpm_attr_raw READPUBLIC_OUT — the raw objectAttributes tpm2_readpublic printed.
tpm_attr_raw() {
        awk '/^attributes:/ { a = 1 } a && $1 == "raw:" { print $2; exit }' "$1"
}

# check_tpm_attrs READPUBLIC_OUT SHOW — tpm2-tools read fixedTPM, fixedParent
# and sensitiveDataOrigin from the TPM, and the same attributes as hwid.
check_tpm_attrs() {
        local raw
        raw=$(tpm_attr_raw "$1")
        [ -n "$raw" ] || fail "tpm2_readpublic printed no attributes"
        (((raw & TPMA_CUSTODY) == TPMA_CUSTODY)) ||
                fail "TPM object attributes $raw lack fixedTPM|fixedParent|sensitiveDataOrigin"
        assert_eq "$(printf '0x%08x' "$raw")" "$(field tpm-attributes "$2")" "attributes: tpm2-tools vs hwid"
}

# provider_pubkey KEY — the public key the tpm2 OpenSSL provider reads from
# KEY (a TSS2 key file or handle:0x81......); needs the TPM free.
provider_pubkey() {
        run_ok env TPM2OPENSSL_TCTI="$HWID_TCTI" \
                openssl pkey -provider tpm2 -provider default -in "$1" -pubout
}
