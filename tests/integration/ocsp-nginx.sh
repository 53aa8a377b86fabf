#!/bin/bash
# ocsp-nginx.sh — nginx checks device client certificates with hwidd's
# OCSP responder (`ssl_verify_client on; ssl_ocsp on;`, no ssl_crl, no
# ssl_ocsp_responder: nginx asks the responder each certificate names in
# its authorityInfoAccess), the recipe of docs/USING.md.
# Proves:
#   - nginx admits a device whose certificate is good, and refuses one
#     revoked before (400, "certificate revoked" in its log);
#   - a device revoked while nginx runs is refused at its next connection,
#     with nothing reloaded anywhere (no CRL to fetch, no SIGHUP);
#   - the answers were hwidd's (hwid_ocsp_requests_total by status).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=policy-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/policy-lib.sh"
# shellcheck source=ops-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ops-lib.sh"
# shellcheck source=nginx-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/nginx-lib.sh"

require_tools nginx

# nginx_start — nginx on NGINX_PORT: TLS with a server certificate of its
# own, client certificates from ca.pem, checked by OCSP only.
nginx_start() {
        mkdir -p "$T/nginx"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$T/nginx/server.key" \
                -subj /CN=localhost -days 2 -out "$T/nginx/server.pem" 2>/dev/null || fail "openssl req -x509"
        nginx_run "        ssl_certificate $T/nginx/server.pem;
        ssl_certificate_key $T/nginx/server.key;
        ssl_client_certificate $CA_DIR/ca.pem;
        ssl_verify_client on;
        ssl_ocsp on;
        location / { return 200 \"hello \$ssl_client_s_dn\\n\"; }"
}

# nginx_get NAME — curl to nginx with device NAME's key and certificate;
# prints the HTTP status.
nginx_get() {
        curl -sS -k -o "$DEV/ng-$1.body" -w '%{http_code}' --cert "$DEV/$1.pem" --key "$DEV/$1.key" \
                "https://127.0.0.1:$NGINX_PORT/" 2>"$DEV/ng-$1.err" || true
}

ca_setup
public_metrics
# An address, not a name: nginx resolves a responder's name only with a
# `resolver` (docs/USING.md).
sed -i "s|^  ocsp_url: .*|  ocsp_url: \"http://127.0.0.1:$HTTP_PORT/ocsp\"|" "$CFG"
hwidd_start
wait_for_port "$HTTP_PORT" 10 "$HWIDD_PID"
enrolled good "$(token_new)"
enrolled bad "$(token_new)"
assert_eq "$(openssl x509 -in "$DEV/good.pem" -noout -ocsp_uri)" "http://127.0.0.1:$HTTP_PORT/ocsp" "the leaf's AIA"
admin cert revoke --reason key-compromise "$(serial_of "$DEV/bad.pem")" >/dev/null
nginx_start
grep -q "ssl_crl" "$T/nginx/nginx.conf" && fail "the nginx configuration names a CRL"

scrape "$T/m0"
assert_eq "$(nginx_get good)" 200 "nginx and the good device ($(cat "$DEV/ng-good.err"))"
assert_contains "$(cat "$DEV/ng-good.body")" "CN=good" "nginx saw the device's certificate"
assert_eq "$(nginx_get bad)" 400 "nginx and the device revoked before ($(cat "$DEV/ng-bad.err"))"
assert_contains "$(cat "$DEV/ng-bad.body")" "The SSL certificate error" "nginx's refusal"
grep -q "certificate revoked" "$T/nginx/logs/error.log" || fail "nginx's log does not say revoked"

# Revoked now: refused at the next connection, nothing reloaded.
admin cert revoke "$(serial_of "$DEV/good.pem")" >/dev/null
assert_eq "$(nginx_get good)" 400 "nginx and the device revoked a moment ago ($(cat "$DEV/ng-good.err"))"
scrape "$T/m1"
assert_eq "$(metric_delta "$T/m0" "$T/m1" 'hwid_ocsp_requests_total{status="good"}')" 1 "good answers to nginx"
assert_eq "$(metric_delta "$T/m0" "$T/m1" 'hwid_ocsp_requests_total{status="revoked"}')" 2 "revoked answers to nginx"
kill -TERM "$NGINX_PID"
wait "$NGINX_PID" 2>/dev/null || true
hwidd_stop
echo "ocsp-nginx: nginx with ssl_ocsp on admits the good device and refuses the revoked ones, at once"
