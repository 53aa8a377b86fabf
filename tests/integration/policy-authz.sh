#!/bin/bash
# policy-authz.sh — who may do what, against a real hwidd on 127.0.0.1
# (CA key in SoftHSM2), seen with curl and openssl. Every refusal is checked
# twice: the client's JSON error body names the reason, and `hwid audit
# list` holds a `deny` record with the very same text -- or, for a client
# without valid credentials, hwidd's log holds the line (such refusals get
# a summary record a minute, not one each).
# Proves:
#   - a node reads its own status (200) but not another node's (403 naming
#     both); without a client certificate it is 401 (mutual TLS needed); a
#     certificate with O=<admin_group> reads any identity;
#   - GET /ca, /crl and /healthz work without a certificate; GET /metrics is
#     refused to anonymous clients and to nodes (403, admin role), and works
#     for the admin role;
#   - a node renewing another node's identity gets 403 naming both, and
#     nothing is issued (while renewing itself works);
#   - a renewal without a client certificate gets 401 (mutual TLS needed),
#     nothing issued;
#   - a token scoped to `edge-*` refuses `other-1` (403 naming the pattern,
#     no use spent) and accepts `edge-7`;
#   - roles come from the certificate's record (its profile's `role`, set
#     at issuance), never from the subject shown: a `role: admin` profile
#     without any O gives the admin role (reads /metrics and another
#     node's identity); a `role: node` profile that fixes O to the admin
#     group gives a node (403 on /metrics), though its subject says
#     O=hwid-admins; the store records each role;
#   - a token is bound to its profile: a `manual` token cannot get what the
#     `default` profile allows (a DNS SAN: 403 naming profile 'manual'; a
#     `?profile=default` in the URL still leaves the request pending), while
#     a `default` token gets both at once.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=policy-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/policy-lib.sh"

# Nodes edge-1 and edge-2 (renewable at once) and an administrator admin-1.
setup_nodes() {
        local tok
        tok=$(token_new --profile short --uses 2)
        enrolled edge-1 "$tok"
        enrolled edge-2 "$tok"
        enrolled admin-1 "$(token_new --profile admin)"
        assert_contains "$(openssl x509 -in "$DEV/admin-1.pem" -noout -subject)" "O = hwid-admins" \
                "subject of the administrator's certificate"
}

test_identity_reads() {
        get_as "$DEV/id-own" /v1/identities/edge-1 edge-1
        expect_status 200 "$DEV/id-own"
        assert_eq "$(json_get "$DEV/id-own.body" .identity)" edge-1 "identity read by its own node"
        assert_eq "$(json_get "$DEV/id-own.body" .serial)" "$(serial_of "$DEV/edge-1.pem")" "serial of edge-1"

        get_as "$DEV/id-other" /v1/identities/edge-2 edge-1
        expect_denied 403 forbidden "$DEV/id-other" node:edge-1 read-identity edge-2 "'edge-1'" "'edge-2'"
        assert_not_contains "$(cat "$DEV/id-other.body")" "$(serial_of "$DEV/edge-2.pem")" "edge-2's serial"

        get_as "$DEV/id-anon" /v1/identities/edge-1 ""
        expect_refused_unauthenticated 401 unauthenticated "$DEV/id-anon" read-identity edge-1 "mutual TLS"

        get_as "$DEV/id-admin" /v1/identities/edge-2 admin-1
        expect_status 200 "$DEV/id-admin"
        assert_eq "$(json_get "$DEV/id-admin.body" .identity)" edge-2 "identity read by the administrator"
}

test_public_endpoints() {
        get_as "$DEV/ca" /ca ""
        expect_status 200 "$DEV/ca"
        cmp -s "$DEV/ca.body" "$CA_DIR/ca.pem" || fail "anonymous GET /ca is not ca.pem"
        get_as "$DEV/crl" /crl ""
        expect_status 200 "$DEV/crl"
        openssl crl -inform DER -in "$DEV/crl.body" -CAfile "$CA_DIR/ca.pem" -noout 2>&1 | grep -qx "verify OK" ||
                fail "the anonymous GET /crl does not verify against ca.pem"
        get_as "$DEV/health" /healthz ""
        expect_status 200 "$DEV/health"
        assert_eq "$(json_get "$DEV/health.body" .status)" ok "anonymous GET /healthz"
}

# /metrics without public_metrics: the admin role only.
test_metrics_admin_only() {
        get_as "$DEV/m-anon" /metrics ""
        expect_refused_unauthenticated 401 unauthenticated "$DEV/m-anon" metrics - "admin role"
        assert_not_contains "$(cat "$DEV/m-anon.body")" hwid_http_requests_total "metrics given to anonymous"
        get_as "$DEV/m-node" /metrics edge-2
        expect_error 403 forbidden "$DEV/m-node" "admin role"
        get_as "$DEV/m-admin" /metrics admin-1
        expect_status 200 "$DEV/m-admin"
        assert_contains "$(cat "$DEV/m-admin.body")" "hwid_http_requests_total " "metrics for the admin role"
}

# renewal_csr NAME CN KEY — $DEV/NAME.csr for CN with the existing KEY.
renewal_csr() {
        openssl req -new -key "$3" -subj "/CN=$2" -out "$DEV/$1.csr" 2>/dev/null ||
                fail "openssl req for $1"
}

test_renew_needs_mtls() {
        local before
        before=$(cert_rows)
        renewal_csr edge-1-anon edge-1 "$DEV/edge-1.key"
        http "$DEV/r-anon" POST /v1/renew -H "Content-Type: application/pkcs10" --data-binary "@$DEV/edge-1-anon.csr"
        expect_refused_unauthenticated 401 unauthenticated "$DEV/r-anon" renew - "mutual TLS"
        assert_eq "$(cert_rows)" "$before" "store after an unauthenticated renewal"
}

test_renew_other_node() {
        local before
        before=$(cert_rows)
        renewal_csr edge-1-as-2 edge-2 "$DEV/edge-1.key"
        renew "$DEV/r-other" "$DEV/edge-1.pem" "$DEV/edge-1.key" "$DEV/edge-1-as-2.csr"
        expect_denied 403 forbidden "$DEV/r-other" node:edge-1 renew edge-2 "'edge-1'" "'edge-2'"
        assert_eq "$(cert_rows)" "$before" "store after edge-1 tried to renew edge-2"
        # The same node renewing itself is fine: the 403 was about the name.
        renewal_csr edge-1-self edge-1 "$DEV/edge-1.key"
        renew "$DEV/r-self" "$DEV/edge-1.pem" "$DEV/edge-1.key" "$DEV/edge-1-self.csr"
        expect_status 201 "$DEV/r-self"
        verify_leaf "$DEV/r-self.body"
        assert_eq "$(openssl x509 -in "$DEV/r-self.body" -noout -subject -nameopt RFC2253)" "subject=CN=edge-1" \
                "subject of edge-1's renewed certificate"
}

test_token_name_pattern() {
        local tok before
        tok=$(token_new --name-pattern 'edge-*' --uses 2)
        before=$(store_state "$tok")
        enroll other-1 "$tok"
        expect_denied 403 forbidden "$DEV/other-1" "token:${tok%%.*}" enroll other-1 "'edge-*'" "'other-1'"
        assert_eq "$(store_state "$tok")" "$before" "store and token after the refusal of other-1"
        enrolled edge-7 "$tok"
        verify_leaf "$DEV/edge-7.pem"
        assert_eq "$(token_used "$tok")" 1 "uses spent after edge-7"
}

# The generated profiles differ: `default` allows a DNS SAN equal to the
# CN and signs at once; `manual` allows no SAN and waits for approval.
test_token_bound_to_profile() {
        local manual before
        enrolled dev-d1 "$(token_new --profile default)" -addext subjectAltName=DNS:dev-d1
        assert_eq "$(ext "$DEV/dev-d1.pem" subjectAltName)" "X509v3 Subject Alternative Name: DNS:dev-d1" \
                "SAN under profile default"

        manual=$(token_new --profile manual --uses 5)
        before=$(store_state "$manual")
        enroll dev-m1 "$manual" -addext subjectAltName=DNS:dev-m1
        expect_denied 403 forbidden "$DEV/dev-m1" "token:${manual%%.*}" enroll dev-m1 "'dev-m1'" "'manual'"
        assert_eq "$(store_state "$manual")" "$before" "store after the refusal of dev-m1"

        make_csr dev-m2
        http "$DEV/dev-m2" POST "/csr?profile=default" -H "Authorization: Bearer $manual" \
                -H "Content-Type: application/pkcs10" --data-binary "@$DEV/dev-m2.csr"
        expect_status 202 "$DEV/dev-m2"
        assert_eq "$(json_get "$DEV/dev-m2.body" .status)" pending "a manual token's request, ?profile=default"
        assert_eq "$(admin request list | awk '$3 == "dev-m2" { print $2 "/" $4 }')" pending/manual \
                "status/profile of dev-m2's request"
        assert_eq "$(admin cert list --identity dev-m2 | tail -n +2)" "" "certificates of dev-m2"
}

# The role is the record's, whatever the subject says.
test_roles_from_record() {
        enrolled boss-1 "$(token_new --profile boss)"
        assert_eq "$(openssl x509 -in "$DEV/boss-1.pem" -noout -subject -nameopt RFC2253)" "subject=CN=boss-1" \
                "subject of a role: admin certificate"
        get_as "$DEV/boss-m" /metrics boss-1
        expect_status 200 "$DEV/boss-m"
        get_as "$DEV/boss-id" /v1/identities/edge-2 boss-1
        expect_status 200 "$DEV/boss-id"

        enrolled o-1 "$(token_new --profile grouped)"
        assert_contains "$(openssl x509 -in "$DEV/o-1.pem" -noout -subject)" "O = hwid-admins" "subject of o-1"
        get_as "$DEV/o-m" /metrics o-1
        expect_denied 403 forbidden "$DEV/o-m" node:o-1 metrics - "admin role"
        get_as "$DEV/o-id" /v1/identities/edge-2 o-1
        expect_denied 403 forbidden "$DEV/o-id" node:o-1 read-identity edge-2 "'o-1'"

        assert_eq "$(store_sql "SELECT identity || '=' || role FROM certificates
                WHERE identity IN ('boss-1', 'o-1', 'admin-1', 'edge-2') ORDER BY identity")" \
                "$(printf 'admin-1=admin\nboss-1=admin\nedge-2=node\no-1=node')" "roles in the store"
}

policy_setup
policy_config "audit_only: false" "admin_group: hwid-admins" <<'EOF'
  short:
    validity: 1h
    subject:
      cn_pattern: "edge-*"
    renewal:
      window: 1.0
  admin:
    validity: 1h
    subject:
      cn_pattern: "admin-*"
      fixed_o: [hwid-admins]
  boss:
    validity: 1h
    role: admin
    subject:
      cn_pattern: "boss-*"
  grouped:
    validity: 1h
    role: node
    subject:
      cn_pattern: "o-*"
      fixed_o: [hwid-admins]
EOF
hwidd_start
setup_nodes
test_identity_reads
test_public_endpoints
test_renew_needs_mtls
test_renew_other_node
test_token_name_pattern
test_token_bound_to_profile
test_metrics_admin_only
test_roles_from_record
hwidd_stop
echo "policy-authz: all checks passed"
