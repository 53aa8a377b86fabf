#!/bin/bash
# ca-approval.sh — the manual approval round trip (profile `manual`, written
# by hwid ca init), driven with curl and the hwid admin commands.
# Proves:
#   - POST /csr answers 202 with a request id, Retry-After (limits.
#     retry_after) and Location: /v1/requests/ID; the request spends a token
#     use and issues nothing; polling says pending the same way;
#   - `hwid request list` shows the request with the device's name and the
#     SHA-256 of its SubjectPublicKeyInfo, equal to what openssl computes
#     from the CSR (and to what the 202 told the device);
#   - after `hwid request approve`, the next poll gets 201 and a certificate
#     for the CSR's key that openssl verifies; later polls (also 8 at once)
#     get the same certificate, and the store holds exactly one;
#   - after `hwid request deny --reason R`, polls get 403 with R and nothing
#     is issued; a decided request cannot be decided again; unknown ids 404.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

# spki_of_csr CSR — openssl's SHA-256 of the CSR's SubjectPublicKeyInfo.
spki_of_csr() {
        openssl req -in "$1" -noout -pubkey | openssl pkey -pubin -outform DER | sha256sum | cut -d' ' -f1
}

# request_row ID [--all] — the row of `hwid request list` for ID.
request_row() {
        local id=$1
        shift
        admin request list "$@" | awk -v id="$id" '$1 == id'
}

# expect_pending OUT NAME CSR — a 202 for NAME; sets REQ_ID.
expect_pending() {
        local out=$1 name=$2 csr=$3
        expect_status 202 "$out"
        assert_eq "$(json_get "$out.body" .status)" pending "status in the 202"
        assert_eq "$(json_get "$out.body" .identity)" "$name" "identity in the 202"
        assert_eq "$(json_get "$out.body" .spki_sha256)" "$(spki_of_csr "$csr")" "spki_sha256 in the 202"
        REQ_ID=$(json_get "$out.body" .request_id)
        [[ $REQ_ID =~ ^[0-9a-f]{32}$ ]] || fail "202 without a request id: $(cat "$out.body")"
        assert_eq "$(header Retry-After "$out")" 7 "Retry-After (limits.retry_after: 7s)"
        assert_eq "$(header Location "$out")" "/v1/requests/$REQ_ID" "Location"
        assert_not_contains "$(cat "$out.body")" "BEGIN CERTIFICATE" "certificate in a 202"
}

# submit NAME TOKEN — a CSR under the manual profile; it must wait.
submit() {
        local name=$1 tok=$2 certs used
        certs=$(cert_rows | wc -l)
        used=$(token_used "$tok")
        enroll "$name" "$tok"
        expect_pending "$DEV/$name" "$name" "$DEV/$name.csr"
        assert_eq "$(cert_rows | wc -l)" "$certs" "certificates after a 202"
        assert_eq "$(token_used "$tok")" $((used + 1)) "a pending request spends a token use"
}

test_approve() {
        local tok=$1 row id pem
        submit man-1 "$tok"
        id=$REQ_ID
        row=$(request_row "$id")
        [ -n "$row" ] || fail "request $id not in hwid request list"
        read -ra f <<<"$row"
        assert_eq "${f[1]} ${f[2]} ${f[3]}" "pending man-1 manual" "request list: status, name, profile"
        assert_eq "${f[-1]}" "$(spki_of_csr "$DEV/man-1.csr")" "request list SPKI-SHA256 vs openssl"
        http "$DEV/poll-0" GET "/v1/requests/$id"
        expect_pending "$DEV/poll-0" man-1 "$DEV/man-1.csr"
        admin request approve "$id" >/dev/null
        [ -z "$(request_row "$id")" ] || fail "an approved request is still listed as waiting"
        http "$DEV/poll-1" GET "/v1/requests/$id"
        expect_status 201 "$DEV/poll-1"
        pem=$DEV/man-1.pem
        cp "$DEV/poll-1.body" "$pem"
        verify_leaf "$pem"
        assert_eq "$(openssl x509 -in "$pem" -noout -subject -nameopt RFC2253)" "subject=CN=man-1" "subject"
        assert_eq "$(openssl x509 -in "$pem" -noout -pubkey)" "$(openssl req -in "$DEV/man-1.csr" -noout -pubkey)" \
                "certificate key vs CSR key"
        read -ra f <<<"$(cert_rows --identity man-1)"
        assert_eq "${f[0]} ${f[1]} ${f[3]}" "$(serial_of "$pem") valid manual" "the store's record of man-1"
        read -ra f <<<"$(request_row "$id" --all)"
        assert_eq "${f[1]}" issued "request status after the poll"
}

# Polls after the first (here 8 at once) get the same certificate.
test_repoll() {
        local id=$1 i pids=()
        for i in $(seq 8); do
                (http "$DEV/repoll-$i" GET "/v1/requests/$id" && echo "$CODE" >"$DEV/repoll-$i.code") &
                pids+=($!)
        done
        for i in "${pids[@]}"; do wait "$i"; done
        for i in $(seq 8); do
                [[ $(cat "$DEV/repoll-$i.code") =~ ^20[01]$ ]] ||
                        fail "poll $i of an issued request: HTTP $(cat "$DEV/repoll-$i.code")"
                cmp -s "$DEV/repoll-$i.body" "$DEV/man-1.pem" || fail "poll $i got another certificate"
        done
        assert_eq "$(cert_rows --identity man-1 | wc -l)" 1 "certificates of man-1 after 9 polls"
}

test_deny() {
        local tok=$1 id before i
        submit man-2 "$tok"
        id=$REQ_ID
        before=$(store_state "$tok")
        admin request deny --reason "serial not on the delivery note" "$id" >/dev/null
        for i in 1 2; do
                http "$DEV/deny-$i" GET "/v1/requests/$id"
                expect_error 403 forbidden "$DEV/deny-$i" "serial not on the delivery note"
        done
        assert_eq "$(store_state "$tok")" "$before" "store after a denial"
        read -ra f <<<"$(request_row "$id" --all)"
        assert_eq "${f[1]}" denied "request status after deny"
        expect_exit 1 "" -- "$HWID" request approve --config "$CFG" "$id"
        read -ra f <<<"$(request_row "$id" --all)"
        assert_eq "${f[1]}" denied "a denied request cannot be approved"
        http "$DEV/deny-3" GET "/v1/requests/$id"
        expect_error 403 forbidden "$DEV/deny-3"
}

test_unknown_requests() {
        http "$DEV/unknown" GET /v1/requests/0123456789abcdef0123456789abcdef
        expect_error 404 not_found "$DEV/unknown"
        http "$DEV/bad-id" GET "/v1/requests/..%2f..%2fetc"
        expect_error 404 not_found "$DEV/bad-id"
        expect_exit 1 "" -- "$HWID" request approve --config "$CFG" 0123456789abcdef0123456789abcdef
}

ca_setup
sed 's/^  retry_after: 5s$/  retry_after: 7s/' "$CA_DIR/hwidd.yaml" >"$CA_DIR/hwidd-test.yaml"
CFG=$CA_DIR/hwidd-test.yaml
grep -q 'retry_after: 7s' "$CFG" || fail "could not set retry_after in the test config"
hwidd_start
TOK=$(token_new --profile manual --uses 5)
test_approve "$TOK"
test_repoll "$REQ_ID"
test_deny "$TOK"
test_unknown_requests
hwidd_stop
echo "ca-approval: all checks passed"
