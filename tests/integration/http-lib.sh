# shellcheck shell=bash disable=SC2034  # variables used by the scripts sourcing this
# http-lib.sh — fixtures of the transport tests (http-*.sh): tests/http-test-server
# with its TLS keys in a SoftHSM2 token, a throwaway PKI made with openssl
# (files in $T only), and curl / openssl s_client helpers.  Sourced after
# tests/lib.sh.

: "${HTTP_TEST_SERVER:=$(_lib_default_bin "$BUILDDIR/tests/http-test-server")}"
require_tools openssl curl jq ss softhsm2-util
[ -x "$HTTP_TEST_SERVER" ] || fail "no test server at $HTTP_TEST_SERVER (build it or set HTTP_TEST_SERVER)"

# OpenSSL keeps the providers hsm_init() loads for the life of the process;
# LeakSanitizer reports that one allocation at exit.  Suppress it alone.
printf 'leak:load_providers\n' >"$T/lsan.supp"
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$T/lsan.supp}

softhsm_init tls
P=$T/pki
keyuri() { echo "pkcs11:token=tls;object=$1?module-path=$SOFTHSM_MODULE&pin-source=file:$T/pin"; }

# --- fixtures: device keys, a throwaway test PKI (files in $T only) -----------

mkpki() {
        local d=$T/pki
        mkdir -p "$d/db" && : >"$d/db/index.txt" && echo 1000 >"$d/db/serial"
        newca() { openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes \
                -keyout "$d/$1.key" -out "$d/$1.pem" -subj "/CN=$1" -days 2 2>/dev/null; }
        newca server-ca && newca client-ca && newca other-ca
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$d/junk.key" 2>/dev/null
        printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' >"$d/server.ext"
        printf 'extendedKeyUsage=clientAuth\n' >"$d/client.ext"
        cat >"$d/ca.cnf" <<EOF
[ca]
default_ca = d
[d]
database = $d/db/index.txt
serial = $d/db/serial
new_certs_dir = $d/db
default_md = sha256
policy = p
[p]
commonName = supplied
[ext]
extendedKeyUsage = clientAuth
EOF
}

# server_cert NAME TYPE — key NAME in the token, certificate $T/pki/NAME.pem
# for its public key (a throwaway CSR only carries the subject).
server_cert() {
        local d=$T/pki
        run_ok "$HTTP_TEST_SERVER" create-key "$(keyuri "$1")" "$2" >"$d/$1.pub"
        openssl req -new -key "$d/junk.key" -subj /CN=localhost -out "$d/$1.csr"
        openssl x509 -req -in "$d/$1.csr" -force_pubkey "$d/$1.pub" -CA "$d/server-ca.pem" \
                -CAkey "$d/server-ca.key" -CAcreateserial -days 2 -extfile "$d/server.ext" \
                -out "$d/$1.pem" 2>/dev/null
}

# client_cert NAME CA [expired]
client_cert() {
        local d=$T/pki
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/$1.key" \
                -subj "/CN=dev-$1" -out "$d/$1.csr" 2>/dev/null
        if [ "${3:-}" = expired ]; then
                openssl ca -batch -config "$d/ca.cnf" -cert "$d/$2.pem" -keyfile "$d/$2.key" \
                        -in "$d/$1.csr" -startdate 20200101000000Z -enddate 20200201000000Z \
                        -extensions ext -out "$d/$1.pem" 2>/dev/null
        else
                openssl x509 -req -in "$d/$1.csr" -CA "$d/$2.pem" -CAkey "$d/$2.key" -CAcreateserial \
                        -days 2 -extfile "$d/client.ext" -out "$d/$1.pem" 2>/dev/null
        fi
}

# --- helpers ------------------------------------------------------------------

# start_server NAME KEY [serve options] — sets SRV_PID and PORT.
start_server() {
        local name=$1 key=$2 i
        shift 2
        start_bg "$T/$name.log" "$HTTP_TEST_SERVER" serve --key "$(keyuri "$key")" \
                --cert "$P/$key.pem" "$@"
        SRV_PID=$BG_PID SRV_LOG=$T/$name.log PORT=
        for ((i = 0; i < 300; i++)); do
                PORT=$(sed -n 's/^port \([0-9]*\)$/\1/p' "$SRV_LOG")
                [ -n "$PORT" ] && return 0
                _lib_is_alive "$SRV_PID" || fail "test server $name exited: $(cat "$SRV_LOG")"
                sleep 0.05
        done
        fail "test server $name did not start"
}

# stop_server — SIGTERM, then it must stop gracefully and exit 0, having
# printed nothing but its own lines (the transport never logs).
stop_server() {
        local rc=0
        kill -TERM "$SRV_PID"
        wait "$SRV_PID" || rc=$?
        assert_eq "$rc" 0 "test server exit code"
        assert_eq "$(tr '\n' ' ' <"$SRV_LOG")" "port $PORT stopping stopped " "test server output"
}

URL() { echo "https://127.0.0.1:$PORT$1"; }
hcurl() { curl -sS --max-time 20 --cacert "$P/server-ca.pem" "$@"; }
# status URL [curl options] — the HTTP status only (000: no response).
status() { hcurl -o /dev/null -w '%{http_code}' "$@" 2>/dev/null || true; }
calls() { hcurl "$(URL /count)" | json_get - .calls; }

# sclient ARGS... — openssl s_client as the peer; prints its report.
sclient() {
        printf 'GET /s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n' |
                timeout 20 openssl s_client -connect "127.0.0.1:$PORT" -CAfile "$P/server-ca.pem" \
                        -verify_return_error -ign_eof "$@" 2>&1 || true
}

