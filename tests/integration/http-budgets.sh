#!/bin/bash
# The HTTPS transport (service/http*.c) against requests framed two ways,
# refused TLS handshakes, and connections that would take more than their
# share: tests/http-test-server with its TLS key in SoftHSM2; openssl
# s_client, curl and tests/integration/flood.py as the peers.
#
# Proves:
# - message framing (RFC 9112 6.3): two Content-Length fields that differ,
#   or Content-Length with Transfer-Encoding, are 400 and the connection is
#   closed (a request pipelined behind is never answered: no smuggling);
#   so is a Content-Length or Transfer-Encoding field with whitespace before
#   its colon, or folded onto a second line (libmicrohttpd would keep it as
#   a field of another name and read the body as the next request);
#   an unknown transfer coding is 501 at once, not a 30 s wait; chunked
#   alone is still served;
# - a TLS 1.0 or 1.1 ClientHello gets a protocol_version alert, a NULL
#   cipher suite a handshake_failure alert (libmicrohttpd sends none);
# - handshaking connections have a cap of their own (the oldest evicted for
#   a new one) and a deadline of their own; when max_connections is
#   reached, the address holding the most gives way to a newcomer, and
#   never takes a lighter address's idle connection for its own newcomer;
#   an address never holds more than its share.
#
# Needs: $HTTP_TEST_SERVER, softhsm2-util, openssl, curl, jq, /usr/bin/python3.
source "$(dirname "$0")/../lib.sh"
# shellcheck source=http-lib.sh
source "$(dirname "$0")/http-lib.sh"

require_tools /usr/bin/python3
FLOOD=$(dirname "$0")/flood.py
mkpki
server_cert ec ec-p256

# raw REQUEST — sends REQUEST (printf format) over TLS, prints the answer.
raw() {
        # shellcheck disable=SC2059  # the request is the format
        printf "$1" | timeout 20 openssl s_client -quiet -connect "127.0.0.1:$PORT" \
                -CAfile "$P/server-ca.pem" -ign_eof 2>/dev/null | tr -d '\r' || true
}
stat() { hcurl --interface 127.0.0.9 "$(URL /stats)" | json_get - "$1"; }

# --- message framing ------------------------------------------------------------------

start_server framing ec
before=$(calls)
second='GET /second HTTP/1.1\r\nHost: x\r\n\r\n'
out=$(raw "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\nabcde$second")
assert_contains "$(head -n1 <<<"$out")" " 400 " "two Content-Length fields that differ"
assert_eq "$(grep -c '^HTTP/1.1' <<<"$out")" 1 "answers on the connection (the pipelined request is not one)"
out=$(raw "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n$second")
assert_contains "$(head -n1 <<<"$out")" " 400 " "Content-Length with Transfer-Encoding"
assert_eq "$(grep -c '^HTTP/1.1' <<<"$out")" 1 "answers on the connection (the pipelined request is not one)"
# Whitespace before the colon (RFC 9112 5.1), or a value folded onto the
# next line (RFC 9112 5.2: libmicrohttpd glues it to the name): 400, never
# a field of another name that leaves the body unframed (and read as the
# next request).
for f in 'Content-Length : 33' 'Content-Length\t: 33' 'Transfer-Encoding : chunked' 'Content-Length:\r\n 33' \
        'Transfer-Encoding:\r\n\tchunked'; do
        body=$second
        [[ $f == Transfer* ]] && body="0\r\n\r\n$second"
        out=$(raw "POST /a HTTP/1.1\r\nHost: x\r\n$f\r\n\r\n$body")
        assert_contains "$(head -n1 <<<"$out")" " 400 " "$f"
        assert_eq "$(grep -c '^HTTP/1.1' <<<"$out")" 1 "answers on the connection ($f: the body is not a request)"
done
t0=$SECONDS
out=$(raw 'POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nabc')
assert_contains "$(head -n1 <<<"$out")" " 501 " "an unknown transfer coding"
assert_contains "$out" '"error":"not_implemented"' "its error slug"
[ $((SECONDS - t0)) -le 5 ] || fail "the unknown transfer coding was answered after $((SECONDS - t0)) s"
assert_eq "$(calls)" $((before + 1)) "refused requests never reached the handler"
out=$(raw 'POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n')
assert_contains "$out" '"body":"abc"' "a chunked body alone is served"

# --- refused handshakes get an alert -------------------------------------------------------

tls() { echo | timeout 20 openssl s_client -connect "127.0.0.1:$PORT" "$@" 2>&1 || true; }
assert_contains "$(tls -tls1 -cipher 'DEFAULT@SECLEVEL=0')" "alert protocol version" "TLS 1.0"
assert_contains "$(tls -tls1_1 -cipher 'DEFAULT@SECLEVEL=0')" "alert protocol version" "TLS 1.1"
assert_contains "$(tls -tls1_2 -cipher 'NULL-SHA256@SECLEVEL=0')" "alert handshake failure" "a NULL cipher suite"
assert_eq "$(stat .tls_failures)" 3 "failed handshakes counted"
stop_server

# --- handshaking connections: a cap and a deadline of their own ------------------------------

# flood_until STATUS AWK-CONDITION — waits (10 s at most) until flood.py's
# STATUS file meets the condition.
flood_until() {
        local i
        for ((i = 0; i < 100; i++)); do
                [ -s "$1" ] && awk "$2 { ok = 1 } END { exit !ok }" "$1" && return 0
                sleep 0.1
        done
        fail "the flood did not get there ($2): $(cat "$1" 2>/dev/null)"
}

# Stats come over a connection of their own (from 127.0.0.9), which the
# budgets count like any other: each read below is a newcomer too.
start_server handshakes ec --handshake-cap 8 --handshake-timeout 2 --max-conn 64 --per-ip 32
/usr/bin/python3 "$FLOOD" "$PORT" "$T/hs.status" --rate 10 --for 30 handshake:127.0.0.2:16 &
flood=$!
track_pid "$flood"
flood_until "$T/hs.status" '$6 >= 16 && $8 >= 8'
[ "$(stat '.evicted.handshake_cap')" -ge 8 ] || fail "16 half-open handshakes, a cap of 8: not evicted"
[ "$(stat .handshaking)" -le 8 ] || fail "more handshaking connections than the cap of 8"
assert_eq "$(status --interface 127.0.0.3 "$(URL /hs)")" 200 "a whole handshake while the cap is full"
kill "$flood"
wait "$flood" || true
/usr/bin/python3 "$FLOOD" "$PORT" "$T/hs2.status" --for 10 handshake:127.0.0.4:2 &
flood=$!
track_pid "$flood"
flood_until "$T/hs2.status" '$6 >= 2'
t0=$(date +%s.%N)
flood_until "$T/hs2.status" '$8 >= 2'
secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
awk -v s="$secs" 'BEGIN { exit !(s <= 3.5) }' || fail "half-open handshakes closed after $secs s, the deadline is 2 s"
[ "$(stat '.evicted.handshake_timeout')" -ge 2 ] || fail "half-open handshakes not counted at their deadline"
kill "$flood"
wait "$flood" || true
stop_server

# --- shares of max_connections ------------------------------------------------------------

start_server shares ec --max-conn 8 --per-ip 6 --handshake-cap 8 --handshake-timeout 60
/usr/bin/python3 "$FLOOD" "$PORT" "$T/sh.status" --rate 50 --for 30 idle:127.0.0.2:7 idle:127.0.0.4:2 &
flood=$!
track_pid "$flood"
# 127.0.0.2 holds its 6 (a 7th is closed at once, again and again), 127.0.0.4 its 2.
flood_until "$T/sh.status" '$2 == "127.0.0.2" && $8 >= 3'
flood_until "$T/sh.status" '$2 == "127.0.0.4" && $4 == 2'
# 6 + 2 = 8 open: the stats connection, a newcomer, takes the place of
# the oldest of 127.0.0.2's (once the server holds all 8).
for ((i = 0; i < 20; i++)); do
        [ "$(stat '.evicted.fair_share')" -ge 1 ] && break
        sleep 0.2
done
[ "$(stat '.evicted.fair_share')" -ge 1 ] || fail "nobody gave way to a newcomer at max_connections"
[ "$(stat '.refused.per_address')" -ge 1 ] || fail "a 7th connection from one address, a share of 6: not refused"
assert_eq "$(status --interface 127.0.0.5 "$(URL /share)")" 200 "a newcomer at max_connections"
kill "$flood"
wait "$flood" || true
stop_server

# --- the heaviest address reconnecting takes no lighter one's keep-alive ---------------------

# 127.0.0.5 holds one connection through its handshake, idle (a keep-alive,
# or a request about to come); 127.0.0.2 reconnects at a share of 4 out of
# 4 again and again.  It may take its own slots, never 127.0.0.5's.
start_server keepalive ec --max-conn 4 --per-ip 4 --handshake-cap 4 --handshake-timeout 60
# Through its handshake first: the handshake cap (4 here) may close the
# oldest of five handshakes, and this test is not about that.
/usr/bin/python3 "$FLOOD" "$PORT" "$T/ka5.status" --rate 5 --for 30 tls:127.0.0.5:1 &
keeper=$!
track_pid "$keeper"
flood_until "$T/ka5.status" '$4 == 1'
/usr/bin/python3 "$FLOOD" "$PORT" "$T/ka2.status" --rate 50 --for 30 idle:127.0.0.2:4 &
flood=$!
track_pid "$flood"
flood_until "$T/ka2.status" '$4 >= 3'
for ((i = 0; i < 20; i++)); do
        [ "$(stat '.refused.limit')" -ge 5 ] && break
        sleep 0.2
done
[ "$(stat '.refused.limit')" -ge 5 ] || fail "127.0.0.2 at the limit was never refused: $(cat "$T/ka2.status")"
sleep 1.1 # the keeper's next status
kept=$(awk '{ print $4 "/" $8 }' "$T/ka5.status")
[ "$kept" = 1/0 ] || fail "127.0.0.5's idle connection (open/closed $kept) while 127.0.0.2 reconnects at the limit: $(stat -c .)"
assert_eq "$(stat '.evicted.idle_at_limit')" 0 "idle connections closed for the heaviest address"
kill "$flood" "$keeper"
wait "$flood" || true
wait "$keeper" || true
stop_server

echo "http-budgets: OK"
