#!/bin/bash
# The HTTPS transport of hwidd (service/http*.c) against independent peers:
# curl and openssl s_client talk to tests/http-test-server, whose TLS key
# lives in a SoftHSM2 token (every handshake signature is made there).
#
# Proves: TLS 1.3 and 1.2 with EC P-256, P-384 and RSA-2048 server keys
# (RSA-PSS, and PKCS#1 v1.5 under 1.2); the request as delivered (method,
# path, query, body, Authorization); body and header caps; JSON errors and
# response headers; mutual TLS (none, valid, other CA, expired); per-address
# rate limiting; connection limits; graceful stop; start-up errors.
# (Slow and abusive clients: http-abuse.sh.)
#
# Needs: $HTTP_TEST_SERVER (default $BUILDDIR/tests/http-test-server),
# softhsm2-util, openssl, curl, jq, ss.
source "$(dirname "$0")/../lib.sh"

# shellcheck source=http-lib.sh
source "$(dirname "$0")/http-lib.sh"

mkpki
server_cert ec ec-p256
server_cert p384 ec-p384
server_cert rsa rsa-2048
client_cert good client-ca
client_cert other other-ca
client_cert expired client-ca expired

# --- EC P-256: TLS versions, the request, caps, errors, mutual TLS ---------------

start_server ec ec --client-ca "$P/client-ca.pem" --max-body 1024 --max-header 2048

out=$(hcurl --tlsv1.3 "$(URL '/echo/x?a=1&b=%20c')" -H 'Authorization: Bearer abcdef.0123456789abcdef' \
        -H 'Content-Type: application/pkcs10' --data-binary 'hello body')
assert_eq "$(json_get "$out" .method)" POST "method"
assert_eq "$(json_get "$out" .path)" /echo/x "path"
assert_eq "$(json_get "$out" .query)" 'a=1&b=%20c' "raw query"
assert_eq "$(json_get "$out" .content_type)" application/pkcs10 "content type"
assert_eq "$(json_get "$out" .authorization)" 'Bearer abcdef.0123456789abcdef' "authorization"
assert_eq "$(json_get "$out" .body)" 'hello body' "body"
assert_eq "$(json_get "$out" .body_len)" 10 "body length"
assert_eq "$(json_get "$out" .peer_addr)" 127.0.0.1 "peer address"
assert_eq "$(json_get "$out" .peer_cert)" null "no client certificate"
assert_eq "$(json_get "$out" .peer_verified)" false "not verified without a certificate"

out=$(hcurl --tlsv1.2 --tls-max 1.2 -v "$(URL /v12)" 2>&1)
assert_contains "$out" "SSL connection using TLSv1.2 / ECDHE-ECDSA" "curl TLS 1.2"
assert_contains "$out" '"path":"\/v12"' "TLS 1.2 request delivered"
out=$(hcurl --tlsv1.3 -v "$(URL /v13)" 2>&1)
assert_contains "$out" "SSL connection using TLSv1.3" "curl TLS 1.3"

for v in -tls1_3 -tls1_2; do
        out=$(sclient $v)
        assert_contains "$out" "Verify return code: 0 (ok)" "s_client $v verifies the chain"
        assert_contains "$out" "Peer signature type: ECDSA" "s_client $v: ECDSA handshake signature"
        assert_contains "$out" "HTTP/1.1 200 OK" "s_client $v request"
done
# TLS below 1.2 is off.
assert_not_contains "$(sclient -tls1_1)" "HTTP/1.1 200" "TLS 1.1 refused"

# Body cap: 413 JSON, by Content-Length and by chunked length, handler untouched.
head -c 1025 /dev/zero | tr '\0' a >"$T/body1025"
head -c 1024 /dev/zero | tr '\0' a >"$T/body1024"
before=$(calls)
out=$(hcurl -w '\n%{http_code}' "$(URL /b)" --data-binary @"$T/body1025")
assert_eq "$(tail -n1 <<<"$out")" 413 "Content-Length over max_body"
assert_eq "$(head -n1 <<<"$out" | json_get - .error)" too_large "413 slug"
out=$(hcurl -w '\n%{http_code}' "$(URL /b)" -H 'Transfer-Encoding: chunked' --data-binary @"$T/body1025")
assert_eq "$(tail -n1 <<<"$out")" 413 "chunked body over max_body"
assert_eq "$(head -n1 <<<"$out" | json_get - .error)" too_large "chunked 413 slug"
# A large declared length is refused before the body is read: curl waits for
# "100 Continue", gets the 413 instead and uploads nothing.
head -c 3000000 /dev/zero >"$T/body3M"
out=$(hcurl -w '%{http_code} %{size_upload}' -o /dev/null -H 'Expect: 100-continue' \
        --expect100-timeout 10 "$(URL /b)" --data-binary @"$T/body3M")
assert_eq "$out" "413 0" "Content-Length refused before reading the body"
assert_eq "$(calls)" $((before + 1)) "the handler never saw the oversize bodies"
assert_eq "$(hcurl "$(URL /b)" -H 'Transfer-Encoding: chunked' --data-binary @"$T/body1024" | json_get - .body_len)" \
        1024 "a chunked body of exactly max_body"

# Header cap: JSON 431 above max_header, and beyond MHD's memory pool too
# (http-abuse.sh has more).
big=$(head -c 3000 /dev/zero | tr '\0' h)
out=$(hcurl -w '\n%{http_code}' "$(URL /h)" -H "X-Big: $big")
assert_eq "$(tail -n1 <<<"$out")" 431 "header over max_header"
assert_eq "$(head -n1 <<<"$out" | json_get - .error)" headers_too_large "431 slug"
huge=$(head -c 40000 /dev/zero | tr '\0' h)
out=$(hcurl -w '\n%{http_code}' "$(URL /h)" -H "X-Huge: $huge")
assert_eq "$(tail -n1 <<<"$out")" 431 "a 40 KB header"
assert_eq "$(head -n1 <<<"$out" | json_get - .error)" headers_too_large "40 KB header: 431 slug"
assert_eq "$(status "$(URL /after)")" 200 "server alive after oversize headers"

# Response side: JSON errors (escaped by json-c), Retry-After, Location, Cache-Control.
out=$(hcurl -i "$(URL /error)")
assert_contains "$out" "HTTP/1.1 403" "error status from hwid_err"
assert_contains "$out" "Content-Type: application/json" "error content type"
assert_eq "$(sed -n '/^{/p' <<<"$out" | json_get - .error)" forbidden "error slug"
assert_eq "$(sed -n '/^{/p' <<<"$out" | json_get - .message)" "$(printf 'denied: "quoted" \\ </script>\n\001')" \
        "error message survives JSON escaping"
out=$(hcurl -i "$(URL /pending)")
assert_contains "$out" "HTTP/1.1 202" "pending status"
assert_contains "$out" "Retry-After: 7" "Retry-After"
assert_contains "$out" "Location: /v1/requests/abc123" "Location"
assert_contains "$out" "Cache-Control: no-store" "no-store by default"
assert_not_contains "$(hcurl -i "$(URL /ca)")" "no-store" "cacheable responses"

# Mutual TLS, requested but not required.
for v in "--tlsv1.3" "--tlsv1.2 --tls-max 1.2"; do
        out=$(hcurl $v "$(URL /m)" --cert "$P/good.pem" --key "$P/good.key")
        assert_eq "$(json_get "$out" .peer_verified)" true "valid client certificate ($v)"
        assert_eq "$(json_get "$out" .peer_expired)" false "valid is not expired ($v)"
        assert_eq "$(json_get "$out" .peer_cert)" \
                "$(openssl x509 -in "$P/good.pem" -outform DER | sha256sum | cut -d' ' -f1)" "leaf DER ($v)"
        out=$(hcurl $v "$(URL /m)" --cert "$P/expired.pem" --key "$P/expired.key")
        assert_eq "$(json_get "$out" .peer_verified)" false "expired is not verified ($v)"
        assert_eq "$(json_get "$out" .peer_expired)" true "expired client certificate ($v)"
done
out=$(hcurl "$(URL /m)" --cert "$P/other.pem" --key "$P/other.key")
assert_eq "$(json_get "$out" .peer_subject)" /CN=dev-other "other CA: certificate delivered"
assert_eq "$(json_get "$out" .peer_verified)" false "other CA: not verified"
assert_eq "$(json_get "$out" .peer_expired)" false "other CA: not merely expired"
out=$(sclient -cert "$P/good.pem" -key "$P/good.key" -tls1_3)
assert_contains "$out" '"peer_verified":true' "s_client with a client certificate"

# Session resumption for returning clients (a ticket: no full handshake,
# no signature with the TLS key), with and without a client certificate;
# a resumed session still carries the client certificate, checked again.
for v in -tls1_3 -tls1_2; do
        rm -f "$T/sess"
        out=$(sclient $v -sess_out "$T/sess" -cert "$P/good.pem" -key "$P/good.key")
        assert_contains "$out" "New, TLS" "s_client $v: first connection, full handshake"
        [ -s "$T/sess" ] || fail "s_client $v: no session ticket from the server"
        out=$(sclient $v -sess_in "$T/sess")
        assert_contains "$out" "Reused, TLS" "s_client $v: the session resumed"
        assert_not_contains "$out" "Peer signature type" "s_client $v: no signature with the TLS key when resumed"
        assert_contains "$out" '"peer_verified":true' "s_client $v: resumed session keeps the verified client certificate"
        assert_contains "$out" "$(openssl x509 -in "$P/good.pem" -outform DER | sha256sum | cut -d' ' -f1)" \
                "s_client $v: resumed session delivers the same client certificate"
done
out=$(sclient -tls1_3 -sess_out "$T/sess")
stop_server
# After a restart the ticket key is new: an old ticket gets a full handshake.
start_server ec-again ec
out=$(sclient -tls1_3 -sess_in "$T/sess")
assert_contains "$out" "New, TLS" "a ticket from before a restart is not resumed"
assert_contains "$out" "HTTP/1.1 200 OK" "the full handshake after a refused ticket serves the request"
stop_server

# --- RSA-2048 and P-384 server keys ---------------------------------------------

start_server rsa rsa
assert_contains "$(sclient -tls1_3)" "Peer signature type: RSA-PSS" "RSA key, TLS 1.3: PSS"
assert_contains "$(sclient -tls1_2 -sigalgs rsa_pss_rsae_sha384)" "Peer signature type: RSA-PSS" "RSA, 1.2 PSS"
for s in RSA+SHA256 RSA+SHA512; do
        out=$(sclient -tls1_2 -sigalgs $s)
        assert_contains "$out" "Peer signature type: RSA" "RSA key, TLS 1.2, PKCS#1 v1.5 $s"
        assert_contains "$out" "HTTP/1.1 200 OK" "RSA PKCS#1 v1.5 $s request"
done
assert_eq "$(status --tlsv1.3 "$(URL /r)")" 200 "curl TLS 1.3, RSA key"
assert_eq "$(status --tlsv1.2 --tls-max 1.2 "$(URL /r)")" 200 "curl TLS 1.2, RSA key"
stop_server

start_server p384 p384
assert_contains "$(sclient -tls1_3)" "Peer signature type: ECDSA" "P-384 key, TLS 1.3"
assert_contains "$(sclient -tls1_2 -sigalgs ECDSA+SHA384)" "HTTP/1.1 200 OK" "P-384 key, TLS 1.2"
assert_not_contains "$(sclient -tls1_3 -sigalgs ecdsa_secp256r1_sha256)" "HTTP/1.1 200" \
        "P-384 key never signs as secp256r1"
stop_server

# --- rate limiting --------------------------------------------------------------

start_server rate ec --rate 1 --burst 2
before=$(hcurl "$(URL /count)" | json_get - .calls)   # 1 token left
assert_eq "$(status "$(URL /r)")" 200 "within the burst"
out=$(hcurl -i "$(URL /r)")
assert_contains "$out" "HTTP/1.1 429" "over the rate"
assert_contains "$out" "Retry-After: 1" "429 says when to retry"
assert_eq "$(sed -n '/^{/p' <<<"$out" | json_get - .error)" rate_limited "429 slug"
assert_eq "$(status --interface 127.0.0.2 "$(URL /r)")" 200 "another address has its own bucket"
sleep 1.2
assert_eq "$(hcurl "$(URL /count)" | json_get - .calls)" $((before + 3)) "refused requests never reached the handler"
stop_server

# --- connection limits ------------------------------------------------------------

start_server conn ec --max-conn 2 --timeout 5
exec 3<>"/dev/tcp/127.0.0.1/$PORT" 4<>"/dev/tcp/127.0.0.1/$PORT"
sleep 0.3
assert_eq "$(status --max-time 3 "$(URL /c)")" 000 "a third connection is not served"
exec 3>&- 4>&-
sleep 0.3
assert_eq "$(status "$(URL /c)")" 200 "served once the others are gone"
stop_server

start_server perip ec --max-conn 8 --per-ip 1
exec 3<>"/dev/tcp/127.0.0.1/$PORT"
sleep 0.3
assert_eq "$(status --max-time 3 "$(URL /c)")" 000 "second connection from one address refused"
assert_eq "$(status --interface 127.0.0.2 "$(URL /c)")" 200 "another address is served"
exec 3>&-
sleep 0.3
assert_eq "$(status "$(URL /c)")" 200 "served once the first is gone"
stop_server

# --- graceful stop ---------------------------------------------------------------

start_server stop ec --timeout 10
hcurl -w '\n%{http_code}' "$(URL '/slow?ms=2000')" >"$T/slow.out" 2>&1 &
slow_pid=$!
track_pid "$slow_pid"
sleep 0.5
kill -TERM "$SRV_PID"
sleep 0.3
assert_eq "$(status --max-time 3 "$(URL /new)")" 000 "no new connections while stopping"
wait "$slow_pid" || fail "the in-flight request failed: $(cat "$T/slow.out")"
assert_eq "$(tail -n1 "$T/slow.out")" 200 "the in-flight request completed"
assert_eq "$(head -n1 "$T/slow.out" | json_get - .query)" ms=2000 "the in-flight request's answer"
rc=0
wait "$SRV_PID" || rc=$?
assert_eq "$rc" 0 "exit after a graceful stop"
assert_contains "$(cat "$SRV_LOG")" stopped "stopped"

# --- start-up errors ----------------------------------------------------------------

start_server busy ec
expect_exit 1 "cannot listen on 127.0.0.1:$PORT: address in use" -- timeout 20 \
        "$HTTP_TEST_SERVER" serve --key "$(keyuri ec)" --cert "$P/ec.pem" --listen "127.0.0.1:$PORT"
stop_server
expect_exit 1 "not the TLS key" -- timeout 20 \
        "$HTTP_TEST_SERVER" serve --key "$(keyuri ec)" --cert "$P/rsa.pem"
expect_exit 1 "is not a numeric IPv4 or IPv6 address" -- timeout 20 \
        "$HTTP_TEST_SERVER" serve --key "$(keyuri ec)" --cert "$P/ec.pem" --listen localhost:0
cat "$P/server-ca.pem" "$P/ec.pem" >"$T/unsorted.pem"
expect_exit 1 "not sorted" -- timeout 20 \
        "$HTTP_TEST_SERVER" serve --key "$(keyuri ec)" --cert "$T/unsorted.pem"

# A served chain (leaf then issuer) over IPv6 loopback, if the host has it.
cat "$P/ec.pem" "$P/server-ca.pem" >"$P/chain.pem"
if grep -qs '^0\{31\}1 ' /proc/net/if_inet6; then
        start_bg "$T/v6.log" "$HTTP_TEST_SERVER" serve --key "$(keyuri ec)" --cert "$P/chain.pem" \
                --listen '[::1]:0'
        SRV_PID=$BG_PID SRV_LOG=$T/v6.log
        for ((i = 0; i < 300; i++)); do
                PORT=$(sed -n 's/^port \([0-9]*\)$/\1/p' "$SRV_LOG")
                [ -n "$PORT" ] && break
                sleep 0.05
        done
        [ -n "$PORT" ] || fail "IPv6 test server did not start: $(cat "$SRV_LOG")"
        out=$(curl -sS -g --max-time 20 --cacert "$P/server-ca.pem" --resolve "localhost:$PORT:[::1]" \
                "https://localhost:$PORT/v6")
        assert_eq "$(json_get "$out" .peer_addr)" ::1 "IPv6 listener"
        stop_server
fi

echo "http-transport: OK"
