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
#   - nor a request carrying a key it rotated away (renewed with a new
#     key, the old certificate superseded): 403 naming the earlier
#     certificate, audited, still pending, shown as not its to approve in
#     the list (may_approve false, why); another approver approves it;
#   - a body naming a member twice ({"reason":"a","reason":"b"}) is 400 and
#     changes nothing (json_read(), for every JSON the admin API reads);
#   - an approver scoped to profile `held-line` and `line-3-*` (its scope
#     recorded with its certificate; key in SoftHSM2, `hwid request` with
#     --dir) lists only the requests within its scope, each with what it
#     may do (YOU-MAY); approving or denying one outside (another name,
#     another profile) is 403 naming the scope, audited as a `deny` with
#     the same reason, the request still pending; within, it approves and
#     denies; an unscoped approver still decides any node request (the
#     API's may_approve/may_deny say so) and approves the one refused.
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
        TARGET=$(json_get "$DEV/$f.body" .request_id)
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

# listed ID — the entry of request ID in the list in $DEV/list.body (JSON).
listed() {
        json_get "$DEV/list.body" "[.. | objects | select(.id? == \"$1\")] | first"
}

# An approver renews with a new key: a request for the key it held before
# is still its own.
test_rotated_key() {
        local me=op-approver-rot why entry
        enrolled "$me" "$(token_new --profile ops-approver-renew)"
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$DEV/$me-new.key" \
                -subj "/CN=$me" -out "$DEV/$me-new.csr" 2>/dev/null || fail "openssl req for $me's new key"
        renew "$DEV/$me-new" "$DEV/$me.pem" "$DEV/$me.key" "$DEV/$me-new.csr"
        expect_status 201 "$DEV/$me-new"
        cp "$DEV/$me-new.body" "$DEV/$me-new.pem"
        held node-rot manual "$DEV/$me.key"
        why="'$me' may not approve a request for its own key (the request's key is one an earlier certificate of '$me'"
        approve_as "$me-new" "$TARGET"
        expect_denied 403 forbidden "$DEV/decide" "approver:$me" request.approve "${TARGET:0:8}..." "$why"
        assert_eq "$(request_state "$TARGET")" pending "a request for its earlier key approved"
        http "$DEV/list" GET /v1/admin/requests --cert "$DEV/$me-new.pem" --key "$DEV/$me-new.key"
        expect_status 200 "$DEV/list"
        entry=$(listed "$TARGET")
        assert_eq "$(json_get "$entry" .status)" pending "the request in the rotated approver's list"
        assert_eq "$(json_get "$entry" '"\(.may_approve) \(.may_deny)"')" "false true" "what the list says it may do"
        [[ $(json_get "$entry" .approve_refused) == "$why"* ]] ||
                fail "why the list says it may not approve: $(json_get "$entry" .approve_refused)"
        approve_as op-approver-4e "$TARGET"
        expect_status 200 "$DEV/decide"
        assert_eq "$(request_state "$TARGET")" approved "the request approved by another approver"
}

# scoped_as OP VERB ID — hwid request VERB ID as the scoped approver OP;
# output in $T/last.out/.err, exit code in RC.
scoped_as() {
        RC=0
        as "$1" request "$2" "${@:4}" "$3" >"$T/last.out" 2>"$T/last.err" || RC=$?
}

# refused_scope OP VERB ID TARGET PART — OP may not VERB the request ID
# (403 naming PART, audited with the very same reason); it stays pending.
refused_scope() {
        scoped_as "$1" "$2" "$3"
        assert_eq "$RC" 1 "exit code of $1's request $2 of $4"
        assert_contains "$(cat "$T/last.err")" "server answered 403: $5" "reason of $1's request $2 of $4"
        expect_audit "approver:$1" "request.$2" "${3:0:8}..." deny \
                "$(sed -n 's/^hwid: server answered 403: //p' "$T/last.err")"
        assert_eq "$(request_state "$3")" pending "$4 after $1's request $2"
}

test_approver_scope() {
        local me=op-approver-line in1 in2 out_name out_prof rows
        assert_eq "$(store_sql "SELECT role || ' ' || scope FROM certificates
                WHERE identity = '$me' AND status = 'valid'")" \
                'approver {"profiles":["held-line"],"name_patterns":["line-3-*"]}' "the scoped approver's record"
        held line-3-1 held-line && in1=$TARGET
        held line-3-2 held-line && in2=$TARGET
        held line-4-1 held-line && out_name=$TARGET
        held line-3-9 manual && out_prof=$TARGET
        # The list: what is within its scope, and what it may do with it.
        rows=$(as "$me" request list | tail -n +2 | awk '{ print $3, $4, $NF }' | sort)
        assert_eq "$rows" $'line-3-1 held-line approve,deny\nline-3-2 held-line approve,deny' \
                "the scoped approver's request list"
        # Outside: another name, another profile; approve and deny alike.
        refused_scope "$me" approve "$out_name" line-4-1 \
                "name 'line-4-1' is outside the scope of approver '$me' ('line-3-*')"
        refused_scope "$me" deny "$out_name" line-4-1 "name 'line-4-1' is outside the scope"
        refused_scope "$me" approve "$out_prof" "the manual request" \
                "profile 'manual' is outside the scope of approver '$me' (profiles 'held-line')"
        refused_scope "$me" deny "$out_prof" "the manual request" "profile 'manual' is outside the scope"
        # Within: it decides.
        scoped_as "$me" approve "$in1"
        [ "$RC" = 0 ] || fail "the scoped approver cannot approve line-3-1: $(cat "$T/last.err")"
        assert_eq "$(request_state "$in1")" approved "line-3-1 after the scoped approval"
        scoped_as "$me" deny "$in2" --reason "not ours"
        [ "$RC" = 0 ] || fail "the scoped approver cannot deny line-3-2: $(cat "$T/last.err")"
        assert_eq "$(request_state "$in2")" denied "line-3-2 after the scoped denial"
        # An approver without a scope decides any node request, as before.
        http "$DEV/list" GET /v1/admin/requests --cert "$DEV/op-approver-4e.pem" --key "$DEV/op-approver-4e.key"
        expect_status 200 "$DEV/list"
        for id in "$out_name" "$out_prof"; do
                [ "$(json_get "$(listed "$id")" .status)" = pending ] || fail "$id not listed unscoped"
        done
        assert_eq "$(json_get "$DEV/list.body" '[.. | objects | select(.may_approve == true and .may_deny == true)] | length')" 2 \
                "requests the unscoped approver may decide"
        approve_as op-approver-4e "$out_name"
        expect_status 200 "$DEV/decide"
        assert_eq "$(request_state "$out_name")" approved "line-4-1 approved by an unscoped approver"
}

softhsm_init ops 4321
device_ca < <(operator_profiles
        printf '  ops-approver-held:\n    validity: 1h\n    role: approver\n    approval: manual\n'
        printf '    subject:\n      cn_pattern: "op-approver*"\n'
        printf '  again:\n    validity: 1h\n    approval: manual\n    allow_reenroll: true\n'
        printf '  ops-approver-line:\n    validity: 1h\n    role: approver\n'
        printf '    scope: {profiles: [held-line], name_patterns: ["line-3-*"]}\n'
        printf '    subject:\n      cn_pattern: "op-approver*"\n'
        printf '  held-line:\n    validity: 1h\n    approval: manual\n    subject:\n      cn_pattern: "line-*"\n'
        printf '  ops-approver-renew:\n    validity: 1h\n    role: approver\n    renewal: {window: 1}\n'
        printf '    subject:\n      cn_pattern: "op-approver*"\n')
op_join op-approver-line ops-approver-line
test_four_eyes
test_rotated_key
test_approver_scope
hwidd_stop
echo "admin-four-eyes: all checks passed"
