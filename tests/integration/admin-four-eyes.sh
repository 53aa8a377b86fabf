#!/bin/bash
# admin-four-eyes.sh — four eyes on manual approval, against a real hwidd
# (CA key in SoftHSM2), the operators enrolled with openssl keys and
# talking to the admin API with curl over mutual TLS. Proves:
#   - the reported attack: an approver that makes a request for a second
#     approver certificate carrying its own public key cannot approve it:
#     403 naming why, a `deny` record with the very same reason, the
#     request still pending;
#   - nor a request naming its own identity (another key, a node profile);
#   - a request under an operator profile (role approver) is refused to an
#     approver (403: only an admin) and approved by an admin;
#   - an approver still approves another's node request, and may deny any
#     request, its own included (a denial grants nothing);
#   - a body naming a member twice ({"reason":"a","reason":"b"}) is 400 and
#     changes nothing (json_read(), for every JSON the admin API reads).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"
# shellcheck source=policy-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/policy-lib.sh"
# shellcheck source=admin-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/admin-lib.sh"

request_state() {
        admin request list --all | awk -v id="$1" '$1 == id { print $2 }'
}


# held NAME PROFILE [KEY] — a request held for approval for CN=NAME (its key
# KEY, else a new one in $DEV/held-N.key); sets TARGET to its id.
HELD=0
held() {
        local name=$1 profile=$2 key=${3:-} f
        HELD=$((HELD + 1))
        f=held-$HELD
        if [ -n "$key" ]; then
                openssl req -new -key "$key" -subj "/CN=$name" -out "$DEV/$f.csr" 2>/dev/null ||
                        fail "openssl req for $name"
        else
                make_csr "$f" -subj "/CN=$name"
        fi
        post_csr "$DEV/$f" "$(token_new --profile "$profile")" "$DEV/$f.csr"
        expect_status 202 "$DEV/$f"
        TARGET=$(json_str request_id "$DEV/$f.body")
}

approve_as() {
        http "$DEV/decide" POST "/v1/admin/requests/$2/${3:-approve}" --cert "$DEV/$1.pem" --key "$DEV/$1.key" \
                -H "Content-Type: application/json" "${@:4}"
}

test_four_eyes() {
        local me=op-approver-4e
        enrolled "$me" "$(token_new --profile ops-approver)"
        enrolled op-admin-4e "$(token_new --profile ops-admin)"
        # The reported attack: a second approver certificate for its own key.
        held op-approver-5 ops-approver-held "$DEV/$me.key"
        approve_as "$me" "$TARGET"
        expect_denied 403 forbidden "$DEV/decide" "approver:$me" request.approve "${TARGET:0:8}..." \
                "'$me' may not approve a request for its own key"
        assert_eq "$(request_state "$TARGET")" pending "a request approved with its own key"
        # Nor by its name, with another key, under a node profile (one that
        # lets a token enroll a name that is live).
        held "$me" again
        approve_as "$me" "$TARGET"
        expect_denied 403 forbidden "$DEV/decide" "approver:$me" request.approve "${TARGET:0:8}..." \
                "'$me' may not approve a request for its own identity"
        assert_eq "$(request_state "$TARGET")" pending "a request approved by its own identity"
        # An operator profile: admins only.
        held op-approver-6 ops-approver-held
        approve_as "$me" "$TARGET"
        expect_denied 403 forbidden "$DEV/decide" "approver:$me" request.approve "${TARGET:0:8}..." \
                "profile 'ops-approver-held' issues approver certificates: only an admin may approve"
        assert_eq "$(request_state "$TARGET")" pending "an operator request approved by an approver"
        approve_as op-admin-4e "$TARGET"
        expect_status 200 "$DEV/decide"
        assert_eq "$(request_state "$TARGET")" approved "an operator request approved by an admin"
        # A node's request, another's key and name: the approver's job.
        held node-4e manual
        approve_as "$me" "$TARGET"
        expect_status 200 "$DEV/decide"
        # A denial grants nothing: its own request, it may.  With the
        # reason given twice (which one would be recorded?) it is 400.
        held "$me" again
        approve_as "$me" "$TARGET" deny --data-binary '{"reason":"withdrawn","reason":"approved"}'
        expect_error 400 invalid_argument "$DEV/decide" \
                "the request body is not valid JSON: an object names a member twice (line 1, column"
        assert_eq "$(request_state "$TARGET")" pending "a request after a body with a member twice"
        approve_as "$me" "$TARGET" deny --data-binary '{"reason":"withdrawn"}'
        expect_status 200 "$DEV/decide"
        assert_eq "$(request_state "$TARGET")" denied "its own request denied"
}

device_ca < <(operator_profiles
        printf '  ops-approver-held:\n    validity: 1h\n    role: approver\n    approval: manual\n'
        printf '    subject:\n      cn_pattern: "op-approver*"\n'
        printf '  again:\n    validity: 1h\n    approval: manual\n    allow_reenroll: true\n')
test_four_eyes
hwidd_stop
echo "admin-four-eyes: all checks passed"
