#!/bin/bash
# ocsp.sh — hwidd's OCSP responder (RFC 6960, RFC 5019) as the stock
# `openssl ocsp` client and curl see it, on both listeners, the CA key in
# SoftHSM2; every answer verified against ca.pem ("Response verify OK").
# Proves:
#   - `hwid ca init` writes ca.ocsp_url (the plain-HTTP listener, /ocsp;
#     commented out with --http-listen none), and every issued leaf and
#     hwidd's TLS certificate name it (authorityInfoAccess, openssl x509
#     -ocsp_uri);
#   - `good`, then `revoked` with its reason and time right after `hwid
#     cert revoke` (no reload; the cached `good` is not served again),
#     `unknown` for a serial never issued, `unauthorized` (unsigned) for a
#     certID of another issuer; the nonce openssl sends is echoed;
#   - without a nonce the second answer comes from the cache, byte for
#     byte (hwid_ocsp_cache_hits_total grows, hwid_ocsp_signatures_total
#     does not); past half its validity it is signed again;
#   - GET /ocsp/<base64>, URL-encoded or not, answers as POST does;
#   - hostile requests are refused with 400 and the unsigned
#     malformedRequest: truncated DER, two certIDs (openssl's own), 1,000
#     certIDs, an MD5 certID, a GET path too long for a request, a path
#     that is not base64, an empty body; a body over limits.max_body is
#     the transport's 413; other methods 405;
#   - a flood of random serials from one address costs at most that
#     address's signing budget (burst + rate x time): the rest is the
#     unsigned tryLater; right after it, a nonce from that address is
#     answered from the cache without the nonce, a serial not cached gets
#     tryLater, and another address still gets a signed `good` with its
#     nonce; the cache holds 16 answers, and the flood's `unknown`s push
#     none of them out: a poll of dev-3 without a nonce from a third
#     address is still a cache hit.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=policy-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/policy-lib.sh"
# shellcheck source=ops-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ops-lib.sh"
# shellcheck source=ocsp-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ocsp-lib.sh"

require_tools /usr/bin/python3

BURST=40    # limits.ocsp_sign_burst_per_ip
RATE=1      # limits.ocsp_sign_rate_per_ip

ocsp_uri_of() {
        openssl x509 -in "$1" -noout -ocsp_uri
}

test_aia() {
        local d=$T/none
        assert_eq "$(sed -n 's/^  ocsp_url: "\(.*\)"$/\1/p' "$CA_DIR/hwidd.yaml")" "http://localhost:$HTTP_PORT/ocsp" \
                "ocsp_url written by ca init"
        assert_eq "$(ocsp_uri_of "$DEV/dev-1.pem")" "http://localhost:$HTTP_PORT/ocsp" "OCSP URI of an issued leaf"
        assert_eq "$(ocsp_uri_of "$CA_DIR/tls.pem")" "http://localhost:$HTTP_PORT/ocsp" "OCSP URI of hwidd's TLS certificate"
        run_ok "$HWID" ca init --key "$(ca_key_uri)" --subject /CN=other --dir "$d" --http-listen none >/dev/null
        grep -q '^  # ocsp_url:' "$d/hwidd.yaml" || fail "--http-listen none still writes an ocsp_url"
        assert_eq "$(ocsp_uri_of "$d/tls.pem")" "" "OCSP URI with --http-listen none"
}

test_good() {
        local url
        for url in "$PLAIN" "$URL/ocsp"; do
                ocsp_ask "$DEV/good" "$url" "$DEV/dev-1.pem"
                assert_eq "$(ocsp_status "$DEV/good")" good "dev-1 over $url"
        done
}

test_cache() {
        scrape "$DEV/m0"
        ocsp_ask "$DEV/c1" "$PLAIN" "$DEV/dev-2.pem" -no_nonce
        assert_eq "$(ocsp_status "$DEV/c1")" good "dev-2 without a nonce"
        ocsp_ask "$DEV/c2" "$PLAIN" "$DEV/dev-2.pem" -no_nonce
        assert_eq "$(ocsp_status "$DEV/c2")" good "dev-2 again"
        cmp -s "$DEV/c1.der" "$DEV/c2.der" || fail "the second answer without a nonce is not the first"
        scrape "$DEV/m1"
        assert_eq "$(metric_delta "$DEV/m0" "$DEV/m1" hwid_ocsp_signatures_total)" 1 "signatures of two asks"
        assert_eq "$(metric_delta "$DEV/m0" "$DEV/m1" hwid_ocsp_cache_hits_total)" 1 "cache hits of two asks"
        assert_eq "$(metric_delta "$DEV/m0" "$DEV/m1" 'hwid_ocsp_requests_total{status="good"}')" 2 "good answers"
        # Past half of its validity (ocsp_validity 2m), it is signed again.
        clock_advance 61
        ocsp_ask "$DEV/c3" "$PLAIN" "$DEV/dev-2.pem" -no_nonce
        assert_eq "$(ocsp_status "$DEV/c3")" good "dev-2 a minute later"
        scrape "$DEV/m2"
        assert_eq "$(metric_delta "$DEV/m1" "$DEV/m2" hwid_ocsp_signatures_total)" 1 "signatures after a minute"
        [ "$(grep 'This Update' "$DEV/c3.out")" != "$(grep 'This Update' "$DEV/c2.out")" ] ||
                fail "the answer a minute later has the old thisUpdate"
}

test_revoked() {
        local serial
        serial=$(serial_of "$DEV/dev-2.pem")
        admin cert revoke --reason key-compromise "$serial" >/dev/null
        ocsp_ask "$DEV/r1" "$PLAIN" "$DEV/dev-2.pem" -no_nonce
        assert_eq "$(ocsp_status "$DEV/r1")" revoked "dev-2 right after hwid cert revoke"
        assert_contains "$(cat "$DEV/r1.out")" "Reason: keyCompromise" "the revocation's reason"
        assert_contains "$(cat "$DEV/r1.out")" "Revocation Time:" "the revocation's time"
        ocsp_ask "$DEV/r2" "$URL/ocsp" "$DEV/dev-2.pem"
        assert_eq "$(ocsp_status "$DEV/r2")" revoked "dev-2 with a nonce, over TLS"
}

test_unknown_unauthorized() {
        ocsp_ask "$DEV/u" "$PLAIN" 0x0123456789ABCDEF
        assert_eq "$(ocsp_status "$DEV/u")" unknown "a serial never issued"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$DEV/other.key" \
                -subj /CN=other -days 2 -out "$DEV/other.pem" 2>/dev/null || fail "openssl req -x509"
        ISSUER=$DEV/other.pem ocsp_ask "$DEV/o" "$PLAIN" "0x$(serial_of "$DEV/dev-1.pem")"
        [ "$OCSP_RC" != 0 ] || fail "openssl ocsp took an answer about another issuer: $(cat "$DEV/o.out")"
        assert_contains "$(cat "$DEV/o.out")" "Responder Error: unauthorized (6)" "another issuer's certID"
}

# check_body OUT CERT — the answer in OUT.body (to a request without a
# nonce) verifies against ca.pem and says CERT is good.
check_body() {
        expect_status 200 "$1"
        assert_contains "$(header Content-Type "$1")" "application/ocsp-response" "Content-Type of an OCSP answer"
        "${CLOCK[@]}" openssl ocsp -respin "$1.body" -issuer "$CA_DIR/ca.pem" -cert "$2" -CAfile "$CA_DIR/ca.pem" \
                -no_nonce >"$1.out" 2>"$1.err" || fail "openssl ocsp -respin: $(cat "$1.out" "$1.err")"
        OCSP_RC=0
        assert_eq "$(ocsp_status "$1")" good "the answer in $1.body"
}

test_get() {
        local b64 url
        ocsp_request "$DEV/g.req" "$DEV/dev-3.pem" -no_nonce
        for url in "$PLAIN" "$URL/ocsp"; do
                ocsp_get "$DEV/g" "$url" "$DEV/g.req"
                check_body "$DEV/g" "$DEV/dev-3.pem"
        done
        # Not URL-encoded, as many clients send it ('/' and '+' as they are).
        b64=$(base64 -w0 "$DEV/g.req")
        CODE=$(curl -sS --max-time 30 -o "$DEV/g2.body" -D "$DEV/g2.hdr" -w '%{http_code}' "$PLAIN/$b64" \
                2>"$DEV/g2.err") || true
        check_body "$DEV/g2" "$DEV/dev-3.pem"
        ocsp_post "$DEV/p" "$PLAIN" "$DEV/g.req"
        check_body "$DEV/p" "$DEV/dev-3.pem"
}

test_hostile() {
        local n=0 long
        scrape "$DEV/h0"
        ocsp_request "$DEV/one.req" "$DEV/dev-1.pem" -no_nonce
        head -c 30 "$DEV/one.req" >"$DEV/trunc.req"
        ocsp_request "$DEV/two.req" "$DEV/dev-1.pem" -cert "$DEV/dev-3.pem"
        # 1,000 certIDs of a 1-byte serial: 62 KB, under limits.max_body.
        ocsp_request "$DEV/small.req" 0x01 -no_nonce
        /usr/bin/python3 "$OCSP_PEER" many "$DEV/small.req" 1000 "$DEV/many.req"
        openssl ocsp -md5 -issuer "$CA_DIR/ca.pem" -cert "$DEV/dev-1.pem" -reqout "$DEV/md5.req" -no_nonce \
                >/dev/null 2>&1 || fail "openssl ocsp -md5"
        : >"$DEV/empty.req"
        for f in trunc two many md5 empty; do
                ocsp_post "$DEV/h-$f" "$PLAIN" "$DEV/$f.req"
                ocsp_malformed "$DEV/h-$f" 400
                n=$((n + 1))
        done
        long=$(head -c 6000 /dev/zero | tr '\0' A)
        for p in "$long" '!!!not-base64' ''; do
                CODE=$(curl -sS -o "$DEV/h-get.body" -D "$DEV/h-get.hdr" -w '%{http_code}' "$PLAIN/$p" 2>/dev/null) || true
                ocsp_malformed "$DEV/h-get" 400
                n=$((n + 1))
        done
        head -c 70000 /dev/zero >"$DEV/huge.req"
        ocsp_post "$DEV/h-huge" "$PLAIN" "$DEV/huge.req"
        expect_status 413 "$DEV/h-huge"
        CODE=$(curl -sS -X PUT -o "$DEV/h-put.body" -w '%{http_code}' "$PLAIN" 2>/dev/null) || true
        expect_status 405 "$DEV/h-put"
        scrape "$DEV/h1"
        assert_eq "$(metric_delta "$DEV/h0" "$DEV/h1" 'hwid_ocsp_requests_total{status="malformed"}')" "$n" \
                "malformed requests counted"
        assert_eq "$(metric_delta "$DEV/h0" "$DEV/h1" hwid_ocsp_signatures_total)" 0 "signatures for hostile requests"
}

# echoed OUT REQ — whether the answer OUT echoes REQ's nonce (openssl puts
# the nonce's 16 bytes last in a request it does not sign).
echoed() {
        grep -qF "$(tail -c 16 "$2" | od -An -tx1 | tr -d ' \n')" <(od -An -tx1 -v "$1" | tr -d ' \n')
}

# over_budget — what the flooding address gets the moment its budget is
# spent (ocsp-peer.py sends these right after the flood): a nonce answered
# from the cache without it, a serial not cached tryLater. A token of its
# bucket may come back (1 a second) just before the first of each pair: a
# signature then takes it, and the second, milliseconds later, has none.
over_budget() {
        local n
        for n in 1 2; do
                echoed "$DEV/f-nonce$n.der.answer" "$DEV/f-nonce$n.der" && continue
                "${CLOCK[@]}" openssl ocsp -respin "$DEV/f-nonce$n.der.answer" -reqin "$DEV/f-nonce$n.der" \
                        -CAfile "$CA_DIR/ca.pem" -resp_text >"$DEV/f-nonce.out" 2>"$DEV/f-nonce.err" ||
                        fail "openssl ocsp on the answer without the nonce: $(cat "$DEV/f-nonce.err")"
                assert_contains "$(cat "$DEV/f-nonce.err")" "WARNING: no nonce in response" "a nonce over the budget"
                assert_contains "$(cat "$DEV/f-nonce.err")" "Response verify OK" "the cached answer's verification"
                assert_contains "$(cat "$DEV/f-nonce.out")" "Cert Status: good" "the cached answer"
                break
        done
        [ "$n" != 2 ] || ! echoed "$DEV/f-nonce2.der.answer" "$DEV/f-nonce2.der" ||
                fail "both nonces over the budget were signed"
        cmp -s "$DEV/f-new1.der.answer" <(printf '\x30\x03\x0a\x01\x03') ||
                cmp -s "$DEV/f-new2.der.answer" <(printf '\x30\x03\x0a\x01\x03') ||
                fail "a serial not cached, over the budget, was not answered tryLater"
}

test_flood() {
        local t0 t1 out signed bound
        ocsp_request "$DEV/tmpl.req" 0x7E7E7E7E7E7E7E7E7E7E7E7E7E7E7E7E -no_nonce
        ocsp_request "$DEV/f-nonce1.der" "$DEV/dev-3.pem"
        ocsp_request "$DEV/f-nonce2.der" "$DEV/dev-3.pem"
        ocsp_request "$DEV/f-new1.der" 0x0A0B0C0D -no_nonce
        ocsp_request "$DEV/f-new2.der" 0x0A0B0C0E -no_nonce
        scrape "$DEV/f0"
        t0=$(date +%s.%N)
        out=$(/usr/bin/python3 "$OCSP_PEER" flood "$DEV/tmpl.req" "$PLAIN" 127.0.0.1 300 "$DEV/f-nonce1.der" \
                "$DEV/f-nonce2.der" "$DEV/f-new1.der" "$DEV/f-new2.der") || fail "ocsp-peer.py flood"
        t1=$(date +%s.%N)
        scrape "$DEV/f1"
        signed=$(metric_delta "$DEV/f0" "$DEV/f1" hwid_ocsp_signatures_total)
        bound=$(awk -v a="$t0" -v b="$t1" -v burst=$BURST -v rate=$RATE 'BEGIN { printf "%d\n", burst + (b - a) * rate + 1 }')
        echo "flood of 300 random serials: $out; $signed signatures in all (bound $bound)"
        [ "$signed" -le "$bound" ] || fail "a flood from one address cost $signed signatures, over its budget $bound"
        [ "$signed" -ge 2 ] || fail "the flood got no signed answer at all: its budget was never spent"
        assert_eq "$(other_of "$out")" 0 "answers to the flood that were neither signed nor tryLater"
        [ "$(trylater_of "$out")" -ge $((300 - signed)) ] || fail "the flood's unsigned answers: $out"
        over_budget
        # Another address: its own budget, a signed answer with its nonce.
        ocsp_request "$DEV/f-other.req" "$DEV/dev-1.pem"
        ocsp_post "$DEV/f-other" "$PLAIN" "$DEV/f-other.req" --interface 127.0.0.2
        expect_status 200 "$DEV/f-other"
        assert_eq "$(ocsp_nonce_status "$DEV/f-other" "$DEV/f-other.req")" good "another address after the flood"
        scrape "$DEV/f2"
        assert_eq "$(metric_delta "$DEV/f1" "$DEV/f2" hwid_ocsp_signatures_total)" 1 "signatures after the flood"
        # A relying party polling dev-3 (kept since test_get) still gets the kept answer.
        ocsp_request "$DEV/f-poll.req" "$DEV/dev-3.pem" -no_nonce
        ocsp_post "$DEV/f-poll" "$PLAIN" "$DEV/f-poll.req" --interface 127.0.0.3
        check_body "$DEV/f-poll" "$DEV/dev-3.pem"
        scrape "$DEV/f3"
        assert_eq "$(metric_delta "$DEV/f2" "$DEV/f3" hwid_ocsp_signatures_total)" 0 "signatures of a poll after the flood"
        assert_eq "$(metric_delta "$DEV/f2" "$DEV/f3" hwid_ocsp_cache_hits_total)" 1 "cache hits of a poll after the flood"
}

other_of() { sed -n 's/.* other \([0-9]*\)$/\1/p' <<<"$1"; }
trylater_of() { sed -n 's/.* trylater \([0-9]*\) .*/\1/p' <<<"$1"; }

test_clock
ca_setup
public_metrics
sed -i 's/^  crl_validity: .*/&\n  ocsp_validity: 2m/' "$CFG"
ocsp_config "ocsp_sign_rate_per_ip: $RATE" "ocsp_sign_burst_per_ip: $BURST" "ocsp_cache_entries: 16"
PLAIN=http://127.0.0.1:$HTTP_PORT/ocsp
hwidd_start
wait_for_port "$HTTP_PORT" 10 "$HWIDD_PID"
assert_contains "$(cat "$HWIDD_LOG")" "and OCSP at /ocsp" "hwidd's log"
for d in dev-1 dev-2 dev-3; do enrolled "$d" "$(token_new)"; done
test_aia
test_good
test_cache
test_revoked
test_unknown_unauthorized
test_get
test_hostile
test_flood
hwidd_stop
echo "ocsp: all checks passed"
