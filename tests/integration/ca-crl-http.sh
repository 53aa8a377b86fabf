#!/bin/bash
# ca-crl-http.sh — the CRL distribution point is fetchable by a standard
# relying party. A real hwidd (CA key in SoftHSM2); openssl fetches the CDP
# by itself (-crl_download speaks plain HTTP only) and curl checks the rest.
# Proves:
#   - `hwid ca init` configures a plain-HTTP listener (http_listen) and writes
#     a CDP URL naming it with a real host: the first --tls-names entry that
#     is not an unspecified address (never 0.0.0.0), else the machine's host
#     name; `--http-listen none` writes neither;
#   - hwidd serves GET /crl (DER, signed by the CA) and GET /ca there, and
#     nothing else (404 for every other endpoint, and for POST /csr);
#   - `openssl verify -crl_download -crl_check` with nothing but ca.pem
#     refuses a revoked certificate and accepts a good one;
#   - a changed ca.crl_url applies on SIGHUP (the reload line says so):
#     certificates issued after it name the new URL, and it works too.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=policy-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/policy-lib.sh"

# yaml_value KEY FILE — the quoted value of the first line "KEY: "..."" (indent allowed).
yaml_value() {
        sed -n "s/^ *$1: \"\(.*\)\"$/\1/p" "$2" | head -n 1
}

cdp_of() {
        openssl x509 -in "$1" -noout -ext crlDistributionPoints | sed -n 's/^ *URI://p'
}

test_generated_config() {
        local d=$T/other
        assert_eq "$(yaml_value http_listen "$CFG")" "127.0.0.1:$HTTP_PORT" "http_listen written by ca init"
        assert_eq "$(yaml_value crl_url "$CFG")" "http://localhost:$HTTP_PORT/crl" "crl_url written by ca init"

        run_ok "$HWID" ca init --key "$(ca_key_uri)" --subject /CN=other --dir "$d/a" --listen 0.0.0.0:9443 \
                --tls-names "0.0.0.0,ca.example.org,10.0.0.1" >/dev/null
        assert_eq "$(yaml_value http_listen "$d/a/hwidd.yaml")" "0.0.0.0:8080" "default http_listen on 0.0.0.0"
        assert_eq "$(yaml_value crl_url "$d/a/hwidd.yaml")" "http://ca.example.org:8080/crl" "CDP from --tls-names"
        assert_eq "$(cdp_of "$d/a/tls.pem")" "http://ca.example.org:8080/crl" "CDP of hwidd's TLS certificate"

        run_ok "$HWID" ca init --key "$(ca_key_uri)" --subject /CN=other --dir "$d/b" --listen "[::]:9443" \
                --tls-names "::" --http-listen "[::]:8081" >/dev/null
        assert_eq "$(yaml_value crl_url "$d/b/hwidd.yaml")" "http://$(hostname):8081/crl" "CDP from the host name"

        run_ok "$HWID" ca init --key "$(ca_key_uri)" --subject /CN=other --dir "$d/c" --http-listen none >/dev/null
        grep -q '^# http_listen:' "$d/c/hwidd.yaml" || fail "--http-listen none still configures a listener"
        grep -q '^  # crl_url:' "$d/c/hwidd.yaml" || fail "--http-listen none still writes a crl_url"
        assert_eq "$(cdp_of "$d/c/tls.pem")" "" "CDP with --http-listen none"
        expect_exit 1 "fixed port" -- "$HWID" ca init --key "$(ca_key_uri)" --subject /CN=other --dir "$d/e" \
                --http-listen 127.0.0.1:0
        ! grep -R -q '0\.0\.0\.0:8080/crl\|//0\.0\.0\.0' "$d" "$CFG" || fail "a CDP names 0.0.0.0"
}

# plain OUT METHOD PATH — one request to the plain-HTTP listener.
plain() {
        CODE=$(curl -sS --max-time 30 -X "$2" -o "$1.body" -D "$1.hdr" -w '%{http_code}' \
                "http://127.0.0.1:$HTTP_PORT$3" 2>"$1.err") || true
}

test_plain_listener() {
        local p
        plain "$DEV/p-crl" GET /crl
        expect_status 200 "$DEV/p-crl"
        assert_contains "$(header Content-Type "$DEV/p-crl")" "application/pkix-crl" "Content-Type of /crl"
        assert_eq "$(openssl crl -inform DER -in "$DEV/p-crl.body" -CAfile "$CA_DIR/ca.pem" -noout 2>&1)" \
                "verify OK" "CRL over plain HTTP"
        plain "$DEV/p-ca" GET /ca
        expect_status 200 "$DEV/p-ca"
        cmp -s "$DEV/p-ca.body" "$CA_DIR/ca.pem" || fail "GET /ca over plain HTTP is not ca.pem"
        for p in /healthz /metrics /v1/identities/dev-1 /v1/requests/00000000000000000000000000000000 /crl/x /; do
                plain "$DEV/p-404" GET "$p"
                expect_error 404 not_found "$DEV/p-404"
        done
        make_csr p-1
        CODE=$(curl -sS --max-time 30 -o "$DEV/p-csr.body" -D "$DEV/p-csr.hdr" -w '%{http_code}' \
                -H "Authorization: Bearer $(token_new)" --data-binary "@$DEV/p-1.csr" \
                "http://127.0.0.1:$HTTP_PORT/csr" 2>"$DEV/p-csr.err") || true
        expect_error 404 not_found "$DEV/p-csr"
        assert_eq "$(admin cert list --identity p-1 | tail -n +2)" "" "certificates after POST /csr over plain HTTP"
}

# crl_download PEM — openssl fetches the CRL named by PEM's CDP itself.
crl_download() {
        openssl verify -crl_download -crl_check -purpose sslclient -CAfile "$CA_DIR/ca.pem" "$1" 2>&1
}

test_crl_download() {
        local out
        enrolled dev-1 "$(token_new)"
        enrolled dev-2 "$(token_new)"
        assert_eq "$(cdp_of "$DEV/dev-1.pem")" "http://localhost:$HTTP_PORT/crl" "CDP of an issued certificate"
        admin cert revoke "$(serial_of "$DEV/dev-1.pem")" >/dev/null
        if out=$(crl_download "$DEV/dev-1.pem"); then
                fail "openssl -crl_download accepts the revoked dev-1: $out"
        fi
        assert_contains "$out" "certificate revoked" "openssl -crl_download on the revoked dev-1"
        out=$(crl_download "$DEV/dev-2.pem") || fail "openssl -crl_download refuses dev-2: $out"
        assert_eq "$out" "$DEV/dev-2.pem: OK" "openssl -crl_download on dev-2"
}

test_crl_url_reload() {
        local line out
        sed -i "s|^  crl_url: .*$|  crl_url: \"http://127.0.0.1:$HTTP_PORT/crl\"|" "$CFG"
        line=$(hwidd_reload "policy reloaded")
        assert_contains "$line" "ca.crl_url" "reload line"
        assert_contains "${line%%need a restart*}" "crl_url" "crl_url among the settings applied"
        enrolled dev-3 "$(token_new)"
        assert_eq "$(cdp_of "$DEV/dev-3.pem")" "http://127.0.0.1:$HTTP_PORT/crl" "CDP after the reload"
        out=$(crl_download "$DEV/dev-3.pem") || fail "openssl -crl_download refuses dev-3: $out"
}

ca_setup
CFG=$CA_DIR/hwidd.yaml
test_generated_config
hwidd_start
assert_contains "$(cat "$HWIDD_LOG")" "serving GET /crl and GET /ca on http://127.0.0.1:$HTTP_PORT" "hwidd's log"
wait_for_port "$HTTP_PORT" 10 "$HWIDD_PID"
test_plain_listener
test_crl_download
test_crl_url_reload
hwidd_stop
echo "ca-crl-http: all checks passed"
