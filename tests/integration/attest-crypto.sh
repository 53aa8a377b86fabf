#!/bin/bash
# shellcheck disable=SC2119  # lib.sh helpers take optional arguments
# attest-crypto.sh — the cryptographic core of TPM attestation (issue 12):
# the device side (hsm/tpm-attest.c) on swtpm, the CA side
# (service/attest-*.c) in software, run end to end by attest-tool, which
# swaps in what an attacker would send.  Nothing is mocked: the TPM
# activates the credential the CA made in software, and signs the Certify
# the CA verifies.
#
# Proves:
#   - the exchange succeeds with RSA 2048, ECC P-256 and ECC P-384 EKs, with
#     the persistent EK and with the EK made from the TCG template; the EK
#     certificate the CA verified is the one tpm2-tools reads from NV;
#   - its cost: at most 16 TPM commands and 2 CreatePrimary (swtpm's log);
#   - every refusal, at the step that must catch it: an EK certificate from
#     a foreign manufacturer (same CA name, other key); a credential made
#     for another TPM's EK, or bound to another TPM's AK; a wrong activated
#     secret; a TPM whose NV holds another TPM's EK certificate; an AK without
#     `restricted`; a device key without fixedTPM/fixedParent; a Certify
#     over another nonce; a CSR key that is not the certified one; a
#     replayed answer; a late answer; malformed evidence (refused as such,
#     without using up the challenge);
#   - EK certificate chains: a critical subjectDirectoryAttributes (which
#     plain OpenSSL refuses) is accepted at the EK only; any other unknown
#     critical extension, a CA certificate or a non-EK EKU is refused;
#   - no transient object or session is left after any step (in-process
#     while the tool holds swtpm's only connection, then with tpm2_getcap).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

require_tools tpm2_evictcontrol tpm2_createprimary tpm2_readpublic tpm2_flushcontext tpm2_nvread \
        tpm2_nvdefine tpm2_nvundefine tpm2_nvwrite tpm2_createek openssl
: "${ATTEST_TOOL:=$BUILDDIR/tests/attest-tool}"
[ -x "$ATTEST_TOOL" ] || fail "attest-tool not built: $ATTEST_TOOL"
export TSS2_LOG=all+NONE

# Two TPMs of one manufacturer (A, B), commands logged.
swtpm_init --log 2
A=${TCTIS[0]} B=${TCTIS[1]}
A_LOG=$SWTPM_DIR/tpm0/swtpm.log B_LOG=$SWTPM_DIR/tpm1/swtpm.log
CA_DIR=$SWTPM_DIR/localca
# What a deployment configures: the manufacturer's root and intermediate.
ROOTS=$T/roots
mkdir -p "$ROOTS"
cp "$CA_DIR/swtpm-localca-rootca-cert.pem" "$CA_DIR/issuercert.pem" "$ROOTS/"
# A foreign "manufacturer": its own local CA, with the same names, other keys.
swtpm_init 1
F=${TCTIS[2]}
F_ROOTS=$SWTPM_DIR/localca
assert_eq "$(openssl x509 -in "$F_ROOTS/issuercert.pem" -noout -subject)" \
        "$(openssl x509 -in "$CA_DIR/issuercert.pem" -noout -subject)" "foreign EK CA has the same name"

for t in A B F; do
        run_ok "$HWID" key create "tpm2:file=$T/$t.pem" --tcti "${!t}" >/dev/null
done
assert_no_transient

# attest TCTI ARGS... — the whole exchange on that TPM; must succeed.
attest() {
        local tcti=$1
        shift
        run_ok "$ATTEST_TOOL" exchange --tcti "$tcti" --check-transient --roots "$ROOTS" "$@"
}

# refused STAGE REASON TCTI ARGS... — the exchange fails at STAGE, saying REASON.
refused() {
        local stage=$1 reason=$2 tcti=$3
        shift 3
        expect_exit 1 "attest-tool: $stage: " -- "$ATTEST_TOOL" exchange --tcti "$tcti" "$@"
        grep -qF -- "$reason" "$T/last.err" || fail "refused at $stage, but not with '$reason': $(cat "$T/last.err")"
        assert_no_transient "$tcti"
}

# --- TPM command names and counts in swtpm's log (as bench/run.sh counts) ----

tpm_name() {
        case "$1" in
        00000131) echo CreatePrimary ;; 00000147) echo ActivateCredential ;; 00000148) echo Certify ;;
        0000014E) echo NV_Read ;; 00000151) echo PolicySecret ;; 00000157) echo Load ;;
        0000015D) echo Sign ;; 00000161) echo ContextLoad ;; 00000162) echo ContextSave ;;
        00000165) echo FlushContext ;; 00000169) echo NV_ReadPublic ;; 00000173) echo ReadPublic ;;
        00000176) echo StartAuthSession ;; 0000017A) echo GetCapability ;; *) echo "0x$1" ;;
        esac
}

# tpm_commands LOG FROM TO — the commands of log lines FROM+1..TO, one a line.
tpm_commands() {
        sed -n "$(($2 + 1)),$3p" "$1" |
                awk '/SWTPM_IO_Read/ { getline; code = $7 $8 $9 $10 }
                     /SWTPM_IO_Write/ { getline; print ($7 $8 $9 $10 == "00000922" ? "RETRY" : code) }' |
                while read -r c; do tpm_name "$c"; done
}

# counted LOG OUT — the commands of the exchange whose tool output is OUT.
counted() {
        local range
        range=$(awk '/^tpm-log-lines:/ { print $2, $3 }' <<<"$2")
        [ -n "$range" ] || fail "no tpm-log-lines in: $2"
        # shellcheck disable=SC2086  # two numbers
        tpm_commands "$1" $range
}

# --- the exchange succeeds -----------------------------------------------------

echo "== RSA 2048 EK (the first certificate swtpm has), persistent EK"
out=$(attest "$A" --key "tpm2:file=$T/A.pem" --replay --malformed-first)
assert_contains "$out" "ek: rsa-2048"
assert_contains "$out" "no-transient: after begin"
assert_contains "$out" "no-transient: after respond"
assert_contains "$out" "malformed refused: the device key's public area is not"
assert_contains "$out" "verified"
assert_contains "$out" "replay refused: unknown attestation challenge"
assert_no_transient "$A"
# The EK certificate the CA verified is the one in the TPM's NV.
run_ok tpm2_nvread -T "$A" -C 0x01c00002 -o "$T/ek-a.der" 0x01c00002 2>/dev/null
assert_contains "$out" "ek-sha256: $(sha256sum <"$T/ek-a.der" | cut -d' ' -f1)"

echo "== ECC P-384 EK (high-range template H-3: KDFe, SHA-384, AES-256)"
out=$(attest "$A" --key "tpm2:file=$T/A.pem" --ek ecc-p384)
assert_contains "$out" "ek: ecc-p384"
assert_contains "$out" "verified"

echo "== TPM commands per exchange (device key already used, as after the CSR)"
for ek in auto rsa-2048 ecc-p384; do
        # Without --check-transient, whose GetCapability would be counted.
        out=$(run_ok "$ATTEST_TOOL" exchange --tcti "$A" --roots "$ROOTS" --key "tpm2:file=$T/A.pem" \
                --ek "$ek" --warm --count-log "$A_LOG")
        assert_contains "$out" "verified"
        cmds=$(counted "$A_LOG" "$out")
        n=$(grep -c . <<<"$cmds")
        cp=$(grep -c '^CreatePrimary$' <<<"$cmds" || true)
        echo "  $ek: $n commands, $cp CreatePrimary: $(tr '\n' ' ' <<<"$cmds")"
        ! grep -q RETRY <<<"$cmds" || fail "a command was refused with TPM_RC_RETRY: $cmds"
        [ "$n" -le 16 ] || fail "$ek: $n TPM commands, more than 16"
        [ "$cp" -le 2 ] || fail "$ek: $cp CreatePrimary, more than 2"
done
assert_no_transient "$A"

echo "== EK made from the TCG template (no persistent EK)"
run_ok tpm2_evictcontrol -T "$B" -C o -c 0x81010001 >/dev/null
run_ok tpm2_evictcontrol -T "$B" -C o -c 0x81010016 >/dev/null
for ek in rsa-2048 ecc-p384; do
        out=$(run_ok "$ATTEST_TOOL" exchange --tcti "$B" --roots "$ROOTS" --key "tpm2:file=$T/B.pem" \
                --ek "$ek" --warm --count-log "$B_LOG")
        assert_contains "$out" "verified"
        cmds=$(counted "$B_LOG" "$out")
        n=$(grep -c . <<<"$cmds")
        cp=$(grep -c '^CreatePrimary$' <<<"$cmds" || true)
        echo "  $ek: $n commands, $cp CreatePrimary: $(tr '\n' ' ' <<<"$cmds")"
        assert_eq "$cp" 2 "$ek: CreatePrimary for the AK and the EK"
        [ "$n" -le 18 ] || fail "$ek: $n TPM commands with the EK made from its template"
        assert_no_transient "$B"
done
out=$(attest "$B" --key "tpm2:file=$T/B.pem")
assert_contains "$out" "verified"

# --- refusals --------------------------------------------------------------------

echo "== EK certificate of a foreign manufacturer"
refused challenge "does not chain to a configured TPM manufacturer root" "$F" \
        --roots "$ROOTS" --key "tpm2:file=$T/F.pem"
# The control: with its own manufacturer's roots, the same TPM passes; and
# OpenSSL agrees the chain is foreign.
out=$(run_ok "$ATTEST_TOOL" exchange --tcti "$F" --roots "$F_ROOTS" --key "tpm2:file=$T/F.pem")
assert_contains "$out" "verified"
run_ok tpm2_nvread -T "$F" -C 0x01c00002 -o "$T/ek-f.der" 0x01c00002 2>/dev/null
openssl x509 -inform der -in "$T/ek-f.der" -out "$T/ek-f.pem"
! openssl verify -CAfile "$ROOTS/swtpm-localca-rootca-cert.pem" -untrusted "$ROOTS/issuercert.pem" \
        "$T/ek-f.pem" >/dev/null 2>&1 || fail "openssl verify accepts the foreign EK certificate"

echo "== a credential made for another TPM's EK cannot be activated"
mkdir -p "$T/ek-b"
run_ok "$ATTEST_TOOL" ek-export --tcti "$B" --ek rsa-2048 --out "$T/ek-b" >/dev/null
assert_no_transient "$B"
refused respond "it was made for another EK or another AK" "$A" --check-transient \
        --roots "$ROOTS" --key "tpm2:file=$T/A.pem" --ek rsa-2048 --ek-from "$T/ek-b"

echo "== a wrong activated secret is refused"
refused verify "the activated secret is wrong" "$A" --roots "$ROOTS" --key "tpm2:file=$T/A.pem" --wrong-secret

echo "== a credential bound to another TPM's AK cannot be activated"
refused respond "it was made for another EK or another AK" "$A" --check-transient \
        --roots "$ROOTS" --key "tpm2:file=$T/A.pem" --ak-public "$T/ek-b/ak.pub"

echo "== an AK without restricted is refused"
# Made by tpm2-tools, like our AK but unrestricted: it would sign anything.
run_ok tpm2_createprimary -T "$A" -Q -C e -g sha256 -G ecc256:ecdsa-sha256 \
        -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|sign' -c "$T/ak.ctx"
run_ok tpm2_readpublic -T "$A" -Q -c "$T/ak.ctx" -f tpmt -o "$T/ak-unrestricted.pub"
run_ok tpm2_flushcontext -T "$A" -t
refused challenge "the AK is not a restricted signing key fixed to its TPM: it lacks restricted" "$A" \
        --roots "$ROOTS" --key "tpm2:file=$T/A.pem" --ak-public "$T/ak-unrestricted.pub"

echo "== a device key without fixedTPM (duplicable) is refused"
run_ok "$ATTEST_TOOL" dup-key --tcti "$A" --out "$T/dup.pem"
assert_no_transient "$A"
show=$(run_ok "$HWID" key show "tpm2:file=$T/dup.pem" --tcti "$A")
assert_contains "$show" "fixedTPM=no fixedParent=no"
refused verify "it lacks fixedTPM" "$A" --check-transient --roots "$ROOTS" --key "tpm2:file=$T/dup.pem"

echo "== a Certify over another nonce is refused"
refused verify "the Certify is over another nonce" "$A" --roots "$ROOTS" \
        --key "tpm2:file=$T/A.pem" --other-nonce

echo "== a CSR whose key is not the certified one is refused"
run_ok "$HWID" key create "tpm2:file=$T/A2.pem" --tcti "$A" >/dev/null
refused verify "the CSR's key is not the certified TPM key" "$A" --roots "$ROOTS" \
        --key "tpm2:file=$T/A.pem" --csr-key "tpm2:file=$T/A2.pem"

echo "== a late answer is refused"
refused verify "the attestation challenge has expired" "$A" --roots "$ROOTS" \
        --key "tpm2:file=$T/A.pem" --late

echo "== a TPM whose NV holds another TPM's EK certificate refuses to answer"
# Its RSA EK certificate replaced by A's (platform authorization is empty on
# swtpm): the CA cannot tell, but the EK the TPM makes from the template is
# not that key.  B has no persistent EK any more; F's persistent EK is not
# the certified key either, and is passed over.
for t in B F; do
        tcti=${!t}
        run_ok tpm2_nvundefine -T "$tcti" -C p 0x01c00002
        run_ok tpm2_nvdefine -T "$tcti" -C p -s "$(stat -c %s "$T/ek-a.der")" \
                -a 'ppwrite|ppread|ownerread|authread|no_da|platformcreate' 0x01c00002 >/dev/null
        run_ok tpm2_nvwrite -T "$tcti" -C p -i "$T/ek-a.der" 0x01c00002
        refused respond "the rsa-2048 EK this TPM makes from the TCG template is not the key of its EK certificate" \
                "$tcti" --check-transient --roots "$ROOTS" --key "tpm2:file=$T/$t.pem" --ek rsa-2048
done

echo "== ECC P-256 EK (low-range template L-2), certified here, persistent"
# swtpm_setup makes no P-256 EK: tpm2-tools makes it from the TCG template
# and persists it; the manufacturer's CA certifies it into NV 0x01c0000a.
run_ok tpm2_createek -T "$A" -G ecc -c 0x81010002 -u "$T/ek256.pub" -f pem >/dev/null
run_ok tpm2_readpublic -T "$A" -Q -c 0x81010002 -f pem -o "$T/ek256.pem"
# (openssl x509 -req wants a CSR; -force_pubkey puts the EK's key in.)
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$T/csr-only.key" 2>/dev/null
openssl req -new -key "$T/csr-only.key" -subj "/CN=unused" -out "$T/ek256.csr"
# Padded past 1024 bytes (one NV_Read's worth on swtpm) by a non-critical
# extension, and stored in an NV index 64 bytes bigger than itself.
printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,keyAgreement\nextendedKeyUsage=2.23.133.8.1\n1.3.6.1.4.1.99999.2=ASN1:UTF8String:%s\n' \
        "$(head -c 1200 /dev/zero | tr '\0' x)" >"$T/ek256.ext"
run_ok openssl x509 -req -in "$T/ek256.csr" -force_pubkey "$T/ek256.pem" -CA "$CA_DIR/issuercert.pem" \
        -CAkey "$CA_DIR/signkey.pem" -set_serial 256 -days 30 -extfile "$T/ek256.ext" \
        -outform der -out "$T/ek256.der"
size=$(stat -c %s "$T/ek256.der")
[ "$size" -gt 1024 ] || fail "the P-256 EK certificate has only $size bytes"
head -c 64 /dev/zero >"$T/pad"
cat "$T/ek256.der" "$T/pad" >"$T/ek256.nv"
run_ok tpm2_nvdefine -T "$A" -C p -s $((size + 64)) \
        -a 'ppwrite|ppread|ownerread|authread|no_da|platformcreate' 0x01c0000a >/dev/null
run_ok tpm2_nvwrite -T "$A" -C p -i "$T/ek256.nv" 0x01c0000a
assert_no_transient "$A"
out=$(attest "$A" --key "tpm2:file=$T/A.pem")
assert_contains "$out" "ek: ecc-p256"
assert_contains "$out" "verified"
assert_contains "$out" "ek-sha256: $(sha256sum <"$T/ek256.der" | cut -d' ' -f1)"
# And from the template, once the persistent one is gone.
run_ok tpm2_evictcontrol -T "$A" -C o -c 0x81010002 >/dev/null
out=$(attest "$A" --key "tpm2:file=$T/A.pem" --ek ecc-p256)
assert_contains "$out" "verified"

# --- EK certificate chains with the extensions EK certificates carry -------------

echo "== EK certificates: critical extensions, CA flag, extendedKeyUsage"
W=$T/ekcerts
mkdir -p "$W"
# subjectDirectoryAttributes: tcg-at-tpmSpecification { "2.0", 0, 164 }.
SDA='2.5.29.9 = critical,DER:3019301706056781050210310e300c0c03322e30020100020200a4'
cat >"$W/ext.cnf" <<EOF
[tpm_dn]
# "N." prefixes: OpenSSL drops what precedes the first dot of a name here.
0.2.23.133.2.1 = id:00001014
1.2.23.133.2.2 = swtpm
2.2.23.133.2.3 = id:20191023

[ek_sda]
basicConstraints = critical,CA:FALSE
keyUsage = critical,keyAgreement
extendedKeyUsage = 2.23.133.8.1
subjectAltName = critical,dirName:tpm_dn
$SDA

[ek_unknown]
basicConstraints = critical,CA:FALSE
keyUsage = critical,keyAgreement
extendedKeyUsage = 2.23.133.8.1
1.3.6.1.4.1.99999.1 = critical,DER:0500

[ek_ca]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyAgreement
extendedKeyUsage = 2.23.133.8.1

[ek_eku]
basicConstraints = critical,CA:FALSE
keyUsage = critical,keyAgreement
extendedKeyUsage = serverAuth

[int_sda]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign
$SDA

[ek_plain]
basicConstraints = critical,CA:FALSE
keyUsage = critical,keyAgreement
extendedKeyUsage = 2.23.133.8.1
EOF
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$W/ek.key" 2>/dev/null
openssl req -new -key "$W/ek.key" -subj "/CN=ek" -out "$W/ek.csr"
# sign NAME SECTION CA_CERT CA_KEY
sign() {
        run_ok openssl x509 -req -in "$W/ek.csr" -CA "$3" -CAkey "$4" -set_serial "$RANDOM" -days 30 \
                -extfile "$W/ext.cnf" -extensions "$2" -out "$W/$1.pem"
}
for s in ek_sda ek_unknown ek_ca ek_eku; do
        sign "$s" "$s" "$CA_DIR/issuercert.pem" "$CA_DIR/signkey.pem"
done
# An intermediate with a critical subjectDirectoryAttributes, and an EK under it.
openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$W/int.key" 2>/dev/null
openssl req -new -key "$W/int.key" -subj "/CN=intermediate" -out "$W/int.csr"
run_ok openssl x509 -req -in "$W/int.csr" -CA "$CA_DIR/swtpm-localca-rootca-cert.pem" \
        -CAkey "$CA_DIR/swtpm-localca-rootca-privkey.pem" -set_serial 77 -days 30 \
        -extfile "$W/ext.cnf" -extensions int_sda -out "$W/int-sda.pem"
sign ek_under_int ek_plain "$W/int-sda.pem" "$W/int.key"
mkdir -p "$W/roots-int"
cp "$ROOTS"/*.pem "$W/int-sda.pem" "$W/roots-int/"

# Plain OpenSSL refuses the critical subjectDirectoryAttributes: the case matters.
expect_exit 2 "" --multiline -- openssl verify -CAfile "$ROOTS/swtpm-localca-rootca-cert.pem" \
        -untrusted "$ROOTS/issuercert.pem" "$W/ek_sda.pem"
assert_contains "$(cat "$T/last.out" "$T/last.err")" "unhandled critical extension"
out=$(run_ok "$ATTEST_TOOL" ek-verify --roots "$ROOTS" "$W/ek_sda.pem")
assert_eq "$out" chains "a critical subjectDirectoryAttributes at the EK"
expect_exit 1 "unhandled critical extension" -- "$ATTEST_TOOL" ek-verify --roots "$ROOTS" "$W/ek_unknown.pem"
expect_exit 1 "the EK certificate is a CA certificate" -- "$ATTEST_TOOL" ek-verify --roots "$ROOTS" "$W/ek_ca.pem"
expect_exit 1 "lacks tcg-kp-EKCertificate" -- "$ATTEST_TOOL" ek-verify --roots "$ROOTS" "$W/ek_eku.pem"
expect_exit 1 "unhandled critical extension" -- "$ATTEST_TOOL" ek-verify --roots "$W/roots-int" \
        "$W/ek_under_int.pem"
# Roots as single files: a chain needs its intermediate.
expect_exit 1 "does not chain" -- "$ATTEST_TOOL" ek-verify \
        --roots "$ROOTS/swtpm-localca-rootca-cert.pem" "$W/ek_sda.pem"
out=$(run_ok "$ATTEST_TOOL" ek-verify --roots "$ROOTS/swtpm-localca-rootca-cert.pem" \
        --roots "$ROOTS/issuercert.pem" "$T/ek-a.der")
assert_eq "$out" chains "the TPM's own EK certificate (DER), roots as files"
# A roots file that holds no certificate is a configuration error.
echo "not a certificate" >"$W/empty.pem"
expect_exit 1 "holds no certificate" -- "$ATTEST_TOOL" ek-verify --roots "$W/empty.pem" "$T/ek-a.der"

assert_no_transient
echo "attest-crypto: all checks passed"
