#!/bin/bash
# key-softhsm.sh — hwid key create|show and hwid csr on a SoftHSM2 token, for
# every key type. Proves, with tools that are not hwid:
#   - the CSR verifies (openssl req -verify) and carries the public key,
#     subject and SANs asked for; its public key is the one `hwid key show`
#     reports, which is the public-key object on the token (pkcs11-tool);
#   - custody, from the device's side: pkcs11-tool reads the private key back
#     as sensitive, always sensitive, never extractable and generated on the
#     token; asking the token for its private value is refused
#     (p11-read-secret); hwid key show reports the same;
#   - the PIN (given through pin-source=file:) appears in no output, and no
#     file holds an unwrapped private key.
# Controls show the custody checks can fail: a key pkcs11-tool made
# extractable fails them, and a readable secret is reported as readable.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=key-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/key-lib.sh"

require_tools pkcs11-tool
: "${HWID_P11_READ_SECRET:=$BUILDDIR/tests/p11-read-secret}"
[ -x "$HWID_P11_READ_SECRET" ] || fail "p11-read-secret not built: $HWID_P11_READ_SECRET"

P11_TOKEN=dev
P11_PIN=hsm-Pin-4417    # distinctive, so that any trace of it in output shows
softhsm_init "$P11_TOKEN" "$P11_PIN"

# p11_uri LABEL — the key URI the tests use: module by path, PIN from a file.
p11_uri() {
        echo "pkcs11:token=$P11_TOKEN;object=$1?module-path=$SOFTHSM_MODULE&pin-source=file:$T/pin"
}

# read_secret LABEL — run p11-read-secret on the private key LABEL; its
# report is in $T/secret.out, its exit code in SECRET_RC.
read_secret() {
        SECRET_RC=0
        "$HWID_P11_READ_SECRET" "$SOFTHSM_MODULE" "$P11_TOKEN" "$1" "$T/pin" \
                >"$T/secret.out" 2>&1 || SECRET_RC=$?
}

# check_device_custody LABEL TYPE SHOW — what the token itself says about
# the key LABEL, and that hwid key show (output in SHOW) reports the same.
check_device_custody() {
        local label=$1 type=$2 show=$3 on_token shown
        assert_eq "$(p11_attr privkey "$label" Access)" "sensitive, always sensitive, never extractable, local" \
                "pkcs11-tool Access flags of '$label'"
        read_secret "$label"
        assert_eq "$SECRET_RC" 0 "p11-read-secret on '$label' ($(tr '\n' ';' <"$T/secret.out"))"
        assert_not_contains "$(cat "$T/secret.out")" READABLE "token handed out a secret of '$label'"
        assert_contains "$(cat "$T/secret.out")" "refused (CKR_ATTRIBUTE_SENSITIVE)" "secret refused"
        assert_eq "$(field custody "$show")" "${P11_CUSTODY#custody: }" "hwid key show custody of '$label'"
        on_token=$(p11_token_pubkey "$label" "$type")
        shown=$(pem_block "$show" | pem_pub_value)
        [ -n "$on_token" ] || fail "no public key read from the token for '$label'"
        assert_eq "$on_token" "$shown" "public key on the token vs key show"
}

# test_key_type TYPE — create, show, custody and CSR for one key type.
test_key_type() {
        local type=$1 label=key-$1 uri out
        uri=$(p11_uri "$label")
        create_key "$uri" "$type" "$T/$label.create"
        show_key "$uri" "$T/$label.show"
        check_show "$T/$label.show" "$type" "$T/$label.create"
        assert_eq "$(field backend "$T/$label.show")" pkcs11 "backend"
        assert_contains "$(field location "$T/$label.show")" "token '$P11_TOKEN', key labelled '$label'"
        check_device_custody "$label" "$type" "$T/$label.show"
        check_csr "$uri" "$type" "$T/$label.show" "edge-$type"
        assert_eq "$(p11_count privkey "$label")/$(p11_count pubkey "$label")" 1/1 "one key pair '$label'"
        for out in "$T/$label.create" "$T/$label.show" "$T/last.err"; do
                assert_not_contains "$(cat "$out")" "$P11_PIN" "PIN in $(basename "$out")"
        done
}

# Modules found through p11-kit's configuration (Debian registers SoftHSM2
# there), by module-name= or with no module named at all.
test_p11kit_registry() {
        local uri="pkcs11:token=$P11_TOKEN;object=reg?pin-source=file:$T/pin"
        create_key "$uri" ec-p256 "$T/reg.create"
        show_key "pkcs11:token=$P11_TOKEN;object=reg?module-name=softhsm2&pin-source=file:$T/pin" "$T/reg.show"
        check_show "$T/reg.show" ec-p256 "$T/reg.create"
        check_csr "$uri" ec-p256 "$T/reg.show" registry
}

# A key hwid did not make, made extractable by pkcs11-tool: hwid must report
# what the token says, and the device-side checks above must refuse it.
test_control_extractable() {
        p11 --keypairgen --key-type EC:prime256v1 --label ctl --id c0c0 --usage-sign \
                --extractable >/dev/null || fail "pkcs11-tool --keypairgen failed"
        show_key "$(p11_uri ctl)" "$T/ctl.show"
        assert_contains "$(field custody "$T/ctl.show")" "extractable=yes never-extractable=no" \
                "hwid key show reads custody from the token"
        if (check_device_custody ctl ec-p256 "$T/ctl.show") >/dev/null 2>&1; then
                fail "the custody checks accept an extractable key"
        fi
}

# A secret the token does hand out: p11-read-secret must say so.
test_control_readable() {
        p11 --keygen --key-type GENERIC:32 --label ctl-secret --extractable >/dev/null ||
                fail "pkcs11-tool --keygen failed"
        read_secret ctl-secret
        assert_eq "$SECRET_RC" 1 "p11-read-secret on a readable secret"
        assert_contains "$(cat "$T/secret.out")" "CKA_VALUE: READABLE (32 bytes)"
}

for type in "${KEY_TYPES[@]}"; do
        test_key_type "$type"
done
test_p11kit_registry
test_control_extractable
test_control_readable
no_private_keys_in "$T"
echo "key-softhsm: all checks passed"
