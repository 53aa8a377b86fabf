#!/bin/bash
# ca-concurrency.sh — one live certificate per identity (invariant 6) under
# a race: 32 curls enroll the SAME identity at once (32 different keys, one
# token with 32 uses). Proves:
#   - exactly one gets 201, the other 31 get 409 identity_has_certificate
#     with a reason naming the identity;
#   - the store holds exactly one certificate for the identity, the one the
#     winner received; the token has spent exactly one use;
#   - a second race for the identity while it is live: all 32 get 409 and
#     spend no use;
#   - a token is never spent more than its uses: 32 concurrent enrollments
#     of distinct names with a 5-use token give exactly 5 certificates, the
#     rest 401 bad_token;
#   - one renewal per certificate: 16 concurrent identical renewals with the
#     same client certificate give exactly one 201, the other 15 the same
#     certificate back (200), and the identity has one valid certificate,
#     the new one;
#   - identical retries (the same token, key and name) sent at once get the
#     idempotent answer, never "used up": 16 concurrent POST /csr with a
#     one-use token give one 201 and 15 200s of the same certificate; under
#     manual approval all 16 get 202 for one request; 16 concurrent EST
#     simpleenrolls all get 200 with the same certificate.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

N=32

# race NAME TOKEN TAG — N concurrent enrollments of NAME, each with its own
# key ($DEV/TAG-I.csr); statuses in $DEV/TAG-I.code.
race() {
        local name=$1 tok=$2 tag=$3 i pids=()
        for i in $(seq "$N"); do
                make_csr "$tag-$i" -subj "/CN=$name"
        done
        for i in $(seq "$N"); do
                (post_csr "$DEV/$tag-$i" "$tok" "$DEV/$tag-$i.csr" && echo "$CODE" >"$DEV/$tag-$i.code") &
                pids+=($!)
        done
        for i in "${pids[@]}"; do wait "$i"; done
}

# count TAG STATUS — how many of the race TAG got STATUS.
count() {
        cat "$DEV/$1"-*.code | grep -cx "$2" || true
}

test_one_winner() {
        local tok winner i rows
        tok=$(token_new --uses "$N")
        race node-x "$tok" a
        assert_eq "$(count a 201)/$(count a 409)" "1/$((N - 1))" "201s/409s of $N concurrent enrollments"
        for i in $(seq "$N"); do
                CODE=$(cat "$DEV/a-$i.code")
                if [ "$CODE" = 201 ]; then
                        winner=$i
                else
                        expect_error 409 identity_has_certificate "$DEV/a-$i" node-x
                fi
        done
        verify_leaf "$DEV/a-$winner.body"
        assert_eq "$(openssl x509 -in "$DEV/a-$winner.body" -noout -pubkey)" \
                "$(openssl req -in "$DEV/a-$winner.csr" -noout -pubkey)" "the winner's certificate has its key"
        rows=$(cert_rows --identity node-x)
        assert_eq "$(wc -l <<<"$rows")" 1 "certificates of node-x in the store"
        assert_eq "$(awk '{ print $1 }' <<<"$rows")" "$(serial_of "$DEV/a-$winner.body")" \
                "the stored certificate is the winner's"
        assert_eq "$(token_used "$tok")" 1 "token uses spent by the race"
}

# While node-x is live, a second race for it issues nothing at all.
test_all_lose() {
        local tok
        tok=$(token_new --uses "$N")
        race node-x "$tok" b
        assert_eq "$(count b 409)" "$N" "409s of a race for a live identity"
        assert_eq "$(cert_rows --identity node-x | wc -l)" 1 "certificates of node-x after the second race"
        assert_eq "$(token_used "$tok")" 0 "token uses spent by the second race"
}

test_token_uses() {
        local tok i pids=()
        tok=$(token_new --uses 5)
        for i in $(seq "$N"); do
                make_csr "c-$i"
        done
        for i in $(seq "$N"); do
                (post_csr "$DEV/c-$i" "$tok" "$DEV/c-$i.csr" && echo "$CODE" >"$DEV/c-$i.code") &
                pids+=($!)
        done
        for i in "${pids[@]}"; do wait "$i"; done
        assert_eq "$(count c 201)/$(count c 401)" "5/$((N - 5))" "201s/401s with a 5-use token"
        assert_eq "$(cert_rows | awk '$3 ~ /^c-/' | wc -l)" 5 "certificates issued with the 5-use token"
        assert_eq "$(token_used "$tok")" 5 "uses spent"
}

test_one_renewal() {
        local i pids=() winner rows
        add_profiles <<'EOF'
  short:
    validity: 1h
    renewal:
      window: 1.0
EOF
        hwidd_stop
        hwidd_start
        enroll r-0 "$(token_new --profile short)"
        expect_status 201 "$DEV/r-0"
        for i in $(seq 16); do
                openssl req -new -key "$DEV/r-0.key" -subj /CN=r-0 -out "$DEV/r-$i.csr"
        done
        for i in $(seq 16); do
                (renew "$DEV/r-$i" "$DEV/r-0.pem" "$DEV/r-0.key" "$DEV/r-$i.csr" && echo "$CODE" >"$DEV/r-$i.code") &
                pids+=($!)
        done
        for i in "${pids[@]}"; do wait "$i"; done
        # One renewal wins (201).  The others, identical, get the winner's
        # certificate back (200): those that lost the race to commit as
        # well as those that came after it with the now superseded
        # certificate; never a second one, nor a 409.
        assert_eq "$(count r 201)/$(count r 200)" 1/15 "201s/200s of 16 identical renewals"
        winner=$(grep -lx 201 "$DEV"/r-*.code)
        for i in $(grep -lx 200 "$DEV"/r-*.code); do
                assert_eq "$(serial_of "${i%.code}.body")" "$(serial_of "${winner%.code}.body")" "a replayed renewal"
        done
        rows=$(admin cert list --identity r-0 | tail -n +2)
        assert_eq "$(wc -l <<<"$rows")" 1 "valid certificates of r-0 after the renewal race"
        assert_eq "$(awk '{ print $1 }' <<<"$rows")" "$(serial_of "${winner%.code}.body")" "the valid one is the winner's"
        assert_eq "$(cert_rows --identity r-0 | wc -l)" 2 "certificates of r-0: the original and one renewal"
}

# burst TAG N CMD... — N concurrent runs of CMD (a function that sets CODE
# and writes its answer to OUT.body, OUT=$DEV/TAG-I given as its last
# argument); statuses in $DEV/TAG-I.code.
burst() {
        local tag=$1 n=$2 i pids=()
        shift 2
        for i in $(seq "$n"); do
                ("$@" "$DEV/$tag-$i" && echo "$CODE" >"$DEV/$tag-$i.code") &
                pids+=($!)
        done
        for i in "${pids[@]}"; do wait "$i"; done
}

same_csr() { post_csr "$3" "$2" "$DEV/$1.csr"; }

same_est() {
        http "$3" POST /.well-known/est/simpleenroll --user "${2%%.*}:${2#*.}" \
                -H "Content-Type: application/pkcs10" --data-binary "@$DEV/$1.b64"
}

# the_same_serial TAG CODE... — every answer of TAG with one of CODEs holds
# one and the same certificate (PEM, or EST's base64 PKCS#7); prints it.
the_same_serial() {
        local tag=$1 f serials
        shift
        serials=$(for f in "$DEV/$tag"-*.code; do
                grep -qxE "$(IFS='|'; echo "$*")" "$f" || continue
                if [ "$tag" = e ]; then
                        openssl base64 -d -in "${f%.code}.body" | openssl pkcs7 -inform DER -print_certs |
                                openssl x509 -noout -serial | cut -d= -f2
                else
                        serial_of "${f%.code}.body"
                fi
        done | sort -u)
        assert_eq "$(wc -l <<<"$serials")" 1 "certificates in the answers of $tag: $serials"
        echo "$serials"
}

test_identical_retries() {
        local tok serial
        tok=$(token_new)
        make_csr same
        burst s 16 same_csr same "$tok"
        assert_eq "$(count s 201)/$(count s 200)" 1/15 "201s/200s of 16 identical enrollments at once"
        serial=$(the_same_serial s 201 200)
        assert_eq "$(cert_rows --identity same | awk '{ print $1 }')" "$serial" "the one certificate stored"
        assert_eq "$(token_used "$tok")" 1 "token uses spent by identical enrollments"
        # Held for approval: one request, and every retry is told about it.
        tok=$(token_new --profile manual)
        make_csr held
        burst h 16 same_csr held "$tok"
        assert_eq "$(count h 202)" 16 "202s of 16 identical enrollments held for approval"
        assert_eq "$(for f in "$DEV"/h-*.body; do json_get "$f" .request_id; done | sort -u | wc -l)" 1 \
                "requests named in the 202s"
        assert_eq "$(admin request list --all | awk '$3 == "held"' | wc -l)" 1 "requests stored for held"
        # EST: a client retrying at once gets the certificate too.
        tok=$(token_new)
        make_csr e-same
        openssl req -in "$DEV/e-same.csr" -outform DER | openssl base64 -e >"$DEV/e-same.b64"
        burst e 16 same_est e-same "$tok"
        assert_eq "$(count e 200)" 16 "200s of 16 identical EST simpleenrolls at once"
        serial=$(the_same_serial e 200)
        assert_eq "$(cert_rows --identity e-same | awk '{ print $1 }')" "$serial" "the one EST certificate stored"
}

ca_setup
hwidd_start
test_one_winner
test_all_lose
test_token_uses
test_identical_retries
test_one_renewal
hwidd_stop
echo "ca-concurrency: all checks passed"
