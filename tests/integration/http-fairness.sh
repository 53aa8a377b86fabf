#!/bin/bash
# The HTTPS transport (service/http*.c): what one client does never costs
# another client its connection.  tests/http-test-server with its TLS key
# in SoftHSM2; curl, tests/integration/http-oversize.py and flood.py as the
# peers; other loopback addresses (127.0.0.x) as other clients.
#
# Proves:
# - a client sending oversized header blocks, one connection after the
#   other, gets its 431 each time (as JSON), and never gets another
#   client's connection closed: every probe from another address is
#   answered 200, and no TLS handshake fails (libmicrohttpd's refusal is
#   answered on the connection it is about, never on another connection
#   its I/O thread serves);
# - at max_connections, connections inside a request give way to a new
#   address: 18 addresses holding their share of connections that sent a
#   request line and then stall, or trickle a byte a second, never keep a
#   newcomer out (the address holding the most gives up the connection
#   silent longest); nor do 64 addresses holding one stalled request each
#   (a request silent for seconds gives way);
# - at the handshake cap, the address with the most handshakes in
#   progress gives one up: a flood of half-open handshakes from one
#   address never closes another address's handshake;
# - IPv6: requests over [::1] are rate limited by their /64.
#
# Needs: $HTTP_TEST_SERVER, softhsm2-util, openssl, curl, jq, /usr/bin/python3.
source "$(dirname "$0")/../lib.sh"
# shellcheck source=http-lib.sh
source "$(dirname "$0")/http-lib.sh"

require_tools /usr/bin/python3
FLOOD=$(dirname "$0")/flood.py
OVERSIZE=$(dirname "$0")/http-oversize.py
mkpki
server_cert ec ec-p256

stat() { hcurl --interface 127.0.0.9 "$(URL /stats)" | json_get - "$1"; }

# until_file FILE AWK-CONDITION — waits (30 s at most) until FILE, written
# by a peer, meets the condition.
until_file() {
        local i
        for ((i = 0; i < 300; i++)); do
                [ -s "$1" ] && awk "$2 { ok = 1 } END { exit !ok }" "$1" && return 0
                sleep 0.1
        done
        fail "the peer did not get there ($2): $(cat "$1" 2>/dev/null)"
}

# probes N ADDRESS PATH — N requests from ADDRESS, one after the other;
# prints how many were not answered 200, and the codes.
probes() {
        local i code bad=0 codes=
        for ((i = 0; i < $1; i++)); do
                code=$(status --max-time 15 --interface "$2" "$(URL "$3")")
                [ "$code" = 200 ] || bad=$((bad + 1))
                codes+=" $code"
        done
        echo "$bad:$codes"
}

stop_peer() {
        kill "$1" 2>/dev/null || true
        wait "$1" || true
}

# --- oversized headers from one address -------------------------------------------------

start_server oversize ec
/usr/bin/python3 "$OVERSIZE" "$PORT" "$P/server-ca.pem" 127.0.0.80 1048576 "$T/oversize.status" &
big=$!
track_pid "$big"
until_file "$T/oversize.status" '$4 >= 20'
out=$(probes 30 127.0.0.1 /healthz)
assert_eq "${out%%:*}" 0 "probes from 127.0.0.1 not answered 200 while 127.0.0.80 sends 1 MiB headers (${out#*:})"
until_file "$T/oversize.status" '$4 >= 100'
stop_peer "$big"
read -r _ tries _ answered _ json _ codes <"$T/oversize.status"
assert_eq "$codes" 431 "what the oversized requests got ($tries tries, $answered answered)"
[ "$answered" -ge $((tries - 1)) ] || fail "only $answered of $tries oversized requests were answered"
[ "$json" -ge $((answered * 9 / 10)) ] || fail "only $json of $answered 431 answers were our JSON"
assert_eq "$(stat .tls_failures)" 0 "TLS handshakes that failed"
stop_server

# --- connections inside a request give way to a new address ------------------------------

# 18 addresses x 64 (their share) > 1024 (max_connections); each
# connection is through its handshake and inside a request.
for kind in stall trickle; do
        start_server "in-request-$kind" ec --max-conn 1024 --per-ip 64 --handshake-cap 64 --timeout 60 \
                --handshake-timeout 10
        groups=()
        for ((i = 10; i < 28; i++)); do groups+=("$kind:127.0.0.$i:64"); done
        /usr/bin/python3 "$FLOOD" "$PORT" "$T/$kind.status" --rate 100 --for 120 "${groups[@]}" &
        flood=$!
        track_pid "$flood"
        # The flood holds (nearly) all of the server.
        for ((i = 0; i < 600; i++)); do
                [ "$(awk '{ open += $4 } END { print open + 0 }' "$T/$kind.status" 2>/dev/null || echo 0)" -ge 1000 ] &&
                        break
                sleep 0.1
        done
        sleep 2
        out=$(probes 20 127.0.0.100 /probe)
        assert_eq "${out%%:*}" 0 "probes from a new address not answered 200 ($kind, ${out#*:})"
        [ "$(stat .active)" -ge 900 ] || fail "the flood no longer held the server ($kind): $(stat .)"
        stop_peer "$flood"
        stop_server
done

# 64 addresses holding one stalled request each, max_connections 64: no
# address holds more than a newcomer's would, and a request silent for
# seconds gives way.
start_server stalled ec --max-conn 64 --per-ip 64 --handshake-cap 64 --timeout 60 --handshake-timeout 10
groups=()
for ((i = 1; i <= 64; i++)); do groups+=("stall:127.0.1.$i:1"); done
/usr/bin/python3 "$FLOOD" "$PORT" "$T/many.status" --rate 50 --for 120 "${groups[@]}" &
flood=$!
track_pid "$flood"
for ((i = 0; i < 300; i++)); do
        [ "$(awk '{ open += $4 } END { print open + 0 }' "$T/many.status" 2>/dev/null || echo 0)" -ge 64 ] && break
        sleep 0.1
done
sleep 3 # silent for 2 s: stalled
out=$(probes 10 127.0.0.100 /probe)
assert_eq "${out%%:*}" 0 "probes from a new address not answered 200 (64 stalled addresses, ${out#*:}; server: $(stat .))"
[ "$(stat '.evicted.stalled')" -ge 10 ] || fail "no stalled request gave way: $(stat .)"
stop_peer "$flood"
stop_server

# --- the handshake cap: the address with the most handshakes gives way ----------------------

# 127.0.0.3 holds one half-open handshake; 127.0.0.2 opens half-open
# handshakes at the cap of 8, again and again.
start_server handshakes ec --handshake-cap 8 --handshake-timeout 60 --max-conn 64 --per-ip 32
/usr/bin/python3 "$FLOOD" "$PORT" "$T/hs3.status" --rate 5 --for 60 handshake:127.0.0.3:1 &
keeper=$!
track_pid "$keeper"
until_file "$T/hs3.status" '$4 == 1'
/usr/bin/python3 "$FLOOD" "$PORT" "$T/hs2.status" --rate 50 --for 60 handshake:127.0.0.2:16 &
flood=$!
track_pid "$flood"
until_file "$T/hs2.status" '$8 >= 20'
[ "$(stat '.evicted.handshake_cap')" -ge 20 ] || fail "16 half-open handshakes, a cap of 8: not evicted"
sleep 1.1 # the keeper's next status
assert_eq "$(awk '{ print $4 "/" $8 }' "$T/hs3.status")" 1/0 \
        "127.0.0.3's handshake (open/closed) while 127.0.0.2 floods the cap"
stop_peer "$flood"
stop_peer "$keeper"
stop_server

# --- IPv6: counted by /64 -------------------------------------------------------------------

start_server v6 ec --listen '[::1]:0' --rate 1 --burst 1
v6() { curl -sS -g --max-time 20 --cacert "$P/server-ca.pem" --resolve "localhost:$PORT:[::1]" "$@" \
        "https://localhost:$PORT/v6"; }
assert_eq "$(v6 | json_get - .peer_addr)" ::1 "a request over IPv6"
out=$(v6 -H 'Connection: close')
assert_contains "$out" '"error":"rate_limited"' "the second request within a second, a burst of 1"
assert_contains "$out" "too many requests from ::1 (counted by its /64)" "the rate limit's key"
stop_server

echo "http-fairness: OK"
