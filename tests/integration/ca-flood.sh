#!/bin/bash
# ca-flood.sh — a real hwidd with what `hwid ca init` writes (its limits
# included; public_metrics on, and a profile that renews at any time, are
# all that is added) stays reachable for honest
# clients while others misbehave (issue 23). Proves:
#   - hwid ca init writes every connection budget into hwidd.yaml, and
#     hwidd raises its open-file soft limit to the hard limit;
#   - 300 devices behind one address (a NAT) enroll at once and then renew
#     at once, each on its own connection: all 300 succeed both times;
#   - while 10,000 idle TCP connections come from one address and 256
#     half-finished TLS handshakes from each of 4 others (127.0.0.2-5),
#     held and reopened as the server closes them (tests/integration/
#     flood.py), a client from a sixth address (127.0.0.6) gets GET /healthz
#     and a full enrollment (curl, a token, an openssl CSR) 20 times of 20,
#     each within 2 s; the budgets show in /metrics (handshaking
#     connections at most handshake_cap, evictions by handshake_cap,
#     refusals by rate; one address never holds more than
#     max_connections_per_ip). Evictions at handshake_timeout and refusals
#     per address, which a flood this size crowds out (the cap evicts
#     first), are http-budgets' subject;
#   - a slow-drip client (one header byte every 2 s) is cut at the total
#     deadline, limits.timeout (30 s), during the flood.
# Needs: python3, curl, openssl; the test raises its own open-file limit.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "$0")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "$0")/ca-lib.sh"
# shellcheck source=ops-lib.sh
source "$(dirname "$0")/ops-lib.sh"

require_tools /usr/bin/python3 xargs
ulimit -n "$(ulimit -Hn)"
[ "$(ulimit -n)" -ge 12000 ] || fail "the flood needs 12,000 open files, the hard limit is $(ulimit -Hn)"
HERE=$(dirname "$0")
N=300

ca_setup
for kv in "max_connections: 16384" "max_connections_per_ip: 1024" "handshake_cap: 1024" "handshake_timeout: 10s" \
        "rate_per_ip: 200" "rate_burst: 500" "timeout: 30s"; do
        grep -q "^  $kv$" "$CFG" || fail "hwid ca init did not write '$kv' into hwidd.yaml"
done
public_metrics
add_profiles <<'EOF'
  nat:
    validity: 30d
    key_types: [ec-p256]
    extended_key_usage: [clientAuth]
    subject:
      allowed_rdns: [CN]
    approval: auto
    renewal:
      window: 1.0
EOF
hwidd_start
limits=$(awk '/^Max open files/ { print $4, $5 }' "/proc/$HWIDD_PID/limits")
assert_eq "$limits" "$(ulimit -Hn) $(ulimit -Hn)" "hwidd's open-file limits (soft hard)"

# --- 300 devices behind one address: enroll at once, renew at once -----------------

echo "$(date +%T) ca ready"
mkdir -p "$DEV/nat"
seq 1 $N | xargs -P 2 -I{} openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
        -keyout "$DEV/nat/d{}.key" -subj "/CN=nat-{}" -out "$DEV/nat/d{}.csr" 2>/dev/null
echo "$(date +%T) $N keys made"
TOK=$(token_new --uses $N --profile nat)

# parallel_curl NAME — NAME.cfg.0 .. NAME.cfg.29, each a curl config of
# N/30 requests, all sent at once, one connection each, by 30 curl
# processes (one would make its TLS handshakes one after the other, too
# slowly on a loaded machine); each answer's status into NAME.codes.
parallel_curl() {
        local i pids=()
        for ((i = 0; i < 30; i++)); do
                curl -sS --parallel --parallel-immediate --parallel-max $N -K "$1.cfg.$i" \
                        >"$1.codes.$i" 2>"$1.err.$i" &
                pids+=($!)
        done
        wait "${pids[@]}" || true
        cat "$1".codes.* >"$1.codes"
}

# device_cfg NAME I — the curl config of device I's request (enroll: POST
# /csr with the token; renew: POST /v1/renew with its certificate).
device_cfg() {
        printf 'url = "%s/%s"\ncacert = "%s"\n' "$URL" "$([ "$1" = enroll ] && echo csr || echo v1/renew)" "$CA_DIR/ca.pem"
        if [ "$1" = enroll ]; then
                printf 'header = "Authorization: Bearer %s"\n' "$TOK"
        else
                printf 'cert = "%s"\nkey = "%s"\n' "$DEV/nat/d$2.pem" "$DEV/nat/d$2.key"
        fi
        printf 'header = "Content-Type: application/pkcs10"\ndata-binary = "@%s"\n' "$DEV/nat/d$2.csr"
        printf 'output = "%s"\nwrite-out = "%%{http_code}\\n"\n' "$DEV/nat/d$2.$1.pem"
}

for what in enroll renew; do
        for ((i = 1; i <= N; i++)); do
                device_cfg $what $i >>"$T/$what.cfg.$((i % 30))"
                [ $((i + 30)) -gt $N ] || echo next >>"$T/$what.cfg.$((i % 30))"
        done
done
parallel_curl "$T/enroll"
scrape "$T/m-enroll"
assert_eq "$(grep -c '^201$' "$T/enroll.codes")" $N "enrollments at once from one address: $(sort "$T/enroll.codes" |
        uniq -c | tr '\n' ' ') $(grep '^hwid_connections' "$T/m-enroll.body" | grep -v ' 0$' | tr '\n' ' ')"
for ((i = 1; i <= N; i++)); do
        mv "$DEV/nat/d$i.enroll.pem" "$DEV/nat/d$i.pem"
done
echo "$(date +%T) $N enrolled"
parallel_curl "$T/renew"
scrape "$T/m-renew"
assert_eq "$(grep -c '^201$' "$T/renew.codes")" $N "renewals at once from one address: $(sort "$T/renew.codes" |
        uniq -c | tr '\n' ' ') $(grep '^hwid_connections' "$T/m-renew.body" | grep -v ' 0$' | tr '\n' ' ')"
openssl verify -CAfile "$CA_DIR/ca.pem" "$DEV/nat/d$N.renew.pem" >/dev/null || fail "a renewed certificate does not verify"

# --- the flood ---------------------------------------------------------------------------

scrape "$T/m0"
/usr/bin/python3 "$HERE/http-slow-client.py" "$PORT" "$CA_DIR/ca.pem" headers 2 40 127.0.0.7 >"$T/drip.out" 2>&1 &
DRIP=$!
track_pid "$DRIP"
/usr/bin/python3 "$HERE/flood.py" "$PORT" "$T/flood.status" --for 120 --rate 1000 idle:127.0.0.1:10000 \
        handshake:127.0.0.2:256 handshake:127.0.0.3:256 handshake:127.0.0.4:256 handshake:127.0.0.5:256 &
FLOOD=$!
track_pid "$FLOOD"
# Built up: 256 half-finished handshakes made from each address, and 10,000
# idle connections (hwidd keeps what its budgets allow and closes the rest,
# which the flood opens again).
for ((i = 0; i < 120; i++)); do
        [ -s "$T/flood.status" ] &&
                awk '$1 == "handshake" && $6 < 256 { short = 1 } $1 == "idle" && $6 < 10000 { short = 1 }
                     END { exit short }' "$T/flood.status" && break
        sleep 0.5
done
cat "$T/flood.status"
awk '$1 == "handshake" && $6 < 256 { short = 1 } $1 == "idle" && $6 < 10000 { short = 1 } END { exit short }' \
        "$T/flood.status" || fail "the flood did not build up within 60 s: $(cat "$T/flood.status")"

echo "$(date +%T) flood built up"
# A sixth address, 20 times: /healthz and a whole enrollment, each within 2 s.
GOOD=$(token_new --uses 20)
for ((i = 1; i <= 20; i++)); do
        make_csr "good-$i"
done
for ((i = 1; i <= 20; i++)); do
        h=$(curl -sS --interface 127.0.0.6 --max-time 10 --cacert "$CA_DIR/ca.pem" -o /dev/null \
                -w '%{http_code} %{time_total}' "$URL/healthz" 2>&1 || true)
        e=$(curl -sS --interface 127.0.0.6 --max-time 10 --cacert "$CA_DIR/ca.pem" -o "$DEV/good-$i.pem" \
                -H "Authorization: Bearer $GOOD" -H "Content-Type: application/pkcs10" \
                --data-binary "@$DEV/good-$i.csr" -w '%{http_code} %{time_total}' "$URL/csr" 2>&1 || true)
        echo "try $i: healthz $h, enroll $e"
        [ "${h%% *}" = 200 ] || fail "try $i: GET /healthz during the flood: $h ($(cat "$T/flood.status"))"
        [ "${e%% *}" = 201 ] || fail "try $i: enrollment during the flood: $e ($(cat "$T/flood.status"))"
        awk -v a="${h#* }" -v b="${e#* }" 'BEGIN { exit !(a < 2 && b < 2) }' ||
                fail "try $i took more than 2 s: healthz ${h#* } s, enrollment ${e#* } s"
done
openssl verify -CAfile "$CA_DIR/ca.pem" "$DEV/good-20.pem" >/dev/null || fail "the enrollment during the flood"
scrape "$T/m1"
cat "$T/flood.status"
hs=$(metric "$T/m1" 'hwid_connections{state="handshaking"}')
[ "$hs" -le 1024 ] || fail "$hs connections in their handshake: more than handshake_cap"
# The idle connections are handshaking ones too (no ClientHello): the
# handshake cap evicts them before one address reaches its share of 1024
# (per_address refusals are http-budgets' subject), and never does that
# address hold more than its share.
idle_open=$(awk '$1 == "idle" { print $4 }' "$T/flood.status")
[ "$idle_open" -le 1024 ] || fail "$idle_open connections open from one address: more than max_connections_per_ip"
for series in 'hwid_connections_evicted_total{reason="handshake_cap"}' 'hwid_connections_refused_total{reason="rate"}'; do
        [ "$(metric_delta "$T/m0" "$T/m1" "$series")" -gt 0 ] || fail "$series did not move during the flood"
done

echo "$(date +%T) 20 tries done"
# The drip, started with the flood, is cut at limits.timeout.
wait "$DRIP" || true
out=$(cat "$T/drip.out")
assert_contains "$out" closed "the slow drip"
awk -v s="${out#closed }" 'BEGIN { exit !(s >= 29 && s <= 36) }' || fail "the slow drip was cut after ${out#closed } s, not 30"
kill -TERM "$FLOOD"
wait "$FLOOD" || true
hwidd_stop
echo "ca-flood: OK"
