#!/bin/bash
# shellcheck disable=SC2119  # lib.sh helpers take optional arguments
# key-errors-tpm.sh — bad input and failures for hwid key create|show and
# hwid csr on swtpm. Each case must exit 1 with one stderr line that says
# what is wrong and leave nothing behind: the TPM's persistent handles as
# before (tpm2_getcap handles-persistent), the key files byte for byte as
# before and no new file, no CSR file, and no transient object or session
# in the TPM (invariant 5) — also when hwid fails halfway through.
# The PKCS#11 cases and the usage errors are in key-errors.sh.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=key-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/key-lib.sh"

require_tools tpm2_readpublic sha256sum
swtpm_init
KEYS=$T/keys
mkdir -p "$KEYS"
FILE=$KEYS/k.tss2.pem
HANDLE=0x81000001
OUT=$T/out.csr

# tpm_state — what a failed command must not change: persistent handles and
# the key files (names and contents).
tpm_state() {
        tpm_persistent
        (cd "$KEYS" && find . -type f -exec sha256sum {} + | sort -k2)
}

# refused MESSAGE -- ARGS... — hwid ARGS must exit 1 with MESSAGE in its one
# stderr line and change nothing.
refused() {
        local msg=$1
        shift 2
        tpm_state >"$T/state.before"
        expect_exit 1 "$msg" -- "$HWID" "$@"
        assert_no_transient
        tpm_state >"$T/state.after"
        cmp -s "$T/state.before" "$T/state.after" ||
                fail "hwid $* changed the TPM or the key files: $(diff "$T/state.before" "$T/state.after" || true)"
        [ ! -e "$OUT" ] || fail "hwid $* wrote $OUT"
}

# Both subcommands that take a key, with the same URI.
refused_all() {
        local msg=$1 key=$2
        shift 2
        refused "$msg" -- key show "$key" "$@"
        refused "$msg" -- csr --key "$key" --subject /CN=x --out "$OUT" "$@"
}

spki_of() {
        run_ok "$HWID" key show "$1" | sed -n 's/^spki-sha256: //p'
}

# A closed loopback port: by --tcti and by $HWID_TCTI.
test_unreachable() {
        local tcti
        tcti=swtpm:host=127.0.0.1,port=$(free_port)
        refused "cannot reach the TPM at $tcti" -- key create "tpm2:file=$KEYS/new.pem" --tcti "$tcti"
        refused "cannot reach the TPM at $tcti" -- key create "tpm2:handle=0x81000002" --tcti "$tcti"
        refused_all "cannot reach the TPM at $tcti" "tpm2:handle=$HANDLE" --tcti "$tcti"
        HWID_TCTI=$tcti refused_all "cannot reach the TPM at $tcti" "tpm2:file=$FILE"
}

test_unknown_object() {
        refused_all "no key file at $KEYS/none.pem" "tpm2:file=$KEYS/none.pem"
        refused_all "no key at TPM handle 0x81000099" "tpm2:handle=0x81000099"
}

test_malformed_uri() {
        refused "TPM handle '0x81800001' is not a persistent handle" -- key create "tpm2:handle=0x81800001"
        refused "TPM handle '81000001' must be hexadecimal" -- key show "tpm2:handle=81000001"
        refused "tpm2:file= needs a path" -- key create "tpm2:file="
        refused "TPM URI must be tpm2:handle=0x81xxxxxx or tpm2:file=PATH" -- key create "tpm2:path=$KEYS/x"
}

# Files and objects that are not hwid signing keys.
test_not_a_key() {
        run_ok "$HWID" key show "tpm2:file=$FILE" | pem_block /dev/stdin >"$KEYS/public.pem"
        refused_all "$KEYS/public.pem is not a TSS2 PEM key file" "tpm2:file=$KEYS/public.pem"
        # The EK swtpm_setup made: hwid refuses the endorsement range outright.
        refused_all "reserved for endorsement keys" "tpm2:handle=0x81010001"
}

test_unsupported_type() {
        refused "unsupported key type 'ec-p521'" -- key create "tpm2:file=$KEYS/new.pem" --type ec-p521
        refused "unsupported key type 'ec-p521'" -- key create "tpm2:handle=0x81000002" --type ec-p521
}

# An existing key file is refused without --force and left byte for byte;
# with --force it is replaced, and it is still the only file.
test_existing_file() {
        local spki
        spki=$(spki_of "tpm2:file=$FILE")
        refused "a key file already exists at $FILE (use --force to replace it)" -- \
                key create "tpm2:file=$FILE" --type rsa-2048
        run_ok "$HWID" key create "tpm2:file=$FILE" --type rsa-2048 --force >/dev/null
        assert_no_transient
        run_ok "$HWID" key show "tpm2:file=$FILE" >"$T/forced-file.show"
        assert_eq "$(field type "$T/forced-file.show")" "rsa-2048 (2048 bits)" "key file after --force"
        [ "$(field spki-sha256 "$T/forced-file.show")" != "$spki" ] || fail "--force kept the old key file"
        assert_eq "$(cd "$KEYS" && find . -type f | sort)" "$(printf './k.tss2.pem\n./public.pem')" "files after --force"
        assert_file_mode "$FILE" 600
}

# The same for a persistent handle: refused, unchanged; forced, replaced in
# place (same handle list, the TPM holds the new key there).
test_existing_handle() {
        local spki before
        spki=$(spki_of "tpm2:handle=$HANDLE")
        before=$(tpm_persistent)
        refused "a key already exists at TPM handle $HANDLE (use --force to replace it)" -- \
                key create "tpm2:handle=$HANDLE" --type rsa-2048
        run_ok "$HWID" key create "tpm2:handle=$HANDLE" --type rsa-2048 --force >/dev/null
        assert_no_transient
        assert_eq "$(tpm_persistent)" "$before" "persistent handles after --force"
        run_ok "$HWID" key show "tpm2:handle=$HANDLE" >"$T/forced-handle.show"
        [ "$(field spki-sha256 "$T/forced-handle.show")" != "$spki" ] || fail "--force kept the old key"
        run_ok tpm2_readpublic -c "$HANDLE" -f pem -o "$T/forced-handle.pem" >/dev/null
        assert_eq "$(pem_block "$T/forced-handle.pem")" "$(pem_block "$T/forced-handle.show")" \
                "the TPM holds the new key at $HANDLE"
}

# hwid fails after the TPM did its work (the file cannot be written): no
# transient object may be left, and no file.
test_fail_halfway() {
        refused "cannot create $KEYS/nodir/k.pem" -- key create "tpm2:file=$KEYS/nodir/k.pem"
}

run_ok "$HWID" key create "tpm2:file=$FILE" >/dev/null
run_ok "$HWID" key create "tpm2:handle=$HANDLE" >/dev/null
assert_no_transient

test_unreachable
test_unknown_object
test_malformed_uri
test_not_a_key
test_unsupported_type
test_existing_file
test_existing_handle
test_fail_halfway
no_private_keys_in "$T"
echo "key-errors-tpm: all checks passed"
