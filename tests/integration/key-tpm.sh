#!/bin/bash
# shellcheck disable=SC2119  # lib.sh helpers take optional arguments
# key-tpm.sh — hwid key create|show and hwid csr on swtpm, for every key type,
# as a TSS2 key file (tpm2:file=) and at a persistent handle (tpm2:handle=).
# Proves, with tools that are not hwid:
#   - the CSR verifies (openssl req -verify) and carries the public key that
#     `hwid key show` reports;
#   - custody, from the TPM's side: tpm2-tools reads fixedTPM, fixedParent
#     and sensitiveDataOrigin in the public area the TPM itself loaded (a key
#     file is loaded by tpm2_load under the owner storage key, which only
#     works for a blob that TPM wrapped), and the same attributes and public
#     key as hwid key show;
#   - interop: the tpm2 OpenSSL provider reads our key files and handles and
#     finds the same public key, and hwid signs with a key file the provider
#     made;
#   - after every hwid command the TPM holds no transient object or session
#     (invariant 5); the persistent handles are exactly the ones created;
#     key files are mode 0600 and no file holds an unwrapped private key.
# A control (a key imported from outside the TPM) shows hwid key show reports
# what the TPM says and the attribute check refuses such a key.
# swtpm serves one client at a time: every hwid command has exited before
# tpm2-tools or openssl talk to the TPM.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=key-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/key-lib.sh"

require_tools tpm2_load tpm2_readpublic tpm2_flushcontext tpm2_import tpm2_evictcontrol
swtpm_init
mkdir -p "$T/keys"
EK_HANDLES=$(tpm_persistent)    # what swtpm_setup made (EKs); ours come on top
OUR_HANDLES=()

# hwid_ok ARGS... — run_ok hwid, then check invariant 5.
hwid_ok() {
        run_ok "$HWID" "$@"
        assert_no_transient
}

# readpublic_loaded FILE OUT — tpm2-tools loads the TSS2 key file (under the
# owner storage primary it re-creates) and reads back the public area into
# OUT (text) and OUT.pem; then flushes both objects.
readpublic_loaded() {
        tpm2_load -r "$1" -c "$T/loaded.ctx" >"$T/tpm2_load.out" 2>&1 || {
                cat "$T/tpm2_load.out" >&2
                fail "tpm2_load cannot load $1"
        }
        run_ok tpm2_readpublic -c "$T/loaded.ctx" -f pem -o "$2.pem" >"$2"
        run_ok tpm2_flushcontext -t
        assert_no_transient
}

# readpublic_handle HANDLE OUT — the same for a persistent handle.
readpublic_handle() {
        run_ok tpm2_readpublic -c "$1" -f pem -o "$2.pem" >"$2"
}

# check_tpm_key SHOW TYPE READPUBLIC PROVIDER_KEY — hwid key show agrees
# with tpm2-tools (attributes, public key) and the tpm2 provider (public key).
check_tpm_key() {
        local show=$1 type=$2 rp=$3 prov=$4
        assert_eq "$(field custody "$show")" "${TPM_CUSTODY#custody: }" "hwid key show custody"
        assert_eq "$(field backend "$show")" tpm2 "backend"
        check_tpm_attrs "$rp" "$show"
        assert_eq "$(pem_block "$rp.pem")" "$(pem_block "$show")" "public key: tpm2_readpublic vs key show"
        assert_eq "$(provider_pubkey "$prov")" "$(pem_block "$show")" "public key: tpm2 provider vs key show"
        assert_no_transient
}

# test_file_key TYPE — a TSS2 key file: create, show, custody, interop, CSR.
test_file_key() {
        local type=$1 f=$T/keys/$1.tss2.pem name=file-$1
        hwid_ok key create "tpm2:file=$f" --type "$type" >"$T/$name.create"
        assert_contains "$(cat "$T/$name.create")" "created $type key tpm2:file=$f"
        assert_file_mode "$f" 600
        assert_eq "$(head -n 1 "$f")" "-----BEGIN TSS2 PRIVATE KEY-----" "key file format"
        hwid_ok key show "tpm2:file=$f" >"$T/$name.show"
        check_show "$T/$name.show" "$type" "$T/$name.create"
        assert_contains "$(field location "$T/$name.show")" "key file $f"
        readpublic_loaded "$f" "$T/$name.rp"
        check_tpm_key "$T/$name.show" "$type" "$T/$name.rp" "$f"
        check_csr "tpm2:file=$f" "$type" "$T/$name.show" "$name"
        assert_no_transient
}

# test_handle_key TYPE HANDLE — the same for a persistent handle.
test_handle_key() {
        local type=$1 h=$2 name=handle-$1
        hwid_ok key create "tpm2:handle=$h" --type "$type" >"$T/$name.create"
        assert_contains "$(cat "$T/$name.create")" "created $type key tpm2:handle=$h"
        OUR_HANDLES+=("$h")
        hwid_ok key show "tpm2:handle=$h" >"$T/$name.show"
        check_show "$T/$name.show" "$type" "$T/$name.create"
        assert_contains "$(field location "$T/$name.show")" "persistent handle $h"
        readpublic_handle "$h" "$T/$name.rp"
        check_tpm_key "$T/$name.show" "$type" "$T/$name.rp" "handle:$h"
        check_csr "tpm2:handle=$h" "$type" "$T/$name.show" "$name"
        assert_no_transient
}

# The TPM's persistent handles: the EKs plus exactly the ones hwid made.
test_persistent_handles() {
        local want
        want=$(printf '%s\n' "$EK_HANDLES" "${OUR_HANDLES[@]/#/- }" | sort)
        assert_eq "$(tpm_persistent | sort)" "$want" "persistent handles"
}

# Interop the other way: a key file the tpm2 provider generated signs a CSR
# through hwid, with the public key the provider reports.
test_provider_key() {
        local f=$T/keys/provider.tss2.pem
        run_ok env TPM2OPENSSL_TCTI="$HWID_TCTI" openssl genpkey -provider tpm2 -provider default \
                -algorithm EC -pkeyopt group:P-256 -out "$f" 2>/dev/null
        assert_no_transient
        hwid_ok key show "tpm2:file=$f" >"$T/provider.show"
        assert_eq "$(field type "$T/provider.show")" "ec-p256 (256 bits)" "provider key type"
        assert_eq "$(provider_pubkey "$f")" "$(pem_block "$T/provider.show")" "provider key: public key"
        check_csr "tpm2:file=$f" ec-p256 "$T/provider.show" provider-key
        assert_no_transient
}

# Control: a key generated outside the TPM and imported (not fixedTPM, not
# sensitiveDataOrigin). hwid key show must say so, and check_tpm_attrs must
# refuse it. The outside private key is removed at once.
test_control_imported() {
        local h=0x81000100
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$T/outside.pem" 2>/dev/null
        # Each tpm2-tools command leaves its objects loaded: flush in between.
        run_ok tpm2_createprimary -Q -C o -c "$T/srk.ctx"
        run_ok tpm2_flushcontext -t
        run_ok tpm2_import -Q -C "$T/srk.ctx" -G ecc -i "$T/outside.pem" -u "$T/imp.pub" -r "$T/imp.priv"
        rm -f "$T/outside.pem"
        run_ok tpm2_flushcontext -t
        run_ok tpm2_load -Q -C "$T/srk.ctx" -u "$T/imp.pub" -r "$T/imp.priv" -c "$T/imp.ctx"
        run_ok tpm2_evictcontrol -Q -C o -c "$T/imp.ctx" "$h" >/dev/null
        run_ok tpm2_flushcontext -t
        hwid_ok key show "tpm2:handle=$h" >"$T/imported.show"
        assert_contains "$(field custody "$T/imported.show")" "fixedTPM=no fixedParent=no sensitiveDataOrigin=no" \
                "hwid key show reads custody from the TPM"
        readpublic_handle "$h" "$T/imported.rp"
        if (check_tpm_attrs "$T/imported.rp" "$T/imported.show") >/dev/null 2>&1; then
                fail "the TPM attribute check accepts an imported key"
        fi
        run_ok tpm2_evictcontrol -Q -C o -c "$h"
}

handle=0x81000001
for type in "${KEY_TYPES[@]}"; do
        test_file_key "$type"
        test_handle_key "$type" "$handle"
        handle=$(printf '0x%08x' $((handle + 1)))
done
test_persistent_handles
test_provider_key
test_control_imported
assert_no_transient
no_private_keys_in "$T"
echo "key-tpm: all checks passed"
