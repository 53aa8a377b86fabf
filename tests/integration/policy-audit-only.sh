#!/bin/bash
# policy-audit-only.sh — audit-only mode (policy.audit_only: true), set in
# the configuration hwidd starts with. Real hwidd on 127.0.0.1, CA key in
# SoftHSM2; curl and openssl as the peers; `hwid audit list` as the record.
# Proves:
#   - hwidd announces audit-only mode at start-up, in its log, before it
#     serves;
#   - what policy would deny goes through and is recorded as `would-deny`
#     with the reason the enforcing policy gives: a token scoped to `edge-*`
#     enrolls `other-1` (201, in the store); a node reads another node's
#     status (200);
#   - what audit-only must never let through still is refused or withheld:
#     a CSR asking for CA:TRUE or keyCertSign never yields a CA certificate
#     (openssl refuses a chain through what is issued); a renewal or an
#     identity read without a client certificate is 401; a CSR putting the
#     admin group in its own O is 403; /metrics stays closed to anonymous
#     clients; a node renewing another node's identity gets no certificate
#     — nothing issued on any refusal.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=policy-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/policy-lib.sh"

# shellcheck disable=SC2054  # the commas belong to openssl's -addext values
CA_EXTS=(-addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign,digitalSignature)

# line_of_log TEXT — the number of the first line of hwidd's log with TEXT.
line_of_log() {
        local n
        n=$(grep -nF -- "$1" "$HWIDD_LOG" | head -n 1 | cut -d: -f1) || true
        [ -n "$n" ] || fail "hwidd's log has no '$1':"$'\n'"$(cat "$HWIDD_LOG")"
        echo "$n"
}

test_announced() {
        local warn listen
        warn=$(line_of_log "AUDIT-ONLY MODE")
        listen=$(line_of_log "listening on")
        [ "$warn" -lt "$listen" ] || fail "audit-only mode announced after hwidd started serving"
        assert_contains "$(sed -n "${warn}p" "$HWIDD_LOG")" "would-deny" "the audit-only announcement"
}

test_token_pattern_would_deny() {
        local tok
        tok=$(token_new --name-pattern 'edge-*' --uses 2)
        enrolled other-1 "$tok"
        verify_leaf "$DEV/other-1.pem"
        in_store "$(serial_of "$DEV/other-1.pem")" || fail "other-1's certificate is not in the store"
        expect_audit "token:${tok%%.*}" enroll other-1 would-deny \
                "CN 'other-1' does not match the token's name pattern 'edge-*'"
        # An allowed request is not flagged.
        enrolled edge-7 "$tok"
        assert_eq "$(audit_reasons "token:${tok%%.*}" enroll edge-7 would-deny)" "" "would-deny records of edge-7"
}

test_node_reads_other_would_deny() {
        local tok
        tok=$(token_new --uses 2)
        enrolled edge-1 "$tok"
        enrolled edge-2 "$tok"
        get_as "$DEV/id-other" /v1/identities/edge-2 edge-1
        expect_status 200 "$DEV/id-other"
        assert_eq "$(json_get "$DEV/id-other.body" .identity)" edge-2 "identity edge-1 read"
        expect_audit node:edge-1 read-identity edge-2 would-deny "node 'edge-1' may not act on identity 'edge-2'"
}

# ca_request NAME PART OPENSSL-REQ-ARGS... — asks for CA powers; whatever
# the answer, no CA certificate. Policy would refuse it (ungranted: refuse),
# so in audit-only mode it is issued without them, recorded as would-deny
# with a reason holding PART.
ca_request() {
        local name=$1 part=$2 tok reason
        shift 2
        tok=$(token_new)
        enroll "$name" "$tok" "$@"
        expect_status 201 "$DEV/$name"
        assert_contains "$(openssl req -in "$DEV/$name.csr" -noout -text)" "Certificate Sign" "$name's CSR"
        verify_leaf "$DEV/$name.pem"
        expect_not_a_ca "$DEV/$name.pem" "$DEV/$name.key"
        reason=$(audit_reasons "token:${tok%%.*}" enroll "$name" would-deny)
        assert_contains "$reason" "$part" "would-deny record of $name"
        assert_contains "$reason" "profile 'default'" "would-deny record of $name"
}

test_never_a_ca() {
        ca_request ca-want-1 "a CA certificate" "${CA_EXTS[@]}"
        ca_request ca-want-2 keyCertSign -addext keyUsage=critical,keyCertSign,digitalSignature
}

test_never_unauthenticated() {
        local before
        before=$(cert_rows)
        openssl req -new -key "$DEV/edge-1.key" -subj /CN=edge-1 -out "$DEV/edge-1-anon.csr" 2>/dev/null
        http "$DEV/r-anon" POST /v1/renew -H "Content-Type: application/pkcs10" --data-binary "@$DEV/edge-1-anon.csr"
        expect_refused_unauthenticated 401 unauthenticated "$DEV/r-anon" renew - "mutual TLS"
        get_as "$DEV/id-anon" /v1/identities/edge-1 ""
        expect_refused_unauthenticated 401 unauthenticated "$DEV/id-anon" read-identity edge-1 "mutual TLS"
        get_as "$DEV/m-anon" /metrics ""
        expect_refused_unauthenticated 401 unauthenticated "$DEV/m-anon" metrics - "admin role"
        assert_eq "$(cert_rows)" "$before" "store after the unauthenticated requests"
}

# Audit-only lifts the rule that a node renews only itself, but a node
# still never obtains another identity's certificate (one live certificate
# per identity; the store only supersedes the caller's own).
test_never_takeover() {
        local before
        before=$(cert_rows)
        openssl req -new -key "$DEV/edge-1.key" -subj /CN=edge-2 -out "$DEV/edge-1-as-2.csr" 2>/dev/null
        renew "$DEV/r-other" "$DEV/edge-1.pem" "$DEV/edge-1.key" "$DEV/edge-1-as-2.csr"
        [ "$CODE" != 201 ] || fail "edge-1 obtained a certificate for edge-2 in audit-only mode"
        assert_not_contains "$(cat "$DEV/r-other.body")" "BEGIN CERTIFICATE" "answer to edge-1 renewing edge-2"
        assert_eq "$(cert_rows)" "$before" "store after edge-1 tried to renew edge-2"
}

# The admin role is never granted by audit-only mode: a CSR cannot name
# the admin group in its own O.
test_never_admin() {
        local tok before
        tok=$(token_new)
        before=$(store_state "$tok")
        enroll sneaky-1 "$tok" -subj "/O=hwid-admins/CN=sneaky-1"
        expect_denied 403 forbidden "$DEV/sneaky-1" "token:${tok%%.*}" enroll sneaky-1 "admin group"
        assert_eq "$(store_state "$tok")" "$before" "store after sneaky-1"
}

policy_setup
policy_config "audit_only: true" "admin_group: hwid-admins" </dev/null
hwidd_start
test_announced
test_token_pattern_would_deny
test_node_reads_other_would_deny
test_never_a_ca
test_never_unauthenticated
test_never_takeover
test_never_admin
hwidd_stop
echo "policy-audit-only: all checks passed"
