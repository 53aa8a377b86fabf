# shellcheck shell=bash disable=SC2034  # variables used by the scripts sourcing this
# ca-lib.sh — helpers shared by the ca-*.sh tests (hwid ca init, hwidd, the
# admin commands). Sourced after tests/lib.sh.
#
# The peers are independent tools: openssl makes every device key and CSR
# and checks every certificate, CRL and chain; curl speaks HTTPS to a real
# hwidd on 127.0.0.1 whose CA key and TLS key live in a SoftHSM2 token (or
# an swtpm). Nothing here trusts what hwid says about itself when a tool can
# check it.

require_tools openssl curl sqlite3 ss

# OpenSSL keeps the providers hsm_init() loads for the life of the process;
# LeakSanitizer (ASan builds) reports that one allocation at exit.
printf 'leak:load_providers\n' >"$T/lsan.supp"
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$T/lsan.supp}

CA_DIR=$T/ca                    # what hwid ca init writes
CFG=$CA_DIR/hwidd.yaml          # the configuration hwidd and hwid use
DEV=$T/dev                      # device side: keys, CSRs, responses
mkdir -p "$DEV"

# ca_key_uri — the CA key in the SoftHSM2 token 'ca', PIN from a file.
ca_key_uri() {
        echo "pkcs11:token=ca;object=ca-key?pin-source=file:$T/pin"
}

# ca_setup [ARGS...] — a SoftHSM2 token and `hwid ca init` into $CA_DIR,
# listening on a free loopback port, and plain HTTP (GET /crl, /ca) on
# another; sets PORT, URL and HTTP_PORT.
# shellcheck disable=SC2120  # optional arguments
ca_setup() {
        softhsm_init ca
        PORT=$(free_port)
        HTTP_PORT=$(free_port)
        URL=https://127.0.0.1:$PORT
        run_ok "$HWID" ca init --key "$(ca_key_uri)" --subject "/CN=hwid test CA" \
                --dir "$CA_DIR" --listen "127.0.0.1:$PORT" --http-listen "127.0.0.1:$HTTP_PORT" "$@" >"$T/ca-init.out"
        for f in ca.pem tls.pem hwid.db hwidd.yaml; do
                [ -s "$CA_DIR/$f" ] || fail "hwid ca init wrote no $CA_DIR/$f"
        done
        [ "${HWID_TEST_STORE:-sqlite}" != pg ] || ca_use_pg
}

# store_sql SQL — one query on the CA's store, whichever it is (the SQLite
# file, or PostgreSQL with HWID_TEST_STORE=pg); rows one per line, columns
# separated by '|'. SQL both understand.
store_sql() {
        if [ -n "${PG_URI:-}" ]; then
                # Issuances' audit records are in the audit table once
                # linked (store-pg-link.c), as SQLite has them at once.
                pg_wait_linked 3 || true
                pg_sql "$1"
        else
                sqlite3 "$CA_DIR/hwid.db" "$1"
        fi
}

# store_dump — every row of the CA's store as text (sqlite3 .dump, pg_dump).
store_dump() {
        if [ -n "${PG_URI:-}" ]; then
                PGPASSFILE=$PG_PASSFILE "$PG_BIN/pg_dump" -h 127.0.0.1 -p "$PG_PORT" -U hwid -d "$PG_DB"
        else
                sqlite3 "$CA_DIR/hwid.db" .dump
        fi
}

# ca_use_pg — HWID_TEST_STORE=pg: the CA's store becomes a PostgreSQL
# cluster of the test's own (pg-lib.sh): its database: line is the URI, so
# hwidd and every admin command use it; `hwid ca init` made the SQLite
# file, which then stays unused.
ca_use_pg() {
        if [ -z "${PG_URI:-}" ]; then
                # shellcheck source=tests/integration/pg-lib.sh
                source "$SRCDIR/tests/integration/pg-lib.sh"
                # shellcheck disable=SC2119  # no --own: the run's cluster will do
                pg_start
        else
                _CA_PG_DBS=$((${_CA_PG_DBS:-1} + 1))
                pg_new_database "hwid$_CA_PG_DBS"   # each CA a database of its own
        fi
        local uri=${PG_URI//&/\\&}
        sed -i "s|^database: .*|database: \"$uri\"|" "$CA_DIR/hwidd.yaml"
}

# add_profiles — write $CA_DIR/hwidd-test.yaml: the generated configuration
# plus the profiles read from stdin (YAML indented by 2, under `profiles:`,
# which ends the generated file), and make it $CFG.
add_profiles() {
        grep -q '^profiles:$' "$CA_DIR/hwidd.yaml" || fail "generated config has no profiles: block"
        [ "$(tail -n 1 "$CA_DIR/hwidd.yaml" | cut -c1-2)" = "  " ] ||
                fail "profiles: is not the last block of the generated config"
        { cat "$CA_DIR/hwidd.yaml"; cat; } >"$CA_DIR/hwidd-test.yaml"
        CFG=$CA_DIR/hwidd-test.yaml
}

# hwidd_start [ARGS...] — start hwidd on $CFG (on the test's clock, if it
# has one: test_clock) and wait until it listens; sets HWIDD_PID and
# HWIDD_LOG (one log per start).
# shellcheck disable=SC2120  # optional arguments
hwidd_start() {
        _HWIDD_RUNS=$((${_HWIDD_RUNS:-0} + 1))
        HWIDD_LOG=$T/hwidd.$_HWIDD_RUNS.log
        start_bg "$HWIDD_LOG" "${CLOCK[@]}" "$HWIDD" --config "$CFG" "$@"
        HWIDD_PID=$BG_PID
        wait_for_port "$PORT" 20 "$HWIDD_PID"
}

# hwidd_stop — SIGTERM; hwidd must exit 0 (ASan: and without leaks).
hwidd_stop() {
        local rc=0
        kill -TERM "$HWIDD_PID"
        wait "$HWIDD_PID" || rc=$?
        assert_eq "$rc" 0 "hwidd exit code after SIGTERM"
}

# admin ARGS... — an hwid admin command on $CFG (hwid GROUP CMD --config
# ...), on the test's clock.
admin() {
        local group=$1 cmd=$2
        shift 2
        run_ok "${CLOCK[@]}" "$HWID" "$group" "$cmd" --config "$CFG" "$@"
}

# token_new [ARGS...] — `hwid token create`; prints the token <id>.<secret>.
# shellcheck disable=SC2120  # optional arguments
token_new() {
        local out tok
        out=$(admin token create "$@")
        tok=$(sed -n 's/^token: //p' <<<"$out")
        [[ $tok =~ ^[a-z0-9]{6}\.[a-z0-9]{16,}$ ]] || fail "token create printed no token: $out"
        echo "$tok"
}

# token_used TOKEN — how many uses of TOKEN are spent ("2/5" -> 2).
token_used() {
        local uses
        uses=$(admin token list | awk -v id="${1%%.*}" '$1 == id { print $4 }')
        [ -n "$uses" ] || fail "token ${1%%.*} not in hwid token list"
        echo "${uses%%/*}"
}

# cert_rows [ARGS...] — rows of `hwid cert list --all` (every status).
# shellcheck disable=SC2120  # optional arguments
cert_rows() {
        admin cert list --all "$@" | tail -n +2
}

# store_state TOKEN — what an error must leave unchanged: certificates,
# requests, and the token's spent uses.
store_state() {
        echo "certs=$(cert_rows | wc -l) requests=$(admin request list --all | tail -n +2 | wc -l)" \
                "token-used=$(token_used "$1")"
}

# make_csr NAME [OPENSSL-REQ-ARGS...] — device key $DEV/NAME.key (P-256,
# made by openssl, not hwid) and PEM CSR $DEV/NAME.csr for /CN=NAME.
make_csr() {
        local name=$1
        shift
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
                -keyout "$DEV/$name.key" -subj "/CN=$name" -out "$DEV/$name.csr" "$@" \
                2>"$DEV/$name.openssl.err" || fail "openssl req for $name: $(cat "$DEV/$name.openssl.err")"
}

# http OUT METHOD PATH [CURL-ARGS...] — one HTTPS request to hwidd, trusting
# only $CACERT (default ca.pem). Body in OUT.body, headers in OUT.hdr; status in CODE ("000":
# no answer), curl's exit status in CURL_RC (a status line can arrive with the
# connection lost before the body).
http() {
        local out=$1 method=$2 path=$3
        shift 3
        CURL_RC=0
        CODE=$(curl -sS --max-time 60 --cacert "${CACERT:-$CA_DIR/ca.pem}" -X "$method" -o "$out.body" \
                -D "$out.hdr" -w '%{http_code}' "$@" "$URL$path" 2>"$out.err") || CURL_RC=$?
}

# answered_code — the last http()'s status as a client that needs the whole
# response sees it: CODE, or 000 when the connection was lost before the
# response's end (a 201 whose body never came gave the client nothing).
answered_code() {
        if [ "$CURL_RC" = 0 ]; then echo "$CODE"; else echo 000; fi
}

# post_csr OUT TOKEN FILE [CURL-ARGS...] — POST /csr with FILE as the body
# and TOKEN as the bearer token (empty: no Authorization header).
post_csr() {
        local out=$1 token=$2 file=$3 auth=()
        shift 3
        [ -z "$token" ] || auth=(-H "Authorization: Bearer $token")
        http "$out" POST /csr "${auth[@]}" -H "Content-Type: application/pkcs10" \
                --data-binary "@$file" "$@"
}

# enroll NAME TOKEN [OPENSSL-REQ-ARGS...] — make_csr NAME, POST it; CODE;
# on 201 the certificate is $DEV/NAME.pem.
enroll() {
        local name=$1 token=$2
        shift 2
        make_csr "$name" "$@"
        post_csr "$DEV/$name" "$token" "$DEV/$name.csr"
        [ "$CODE" != 201 ] || cp "$DEV/$name.body" "$DEV/$name.pem"
}

# renew OUT CERT KEY CSR — POST /v1/renew over mutual TLS with CERT/KEY.
renew() {
        http "$1" POST /v1/renew --cert "$2" --key "$3" -H "Content-Type: application/pkcs10" \
                --data-binary "@$4"
}

# header NAME OUT — the value of header NAME in OUT.hdr (no CR).
header() {
        grep -i "^$1:" "$2.hdr" | head -n 1 | cut -d: -f2- | tr -d '\r' | sed 's/^ *//'
}

# expect_status STATUS OUT — the last request got STATUS.
expect_status() {
        [ "$CODE" = "$1" ] ||
                fail "HTTP $CODE, expected $1; body: $(head -c 400 "$2.body" 2>/dev/null) $(cat "$2.err" 2>/dev/null)"
}

# expect_error STATUS SLUG OUT [MESSAGE-PART] — an error answer: STATUS, a
# JSON body {"error": SLUG, "message": a reason (containing MESSAGE-PART)},
# and no certificate in it.
expect_error() {
        local status=$1 slug=$2 out=$3 part=${4:-} msg
        expect_status "$status" "$out"
        assert_contains "$(header Content-Type "$out")" application/json "Content-Type of a $status"
        assert_eq "$(json_get "$out.body" .error)" "$slug" "JSON error slug of a $status"
        msg=$(json_get "$out.body" .message)
        [ ${#msg} -ge 10 ] || fail "HTTP $status without a reason: $(cat "$out.body")"
        [ -z "$part" ] || assert_contains "$msg" "$part" "reason of the $status"
        assert_not_contains "$(cat "$out.body")" "BEGIN CERTIFICATE" "certificate in a $status"
}

# serial_of PEM — the certificate's serial, upper-case hex as hwid prints it.
serial_of() {
        openssl x509 -in "$1" -noout -serial | sed 's/^serial=//' | tr a-f A-F
}

# verify_leaf PEM [OPENSSL-VERIFY-ARGS...] — openssl verifies PEM against
# ca.pem (or what the arguments say) for TLS client use; at the time of the
# test's clock, if it has one (test_clock) and the arguments name none.
verify_leaf() {
        local pem=$1 out
        shift
        [ $# -gt 0 ] || set -- -CAfile "$CA_DIR/ca.pem"
        [ ${#CLOCK[@]} -eq 0 ] || [[ " $* " == *" -attime "* ]] || set -- "$@" -attime "$(clock_now)"
        out=$(openssl verify -purpose sslclient "$@" "$pem" 2>&1) || fail "openssl verify refuses $pem: $out"
        assert_eq "$out" "$pem: OK" "openssl verify $pem"
}

# in_store SERIAL — the certificate is in `hwid cert list --all`.
in_store() {
        cert_rows | awk '{ print $1 }' | grep -qx "$1"
}

# check_not_a_ca PEM KEY — openssl refuses a certificate signed by PEM.
check_not_a_ca() {
        local pem=$1 key=$2 out
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$DEV/child.key" \
                -subj /CN=child -out "$DEV/child.csr" 2>/dev/null
        openssl x509 -req -in "$DEV/child.csr" -CA "$pem" -CAkey "$key" -CAcreateserial \
                -CAserial "$DEV/child.srl" -days 1 -out "$DEV/child.pem" 2>/dev/null
        if out=$(openssl verify -CAfile "$CA_DIR/ca.pem" -untrusted "$pem" "$DEV/child.pem" 2>&1); then
                fail "openssl accepts a certificate signed by the leaf $pem: $out"
        fi
        assert_contains "$out" "invalid CA certificate" "why openssl refuses a chain through $pem"
}

# syslog_listen SOCK OUT — a Unix datagram socket bound at SOCK, as journald
# or rsyslog bind /dev/log: each datagram it receives becomes one line of
# OUT (a datagram holding a newline would show as two lines). SYSLOG_PID
# is the listener's PID.
syslog_listen() {
        start_bg "$T/listener.log" /usr/bin/python3 -c '
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
with open(sys.argv[2], "ab", buffering=0) as f:
    while True:
        f.write(s.recv(65536) + b"\n")
' "$1" "$2"
        SYSLOG_PID=$BG_PID
        for _ in $(seq 50); do [ -S "$1" ] && return 0; sleep 0.1; done
        fail "the listener did not bind $1"
}
