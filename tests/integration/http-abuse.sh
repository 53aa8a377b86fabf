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
#   version) gets the same JSON error body as every other error; a field
#   name that is not a token (whitespace before the colon) or a control
#   character in a value is 400; 100 fields and max_header bytes are
#   served (both at once too), and a request over either limit is 431
#   saying which limit it met, with a JSON answer.
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
        assert_eq "$(json_get "$body" .error)" "$slug" "error slug"
        [ -n "$(json_get "$body" .message)" ] || fail "$st $slug without a message"
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
# A field name is a token, a field value holds no control character.
json_error "$(raw 'GET /h HTTP/1.1\r\nHost: a\r\nX-A : b\r\nConnection: close\r\n\r\n')" 400 bad_request
json_error "$(raw 'GET /h HTTP/1.1\r\nHost: a\r\nX-A: b\001c\r\nConnection: close\r\n\r\n')" 400 bad_request
json_error "$(raw 'GET /h HTTP/1.1\r\nHost: a\r\nX(A): b\r\nConnection: close\r\n\r\n')" 400 bad_request
json_error "$(raw 'GET /h HTTP/1.1\r\nHost: a\r\nno colon here\r\n\r\n')" 400 bad_request
json_error "$(raw 'GET /h HTTP/2.5\r\nHost: a\r\n\r\n')" 505 http_version_not_supported
assert_eq "$(status "$(URL /after)")" 200 "served after all that"

# How many fields, and how large: 100 fields (query parameters count) and
# max_header bytes are served, even both at once; beyond either, 431 says
# which limit it was (never a close without an answer, never the size for
# a block of small fields).
# fields N [WIDTH] — N header fields for raw(), each WIDTH bytes with its CRLF (at least 7).
fields() { for ((i = 0; i < $1; i++)); do printf 'f%0*d:\\r\\n' "$((${2:-7} - 4))" "$i"; done; }
message() { sed -n '/^{/p' <<<"$1" | json_get - .message; }
req() { raw "GET /h${2:-} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n$1\r\n"; }
assert_contains "$(req "$(fields 98)")" "200 OK" "100 fields"
assert_contains "$(req "$(fields 97)" '?q=1')" "200 OK" "99 fields and a query parameter"
# 100 fields in 2,047 bytes: the request line 17, Host 9, Connection 19,
# 97 fields of 20, one of 60, the last CRLF 2.
assert_contains "$(req "$(fields 97 20)$(printf 'X-Pad: %0*d\\r\\n' 51 0)")" "200 OK" "100 fields, 2047 bytes"
for n in 2100 5000 40000; do
        out=$(req "$(fields 4 "$((n / 4))")")
        json_error "$out" 431 headers_too_large
        assert_eq "$(message "$out")" "request headers exceed 2048 bytes" "4 fields, $n bytes"
done
assert_eq "$(status "$(URL /after)")" 200 "served after all that"
stop_server

# Many small fields, within max_header (8 KiB): the count is the limit met.
start_server fields ec
for n in 99 175 1000; do
        out=$(req "$(fields "$n")")
        json_error "$out" 431 headers_too_large
        assert_contains "$(message "$out")" "header fields" "$((n + 2)) fields of 7 bytes: the limit named"
        assert_contains "$(message "$out")" "more than 100" "$((n + 2)) fields of 7 bytes: the limit named"
done
assert_eq "$(message "$(req "$(fields 99)")")" "request has 101 header fields, more than 100" "101 fields"
out=$(req "" "?$(for ((i = 0; i < 120; i++)); do printf 'p%d=1&' "$i"; done)")
json_error "$out" 431 headers_too_large
assert_contains "$(message "$out")" "more than 100" "120 query parameters"
assert_contains "$(req "$(fields 97 83)$(printf 'X-Pad: %0*d\\r\\n' 85 0)")" "200 OK" "100 fields, 8,192 bytes"
# Cookies (hwid uses none) take their size twice: libmicrohttpd parses a
# copy.  90 of 76 bytes fit in 8 KiB, not twice over: 431, saying so.
out=$(req "Cookie: $(for ((i = 10; i < 100; i++)); do printf 'c%d=%070d; ' "$i" 0; done)\\r\\n")
json_error "$out" 431 headers_too_large
assert_eq "$(message "$out")" "request cookies too large to parse" "90 cookies in 6,840 bytes"
assert_eq "$(status "$(URL /after)")" 200 "served after all that"
stop_server

echo "http-abuse: OK"
