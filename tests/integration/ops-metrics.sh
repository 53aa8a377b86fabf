#!/bin/bash
# ops-metrics.sh — /healthz, /readyz and /metrics of a real hwidd (CA and
# TLS keys in SoftHSM2) after real traffic. Proves:
#   - /metrics is text format 0.0.4 that promtool check metrics accepts,
#     before and after traffic;
#   - the values move with what happened: N enrollments move the enroll
#     success histogram, the certificate commit histogram and the live
#     certificate gauge by N, and the CA key's sign histogram by exactly
#     the signatures made (N certificates and one CRL);
#     a garbage CSR moves bad_csr and the enroll client_error histogram; a
#     body over the limit and a Content-Length beyond any integer (refused
#     by the transport) move too_large, a header block far beyond
#     max_header headers_too_large; a refused TLS 1.1 handshake gets an
#     alert, a log line and moves the handshake failures; a
#     request without a token moves the unauthenticated refusals (kept from
#     before); a request held for approval moves the pending gauge; the
#     certificate expiry gauges match openssl's reading of ca.pem and
#     tls.pem; the CRL age appears once a CRL was made;
#   - /readyz answers 200 naming its checks (store, ca_key, tls_key) and
#     when they ran, signs at most once per second however often asked;
#     while another process holds the database's write lock it answers
#     503 naming the store (the keys still pass), and 200 once released;
#   - /healthz stays cheap: it signs nothing.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=ops-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ops-lib.sh"

N=5
ENROLL_OK='hwid_http_request_duration_seconds_count{endpoint="enroll",outcome="success"}'
ENROLL_BAD='hwid_http_request_duration_seconds_count{endpoint="enroll",outcome="client_error"}'
CA_SIGNS='hwid_sign_duration_seconds_count{key="ca",backend="pkcs11"}'
TLS_SIGNS='hwid_sign_duration_seconds_count{key="tls",backend="pkcs11"}'
COMMITS='hwid_store_commit_duration_seconds_count{op="certificate"}'

# expiry_in PEM — seconds from now until PEM's notAfter, by openssl.
expiry_in() {
        echo $(($(date -d "$(openssl x509 -in "$1" -noout -enddate | cut -d= -f2)" +%s) - $(date +%s)))
}

# near A B — A and B within 60 s of each other.
near() {
        local d=$(($1 - $2))
        [ ${d#-} -le 60 ] || fail "$3: $1 and $2 are more than 60 s apart"
}

ca_setup
public_metrics
# The CA key's signatures are counted below: hwidd signs an audit
# checkpoint when it starts, and then not again while this test runs.
sed -i 's/^profiles:$/audit:\n  checkpoint_interval: 1d\n  checkpoint_records: 1000000\n&/' "$CFG"
# A record for that checkpoint to cover: a PostgreSQL store
# (HWID_TEST_STORE=pg) starts with an empty log, which has none, and its
# first checkpoint would then be signed in the middle of the count.
token_new >/dev/null
hwidd_start
for _ in $(seq 100); do
        [ "$(store_sql "SELECT count(*) FROM audit_checkpoints")" -ge 1 ] && break
        sleep 0.1
done
[ "$(store_sql "SELECT count(*) FROM audit_checkpoints")" -ge 1 ] || fail "no audit checkpoint at hwidd's start"

scrape "$T/m0"
# A fresh hwidd: nothing enrolled yet, the gauges there already.
assert_eq "$(metric "$T/m0" "$ENROLL_OK")" 0 "enrollments before any"
assert_contains "$(cat "$T/m0.body")" "hwid_unauthenticated_refusals_total" "the counters kept from before"
live0=$(metric "$T/m0" hwid_certificates_live)

# --- readiness: 200 and what it checked; cached for a second ---------------
ready "$T/r1"
expect_status 200 "$T/r1"
assert_eq "$(json_get "$T/r1.body" .status)" ready "/readyz status"
for c in store ca_key tls_key; do
        assert_eq "$(check_of "$T/r1" $c)" true "/readyz check $c"
done
checked=$(json_get "$T/r1.body" .checked_at)
near "$checked" "$(date +%s)" "/readyz checked_at"
scrape "$T/m1"
assert_eq "$(metric_delta "$T/m0" "$T/m1" "$CA_SIGNS")" 1 "the CA key's readiness signature"
assert_eq "$(metric_delta "$T/m0" "$T/m1" 'hwid_sign_duration_seconds_count{key="tls",backend="pkcs11"}')" \
        "$(($(metric_delta "$T/m0" "$T/m1" hwid_http_requests_total) + 1))" \
        "TLS key signatures: a handshake per request (two scrapes, a readyz) and the readiness probe"
for _ in 1 2 3 4 5; do
        ready "$T/r2"
        expect_status 200 "$T/r2"
done
http "$T/h" GET /healthz
expect_status 200 "$T/h"
scrape "$T/m2"
# Five /readyz within a second or so: at most one more probe signature
# each way (there may have been a second boundary), and /healthz none.
[ "$(metric_delta "$T/m1" "$T/m2" "$CA_SIGNS")" -le 1 ] ||
        fail "/readyz made $(metric_delta "$T/m1" "$T/m2" "$CA_SIGNS") CA signatures within a second"
sleep 1.1
ready "$T/r3"
expect_status 200 "$T/r3"
[ "$(json_get "$T/r3.body" .checked_at)" -gt "$checked" ] ||
        fail "/readyz did not check again after a second"

# --- traffic ---------------------------------------------------------------
scrape "$T/before"
TOK=$(token_new --uses 20)
for i in $(seq $N); do
        enroll "dev-$i" "$TOK"
        expect_status 201 "$DEV/dev-$i"
done
http "$T/crl" GET /crl
expect_status 200 "$T/crl"
# A CSR that is not one: 400 bad_csr.
head -c 300 /dev/urandom >"$DEV/garbage.csr"
post_csr "$DEV/garbage" "$TOK" "$DEV/garbage.csr"
expect_error 400 bad_csr "$DEV/garbage"
# No token: 401, counted as an unauthenticated refusal.
make_csr anon
post_csr "$DEV/anon" "" "$DEV/anon.csr"
expect_status 401 "$DEV/anon"
# A body over limits.max_body (64 KiB), refused before any handler runs.
head -c 70000 /dev/zero | tr '\0' 'A' >"$DEV/huge.csr"
post_csr "$DEV/huge" "$TOK" "$DEV/huge.csr"
expect_error 413 too_large "$DEV/huge"
# A Content-Length no integer holds (libmicrohttpd's own 413), and a
# header block far beyond max_header (its own 431): answered with our JSON
# by the transport, and counted like the rest.
http "$DEV/overflow" POST /csr -H "Content-Length: 99999999999999999999999" -H "Content-Type: application/pkcs10"
expect_error 413 too_large "$DEV/overflow"
{ printf 'X-Big: '; head -c 100000 /dev/zero | tr '\0' h; echo; } >"$DEV/big.hdr"
http "$DEV/big-header" GET /healthz -H @"$DEV/big.hdr"
expect_error 431 headers_too_large "$DEV/big-header"
# A TLS 1.1 handshake: refused with an alert, and a log line.
out=$(echo | timeout 20 openssl s_client -connect "127.0.0.1:$PORT" -tls1_1 -cipher 'DEFAULT@SECLEVEL=0' 2>&1 || true)
assert_contains "$out" "alert protocol version" "a TLS 1.1 handshake"
for ((i = 0; i < 50; i++)); do
        grep -q "TLS handshake from 127.0.0.1 refused: the client offers no TLS version served" "$HWIDD_LOG" && break
        sleep 0.1
done
grep -q "TLS handshake from 127.0.0.1 refused: the client offers no TLS version served" "$HWIDD_LOG" ||
        fail "no log line for the refused TLS 1.1 handshake"
# A request held for approval.
MTOK=$(token_new --profile manual)
enroll held "$MTOK"
expect_status 202 "$DEV/held"
scrape "$T/after"

assert_eq "$(metric_delta "$T/before" "$T/after" "$ENROLL_OK")" "$N" "enroll success histogram count"
assert_eq "$(metric "$T/after" 'hwid_http_request_duration_seconds_bucket{endpoint="enroll",outcome="success",le="+Inf"}')" \
        "$(metric "$T/after" "$ENROLL_OK")" "+Inf bucket equals the count"
assert_eq "$(metric_delta "$T/before" "$T/after" "$COMMITS")" "$N" "certificate commits"
assert_eq "$(metric_delta "$T/before" "$T/after" hwid_certificates_live)" "$N" "live certificates gauge"
assert_eq "$(metric "$T/after" hwid_certificates_live)" $((live0 + N)) "live certificates"
# N certificates + the CRL: each one device signature, nothing else.
assert_eq "$(metric_delta "$T/before" "$T/after" "$CA_SIGNS")" $((N + 1)) "CA key signatures"
[ "$(metric_delta "$T/before" "$T/after" "$TLS_SIGNS")" -ge $((N + 1)) ] ||
        fail "TLS key signatures moved by $(metric_delta "$T/before" "$T/after" "$TLS_SIGNS"): one per handshake"
assert_eq "$(metric "$T/after" 'hwid_sign_errors_total{key="ca",backend="pkcs11"}')" 0 "CA sign errors"
assert_eq "$(metric_delta "$T/before" "$T/after" 'hwid_request_errors_total{error="bad_csr"}')" 1 "bad_csr errors"
# 400 and 401 went through the handler; the 413 never reached it.
assert_eq "$(metric_delta "$T/before" "$T/after" "$ENROLL_BAD")" 2 "enroll client errors"
assert_eq "$(metric_delta "$T/before" "$T/after" 'hwid_request_errors_total{error="too_large"}')" 2 \
        "too_large (the transport's refusals)"
assert_eq "$(metric_delta "$T/before" "$T/after" 'hwid_request_errors_total{error="headers_too_large"}')" 1 \
        "headers_too_large (libmicrohttpd's refusal)"
assert_eq "$(metric_delta "$T/before" "$T/after" hwid_tls_handshake_failures_total)" 1 "failed TLS handshakes"
[ "$(metric "$T/after" 'hwid_tls_handshake_duration_seconds_count')" -ge "$N" ] ||
        fail "TLS handshake durations: $(metric "$T/after" 'hwid_tls_handshake_duration_seconds_count') for $N handshakes"
assert_eq "$(metric_delta "$T/before" "$T/after" hwid_unauthenticated_refusals_total)" 1 \
        "unauthenticated refusals"
assert_eq "$(metric_delta "$T/before" "$T/after" hwid_requests_pending)" 1 "pending requests gauge"
assert_eq "$(metric_delta "$T/before" "$T/after" \
        'hwid_http_request_duration_seconds_count{endpoint="enroll",outcome="pending"}')" 1 "enroll pending histogram"
near "$(metric "$T/after" hwid_ca_certificate_expiry_seconds)" "$(expiry_in "$CA_DIR/ca.pem")" "CA expiry gauge"
near "$(metric "$T/after" hwid_tls_certificate_expiry_seconds)" "$(expiry_in "$CA_DIR/tls.pem")" "TLS expiry gauge"
age=$(metric "$T/after" hwid_crl_age_seconds)
if [ "$age" -lt 0 ] || [ "$age" -gt 60 ]; then
        fail "CRL age $age"
fi
assert_eq "$(metric "$T/m0" hwid_crl_age_seconds)" 0 "no CRL age before a CRL exists"
assert_not_contains "$(cat "$T/m0.body")" "hwid_crl_age_seconds " "CRL age before a CRL exists"

# --- the store cannot commit: /readyz 503 naming it --------------------------
# Another session holds the write lock for longer than hwidd waits for it
# (5 s): sqlite3's, or on PostgreSQL a psql holding the probe's row.
sleep 1.1 # past the cached verdict
if [ -n "${PG_URI:-}" ]; then
        pg_sql "BEGIN; SELECT 1 FROM meta WHERE key = 'ready_probe' FOR UPDATE; SELECT pg_sleep(8); COMMIT;" \
                >/dev/null &
else
        { echo "BEGIN IMMEDIATE;"; sleep 8; echo "COMMIT;"; } | sqlite3 "$CA_DIR/hwid.db" &
fi
LOCKER=$!
track_pid "$LOCKER"
sleep 0.5
ready "$T/r4"
expect_status 503 "$T/r4"
assert_eq "$(json_get "$T/r4.body" .error)" not_ready "/readyz error with the store locked"
assert_eq "$(json_get "$T/r4.body" .failed)" '["store"]' "/readyz names the store"
assert_eq "$(check_of "$T/r4" store)" false "/readyz store"
assert_eq "$(check_of "$T/r4" ca_key)" true "/readyz ca_key with the store locked"
wait "$LOCKER"
sleep 1.1
ready "$T/r5"
expect_status 200 "$T/r5"

hwidd_stop
echo "ok"
