#!/bin/bash
# The HTTPS transport (service/http*.c) against slow and abusive clients:
# tests/http-test-server with its TLS key in SoftHSM2, and curl, openssl
# s_client and a Python ssl client (http-slow-client.py) as the peers.
#
# Proves:
# - a handshake flood from one address is cut off at the configured rate
#   before TLS (each handshake is an HSM signature), while another address
#   is served;
# - limits.timeout is a deadline per request, not an idle timeout: a client
#   dripping its headers or its body is disconnected at the deadline, a
#   slow reader loses its connection (the server's thread) at the deadline
#   too, and a slow request within the deadline, or a second request on a
#   kept-alive connection, is served;
# - HTTP strictness: an HTTP/1.1 request without Host, or with two, is 400;
#   a NUL in the target (encoded or raw) is never routed; and whatever
#   libmicrohttpd refuses by itself (headers far beyond its memory pool, a
#   request line too long, a malformed header line, an unknown HTTP
#   version) gets the same JSON error body as every other error.
#
# Needs: $HTTP_TEST_SERVER, softhsm2-util, openssl, curl, jq, /usr/bin/python3.
source "$(dirname "$0")/../lib.sh"
# shellcheck source=http-lib.sh
source "$(dirname "$0")/http-lib.sh"

require_tools /usr/bin/python3
SLOW=$(dirname "$0")/http-slow-client.py

mkpki
server_cert ec ec-p256

# json_error OUT STATUS SLUG — OUT (curl -i or a raw answer) is STATUS with
# a JSON {"error": SLUG, "message": ...} body.
json_error() {
        local out=$1 st=$2 slug=$3 body
        assert_contains "$(head -n1 <<<"$out")" " $st " "status line"
        assert_contains "$out" "Content-Type: application/json" "JSON content type ($st $slug)"
        body=$(sed -n '/^{/p' <<<"$out" | tr -d '\r')
        assert_eq "$(jq -r .error <<<"$body")" "$slug" "error slug"
        [ -n "$(jq -r .message <<<"$body")" ] || fail "$st $slug without a message"
        assert_not_contains "$out" "<html>" "no HTML from libmicrohttpd"
}

# raw REQUEST — sends REQUEST (printf format) over TLS, prints the answer.
raw() {
        # shellcheck disable=SC2059  # the request is the format
        printf "$1" | timeout 20 openssl s_client -quiet -connect "127.0.0.1:$PORT" \
                -CAfile "$P/server-ca.pem" -ign_eof 2>/dev/null | tr -d '\r' || true
}

slow() { /usr/bin/python3 "$SLOW" "$PORT" "$P/server-ca.pem" "$@"; }

# in_range VALUE LOW HIGH MSG — LOW <= VALUE <= HIGH (decimals allowed).
in_range() {
        awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v >= lo && v <= hi) }' ||
                fail "$4: $1 is not within [$2, $3]"
}

# --- handshakes are rate limited before TLS --------------------------------------

start_server flood ec --rate 1 --burst 2
mkdir "$T/flood"
t0=$(date +%s.%N)
# 60 connections at once (Connection: close makes each URL a new handshake).
hcurl -H 'Connection: close' -o "$T/flood/#1" -w '%{http_code}\n' "$(URL '/f[1-60]')" \
        >"$T/flood.codes" 2>/dev/null || true
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%d", b - a + 1 }')
assert_eq "$(wc -l <"$T/flood.codes")" 60 "every flood attempt reported"
handshakes=$(grep -vc '^000$' "$T/flood.codes" || true)
# Requests: burst 2, then 1 per second; connections: twice that burst, so
# that a client over its rate hears 429 first.  A completed handshake is any
# answer at all (a 429 cost a signature too).
[ "$handshakes" -le $((4 + secs)) ] ||
        fail "$handshakes of 60 handshakes completed in ${secs}s with a limit of 1/s, burst 2 (4 for connections)"
[ "$(grep -c '^200$' "$T/flood.codes")" -ge 2 ] || fail "the burst was not served: $(sort "$T/flood.codes" | uniq -c)"
[ "$(grep -c '^429$' "$T/flood.codes")" -ge 1 ] || fail "no 429 before the refusals: $(sort "$T/flood.codes" | uniq -c)"
assert_eq "$(status --interface 127.0.0.2 "$(URL /other)")" 200 "another address is served during the flood"
sleep 1.2
assert_eq "$(status "$(URL /again)")" 200 "the flooding address is served again a second later"
stop_server

# --- limits.timeout is a deadline per request ------------------------------------------

start_server drip ec --timeout 4
# Headers, one byte a second (never idle for long): cut at 4 s, not at 20.
out=$(slow headers 1 20)
assert_contains "$out" closed "headers dripped past the deadline"
in_range "${out#closed }" 3.5 6.5 "headers drip disconnected at the deadline"
# A body, one byte a second: the same.
out=$(slow body 1 20)
assert_contains "$out" closed "body dripped past the deadline"
in_range "${out#closed }" 3.5 6.5 "body drip disconnected at the deadline"
# Slow but within the deadline: 8 bytes over about 2 s are served.
assert_eq "$(slow body 0.25 8 | cut -d' ' -f1-2)" "answered 200" "a slow request within the deadline"
# A kept-alive connection: each request has a deadline of its own.
out=$( { printf 'GET /k1 HTTP/1.1\r\nHost: x\r\n\r\n'; sleep 2.5; printf 'GET /k2 HTTP/1.1\r\nHost: x\r\n\r\n'
         sleep 2.5; printf 'GET /k3 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n'; } |
        timeout 20 openssl s_client -quiet -connect "127.0.0.1:$PORT" -CAfile "$P/server-ca.pem" \
                -ign_eof 2>/dev/null || true)
assert_eq "$(grep -o 'HTTP/1.1 200' <<<"$out" | wc -l)" 3 "three requests over 5 s on one kept-alive connection"
stop_server

# A slow reader holds the server's only connection slot: freed at the
# deadline of sending, not when it has read 8 MiB.
start_server reader ec --timeout 3 --max-conn 1
slow read 0.5 60 >"$T/reader.out" 2>&1 &
reader=$!
track_pid "$reader"
for ((i = 0; i < 100; i++)); do
        grep -q reading "$T/reader.out" && break
        sleep 0.1
done
grep -q reading "$T/reader.out" || fail "the slow reader got no answer: $(cat "$T/reader.out")"
assert_eq "$(status --max-time 2 "$(URL /busy)")" 000 "the slow reader holds the only slot"
freed=
for ((i = 0; i < 20; i++)); do
        if [ "$(status --max-time 1 "$(URL /free)")" = 200 ]; then
                freed=$SECONDS
                break
        fi
        sleep 0.5
done
[ -n "$freed" ] || fail "the slow reader still held the connection 13 s later"
kill "$reader" 2>/dev/null || true
wait "$reader" 2>/dev/null || true
stop_server

# --- HTTP strictness ------------------------------------------------------------------------

start_server strict ec --max-header 2048
before=$(calls)
json_error "$(raw 'GET /h HTTP/1.1\r\nConnection: close\r\n\r\n')" 400 bad_request
json_error "$(raw 'GET /h HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n')" 400 bad_request
assert_contains "$(raw 'GET /h10 HTTP/1.0\r\n\r\n')" '"path":"\/h10"' "HTTP/1.0 without Host is served"
# A NUL never reaches routing: "/ca%00x" is not "/ca".
json_error "$(hcurl -i "$(URL '/ca%00x')")" 400 bad_request
json_error "$(hcurl -i "$(URL '/ca?x=%00')")" 400 bad_request
out=$(raw 'GET /ca\001x HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n')
assert_not_contains "$out" "200 OK" "a raw control character in the target"
assert_eq "$(calls)" $((before + 2)) "refused requests never reached the handler"
# Headers over max_header (ours), and far beyond libmicrohttpd's memory
# pool (its own refusal): the same JSON.
for n in 3000 40000 1000000; do
        { printf 'X-Big: '; head -c "$n" /dev/zero | tr '\0' h; echo; } >"$T/big.hdr"
        json_error "$(hcurl -i "$(URL /h)" -H @"$T/big.hdr")" 431 headers_too_large
done
for ((i = 1; i <= 400; i++)); do echo "X-H$i: $(head -c 60 /dev/zero | tr '\0' h)"; done >"$T/many.hdr"
json_error "$(hcurl -i "$(URL /h)" -H @"$T/many.hdr")" 431 headers_too_large
json_error "$(hcurl -i "$(URL "/$(head -c 40000 /dev/zero | tr '\0' u)")")" 414 uri_too_long
json_error "$(raw 'GET /h HTTP/1.1\r\nHost: a\r\nno colon here\r\n\r\n')" 400 bad_request
json_error "$(raw 'GET /h HTTP/2.5\r\nHost: a\r\n\r\n')" 505 http_version_not_supported
assert_eq "$(status "$(URL /after)")" 200 "served after all that"
stop_server

echo "http-abuse: OK"
