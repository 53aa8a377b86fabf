#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# ca-defaults.sh — what the configuration of a fresh `hwid ca init` grants,
# and how a renewal asked for too early is answered. The default profile is
# the generated one, untouched (one profile, `short`, is added for the agent).
# Proves:
#   - the subject is the CN alone: a token holder's CSR with
#     O=system:masters (or an OU) is refused, 403 naming the attribute,
#     nothing issued and the token not spent; O/OU come only from a
#     profile's fixed_o/fixed_ou;
#   - every certificate of the default profile names its CN as a DNS name
#     (the profile's `{cn}` template, added unasked), so that
#     `openssl verify -verify_hostname CN` accepts it: a CSR from openssl
#     without any SAN, and a device joined with `hwid join` (key in swtpm);
#     a CN that cannot be a DNS name is refused (403, naming the template);
#   - a renewal before the window opens: 403 `renewal_not_open` with
#     `renewal_opens_at` equal to the `renew_after` of GET
#     /v1/identities/NAME (one rule for both, to the second), and a
#     Retry-After of the seconds until then; nothing issued;
#   - `hwid agent` that renews too early (it could not ask the server when
#     the window opens: hwidd was down while it planned) waits for the
#     renewal_opens_at of the answer: one refused attempt, not a series of
#     backoff retries, then the renewal once the window is open.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"

# short: 1 minute certificates whose renewal opens in the last quarter
# (notBefore is backdated by clock_skew, set to 60 s here: the window opens
# 30 s after issuance).
device_ca <<'EOF'
  short:
    validity: 1m
    key_types: [ec-p256]
    renewal:
      window: 0.25
EOF
hwidd_stop
echo "clock_skew: 1m" >>"$CFG"
hwidd_start
swtpm_init

# ext CERT NAME — the lines of extension NAME (openssl x509 -ext), joined.
ext() {
        openssl x509 -in "$1" -noout -ext "$2" 2>/dev/null | tail -n +2 | tr -s ' \n' ' ' | sed 's/^ //; s/ $//'
}

# verify_host PEM NAME — openssl accepts PEM for host NAME (strict check).
verify_host() {
        local out
        out=$(openssl verify -CAfile "$CA_DIR/ca.pem" -verify_hostname "$2" "$1" 2>&1) ||
                fail "openssl verify -verify_hostname $2 refuses $1: $out"
}

# unix_time openssl-date — seconds since the epoch.
unix_time() {
        date -u -d "$1" +%s
}

test_subject_is_cn_only() {
        local tok before
        tok=$(token_new --uses 3)
        for subj in "/O=system:masters/CN=sneaky-1" "/CN=sneaky-2/OU=ops"; do
                before=$(store_state "$tok")
                make_csr sneaky -subj "$subj"
                post_csr "$DEV/sneaky" "$tok" "$DEV/sneaky.csr"
                expect_error 403 forbidden "$DEV/sneaky" "is not allowed by profile 'default'"
                assert_eq "$(store_state "$tok")" "$before" "store after the refusal of $subj"
        done
        assert_contains "$(json_get "$DEV/sneaky.body" .message)" "OU" "reason of the OU refusal"
        enroll plain-1 "$tok"
        expect_status 201 "$DEV/plain-1"
        assert_eq "$(openssl x509 -in "$DEV/plain-1.pem" -noout -subject -nameopt RFC2253)" "subject=CN=plain-1" \
                "subject under the default profile"
}

test_dns_name_of_the_cn() {
        local tok d=$T/cam-1
        tok=$(token_new --uses 2)
        # openssl asks for no SAN at all: the profile's template is added.
        enroll plain-2 "$tok"
        expect_status 201 "$DEV/plain-2"
        assert_eq "$(ext "$DEV/plain-2.pem" subjectAltName)" "DNS:plain-2" "SANs of an openssl CSR without any"
        verify_host "$DEV/plain-2.pem" plain-2
        # A CN that no DNS name can carry is refused, naming the template.
        make_csr kitchen -subj "/CN=kitchen sensor"
        post_csr "$DEV/kitchen" "$tok" "$DEV/kitchen.csr"
        expect_error 403 forbidden "$DEV/kitchen" "cannot be put into DNS template '{cn}'"
        # hwid join, key in the TPM.
        tok=$(token_new)
        expect_exit 0 "enrolled" --multiline -- join_dev "$d" cam-1 "$tok"
        check_dir "$d" cam-1
        assert_eq "$(ext "$d/cert.pem" subjectAltName)" "DNS:cam-1" "SANs of a joined device"
        verify_host "$d/cert.pem" cam-1
        assert_no_transient
}

test_renewal_too_early() {
        local before renew_after opens ra t0
        enroll early-1 "$(token_new)"
        expect_status 201 "$DEV/early-1"
        http "$DEV/early-id" GET /v1/identities/early-1 --cert "$DEV/early-1.pem" --key "$DEV/early-1.key"
        expect_status 200 "$DEV/early-id"
        renew_after=$(json_get "$DEV/early-id.body" .renew_after)
        [[ $renew_after =~ ^[0-9]+$ ]] || fail "GET /v1/identities says no renew_after: $(cat "$DEV/early-id.body")"
        openssl req -new -key "$DEV/early-1.key" -subj /CN=early-1 -out "$DEV/early-1b.csr"
        before=$(cert_rows)
        t0=$(date +%s)
        renew "$DEV/early-1b" "$DEV/early-1.pem" "$DEV/early-1.key" "$DEV/early-1b.csr"
        expect_error 403 renewal_not_open "$DEV/early-1b" "renewal of 'early-1' opens at"
        assert_eq "$(cert_rows)" "$before" "store after a renewal asked too early"
        opens=$(json_get "$DEV/early-1b.body" .renewal_opens_at)
        assert_eq "$opens" "$renew_after" "renewal_opens_at of the 403 vs renew_after of GET /v1/identities"
        ra=$(header Retry-After "$DEV/early-1b")
        [[ $ra =~ ^[0-9]+$ ]] || fail "no Retry-After in the 403: '$ra'"
        # The seconds from the moment of the answer until the window opens.
        [ "$ra" -ge $((opens - t0 - 5)) ] && [ "$ra" -le $((opens - t0)) ] ||
                fail "Retry-After $ra, but the window opens $((opens - t0)) s after the request"
}

# too_early_denials NAME — renewals of NAME the CA refused as too early.
too_early_denials() {
        store_sql "SELECT count(*) FROM audit WHERE action = 'renew' AND target = '$1' \
                AND outcome = 'deny' AND reason LIKE '%opens at%'"
}

# Time passes on the test's clock (test_clock), the agent's and, from its
# restart here, hwidd's: to the renewal the agent planned, then to the window.
test_agent_waits_for_the_window() {
        local d=$T/cam-2 log=$T/agent.log tok nb na opens want_when serial deadline in
        test_clock
        tok=$(token_new --profile short)
        expect_exit 0 "enrolled" --multiline -- join_dev "$d" cam-2 "$tok"
        serial=$(dir_serial "$d")
        nb=$(unix_time "$(openssl x509 -in "$d/cert.pem" -noout -startdate | cut -d= -f2)")
        na=$(unix_time "$(openssl x509 -in "$d/cert.pem" -noout -enddate | cut -d= -f2)")
        opens=$((na - ((na - nb) * 25 + 50) / 100))      # window 0.25, to the nearest second
        want_when=$(date -u -d "@$opens" +%Y-%m-%dT%H:%M:%SZ)
        # The agent plans while hwidd is down: it goes by the certificate
        # alone (10% of the lifetime), which is before the window opens.
        hwidd_stop
        start_bg "$log" "${CLOCK[@]}" "$HWID" agent --dir "$d" --renew-at 0.1 --jitter 0 --min-backoff 1s --max-backoff 2s
        AGENT_PID=$BG_PID
        deadline=$((SECONDS + 20))
        until grep -q "next renewal at" "$log"; do
                [ $SECONDS -lt $deadline ] || fail "the agent planned nothing: $(cat "$log")"
                sleep 0.1
        done
        assert_contains "$(cat "$log")" "cannot ask" "agent log while hwidd is down"
        hwidd_start
        in=$(sed -n 's/.*next renewal at .* (in \([0-9]*\)s)$/\1/p' "$log")
        [[ $in =~ ^[0-9]+$ ]] || fail "when the agent renews: $(cat "$log")"
        clock_advance "$in"
        clock_wake "$AGENT_PID" "$log" "renewal window opens at"
        clock_past "$opens"
        clock_wake "$AGENT_PID" "$log" "cam-2 renewed"
        kill -TERM "$AGENT_PID"
        wait "$AGENT_PID" || fail "agent exit code after SIGTERM"
        # Told when, it waited for exactly that, instead of retrying blind.
        assert_eq "$(too_early_denials cam-2)" 1 "renewals of cam-2 refused as too early"
        assert_contains "$(cat "$log")" "window opens at $want_when (renewal_opens_at $opens)" \
                "what the agent was told"
        [ "$(dir_serial "$d")" != "$serial" ] || fail "DIR still holds the first certificate"
        # Issued once the window was open (hwidd backdates notBefore by 60 s).
        nb=$(unix_time "$(openssl x509 -in "$d/cert.pem" -noout -startdate | cut -d= -f2)")
        [ $((nb + 60)) -ge "$opens" ] || fail "renewed at $((nb + 60)), before the window opened at $opens"
        check_dir "$d" cam-2
        assert_no_transient
}

test_subject_is_cn_only
test_dns_name_of_the_cn
test_renewal_too_early
test_agent_waits_for_the_window
# (the openssl-made keys in $DEV are software keys of the test, on purpose)
no_private_keys_in "$CA_DIR" "$T/cam-1" "$T/cam-2"
echo "ca-defaults: all checks passed"
