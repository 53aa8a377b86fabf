#!/bin/bash
# ca-errors.sh — every error answer of enrollment and renewal, from curl.
# Each case checks the HTTP status, the JSON {"error": slug, "message":
# reason} body, that no certificate comes back, and that NOTHING changed in
# the store: the rows of `hwid cert list --all`, of `hwid request list
# --all`, and the spent uses of the token involved are the same before and
# after.
#   400 bad_csr (garbage, empty, a P-256 key whose point is off the curve,
#   a PEM request with bytes after it, two of them, one after a certificate),
#   400 bad_csr_signature (one bit of the
#   signature of a DER CSR flipped), 401 bad_token (missing, malformed,
#   unknown id, wrong secret, expired, used up, revoked), 413 too_large
#   (Content-Length and chunked; 64 KiB passes the cap, 64 KiB + 1 does not),
#   409 identity_has_certificate, 401 revoked (renewal with a revoked
#   certificate), 401 unauthenticated (renewal without one), 403 forbidden
#   (name pattern), 503 store_unavailable while another process holds the
#   database's write lock longer than hwidd's busy timeout (its detail, the
#   database's path, in hwidd's log and not in the answer) — and afterwards
#   the same request succeeds, so the 503 left nothing half-done (and while
#   it waited, other connections were served at once); 429
#   rate_limited with Retry-After once a client exceeds limits.rate_per_ip, and
#   a handshake flood refused before TLS while another address is served.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

# refused OUT TOKEN STATUS SLUG REASON-PART CMD... — CMD (a request writing
# OUT) gets the error, and the store is as it was.
refused() {
        local out=$1 tok=$2 status=$3 slug=$4 part=$5 before
        shift 5
        before=$(store_state "$tok")
        "$@"
        expect_error "$status" "$slug" "$out" "$part"
        assert_eq "$(store_state "$tok")" "$before" "store after the $status ($slug: $part)"
}

# flip_last_byte IN OUT — OUT is IN with the low bit of its last byte flipped
# (in a DER CSR: inside the signature value).
flip_last_byte() {
        local size last
        cp "$1" "$2"
        size=$(stat -c %s "$2")
        last=$(tail -c 1 "$2" | od -An -tu1 | tr -d ' ')
        printf '%b' "\\x$(printf %02x $((last ^ 1)))" |
                dd of="$2" bs=1 seek=$((size - 1)) conv=notrunc status=none
}

# flip_point_bit IN OUT — OUT is the DER CSR IN with the low bit of its
# P-256 public key's y coordinate flipped: the point is then off the curve.
flip_point_bit() {
        local at last
        cp "$1" "$2"
        # The SubjectPublicKeyInfo's BIT STRING: 03 42 00, then 04 x(32) y(32).
        at=$(LC_ALL=C grep -obUaP '\x03\x42\x00\x04' "$2" | head -n 1 | cut -d: -f1)
        [ -n "$at" ] || fail "no uncompressed P-256 point in $1"
        at=$((at + 4 + 63))
        last=$(od -An -tu1 -j "$at" -N 1 "$2" | tr -d ' ')
        printf '%b' "\\x$(printf %02x $((last ^ 1)))" | dd of="$2" bs=1 seek="$at" conv=notrunc status=none
}

test_bad_csrs() {
        local tok=$1
        head -c 3000 /dev/urandom >"$DEV/garbage"
        refused "$DEV/garbage" "$tok" 400 bad_csr "PKCS#10" post_csr "$DEV/garbage" "$tok" "$DEV/garbage"
        : >"$DEV/empty"
        refused "$DEV/empty" "$tok" 400 bad_csr "" post_csr "$DEV/empty" "$tok" "$DEV/empty"
        make_csr badsig
        openssl req -in "$DEV/badsig.csr" -outform DER -out "$DEV/badsig.der"
        flip_last_byte "$DEV/badsig.der" "$DEV/badsig.bad"
        # Still a well-formed request, only its signature no longer verifies.
        openssl req -inform DER -in "$DEV/badsig.bad" -noout -subject >/dev/null 2>&1 ||
                fail "the flipped CSR no longer parses"
        # (openssl req -verify exits 0 either way in OpenSSL 3.0: read what it says.)
        assert_contains "$(openssl req -inform DER -in "$DEV/badsig.der" -noout -verify 2>&1)" "verify OK"
        assert_contains "$(openssl req -inform DER -in "$DEV/badsig.bad" -noout -verify 2>&1)" "verify failure" \
                "openssl on the flipped CSR"
        refused "$DEV/badsig" "$tok" 400 bad_csr_signature "signature" \
                post_csr "$DEV/badsig" "$tok" "$DEV/badsig.bad"
        # A key that is no point of its curve is refused before anything
        # else is looked at; OpenSSL, as an independent reader, agrees.
        flip_point_bit "$DEV/badsig.der" "$DEV/offcurve.der"
        openssl req -inform DER -in "$DEV/offcurve.der" -noout -subject >/dev/null 2>&1 ||
                fail "the off-curve CSR no longer parses as a request"
        openssl req -inform DER -in "$DEV/offcurve.der" -noout -pubkey >/dev/null 2>&1 &&
                fail "openssl reads the off-curve key"
        refused "$DEV/offcurve" "$tok" 400 bad_csr "public key" \
                post_csr "$DEV/offcurve" "$tok" "$DEV/offcurve.der"
        # A PEM body is one request and nothing after it (white space
        # aside), as a DER body is one DER object.
        { cat "$DEV/badsig.csr"; echo "garbage after the request"; } >"$DEV/pem-trailing.csr"
        refused "$DEV/pem-trailing" "$tok" 400 bad_csr "nothing after it" \
                post_csr "$DEV/pem-trailing" "$tok" "$DEV/pem-trailing.csr"
        cat "$DEV/badsig.csr" "$DEV/badsig.csr" >"$DEV/pem-twice.csr"
        refused "$DEV/pem-twice" "$tok" 400 bad_csr "nothing after it" \
                post_csr "$DEV/pem-twice" "$tok" "$DEV/pem-twice.csr"
        { openssl x509 -in "$CA_DIR/ca.pem"; cat "$DEV/badsig.csr"; } >"$DEV/cert-then-req.csr"
        refused "$DEV/cert-then-req" "$tok" 400 bad_csr "PKCS#10" \
                post_csr "$DEV/cert-then-req" "$tok" "$DEV/cert-then-req.csr"
        { cat "$DEV/badsig.csr"; printf '\n \n'; } >"$DEV/pem-ws.csr"
        post_csr "$DEV/pem-ws" "$tok" "$DEV/pem-ws.csr"
        expect_status 201 "$DEV/pem-ws"
}

test_bad_tokens() {
        local tok=$1 id=${1%%.*} used revoked
        make_csr tok-1
        refused "$DEV/none" "$tok" 401 bad_token "no bootstrap token" post_csr "$DEV/none" "" "$DEV/tok-1.csr"
        refused "$DEV/basic" "$tok" 401 bad_token "Bearer" \
                http "$DEV/basic" POST /csr -H "Authorization: Basic $tok" --data-binary "@$DEV/tok-1.csr"
        refused "$DEV/malformed" "$tok" 401 bad_token "malformed" post_csr "$DEV/malformed" "x.y" "$DEV/tok-1.csr"
        refused "$DEV/unknown" "$tok" 401 bad_token "unknown bootstrap token" \
                post_csr "$DEV/unknown" "zzzzzz.0123456789abcdef0123" "$DEV/tok-1.csr"
        refused "$DEV/wrong" "$tok" 401 bad_token "unknown bootstrap token" \
                post_csr "$DEV/wrong" "$id.0123456789abcdef0123" "$DEV/tok-1.csr"
        # Expired: made with a TTL of 1s at the start of the test.
        [ $SECONDS -ge $((EXPIRED_AT + 2)) ] || sleep 2
        refused "$DEV/expired" "$EXPIRED" 401 bad_token "expired" post_csr "$DEV/expired" "$EXPIRED" "$DEV/tok-1.csr"
        used=$(token_new --uses 1)
        enroll tok-2 "$used"
        expect_status 201 "$DEV/tok-2"
        refused "$DEV/used" "$used" 401 bad_token "used up" post_csr "$DEV/used" "$used" "$DEV/tok-1.csr"
        revoked=$(token_new --uses 5)
        admin token revoke "${revoked%%.*}" >/dev/null
        refused "$DEV/revoked" "$revoked" 401 bad_token "revoked" post_csr "$DEV/revoked" "$revoked" "$DEV/tok-1.csr"
}

test_too_large() {
        local tok=$1
        head -c 65537 /dev/zero >"$DEV/big"
        refused "$DEV/big" "$tok" 413 too_large "65536" post_csr "$DEV/big" "$tok" "$DEV/big"
        refused "$DEV/big-chunked" "$tok" 413 too_large "65536" \
                post_csr "$DEV/big-chunked" "$tok" "$DEV/big" -H "Transfer-Encoding: chunked"
        head -c 1000000 /dev/zero >"$DEV/huge"
        refused "$DEV/huge" "$tok" 413 too_large "" post_csr "$DEV/huge" "$tok" "$DEV/huge"
        # At the cap the body is read (and refused for what it is).
        head -c 65536 /dev/zero >"$DEV/cap"
        refused "$DEV/cap" "$tok" 400 bad_csr "" post_csr "$DEV/cap" "$tok" "$DEV/cap"
}

test_conflict_and_policy() {
        local tok=$1 pat
        enroll live-1 "$tok"
        expect_status 201 "$DEV/live-1"
        make_csr live-1-again -subj /CN=live-1
        refused "$DEV/live-1-again" "$tok" 409 identity_has_certificate "live-1" \
                post_csr "$DEV/live-1-again" "$tok" "$DEV/live-1-again.csr"
        pat=$(token_new --name-pattern 'edge-*' --uses 3)
        make_csr other-1
        refused "$DEV/other-1" "$pat" 403 forbidden "edge-*" post_csr "$DEV/other-1" "$pat" "$DEV/other-1.csr"
        enroll edge-1 "$pat"
        expect_status 201 "$DEV/edge-1"
}

test_renew_refused() {
        local tok=$1
        make_csr rv-new -subj /CN=live-1
        refused "$DEV/rv-anon" "$tok" 401 unauthenticated "mutual TLS" \
                http "$DEV/rv-anon" POST /v1/renew --data-binary "@$DEV/rv-new.csr"
        admin cert revoke --identity live-1 --reason key-compromise >/dev/null
        refused "$DEV/rv-revoked" "$tok" 401 revoked "revoked" \
                renew "$DEV/rv-revoked" "$DEV/live-1.pem" "$DEV/live-1.key" "$DEV/rv-new.csr"
}

# lock_store — another process (the sqlite3 CLI) takes the write lock of
# hwid.db and holds it until unlock_store.
lock_store() {
        mkfifo "$T/lock.fifo"
        # shellcheck disable=SC2016  # expanded by the inner bash
        start_bg "$T/lock.log" bash -c 'exec sqlite3 "$1" <"$2"' lock "$CA_DIR/hwid.db" "$T/lock.fifo"
        LOCK_PID=$BG_PID
        exec 7>"$T/lock.fifo"
        printf 'PRAGMA busy_timeout=10000;\nBEGIN EXCLUSIVE;\n.shell touch %s\n' "$T/locked" >&7
        for _ in $(seq 100); do
                [ -e "$T/locked" ] && return 0
                sleep 0.1
        done
        fail "sqlite3 did not take the lock: $(cat "$T/lock.log")"
}

unlock_store() {
        printf 'ROLLBACK;\n.quit\n' >&7
        exec 7>&-
        wait "$LOCK_PID" || fail "sqlite3 holding the lock failed: $(cat "$T/lock.log")"
}

# probes_open N — N keep-alive TLS connections (openssl s_client), each
# having had one GET /healthz answered; requests go in on fd 20+i.
probes_open() {
        local i deadline
        for ((i = 1; i <= $1; i++)); do
                mkfifo "$T/probe-$i.in"
                openssl s_client -quiet -connect "127.0.0.1:$PORT" -CAfile "$CA_DIR/ca.pem" \
                        -verify_return_error <"$T/probe-$i.in" >"$T/probe-$i.out" 2>&1 &
                track_pid $!
                track_log "$T/probe-$i.out"
                eval "exec $((20 + i))>\"\$T/probe-\$i.in\""
                printf 'GET /healthz HTTP/1.1\r\nHost: hwid\r\n\r\n' >&$((20 + i))
        done
        deadline=$((SECONDS + 10))
        for ((i = 1; i <= $1; i++)); do
                until grep -q '^HTTP/1.1 200' "$T/probe-$i.out"; do
                        [ $SECONDS -lt $deadline ] || fail "probe $i got no answer to its first request"
                        sleep 0.1
                done
        done
}

# probes_ask N — one more GET /healthz on each probe; writes "K of N
# answered" (answered within 3 s) to $T/probes.result.
probes_ask() {
        local i k=0 deadline=$((SECONDS + 3))
        for ((i = 1; i <= $1; i++)); do
                printf 'GET /healthz HTTP/1.1\r\nHost: hwid\r\n\r\n' >&$((20 + i))
        done
        for ((i = 1; i <= $1; i++)); do
                while [ "$(grep -c '^HTTP/1.1 200' "$T/probe-$i.out")" -lt 2 ] && [ $SECONDS -lt $deadline ]; do
                        sleep 0.1
                done
                [ "$(grep -c '^HTTP/1.1 200' "$T/probe-$i.out")" -lt 2 ] || k=$((k + 1))
        done
        echo "$k of $1 answered" >"$T/probes.result"
}

probes_close() {
        local i
        for ((i = 1; i <= $1; i++)); do
                eval "exec $((20 + i))>&-"
        done
}

test_store_unavailable() {
        local tok before
        tok=$(token_new)
        make_csr locked-1
        before=$(store_state "$tok")
        lock_store
        # While that enrollment waits inside hwidd for the lock, eight
        # keep-alive connections opened before it are still answered at once
        # (with a fixed pool, those on the enrollment's thread waited).
        probes_open 8
        ( sleep 1; probes_ask 8 ) &
        local asker=$!
        post_csr "$DEV/locked-1" "$tok" "$DEV/locked-1.csr"
        wait "$asker"
        unlock_store
        assert_eq "$(cat "$T/probes.result")" "8 of 8 answered" \
                "/healthz on connections opened before the enrollment that waits for the store"
        probes_close 8
        expect_error 503 store_unavailable "$DEV/locked-1" "try again later"
        # The store's detail (its path here) is for hwidd's log, not the client.
        assert_not_contains "$(cat "$DEV/locked-1.body")" "hwid.db" "the store's path in a 503"
        assert_contains "$(cat "$HWIDD_LOG")" "hwid.db" "the store's detail in hwidd's log"
        assert_eq "$(store_state "$tok")" "$before" "store after the 503"
        # Nothing was half-done: the same token and CSR now succeed once.
        post_csr "$DEV/locked-1" "$tok" "$DEV/locked-1.csr"
        expect_status 201 "$DEV/locked-1"
        assert_eq "$(cert_rows --identity locked-1 | wc -l)" 1 "certificates of locked-1"
        assert_eq "$(token_used "$tok")" 1 "uses of the token after the retry"
}

# hwidd again, allowing 2 requests at once per address and then one per 10s.
test_rate_limited() {
        local tok before
        hwidd_stop
        sed 's/^  rate_per_ip: .*$/  rate_per_ip: 0.1/; s/^  rate_burst: .*$/  rate_burst: 2/' "$CA_DIR/hwidd.yaml" >"$CA_DIR/rate.yaml"
        grep -q '^  rate_burst: 2$' "$CA_DIR/rate.yaml" || fail "could not set the rate limit"
        CFG=$CA_DIR/rate.yaml
        hwidd_start
        tok=$(token_new --uses 3)
        enroll rate-1 "$tok"
        expect_status 201 "$DEV/rate-1"
        make_csr rate-2
        before=$(store_state "$tok")
        http "$DEV/rate-health" GET /healthz
        expect_status 200 "$DEV/rate-health"
        post_csr "$DEV/rate-2" "$tok" "$DEV/rate-2.csr"
        expect_error 429 rate_limited "$DEV/rate-2" "too many requests"
        [[ $(header Retry-After "$DEV/rate-2") =~ ^[1-9][0-9]*$ ]] || fail "429 without a Retry-After"
        assert_eq "$(store_state "$tok")" "$before" "store after a 429"
        # A flood of handshakes (each one a signature by the TLS key in the
        # HSM) is cut before TLS: the connection burst is 4, three are spent,
        # and 0.1/s refills nothing worth counting.
        mkdir "$T/flood"
        curl -s --max-time 20 --cacert "$CA_DIR/ca.pem" -H 'Connection: close' -o "$T/flood/#1" \
                -w '%{http_code}\n' "$URL/healthz?n=[1-30]" >"$T/flood.codes" 2>/dev/null || true
        assert_eq "$(wc -l <"$T/flood.codes")" 30 "flood attempts reported"
        [ "$(grep -vc '^000$' "$T/flood.codes")" -le 2 ] ||
                fail "handshakes completed in a flood at 0.1/s: $(sort "$T/flood.codes" | uniq -c | tr '\n' ' ')"
        http "$DEV/other-addr" GET /healthz --interface 127.0.0.2
        expect_status 200 "$DEV/other-addr"
}

ca_setup
hwidd_start
EXPIRED=$(token_new --ttl 1s)
EXPIRED_AT=$SECONDS
TOK=$(token_new --uses 10)
test_bad_csrs "$TOK"
test_bad_tokens "$TOK"
test_too_large "$TOK"
test_conflict_and_policy "$TOK"
test_renew_refused "$TOK"
test_store_unavailable
http "$DEV/nowhere" GET /v1/nowhere
expect_error 404 not_found "$DEV/nowhere"
test_rate_limited
hwidd_stop
echo "ca-errors: all checks passed"
