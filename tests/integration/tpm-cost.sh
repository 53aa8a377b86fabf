#!/bin/bash
# shellcheck disable=SC2119  # lib.sh helpers take optional arguments
# tpm-cost.sh — what a join costs the device's TPM, counted in swtpm's
# command log (a real TPM spends tens of milliseconds on a command and up to
# seconds on a CreatePrimary), on TPMs with and without the TCG storage
# root key (SRK) at 0x81000001.
# Proves:
#   - hwid join (a new key file): at most 6 TPM commands, exactly one Sign;
#     on a TPM without an SRK, one CreatePrimary and a key file whose
#     parent is the owner hierarchy (0x40000001); with the TCG SRK (ECC
#     P-256 and RSA 2048 templates, made by tpm2-tools and persisted at
#     0x81000001), no CreatePrimary and a key file whose parent is
#     0x81000001;
#   - an SRK that is not noDA (tpm2-tools' default attributes) is not used
#     as a parent: a CreatePrimary, parent 0x40000001; nor is one with an
#     auth value, which refuses the empty password (one command more);
#   - the key under the SRK keeps Invariant 1 (fixedTPM, fixedParent,
#     sensitiveDataOrigin; and noDA), as the TPM reports its public area;
#     the tpm2 OpenSSL provider loads it (through its parent field) and
#     signs with it, openssl verifying against the certificate; hwid renew
#     renews with it, with no CreatePrimary and at most 5 commands (the key
#     held from the TLS handshake to the CSR); without the SRK at most 6,
#     one CreatePrimary; a renewal that makes a new key under the SRK at
#     most 8, no CreatePrimary;
#   - hwid join --attest (new key file, persistent RSA EK): with the SRK,
#     at most 14 commands and one CreatePrimary (the AK); without, at most
#     16 and two;
#   - a key file whose SRK was evicted fails to load naming 0x81000001;
#   - no TPM command is refused, nothing is left loaded in any TPM.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=attest-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/attest-lib.sh"
# shellcheck source=tpm-log-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/tpm-log-lib.sh"

require_tools tpm2_createprimary tpm2_evictcontrol tpm2_flushcontext

# TPM 0: no SRK; 1: ECC SRK; 2: RSA SRK; 3: an SRK without noDA; 4: an
# SRK with an auth value.
swtpm_init --log 5
manufacturer_roots "$T/ek-roots"
attest_ca "$T/ek-roots" <<'EOF'
  plain:
    validity: 1h
    subject: {allowed_rdns: [CN]}
    renewal: {window: 1.0}
  rotating:
    validity: 1h
    subject: {allowed_rdns: [CN]}
    renewal: {window: 1.0, rotate_key: true}
  attested:
    validity: 1h
    subject: {allowed_rdns: [CN]}
    attestation: required
EOF

TCG_SRK_ATTRS='fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|decrypt'

# srk TPM ALG [ATTRS [ARGS...]] — a storage key made by tpm2-tools from the
# TCG template (ALG ecc256:aes128cfb or rsa2048:aes128cfb), persisted at
# 0x81000001.
srk() {
        local tcti=${TCTIS[$1]} attrs=()
        [ -n "${3:-}" ] && attrs=(-a "$3" "${@:4}")
        run_ok tpm2_createprimary -T "$tcti" -C o -g sha256 -G "$2" "${attrs[@]}" -c "$T/srk$1.ctx" >/dev/null
        run_ok tpm2_evictcontrol -T "$tcti" -C o -c "$T/srk$1.ctx" 0x81000001 >/dev/null
        run_ok tpm2_flushcontext -T "$tcti" -t
}
srk 1 ecc256:aes128cfb "$TCG_SRK_ATTRS"
srk 2 rsa2048:aes128cfb "$TCG_SRK_ATTRS"
srk 3 ecc256:aes128cfb # tpm2-tools' defaults: no noDA
srk 4 ecc256:aes128cfb "$TCG_SRK_ATTRS" -p srk-secret

# counted TPM MAX MAX_CP WHAT COMMAND... — runs COMMAND, which must succeed;
# it may cost TPM at most MAX commands and MAX_CP CreatePrimary.  Sets CMDS.
counted() {
        local tpm=$1 max=$2 max_cp=$3 what=$4 l0 n cp
        shift 4
        l0=$(log_lines "$tpm")
        expect_exit 0 "" --multiline -- "$@"
        CMDS=$(commands_since "$tpm" "$l0")
        n=$(grep -c . <<<"$CMDS")
        cp=$(grep -c '^CreatePrimary$' <<<"$CMDS" || true)
        echo "  TPM $tpm, $what: $n commands, $cp CreatePrimary: $(tr '\n' ' ' <<<"$CMDS")"
        [ "$n" -le "$max" ] || fail "TPM $tpm, $what: $n TPM commands, more than $max"
        assert_eq "$cp" "$max_cp" "TPM $tpm, $what: CreatePrimary"
}

# parent_of PEM — the parent handle a TSS2 key file names, as openssl reads it.
parent_of() {
        openssl asn1parse -in "$1" | awk '/INTEGER/ { sub(/.*:/, ""); print; exit }'
}

# join_plain TPM MAX CREATEPRIMARY PARENT — a join on TPM costs at most MAX
# commands, exactly CREATEPRIMARY CreatePrimary; the key file names PARENT.
join_plain() {
        local tpm=$1 max=$2 cp=$3 parent=$4 d=$T/dev-$1 tok
        tok=$(token_new --profile plain)
        counted "$tpm" "$max" "$cp" "hwid join" join_dev "$d" "dev-$tpm" "$tok" --tcti "${TCTIS[$tpm]}"
        assert_eq "$(grep -c '^Sign$' <<<"$CMDS")" 1 "TPM $tpm: Sign per join"
        assert_eq "$(parent_of "$d/device.tss2.pem")" "$parent" "TPM $tpm: the key file's parent"
        HWID_TCTI=${TCTIS[$tpm]} check_dir "$d" "dev-$tpm"
        assert_no_transient "${TCTIS[$tpm]}"
}

echo "== hwid join: at most 6 TPM commands; no CreatePrimary under the TCG SRK"
join_plain 0 6 1 40000001
join_plain 1 6 0 81000001
join_plain 2 6 0 81000001
join_plain 3 6 1 40000001
join_plain 4 7 1 40000001

echo "== the key under the SRK: its attributes, the tpm2 provider, hwid renew"
shown=$(HWID_TCTI=${TCTIS[1]} run_ok "$HWID" key show "tpm2:file=$T/dev-1/device.tss2.pem")
assert_contains "$shown" "fixedTPM=yes fixedParent=yes sensitiveDataOrigin=yes"
assert_contains "$shown" "noDA=yes"
assert_contains "$shown" "parent 0x81000001"
echo "signed by the device key" >"$T/data"
run_ok env TPM2OPENSSL_TCTI="${TCTIS[1]}" openssl dgst -sha256 -provider tpm2 -provider default \
        -propquery '?provider=tpm2' -sign "$T/dev-1/device.tss2.pem" -out "$T/data.sig" "$T/data"
cert_pubkey "$T/dev-1/cert.pem" >"$T/dev-1.pub"
run_ok openssl dgst -sha256 -verify "$T/dev-1.pub" -signature "$T/data.sig" "$T/data" >/dev/null
assert_no_transient "${TCTIS[1]}"
counted 1 5 0 "hwid renew" "$HWID" renew --dir "$T/dev-1" --tcti "${TCTIS[1]}"
assert_contains "$(cat "$T/last.out")" "renewed: generation 2"
HWID_TCTI=${TCTIS[1]} check_dir "$T/dev-1" dev-1
counted 0 6 1 "hwid renew" "$HWID" renew --dir "$T/dev-0" --tcti "${TCTIS[0]}"
HWID_TCTI=${TCTIS[0]} check_dir "$T/dev-0" dev-0
tok=$(token_new --profile rotating)
expect_exit 0 "" --multiline -- join_dev "$T/rot-1" rot-1 "$tok" --tcti "${TCTIS[1]}"
counted 1 8 0 "hwid renew (rotate_key)" "$HWID" renew --dir "$T/rot-1" --tcti "${TCTIS[1]}"
[ "$(cat "$T/rot-1/key.uri")" != "tpm2:file=$T/rot-1/device.tss2.pem" ] || fail "the key was not rotated"
HWID_TCTI=${TCTIS[1]} check_dir "$T/rot-1" rot-1
assert_no_transient "${TCTIS[0]}" "${TCTIS[1]}"

echo "== hwid join --attest: the SRK saves its CreatePrimary"
# A fresh swtpm's first ActivateCredential is refused with TPM_RC_RETRY, and
# the EK's first use differs: attest once on each before counting.
for i in 0 1; do
        run_ok "$ATTEST_TOOL" exchange --tcti "${TCTIS[$i]}" --roots "$T/ek-roots" \
                --key "tpm2:file=$T/dev-$i/device.tss2.pem" >/dev/null
done
for i in 0 1; do
        tok=$(token_new --profile attested)
        max=$((i == 0 ? 16 : 14))
        counted "$i" "$max" $((i == 0 ? 2 : 1)) "hwid join --attest" \
                join_dev "$T/att-$i" "att-$i" "$tok" --tcti "${TCTIS[$i]}" --attest
        for c in ActivateCredential Certify Sign; do
                assert_eq "$(grep -c "^$c\$" <<<"$CMDS")" 1 "TPM $i: $c per attested join"
        done
        HWID_TCTI=${TCTIS[$i]} check_dir "$T/att-$i" "att-$i"
done
assert_no_transient

echo "== a key file whose SRK was evicted: a clear error, nothing left loaded"
run_ok tpm2_evictcontrol -T "${TCTIS[2]}" -C o -c 0x81000001 >/dev/null
expect_exit 1 "the key's parent, the storage key at 0x81000001, is not in the TPM" -- \
        env HWID_TCTI="${TCTIS[2]}" "$HWID" key show "tpm2:file=$T/dev-2/device.tss2.pem"
assert_no_transient "${TCTIS[2]}"
