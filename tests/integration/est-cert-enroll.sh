#!/bin/bash
# est-cert-enroll.sh — EST simpleenroll by a TLS client certificate instead of
# a bootstrap token (profile option est.enroll_by_certificate), with curl and
# openssl only; the client certificates are hwid's, for software keys.
# Proves:
#   - a live certificate of a listed profile enrolls, without a token, the
#     name of the template with {cn} = its recorded identity: 200, a certs-only
#     PKCS#7 that openssl reads and verifies; the audit record's actor is the
#     certificate's holder and its reason names the certificate's serial; the
#     same request again gets the same certificate, a new key is 409;
#   - refusals, each with nothing issued and no token use spent: no credentials
#     401 + WWW-Authenticate; a profile that does not list the certificate's
#     403 with the reason; two profiles and no label 403; a name other than
#     the template's 403; attestation: required still holds (403); a revoked or
#     superseded certificate 401; a certificate from another CA 401;
#   - HTTP Basic and a certificate together: Basic wins (the token is spent,
#     the certificate plays no part; a wrong Basic is 401, not a fallback).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=est-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/est-lib.sh"

# b64 NAME — $DEV/NAME.csr as the base64 DER EST sends, in $DEV/NAME.b64.
b64() {
        openssl req -in "$DEV/$1.csr" -outform DER | openssl base64 -e >"$DEV/$1.b64"
}

# cert_post OUT PATH HOLDER NAME [CURL-ARGS...] — POST $DEV/NAME.b64 to PATH
# over mutual TLS with HOLDER's certificate and key (HOLDER empty: none).
cert_post() {
        local out=$1 path=$2 holder=$3 name=$4 tls=()
        shift 4
        [ -z "$holder" ] || tls=(--cert "$DEV/$holder.pem" --key "$DEV/$holder.key")
        http "$out" POST "$EST$path" "${tls[@]}" -H "Content-Type: application/pkcs10" \
                --data-binary "@$DEV/$name.b64" "$@"
}

# holder NAME [PROFILE] — a certificate for NAME from POST /csr with a token.
holder() {
        local tok
        tok=$(token_new --profile "${2:-default}")
        enroll "$1" "$tok"
        expect_status 201 "$DEV/$1"
}

setup() {
        ca_setup
        # default: the devices (hwid ca init's profile); fresh: renewable at once.
        # op accepts both; other's certificates are accepted by alt and att.
        add_profiles <<'EOF'
  fresh:
    renewal:
      window: 100%
  other: {}
  op:
    subject:
      cn_pattern: "*-op"
    est:
      enroll_by_certificate:
        from_profiles: [default, fresh]
        name: "{cn}-op"
  alt:
    est:
      enroll_by_certificate: {from_profiles: [other], name: "{cn}-alt"}
  att:
    attestation: required
    est:
      enroll_by_certificate: {from_profiles: [other], name: "{cn}-att"}
attestation:
  ek_roots: [ca.pem]
EOF
        hwidd_start
}

test_enroll() {
        local serial out
        holder dev-1
        make_csr dev-1-op
        b64 dev-1-op
        cert_post "$DEV/op-1" /simpleenroll dev-1 dev-1-op
        expect_est_cert "$DEV/op-1" dev-1-op
        serial=$(serial_of "$DEV/dev-1-op.pem")
        in_store "$serial" || fail "the certificate is not in the store"
        assert_eq "$(cert_rows --identity dev-1-op | awk '{ print $4 }')" op "profile of dev-1-op"
        out=$(admin audit list --limit 0 | grep " enroll " | grep "dev-1-op")
        assert_contains "$out" "node:dev-1" "actor of the enrollment by certificate"
        assert_contains "$out" "certificate $(serial_of "$DEV/dev-1.pem") of dev-1" "reason of the enrollment"
        # The same request again (the answer was lost): the same certificate.
        cert_post "$DEV/op-1b" /op/simpleenroll dev-1 dev-1-op
        expect_est_cert "$DEV/op-1b" dev-1-op
        assert_eq "$(serial_of "$DEV/dev-1-op.pem")" "$serial" "serial of the replayed enrollment"
        # A second certificate for the identity: 409.
        make_csr op-new -subj /CN=dev-1-op
        b64 op-new
        cert_post "$DEV/op-1c" /op/simpleenroll dev-1 op-new
        expect_est_error 409 "$DEV/op-1c" "already has a live certificate"
        assert_eq "$(cert_rows --identity dev-1-op | wc -l)" 1 "certificates of dev-1-op"
}

test_refusals() {
        local tok before
        tok=$(token_new)
        holder dev-2
        holder oth-1 other
        for n in dev-2-op dev-9-op oth-1-alt oth-1-att oth-1-op rev-1-op old-1-op; do
                make_csr "$n"
                b64 "$n"
        done
        make_csr own-2 -subj /CN=dev-2 # its own name
        b64 own-2
        # A revoked and a superseded certificate.
        holder rev-1
        admin cert revoke "$(serial_of "$DEV/rev-1.pem")" >/dev/null
        holder old-1 fresh
        cp "$DEV/old-1.pem" "$DEV/old-1.was.pem"
        cp "$DEV/old-1.key" "$DEV/old-1.was.key"
        make_csr old-1
        renew "$DEV/old-1-renew" "$DEV/old-1.was.pem" "$DEV/old-1.was.key" "$DEV/old-1.csr"
        expect_status 201 "$DEV/old-1-renew"
        # A certificate from another CA (a manufacturer's, say).
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$DEV/idev.key" \
                -subj /CN=dev-2 -days 1 -out "$DEV/idev.pem" 2>/dev/null
        before=$(store_state "$tok")

        cert_post "$DEV/r-none" /simpleenroll "" dev-2-op
        expect_est_error 401 "$DEV/r-none" "HTTP Basic credentials (user = the bootstrap token's id"
        cert_post "$DEV/r-notlisted" /alt/simpleenroll dev-2 dev-2-op
        expect_est_error 403 "$DEV/r-notlisted" \
                "profile 'alt' does not accept enrollment by certificates of profile 'default'"
        cert_post "$DEV/r-unlisted" /simpleenroll dev-1-op dev-2-op
        expect_est_error 403 "$DEV/r-unlisted" "no profile accepts enrollment by certificates of profile 'op'"
        cert_post "$DEV/r-two" /simpleenroll oth-1 oth-1-alt
        expect_est_error 403 "$DEV/r-two" "2 profiles accept"
        cert_post "$DEV/r-other" /simpleenroll dev-2 dev-9-op
        expect_est_error 403 "$DEV/r-other" "may enroll only as 'dev-2-op' under profile 'op', not as 'dev-9-op'"
        cert_post "$DEV/r-own" /op/simpleenroll dev-2 own-2
        expect_est_error 403 "$DEV/r-own" "may enroll only as 'dev-2-op'"
        cert_post "$DEV/r-att" /att/simpleenroll oth-1 oth-1-att
        expect_est_error 403 "$DEV/r-att" "requires TPM attestation"
        cert_post "$DEV/r-revoked" /simpleenroll rev-1 rev-1-op
        expect_est_error 401 "$DEV/r-revoked" "revoked"
        cert_post "$DEV/r-old" /simpleenroll old-1.was old-1-op
        expect_est_error 401 "$DEV/r-old" "replaced by a newer one"
        cert_post "$DEV/r-foreign" /simpleenroll idev dev-2-op
        expect_est_error 401 "$DEV/r-foreign" "does not verify against this CA"
        # Basic wins over the certificate: a wrong one is 401, whatever the certificate.
        cert_post "$DEV/r-basic" /simpleenroll dev-2 dev-2-op --user "${tok%%.*}:wrongsecretwrongsecret00"
        expect_est_error 401 "$DEV/r-basic" "unknown bootstrap token"

        assert_eq "$(store_state "$tok")" "$before" "store after every refusal"
        for n in dev-2-op dev-9-op oth-1-alt oth-1-att rev-1-op old-1-op; do
                assert_eq "$(cert_rows --identity "$n" | wc -l)" 0 "certificates of $n"
        done
        # Then, with the label, oth-1 gets its alt name; dev-2 its op name.
        cert_post "$DEV/oth-1-alt" /alt/simpleenroll oth-1 oth-1-alt
        expect_est_cert "$DEV/oth-1-alt" oth-1-alt
        cert_post "$DEV/dev-2-op" /simpleenroll dev-2 dev-2-op
        expect_est_cert "$DEV/dev-2-op" dev-2-op
}

# Basic with a good token, and a certificate: the token enrolls (its
# profile, its name rules), the certificate is not looked at.
test_basic_wins() {
        local tok
        tok=$(token_new)
        make_csr bas-1
        b64 bas-1
        cert_post "$DEV/bas-1" /simpleenroll dev-1 bas-1 --user "${tok%%.*}:${tok#*.}"
        expect_est_cert "$DEV/bas-1" bas-1
        assert_eq "$(token_used "$tok")" 1 "token uses after Basic with a certificate"
        assert_eq "$(cert_rows --identity bas-1 | awk '{ print $4 }')" default "profile of bas-1"
}

setup
test_enroll
test_refusals
test_basic_wins
hwidd_stop
echo "est-cert-enroll: all checks passed"
