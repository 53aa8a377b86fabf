#!/bin/bash
# est-device.sh — EST with the device key in a TPM (swtpm).
# Proves:
#   - simplereenroll over mutual TLS with openssl s_client and the key in the
#     TPM (tpm2 provider, through tpm2-abrmd: the provider needs a resource
#     manager for a handshake) gets 200 certs-only PKCS#7 for that key, and
#     the old certificate is superseded;
#   - simplereenroll over mutual TLS with curl and openssl (software keys)
#     gets 200 certs-only PKCS#7 for the new key, and the store
#     supersedes the old certificate; the renewal window holds as for
#     /v1/renew (403 with Retry-After before it opens), and rotate_key (the
#     same key is 403); without a client certificate it is 401 with
#     WWW-Authenticate; a label that is not the certificate's profile is 403;
#   - with the key in the TPM (TLS and CSR signatures made there), through
#     hwid's own client: hwid join --est (pin checked against cacerts, key made in the TPM,
#     token as Basic credentials) writes an identity openssl verifies, and
#     spends the token; hwid renew --est renews it; rotate_key holds (a
#     renewal with the same key is refused, --rotate gets a new TPM key);
#   - hwid join --est --no-wait on a manual profile exits 3, and after
#     `hwid request approve` the same command collects the certificate;
#   - no transient object is left in the TPM.
# shellcheck source-path=SCRIPTDIR source=../lib.sh disable=SC2119
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"

require_tools tpm2_getcap tpm2-abrmd dbus-daemon
device_ca <<'EOF'
  device:
    validity: 1h
    key_types: [ec-p256]
    renewal:
      window: 1.0
  early:
    validity: 1h
    key_types: [ec-p256]
    renewal:
      window: 0.1
  rot:
    validity: 1h
    key_types: [ec-p256]
    renewal:
      window: 1.0
      rotate_key: true
EOF
swtpm_init
EST=/.well-known/est

# b64 CSR OUT — the DER of a PEM CSR as base64 with CRLF line breaks.
b64() {
        openssl req -in "$1" -outform DER | openssl base64 -e | sed 's/$/\r/' >"$2"
}

# est_enroll NAME PROFILE — a software key and certificate from simpleenroll
# (curl, Basic): $DEV/NAME.key, $DEV/NAME.pem.
est_enroll() {
        local name=$1 tok
        tok=$(token_new --profile "$2")
        make_csr "$name"
        b64 "$DEV/$name.csr" "$DEV/$name.b64"
        http "$DEV/$name" POST "$EST/simpleenroll" --user "${tok%%.*}:${tok#*.}" \
                -H "Content-Type: application/pkcs10" --data-binary "@$DEV/$name.b64"
        expect_status 200 "$DEV/$name"
        openssl base64 -d -in "$DEV/$name.body" | openssl pkcs7 -inform DER -print_certs -out "$DEV/$name.pem" ||
                fail "openssl cannot read the simpleenroll answer for $name"
}

# reenroll OUT NAME PATH — POST PATH over mutual TLS with NAME's certificate
# and key, sending a CSR for a new key $DEV/NAME-2.key (curl).
reenroll() {
        local out=$1 name=$2 path=$3
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$DEV/$name-2.key" \
                -subj "/CN=$name" -out "$DEV/$name-2.csr" 2>/dev/null || fail "openssl req for $name"
        b64 "$DEV/$name-2.csr" "$out.b64"
        http "$out" POST "$path" --cert "$DEV/$name.pem" --key "$DEV/$name.key" \
                -H "Content-Type: application/pkcs10" --data-binary "@$out.b64"
}

test_simplereenroll() {
        local old
        est_enroll re-1 device
        old=$(serial_of "$DEV/re-1.pem")
        reenroll "$T/re-1a" re-1 "$EST/simplereenroll"
        expect_status 200 "$T/re-1a"
        assert_eq "$(header Content-Type "$T/re-1a")" "application/pkcs7-mime; smime-type=certs-only" "Content-Type"
        assert_eq "$(header Content-Transfer-Encoding "$T/re-1a")" base64 "Content-Transfer-Encoding"
        openssl base64 -d -in "$T/re-1a.body" | openssl pkcs7 -inform DER -print_certs -out "$T/re-1a.pem" ||
                fail "openssl cannot read the simplereenroll answer"
        verify_leaf "$T/re-1a.pem"
        assert_eq "$(cert_pubkey "$T/re-1a.pem")" "$(openssl pkey -in "$DEV/re-1-2.key" -pubout)" "renewed cert vs new key"
        read -ra f <<<"$(cert_rows | awk -v s="$old" '$1 == s')"
        assert_eq "${f[1]}" superseded "the old certificate after simplereenroll"
        # The superseded certificate no longer renews (a new key was certified).
        reenroll "$T/re-1s" re-1 "$EST/simplereenroll"
        expect_status 401 "$T/re-1s"
        # Without a client certificate: 401 and how to authenticate.
        http "$T/re-anon" POST "$EST/simplereenroll" -H "Content-Type: application/pkcs10" --data-binary "@$T/re-1a.b64"
        expect_status 401 "$T/re-anon"
        [ -n "$(header WWW-Authenticate "$T/re-anon")" ] || fail "401 without WWW-Authenticate"
        # A label names the certificate's profile or nothing.
        est_enroll re-2 device
        reenroll "$T/re-2a" re-2 "$EST/rot/simplereenroll"
        expect_status 403 "$T/re-2a"
        assert_contains "$(cat "$T/re-2a.body")" "not of EST label rot" "label refusal"
        reenroll "$T/re-2b" re-2 "$EST/device/simplereenroll"
        expect_status 200 "$T/re-2b"
        # The renewal window is /v1/renew's.
        est_enroll early-1 early
        reenroll "$T/early-1a" early-1 "$EST/early/simplereenroll"
        expect_status 403 "$T/early-1a"
        [ "$(header Retry-After "$T/early-1a")" -gt 60 ] || fail "no Retry-After until the window opens"
        assert_eq "$(cert_rows --identity early-1 | wc -l)" 1 "certificates of early-1 after a refusal"
        # rotate_key: the same key again is refused.
        est_enroll rot-0 rot
        http "$T/rot-0a" POST "$EST/simplereenroll" --cert "$DEV/rot-0.pem" --key "$DEV/rot-0.key" \
                -H "Content-Type: application/pkcs10" --data-binary "@$DEV/rot-0.b64"
        expect_status 403 "$T/rot-0a"
}

# simplereenroll over mutual TLS with the key in the TPM, openssl as the peer
# (s_client with the tpm2 provider): the TLS signature and the CSR's are made
# in the TPM by a program that is not hwid.
test_simplereenroll_tpm_openssl() {
        local h=0x81000011 ossl len old
        ossl=(-provider tpm2 -provider default -propquery '?provider=tpm2,tpm2.digest!=yes')
        run_ok "$HWID" key create "tpm2:handle=$h" --type ec-p256 >/dev/null
        TPM2OPENSSL_TCTI=$HWID_TCTI openssl req -new "${ossl[@]}" -key "handle:$h" -subj /CN=tpm-ossl \
                -out "$T/tpm-ossl.csr" || fail "openssl req with the TPM key"
        b64 "$T/tpm-ossl.csr" "$T/tpm-ossl.b64"
        local tok
        tok=$(token_new --profile device)
        http "$T/tpm-ossl" POST "$EST/simpleenroll" --user "${tok%%.*}:${tok#*.}" \
                -H "Content-Type: application/pkcs10" --data-binary "@$T/tpm-ossl.b64"
        expect_status 200 "$T/tpm-ossl"
        openssl base64 -d -in "$T/tpm-ossl.body" | openssl pkcs7 -inform DER -print_certs -out "$T/tpm-ossl.pem" ||
                fail "openssl cannot read the simpleenroll answer for the TPM key"
        old=$(serial_of "$T/tpm-ossl.pem")
        len=$(wc -c <"$T/tpm-ossl.b64")
        tabrmd_start
        { printf 'POST %s/simplereenroll HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/pkcs10\r\n' "$EST"
          printf 'Content-Length: %s\r\nConnection: close\r\n\r\n' "$len"
          cat "$T/tpm-ossl.b64"; sleep 3; } |
                TPM2OPENSSL_TCTI=$TABRMD_TCTI timeout 30 openssl s_client "${ossl[@]}" -quiet \
                -connect "127.0.0.1:$PORT" -CAfile "$CA_DIR/ca.pem" -cert "$T/tpm-ossl.pem" -key "handle:$h" \
                >"$T/tpm-ossl-re.out" 2>"$T/tpm-ossl-re.err" || true
        tabrmd_stop
        assert_contains "$(head -1 "$T/tpm-ossl-re.out")" "HTTP/1.1 200" \
                "simplereenroll by openssl with the TPM key ($(tail -3 "$T/tpm-ossl-re.err"))"
        sed '1,/^\r$/d' "$T/tpm-ossl-re.out" | openssl base64 -d | openssl pkcs7 -inform DER -print_certs \
                -out "$T/tpm-ossl-2.pem" || fail "openssl cannot read the simplereenroll answer"
        verify_leaf "$T/tpm-ossl-2.pem"
        assert_eq "$(cert_pubkey "$T/tpm-ossl-2.pem")" "$(cert_pubkey "$T/tpm-ossl.pem")" "renewed cert vs the TPM key"
        read -ra f <<<"$(cert_rows | awk -v s="$old" '$1 == s')"
        assert_eq "${f[1]}" superseded "the TPM key's first certificate after simplereenroll by openssl"
        assert_no_transient
}

test_join_renew_est() {
        local d=$T/est-1 tok out first
        tok=$(token_new --profile device)
        out=$(join_dev "$d" est-1 "$tok" --est 2>&1) || fail "hwid join --est: $out"
        assert_contains "$out" "over EST" "join --est progress"
        check_dir "$d" est-1
        assert_eq "$(token_used "$tok")" 1 "token uses after join --est"
        first=$(dir_serial "$d")
        out=$("$HWID" renew --dir "$d" --est 2>&1) || fail "hwid renew --est: $out"
        check_dir "$d" est-1
        [ "$(dir_serial "$d")" != "$first" ] || fail "hwid renew --est kept the old certificate"
        read -ra f <<<"$(cert_rows | awk -v s="$first" '$1 == s')"
        assert_eq "${f[1]}" superseded "the first certificate after renew --est"
        # rotate_key: the same key is refused, --rotate makes a new one in the TPM.
        local r=$T/rot-1 key0
        join_dev "$r" rot-1 "$(token_new --profile rot)" --est >/dev/null 2>&1 || fail "hwid join --est rot-1"
        key0=$(key_pubkey "$(cat "$r/key.uri")")
        expect_exit 1 "new key" --multiline -- "$HWID" renew --dir "$r" --est
        out=$("$HWID" renew --dir "$r" --est --rotate 2>&1) || fail "hwid renew --est --rotate: $out"
        check_dir "$r" rot-1
        [ "$(key_pubkey "$(cat "$r/key.uri")")" != "$key0" ] || fail "renew --est --rotate kept the key"
}

test_join_est_manual() {
        local d=$T/man-1 tok id rc=0
        tok=$(token_new --profile manual)
        join_dev "$d" man-1 "$tok" --est --no-wait >"$T/man-1.out" 2>&1 || rc=$?
        assert_eq "$rc" 3 "hwid join --est --no-wait exit code while pending"
        [ ! -e "$d/cert.pem" ] || fail "a certificate before the approval"
        id=$(admin request list | awk '$3 == "man-1" { print $1 }')
        [ -n "$id" ] || fail "no pending request for man-1"
        admin request approve "$id" >/dev/null
        join_dev "$d" man-1 "$tok" --est --no-wait >"$T/man-1b.out" 2>&1 ||
                fail "hwid join --est after the approval: $(cat "$T/man-1b.out")"
        check_dir "$d" man-1
        assert_eq "$(token_used "$tok")" 1 "token uses after the approval"
        expect_exit 2 "attestation" -- "$HWID" join --server "$URL" --ca-hash "$PIN" --key "tpm2:file=$d/x.tss2.pem" \
                --cn x --dir "$T/x" --est --attest
}

test_simplereenroll
test_simplereenroll_tpm_openssl
test_join_renew_est
test_join_est_manual
assert_no_transient
hwidd_stop
echo "est-device: all checks passed"
