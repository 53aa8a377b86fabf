#!/bin/bash
# using-tpm.sh — docs/USING.md: a device's hwid identity, its key in the TPM
# (swtpm behind tpm2-abrmd on a private D-Bus bus), used by programs that are
# not hwid, through OpenSSL's tpm2 provider and contrib/openssl-tpm2.cnf;
# and relying parties that check hwid's CRL.
# Proves:
#   - with openssl-tpm2.cnf, curl and `openssl s_client` authenticate with
#     the TPM key (mutual TLS to hwidd's GET /v1/identities/NAME, and to
#     nginx); without its [random] section curl stops with "Insufficient
#     randomness" (the failure this configuration fixes);
#   - mosquitto_pub publishes with the TPM key to a mosquitto broker that
#     requires a client certificate from hwid's CA and checks its CRL;
#   - nginx verifies the device certificate against the CA and the CRL;
#   - once the device is revoked and the CRL fetched again from hwidd's
#     plain-HTTP distribution point (and each server told: SIGHUP), the
#     broker and nginx refuse the device, and hwidd refuses it at once;
#   - no transient object is left in the TPM.
# shellcheck source-path=SCRIPTDIR source=../lib.sh disable=SC2119
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"
# shellcheck source=nginx-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/nginx-lib.sh"

require_tools tpm2_getcap tpm2-abrmd dbus-daemon mosquitto mosquitto_pub nginx curl
device_ca <<'EOF'
  device:
    validity: 1h
    key_types: [ec-p256]
  server:
    validity: 1h
    key_types: [ec-p256]
    extended_key_usage: [serverAuth]
    san:
      ip: ["127.0.0.1"]
EOF
swtpm_init
CNF=$SRCDIR/contrib/openssl-tpm2.cnf

# The device: joined with its key in the TPM, as in docs/DEVICE.md.
D=$T/device
join_dev "$D" edge-1 "$(token_new --profile device)" >"$T/join.out" 2>&1 ||
        fail "hwid join: $(cat "$T/join.out")"
KEY=$D/device.tss2.pem
[ -s "$KEY" ] || fail "no TPM key file $KEY"

# The servers' own certificate (software keys: they are the relying parties).
enroll server "$(token_new --profile server)" -addext "subjectAltName=IP:127.0.0.1"
expect_status 201 "$DEV/server"

# fetch_crl — hwidd's CRL from its distribution point, as PEM for the servers.
fetch_crl() {
        curl -sSf --max-time 30 -o "$T/crl.der" "http://127.0.0.1:$HTTP_PORT/crl" || fail "GET /crl"
        openssl crl -inform DER -in "$T/crl.der" -out "$T/crl.pem" || fail "the CRL is not DER"
}
fetch_crl

# tpm CMD... — CMD with the TPM key usable through the tpm2 provider.
tpm() {
        OPENSSL_CONF=${CONF:-$CNF} TPM2OPENSSL_TCTI=$TABRMD_TCTI timeout 60 "$@"
}

# --- nginx: client certificates from hwid's CA, checked against the CRL -----
# TLS 1.3: nginx 1.22 offers only up to 1.2 unless told, and over 1.2 a
# client with the tpm2 provider preferred offers no NIST curve
# (docs/USING.md): "no shared cipher".
nginx_run "        ssl_protocols TLSv1.2 TLSv1.3;
        ssl_certificate $DEV/server.pem;
        ssl_certificate_key $DEV/server.key;
        ssl_client_certificate $CA_DIR/ca.pem;
        ssl_verify_client on;
        ssl_crl $T/crl.pem;
        location / { return 200 \"hello \$ssl_client_s_dn\\n\"; }"

# --- mosquitto: the same, for MQTT over TLS ----------------------------------
MQTT_PORT=$(free_port)
cat >"$T/mosquitto.conf" <<EOF
per_listener_settings false
# the test runs as root and its files are its own (mosquitto would switch to its user)
user root
listener $MQTT_PORT 127.0.0.1
cafile $CA_DIR/ca.pem
certfile $DEV/server.pem
keyfile $DEV/server.key
require_certificate true
use_identity_as_username true
crlfile $T/crl.pem
allow_anonymous false
log_dest stderr
log_type all
EOF
start_bg "$T/mosquitto.log" mosquitto -c "$T/mosquitto.conf"
MOSQ_PID=$BG_PID
wait_for_port "$MQTT_PORT" 20 "$MOSQ_PID"

tabrmd_start

# curl_ident OUT — curl with the TPM key: GET /v1/identities/edge-1 from hwidd.
curl_ident() {
        tpm curl -sS -o "$1.body" -w '%{http_code}' --cacert "$D/ca.pem" --cert "$D/cert.pem" --key "$KEY" \
                "$URL/v1/identities/edge-1" 2>"$1.err" || true
}

# nginx_get OUT — curl with the TPM key to nginx; prints the HTTP status.
nginx_get() {
        tpm curl -sS -o "$1.body" -w '%{http_code}' --cacert "$CA_DIR/ca.pem" --cert "$D/cert.pem" \
                --key "$KEY" "https://127.0.0.1:$NGINX_PORT/" 2>"$1.err" || true
}

# s_client_get OUT — openssl s_client with the TPM key, GET / from nginx.
s_client_get() {
        { printf 'GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n'; sleep 2; } |
                tpm openssl s_client -quiet -connect "127.0.0.1:$NGINX_PORT" -CAfile "$CA_DIR/ca.pem" \
                        -cert "$D/cert.pem" -key "$KEY" >"$1.out" 2>"$1.err" || true
}

# mqtt_pub — mosquitto_pub with the TPM key, QoS 1 (waits for the broker's ack).
mqtt_pub() {
        tpm mosquitto_pub -h 127.0.0.1 -p "$MQTT_PORT" --cafile "$CA_DIR/ca.pem" --cert "$D/cert.pem" \
                --key "$KEY" -q 1 -t "devices/edge-1/hello" -m "hello from the TPM" -i edge-1 >"$T/pub.out" 2>&1
}

# The failure the configuration's [random] section fixes.
sed '/^random = hwid_tpm2_random$/d' "$CNF" >"$T/no-random.cnf"
code=$(CONF=$T/no-random.cnf curl_ident "$T/norand")
assert_contains "$(cat "$T/norand.err")" "Insufficient randomness" "curl without the [random] section (status $code)"

# Before revocation: every relying party accepts the TPM key.
assert_eq "$(curl_ident "$T/id1")" 200 "curl with the TPM key to hwidd ($(cat "$T/id1.err"))"
assert_contains "$(cat "$T/id1.body")" '"edge-1"' "hwidd's answer to curl"
assert_eq "$(nginx_get "$T/ng1")" 200 "curl with the TPM key to nginx ($(cat "$T/ng1.err"))"
assert_contains "$(cat "$T/ng1.body")" "CN=edge-1" "nginx saw the device's certificate"
s_client_get "$T/sc1"
assert_contains "$(head -n 1 "$T/sc1.out")" "HTTP/1.1 200" "openssl s_client with the TPM key to nginx ($(tail -n 3 "$T/sc1.err"))"
mqtt_pub || fail "mosquitto_pub with the TPM key: $(cat "$T/pub.out"); broker: $(tail -n 5 "$T/mosquitto.log")"
grep -q "Received PUBLISH from edge-1" "$T/mosquitto.log" || fail "the broker logged no PUBLISH from edge-1"

# Revoked: hwidd at once; the others once they have the new CRL (SIGHUP).
admin cert revoke --identity edge-1 --reason key-compromise >/dev/null
fetch_crl
openssl crl -in "$T/crl.pem" -noout -text | grep -q "$(dir_serial "$D")" || fail "the CRL does not list edge-1"
kill -HUP "$NGINX_PID" "$MOSQ_PID"
sleep 2 # both reload on SIGHUP before their next connection; give the load room
assert_eq "$(curl_ident "$T/id2")" 401 "hwidd refuses the revoked device"
assert_eq "$(nginx_get "$T/ng2")" 400 "nginx refuses the revoked device ($(cat "$T/ng2.err"))"
assert_contains "$(cat "$T/ng2.body")" "The SSL certificate error" "nginx's refusal"
grep -q "certificate revoked" "$T/nginx/logs/error.log" || fail "nginx's log does not say revoked"
s_client_get "$T/sc2"
assert_contains "$(head -n 1 "$T/sc2.out")" "HTTP/1.1 400" "openssl s_client, revoked, to nginx"
! mqtt_pub || fail "mosquitto_pub of a revoked device was accepted"
sed -n '/Reloading config/,$p' "$T/mosquitto.log" | grep -q "certificate verify failed" ||
        fail "the broker did not refuse the certificate: $(tail -n 5 "$T/mosquitto.log"); mosquitto_pub: $(cat "$T/pub.out")"

tabrmd_stop
assert_no_transient
echo "using-tpm: curl, openssl s_client and mosquitto_pub with the TPM key; nginx, mosquitto and hwidd refuse the revoked device"
