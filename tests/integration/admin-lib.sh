# shellcheck shell=bash disable=SC2034  # variables used by the scripts sourcing this
# admin-lib.sh — helpers shared by the admin-*.sh tests (remote
# administration with separated roles). Sourced after tests/lib.sh,
# device-lib.sh (and so ca-lib.sh) and policy-lib.sh.
#
# Operators are enrolled like devices, with `hwid join`, their keys inside
# a SoftHSM2 token (or an swtpm): $OPS/NAME is each one's identity
# directory, which the remote admin commands take as --dir.

OPS=$T/ops

# The operator profiles, one per role, and `line`, the node profile a
# factory station mints tokens for: for add_profiles / policy_config.
operator_profiles() {
        cat <<'EOF'
  ops-admin:
    validity: 1h
    role: admin
    subject:
      cn_pattern: "op-admin*"
  ops-approver:
    validity: 1h
    role: approver
    subject:
      cn_pattern: "op-approver*"
  ops-provisioner:
    validity: 1h
    role: provisioner
    scope:
      profiles: [line]
      name_patterns: ["line-3-*"]
    subject:
      cn_pattern: "op-station*"
  ops-auditor:
    validity: 1h
    role: auditor
    subject:
      cn_pattern: "op-auditor*"
  line:
    validity: 1h
    subject:
      cn_pattern: "line-*"
EOF
}

# op_key NAME — the URI of operator NAME's key in the SoftHSM2 token 'ops'.
op_key() {
        echo "pkcs11:token=ops;object=$1?pin-source=file:$T/softhsm/ops.pin"
}

# op_join NAME PROFILE [KEY-URI] — enroll operator NAME under PROFILE with a
# token from the CA host; its key in SoftHSM2 unless KEY-URI says otherwise.
op_join() {
        local name=$1 profile=$2 key=${3:-$(op_key "$1")} tok
        tok=$(token_new --profile "$profile")
        HWID_TOKEN=$tok run_ok "$HWID" join --server "$URL" --ca-hash "$PIN" --key "$key" --cn "$name" \
                --dir "$OPS/$name" >/dev/null
        [ -s "$OPS/$name/cert.pem" ] || fail "operator $name was not enrolled"
}

# as NAME GROUP CMD [ARGS...] — an admin command run remotely as operator
# NAME (--dir $OPS/NAME).
as() {
        local name=$1 group=$2 cmd=$3
        shift 3
        "$HWID" "$group" "$cmd" --dir "$OPS/$name" "$@"
}

# secrets_absent FILE TOKEN... — no token secret (the part after the dot)
# appears in FILE.
secrets_absent() {
        local file=$1 tok
        shift
        for tok in "$@"; do
                ! grep -qF -- "${tok#*.}" "$file" || fail "a token secret is in $file"
        done
}

# store_secrets_absent TOKEN... — nor in the CA's database (any table).
store_secrets_absent() {
        local tok
        store_dump >"$T/db.dump"
        for tok in "$@"; do
                ! grep -qF -- "${tok#*.}" "$T/db.dump" || fail "a token secret is in the CA's database"
        done
}
