#!/bin/bash
# admin-roles.sh — remote administration with separated roles, against a
# real hwidd (CA key in SoftHSM2). The operators are enrolled with `hwid
# join`, their keys in a SoftHSM2 token; they run the admin commands with
# --dir (or --cert/--key), which reach /v1/admin/ over mutual TLS.
# Proves:
#   - every admin endpoint × every role (admin, approver, provisioner,
#     auditor, node), table-driven: the roles that may succeed and their
#     effect is what the CA host's own commands see (a token revoked, a
#     request approved or denied, a certificate revoked; lists and shows
#     equal to the local ones); every other role gets 403 naming its role,
#     the action and the roles that may, changes nothing, and the audit log
#     has a `deny` record for <role>:<cn> with the very same reason;
#     allowed actions are audited as `allow` with the actor;
#   - without a client certificate (curl): 401 with JSON naming mutual TLS
#     and the roles, for every endpoint; a node (curl, openssl key) gets a
#     403 JSON body naming it;
#   - a provisioner scoped to profile `line` and `line-3-*` mints tokens
#     for `line-3-*` and for a single name it matches (`line-3-0042`) but
#     not for `line-4-*`, a narrower glob `line-3-00*`, another profile, or
#     without a pattern (403 with the scope in the reason, nothing stored);
#     the scope is recorded with its certificate;
#   - --reason key-compromise remotely blocks the key as on the CA host;
#   - the API with curl as an admin (openssl key): a malformed body, an
#     unknown field, out-of-range or mistyped values, an unknown profile or
#     a control character are 400 naming them and store nothing; a request
#     no longer pending and a certificate already revoked are 409
#     wrong_state; a token created over the API comes back once;
#   - --cert/--key with --ca-hash or --ca-file work like --dir; a wrong pin
#     sends nothing; a revoked operator certificate gets 401;
#   - token secrets minted remotely are in no line of hwidd's log and
#     nowhere in the CA's database;
#   - on a CA without TPM attestation, the EK allowlist lists empty and an
#     entry is refused (409 wrong_state: it would never be used), nothing
#     stored (admin-ek.sh covers the EK allowlist on a CA with attestation).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"
# shellcheck source=policy-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/policy-lib.sh"
# shellcheck source=admin-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/admin-lib.sh"

# Who plays each role.
declare -A WHO=([admin]=op-admin [approver]=op-approver [provisioner]=op-station [auditor]=op-auditor
        [node]=node-1)
ROLES=(admin approver provisioner auditor node)
# Which roles may use each endpoint (docs/OPERATIONS.md).
declare -A MAY=(
        [token.create]="admin provisioner" [token.list]="admin auditor" [token.revoke]="admin"
        [request.list]="admin approver auditor" [request.approve]="admin approver" [request.deny]="admin approver"
        [cert.list]="admin auditor" [cert.show]="admin auditor" [cert.revoke]="admin" [cert.revoke-id]="admin"
        [audit.list]="admin auditor"
)
ENDPOINTS=(token.create token.list token.revoke request.list request.approve request.deny cert.list cert.show
        cert.revoke cert.revoke-id audit.list)
MINTED=()   # every token minted remotely
N=0         # names of fresh targets

# --- targets: fresh for every cell that changes something ---------------------

fresh_token() {
        TARGET=$(token_new --profile default)
        TARGET=${TARGET%%.*}
}

token_state() {
        admin token list | awk -v id="$1" '$1 == id { print $2 }'
}

fresh_request() {
        local tok
        N=$((N + 1))
        tok=$(token_new --profile manual)
        enroll "held-$N" "$tok"
        expect_status 202 "$DEV/held-$N"
        TARGET=$(json_get "$DEV/held-$N.body" .request_id)
}

request_state() {
        admin request list --all | awk -v id="$1" '$1 == id { print $2 }'
}

fresh_cert() {
        N=$((N + 1))
        enrolled "c-$N" "$(token_new --profile default)"
        TARGET=$(serial_of "$DEV/c-$N.pem")
        TARGET_NAME=c-$N
}

cert_state() {
        cert_rows | awk -v s="$1" '$1 == s { print $2 }'
}

# prepare EP — TARGET (and TARGET_NAME) for endpoint EP; STATE: what a
# refusal must leave as it is.
prepare() {
        TARGET=
        case $1 in
        token.create) STATE=$(admin token list | wc -l) ;;
        token.revoke) fresh_token; STATE=$(token_state "$TARGET") ;;
        request.approve | request.deny) fresh_request; STATE=$(request_state "$TARGET") ;;
        cert.show) TARGET=$SHOW_SERIAL; STATE= ;;
        cert.revoke | cert.revoke-id) fresh_cert; STATE=$(cert_state "$TARGET") ;;
        *) STATE= ;;
        esac
}

state() {
        case $1 in
        token.create) admin token list | wc -l ;;
        token.revoke) token_state "$TARGET" ;;
        request.approve | request.deny) request_state "$TARGET" ;;
        cert.revoke | cert.revoke-id) cert_state "$TARGET" ;;
        esac
}

# run EP NAME — the endpoint's command as operator NAME; output in
# $T/last.out / $T/last.err, exit code in RC.
run() {
        local ep=$1 name=$2 args
        case $ep in
        token.create) args=(token create --profile line --name-pattern line-3-7) ;;
        token.list) args=(token list) ;;
        token.revoke) args=(token revoke "$TARGET") ;;
        request.list) args=(request list --all) ;;
        request.approve) args=(request approve "$TARGET") ;;
        request.deny) args=(request deny --reason "not ours" "$TARGET") ;;
        cert.list) args=(cert list --all) ;;
        cert.show) args=(cert show "$TARGET") ;;
        cert.revoke) args=(cert revoke --reason superseded "$TARGET") ;;
        cert.revoke-id) args=(cert revoke --identity "$TARGET_NAME") ;;
        audit.list) args=(audit list --limit 5) ;;
        esac
        RC=0
        as "$name" "${args[@]}" >"$T/last.out" 2>"$T/last.err" || RC=$?
}

# The action name hwidd audits for EP, and the target it records.
action_of() {
        [ "$1" = cert.revoke-id ] && echo cert.revoke || echo "$1"
}

target_of() {
        case $1 in
        token.revoke | cert.show | cert.revoke) echo "$TARGET" ;;
        request.approve | request.deny) echo "${TARGET:0:8}..." ;; # ids are capabilities: a prefix
        cert.revoke-id) echo "$TARGET_NAME" ;;
        *) echo - ;;
        esac
}

# check_effect EP ROLE — what an allowed call must have done, seen from the CA host.
check_effect() {
        local ep=$1 out
        out=$(cat "$T/last.out")
        case $ep in
        token.create)
                assert_eq "$(state "$ep")" $((STATE + 1)) "tokens after $ep"
                MINTED+=("$(sed -n 's/^token: //p' "$T/last.out")") ;;
        token.list) assert_eq "$out" "$(admin token list)" "remote token list" ;;
        token.revoke) assert_eq "$(state "$ep")" revoked "token after $ep" ;;
        request.list) # the local list, and a last column YOU-MAY (nothing to decide for an auditor)
                assert_eq "$(sed -E 's/ +[^ ]+$//' "$T/last.out")" "$(admin request list --all)" "remote request list"
                [ "$2" != auditor ] || assert_eq "$(tail -n +2 "$T/last.out" | awk '$NF != "-"' | wc -l)" 0 \
                        "requests an auditor is told it may decide" ;;
        request.approve) assert_eq "$(state "$ep")" approved "request after $ep" ;;
        request.deny) assert_eq "$(state "$ep")" denied "request after $ep" ;;
        cert.list) assert_eq "$out" "$(admin cert list --all)" "remote cert list" ;;
        cert.show) assert_eq "$out" "$(admin cert show "$TARGET")" "remote cert show" ;;
        cert.revoke | cert.revoke-id) assert_eq "$(state "$ep")" revoked "certificate after $ep" ;;
        audit.list) assert_eq "$(head -n 1 "$T/last.out" | awk '{ print $1, $2 }')" "WHEN ACTOR" "audit header"
                assert_eq "$(tail -n +2 "$T/last.out" | wc -l)" 5 "records of audit list --limit 5" ;;
        esac
}

# One cell: ROLE on EP.
cell() {
        local ep=$1 role=$2 name=${WHO[$2]} msg action target
        action=$(action_of "$ep")
        prepare "$ep"
        run "$ep" "$name"
        if [[ " ${MAY[$ep]} " == *" $role "* ]]; then
                [ "$RC" = 0 ] || fail "$role may $ep but got exit $RC: $(cat "$T/last.err")"
                check_effect "$ep" "$role"
                target=$(target_of "$ep")
                [ "$ep" != token.create ] || target=${MINTED[-1]%%.*}
                [ -n "$(audit_reasons "$role:$name" "$action" "$target" allow)" ] ||
                        fail "no allow record of $role:$name $action $target"
                return
        fi
        [ "$RC" = 1 ] || fail "$role may not $ep, but got exit $RC: $(cat "$T/last.out" "$T/last.err")"
        assert_eq "$(grep -c . "$T/last.err")" 1 "error lines of a refused $ep"
        msg=$(sed -n 's/^hwid: server answered 403: //p' "$T/last.err")
        [ -n "$msg" ] || fail "$role on $ep: not a 403: $(cat "$T/last.err")"
        assert_contains "$msg" "$role '$name' may not perform '$action': it needs the " "reason of $role on $ep"
        assert_eq "$(state "$ep")" "$STATE" "state after $role was refused $ep"
        expect_audit "$role:$name" "$action" "$(target_of "$ep")" deny "$msg"
}

test_matrix() {
        local ep role
        fresh_cert
        SHOW_SERIAL=$TARGET
        for ep in "${ENDPOINTS[@]}"; do
                for role in "${ROLES[@]}"; do
                        cell "$ep" "$role"
                done
        done
        # The reason lists who may: spelled out once.
        prepare request.approve
        run request.approve op-auditor
        assert_contains "$(cat "$T/last.err")" \
                "auditor 'op-auditor' may not perform 'request.approve': it needs the admin or approver role" \
                "reason of a refused approval"
}

# Without a certificate, with curl: 401 for every endpoint.
test_anonymous() {
        local spec method path action target i=0
        for spec in "GET /v1/admin/tokens token.list -" "POST /v1/admin/tokens token.create -" \
                "POST /v1/admin/tokens/abc123/revoke token.revoke abc123" "GET /v1/admin/requests request.list -" \
                "POST /v1/admin/requests/0123456789abcdef0123456789abcdef/approve request.approve 01234567..." \
                "POST /v1/admin/requests/0123456789abcdef0123456789abcdef/deny request.deny 01234567..." \
                "GET /v1/admin/certificates cert.list -" "GET /v1/admin/certificates/0A0B cert.show 0A0B" \
                "POST /v1/admin/certificates/0A0B/revoke cert.revoke 0A0B" \
                "POST /v1/admin/identities/c-1/revoke cert.revoke c-1" "GET /v1/admin/audit audit.list -"; do
                read -r method path action target <<<"$spec"
                if [ "$method" = POST ]; then
                        http "$DEV/anon" POST "$path" -H "Content-Type: application/json" --data-binary '{}'
                else
                        http "$DEV/anon" GET "$path"
                fi
                i=$((i + 1))
                if [ $i -le 8 ]; then # hwidd logs the first 10 refusals of a minute one by one
                        expect_refused_unauthenticated 401 unauthenticated "$DEV/anon" "$action" "$target" \
                                "'$action' needs mutual TLS with the certificate of an operator"
                else
                        expect_error 401 unauthenticated "$DEV/anon" "needs mutual TLS"
                fi
        done
        # A request id is a poll capability: logged by its prefix only.
        ! grep -q 0123456789abcdef0123456789abcdef "$HWIDD_LOG" || fail "a whole request id in hwidd's log"
        http "$DEV/anon" DELETE /v1/admin/tokens
        expect_error 405 method_not_allowed "$DEV/anon"
        http "$DEV/anon" GET /v1/admin/nothing
        expect_error 404 not_found "$DEV/anon"
}

# A node with an openssl key and curl as the peer: the 403's JSON body.
test_node_json() {
        enrolled n-curl "$(token_new --profile default)"
        http "$DEV/n-tok" GET /v1/admin/tokens --cert "$DEV/n-curl.pem" --key "$DEV/n-curl.key"
        expect_denied 403 forbidden "$DEV/n-tok" node:n-curl token.list - \
                "node 'n-curl' may not perform 'token.list': it needs the admin or auditor role"
}

# create PATTERN [ARGS...] — the station mints a token; sets RC.
station_create() {
        RC=0
        as op-station token create --profile line "$@" >"$T/last.out" 2>"$T/last.err" || RC=$?
}

test_provisioner_scope() {
        local before
        assert_eq "$(store_sql "SELECT role || ' ' || scope FROM certificates
                WHERE identity = 'op-station' AND status = 'valid'")" \
                'provisioner {"profiles":["line"],"name_patterns":["line-3-*"]}' "the station's recorded role and scope"
        station_create --name-pattern 'line-3-*' --uses 5
        [ "$RC" = 0 ] || fail "the station cannot mint line-3-*: $(cat "$T/last.err")"
        MINTED+=("$(sed -n 's/^token: //p' "$T/last.out")")
        assert_eq "$(admin token list | awk -v id="${MINTED[-1]%%.*}" '$1 == id { print $3, $4, $7 }')" \
                "line 0/5 line-3-*" "the station's token"
        station_create --name-pattern line-3-0042
        [ "$RC" = 0 ] || fail "the station cannot mint the name line-3-0042: $(cat "$T/last.err")"
        MINTED+=("$(sed -n 's/^token: //p' "$T/last.out")")
        assert_contains "$(cat "$T/last.out")" "--cn line-3-0042" "join command for a single name"

        before=$(admin token list)
        station_create --name-pattern 'line-4-*'
        assert_eq "$RC" 1 "exit code of line-4-*"
        assert_contains "$(cat "$T/last.err")" \
                "403: name pattern 'line-4-*' is outside the scope of provisioner 'op-station' ('line-3-*')" \
                "reason for line-4-*"
        expect_audit provisioner:op-station token.create line deny \
                "$(sed -n 's/^hwid: server answered 403: //p' "$T/last.err")"
        station_create --name-pattern 'line-3-00*'
        assert_contains "$(cat "$T/last.err")" "name pattern 'line-3-00*' is outside the scope" "a narrower glob"
        station_create
        assert_contains "$(cat "$T/last.err")" "must give a name pattern within its scope ('line-3-*')" "no pattern"
        RC=0
        as op-station token create --profile default --name-pattern 'line-3-*' >"$T/last.out" 2>"$T/last.err" || RC=$?
        assert_eq "$RC" 1 "exit code for another profile"
        assert_contains "$(cat "$T/last.err")" "profile 'default' is outside the scope of provisioner 'op-station'" \
                "reason for another profile"
        assert_eq "$(admin token list)" "$before" "tokens after the refusals"
}

test_key_compromise() {
        local name
        fresh_cert
        name=$TARGET_NAME
        run_ok as op-admin cert revoke --identity "$name" --reason key-compromise >/dev/null
        # The same key under another name: blocked.
        openssl req -new -key "$DEV/$name.key" -subj /CN=c-again -out "$DEV/c-again.csr" 2>/dev/null
        post_csr "$DEV/c-again" "$(token_new --profile default)" "$DEV/c-again.csr"
        expect_error 403 key_blocked "$DEV/c-again"
}

test_cert_key_options() {
        local key
        key=$(cat "$OPS/op-auditor/key.uri")
        run_ok "$HWID" token list --cert "$OPS/op-auditor/cert.pem" --key "$key" --server "$URL" --ca-hash "$PIN" \
                >"$T/by-hash.out"
        assert_eq "$(cat "$T/by-hash.out")" "$(admin token list)" "token list with --cert/--key/--ca-hash"
        run_ok "$HWID" audit list --cert "$OPS/op-auditor/cert.pem" --key "$key" --server "$URL" \
                --ca-file "$CA_DIR/ca.pem" --limit 1 >/dev/null
        expect_exit 1 "not the pinned sha256:00000000" -- "$HWID" token list --cert "$OPS/op-auditor/cert.pem" \
                --key "$key" --server "$URL" --ca-hash "sha256:$(printf '0%.0s' {1..64})"
        expect_exit 1 "is not for the key" -- "$HWID" token list --cert "$OPS/op-admin/cert.pem" --key "$key" \
                --server "$URL" --ca-hash "$PIN"
        expect_exit 2 "--config is for the CA host" -- "$HWID" token list --config "$CFG" --dir "$OPS/op-admin"
        expect_exit 2 "--server needs the operator's identity" -- "$HWID" cert list --server "$URL"
        expect_exit 2 "--cert/--key need the CA" -- "$HWID" cert list --cert x --key y --server "$URL"
}

test_revoked_operator() {
        run_ok admin cert revoke --identity op-auditor >/dev/null
        expect_exit 1 "server answered 401" -- as op-auditor token list
        assert_contains "$(cat "$T/last.err")" "revoked" "why a revoked operator is refused"
}

# The API itself with curl as the peer, as an admin whose key openssl made
# (an independent client): bad input is refused and changes nothing.
test_raw_api() {
        local before serial
        enrolled op-admin-raw "$(token_new --profile ops-admin)"
        api() { http "$DEV/api" "$1" "$2" --cert "$DEV/op-admin-raw.pem" --key "$DEV/op-admin-raw.key" \
                -H "Content-Type: application/json" "${@:3}"; }
        before=$(admin token list)
        api POST /v1/admin/tokens --data-binary 'not json'
        expect_error 400 invalid_argument "$DEV/api" "the request body is not one JSON object"
        api POST /v1/admin/tokens --data-binary '{"profile":"line","secret":"x"}'
        expect_error 400 invalid_argument "$DEV/api" 'unknown field'
        assert_contains "$(json_msg "$DEV/api")" 'unknown field "secret"' "the field named"
        api POST /v1/admin/tokens --data-binary '{"profile":"line","name_pattern":"line-3-1","profile":"ops-admin"}'
        expect_error 400 invalid_argument "$DEV/api" \
                'the request body is not valid JSON: an object names a member twice (line 1, column'
        api POST /v1/admin/tokens --data-binary '{"count":0}'
        expect_error 400 invalid_argument "$DEV/api" 'must be 1 to 1000'
        api POST /v1/admin/tokens --data-binary '{"uses":"5"}'
        expect_error 400 invalid_argument "$DEV/api" 'must be an integer'
        api POST /v1/admin/tokens --data-binary '{"profile":"nope"}'
        expect_error 400 invalid_argument "$DEV/api" "there is no profile 'nope'"
        api POST /v1/admin/tokens --data-binary '{"profile":"line","name_pattern":"a\u0001"}'
        expect_error 400 invalid_argument "$DEV/api" "control character"
        assert_eq "$(admin token list)" "$before" "tokens after bad requests"
        api POST /v1/admin/tokens --data-binary '{"profile":"line","name_pattern":"line-9-*","uses":2,"ttl":600}'
        expect_status 201 "$DEV/api"
        [[ $(json_get "$DEV/api.body" '.tokens[-1].token') =~ ^[a-z0-9]{6}\.[a-z0-9]{16,}$ ]] ||
                fail "no token in the answer: $(cat "$DEV/api.body")"
        MINTED+=("$(json_get "$DEV/api.body" '.tokens[-1].token')")
        assert_eq "$(json_get "$DEV/api.body" '.tokens[-1] | "\(.profile)/\(.name_pattern)"')" line/line-9-* \
                "the created token"
        api GET "/v1/admin/audit?limit=abc"
        expect_error 400 invalid_argument "$DEV/api" "limit must be"
        api GET /v1/admin/certificates/NOT-HEX
        expect_error 404 not_found "$DEV/api"
        fresh_request
        api POST "/v1/admin/requests/$TARGET/approve"
        expect_status 200 "$DEV/api"
        api POST "/v1/admin/requests/$TARGET/deny" --data-binary '{"reason":"late"}'
        expect_error 409 wrong_state "$DEV/api" "is approved, not pending"
        fresh_cert
        serial=$TARGET
        api POST "/v1/admin/certificates/$serial/revoke" --data-binary '{"reason":"bogus"}'
        expect_error 400 invalid_argument "$DEV/api" "unknown revocation reason"
        assert_eq "$(cert_state "$serial")" valid "certificate after a bad reason"
        api POST "/v1/admin/certificates/$serial/revoke" --data-binary '{"reason":"superseded"}'
        expect_status 200 "$DEV/api"
        api POST "/v1/admin/certificates/$serial/revoke"
        expect_error 409 wrong_state "$DEV/api" "already revoked"
        api GET "/v1/admin/certificates?identity=$TARGET_NAME"
        expect_status 200 "$DEV/api"
        assert_eq "$(json_get "$DEV/api.body" '.certificates[-1] | "\(.serial)/\(.status)"')" "$serial/revoked" \
                "the certificate listed by identity"
}

test_ek_without_attestation() {
        run_ok as op-auditor ek list >"$T/ek.out"
        assert_eq "$(tail -n +2 "$T/ek.out")" "" "the EK allowlist of a CA without attestation"
        expect_exit 1 "server answered 409: this CA does not verify TPM attestation" -- \
                as op-admin ek add --cn dev-x --ek-sha256 "$(printf 'ab%.0s' {1..32})"
        assert_eq "$(sqlite3 "$CA_DIR/hwid.db" 'SELECT count(*) FROM ek_allowlist')" 0 "EK entries stored"
}

test_secrets() {
        local tok
        [ ${#MINTED[@]} -ge 3 ] || fail "only ${#MINTED[@]} tokens were minted remotely"
        for tok in "${MINTED[@]}"; do
                [[ $tok =~ ^[a-z0-9]{6}\.[a-z0-9]{16,}$ ]] || fail "a minted token looks like '$tok'"
                grep -qF " token.create ${tok%%.*}: allow" "$HWIDD_LOG" || fail "token ${tok%%.*} not logged by id"
        done
        secrets_absent "$HWIDD_LOG" "${MINTED[@]}"
        store_secrets_absent "${MINTED[@]}"
}

softhsm_init ops 4321
device_ca < <(operator_profiles)
op_join op-admin ops-admin
op_join op-approver ops-approver
op_join op-station ops-provisioner
op_join op-auditor ops-auditor
op_join node-1 default
test_anonymous
test_node_json
test_matrix
test_provisioner_scope
test_key_compromise
test_raw_api
test_cert_key_options
test_ek_without_attestation
test_revoked_operator
test_secrets
hwidd_stop
echo "admin-roles: all checks passed"
