#!/bin/bash
# ca-init.sh — what `hwid ca init` leaves behind, when it works and when it
# fails (CA key in SoftHSM2). Proves:
#   - a standard RFC 7512 URI with pin-value= works end to end: the CA and
#     hwidd's TLS key are made in the token, the PIN goes to DIR/ca-key.pin
#     (mode 0600) and hwidd.yaml names it with pin-source= (no PIN in
#     hwidd.yaml, nor in anything ca init printed); hwidd starts on the
#     generated file and issues a certificate that openssl verifies;
#   - hwidd's TLS certificate names its CN among its SANs: in DIR/tls.pem
#     and as the running hwidd presents it (openssl s_client), for the
#     default --tls-names and for a list starting with 0.0.0.0;
#   - a run that fails after it made the CA key (hwidd's TLS key on a token
#     that does not exist) exits 1, says the key stays and a new run uses
#     it, and leaves no directory; the next run uses that key and succeeds;
#   - what would fail only after keys are made (an unknown query attribute
#     in the key URI, a bad --http-listen, a quote in --listen) is refused
#     first: no key on the token, no directory.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=key-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/key-lib.sh"

require_tools pkcs11-tool

P11_TOKEN=ca
P11_PIN=init-Pin-5813   # distinctive, so that any trace of it in output shows
softhsm_init "$P11_TOKEN" "$P11_PIN"

# init DIR ARGS... — hwid ca init of a CA into DIR listening on free ports
# (PORT, URL); its output in $T/last.out, $T/last.err; exit status in RC.
init() {
        local dir=$1
        shift
        PORT=$(free_port)
        URL=https://127.0.0.1:$PORT
        RC=0
        "$HWID" ca init --subject "/CN=init test CA" --dir "$dir" --listen "127.0.0.1:$PORT" \
                --http-listen "127.0.0.1:$(free_port)" "$@" >"$T/last.out" 2>"$T/last.err" || RC=$?
}

# cn_in_sans PEM — the certificate's CN is one of its SANs.
cn_in_sans() {
        local pem=$1 cn sans
        cn=$(openssl x509 -in "$pem" -noout -subject -nameopt multiline | sed -n 's/^ *commonName *= *//p')
        sans=$(openssl x509 -in "$pem" -noout -ext subjectAltName | tail -n +2 | tr -d ' ' | tr ',' '\n')
        [ -n "$cn" ] || fail "$pem has no CN"
        grep -qxE "(DNS|IPAddress):$cn" <<<"$sans" ||
                fail "the CN '$cn' of $pem is not among its SANs: $(tr '\n' ' ' <<<"$sans")"
        echo "$cn"
}

# served_cert FILE — the certificate hwidd presents on $PORT, as PEM.
served_cert() {
        openssl s_client -connect "127.0.0.1:$PORT" -CAfile "$CA_DIR/ca.pem" </dev/null 2>"$1.err" |
                openssl x509 >"$1" 2>>"$1.err" || fail "no certificate from hwidd: $(cat "$1.err")"
}

test_pin_value_end_to_end() {
        local tok cn
        CA_DIR=$T/ca CFG=$T/ca/hwidd.yaml
        init "$CA_DIR" --key "pkcs11:token=ca;object=ca-key?pin-value=$P11_PIN"
        [ "$RC" = 0 ] || fail "ca init with pin-value= exited $RC: $(cat "$T/last.err")"
        assert_not_contains "$(cat "$T/last.out" "$T/last.err")" "$P11_PIN" "PIN in ca init's output"
        assert_not_contains "$(cat "$CFG")" "$P11_PIN" "PIN in hwidd.yaml"
        assert_file_mode "$CA_DIR/ca-key.pin" 600
        assert_eq "$(cat "$CA_DIR/ca-key.pin")" "$P11_PIN" "the PIN file"
        # p11-kit percent-encodes the values of the URIs it writes.
        assert_eq "$(python3 -c 'import sys, urllib.parse; print(urllib.parse.unquote(sys.stdin.read()))' <"$CFG" |
                grep -c "^  key: \"pkcs11:.*pin-source=file:$CA_DIR/ca-key.pin")" 2 "key URIs of hwidd.yaml naming the PIN file"
        [ -z "$(find "$CA_DIR" -name '.hwid-init.*')" ] || fail "ca init left its staging directory"
        p11 --list-objects --type privkey | grep -q "label: *ca-key-tls" || fail "no TLS key on the token"
        hwidd_start
        tok=$(token_new)
        enroll dev-1 "$tok"
        expect_status 201 "$DEV/dev-1"
        verify_leaf "$DEV/dev-1.pem"
        # hwidd's own certificate: CN among the SANs, on disk and served.
        cn=$(cn_in_sans "$CA_DIR/tls.pem")
        assert_eq "$cn" localhost "CN of hwidd's TLS certificate"
        served_cert "$T/served.pem"
        cmp -s <(openssl x509 -in "$T/served.pem" -outform DER) <(openssl x509 -in "$CA_DIR/tls.pem" -outform DER) ||
                fail "hwidd presents another certificate than tls.pem"
        cn_in_sans "$T/served.pem" >/dev/null
        hwidd_stop
}

test_tls_cn_skips_unspecified() {
        init "$T/ca-any" --key "pkcs11:token=ca;object=any?pin-source=file:$T/pin" --tls-names "0.0.0.0,ca.example,127.0.0.1"
        [ "$RC" = 0 ] || fail "ca init exited $RC: $(cat "$T/last.err")"
        assert_eq "$(cn_in_sans "$T/ca-any/tls.pem")" ca.example "CN with --tls-names 0.0.0.0,ca.example,..."
}

test_failed_init_leaves_nothing() {
        local dir=$T/ca-fail
        init "$dir" --key "pkcs11:token=ca;object=k2?pin-source=file:$T/pin" \
                --tls-key "pkcs11:token=nope;object=x?pin-source=file:$T/pin"
        assert_eq "$RC" 1 "exit status of a ca init whose TLS key cannot be made"
        assert_contains "$(cat "$T/last.err")" "no PKCS#11 token labelled 'nope'"
        assert_contains "$(cat "$T/last.err")" "nothing was written to $dir; the CA key this run created stays at"
        [ ! -e "$dir" ] || fail "a failed ca init left $dir: $(ls -A "$dir")"
        p11 --list-objects --type privkey | grep -q "label: *k2$" || fail "the CA key it made is gone"
        # The next run reuses that key and makes the whole CA.
        init "$dir" --key "pkcs11:token=ca;object=k2?pin-source=file:$T/pin"
        [ "$RC" = 0 ] || fail "ca init after a failed one exited $RC: $(cat "$T/last.err")"
        assert_contains "$(cat "$T/last.out")" "using existing CA key"
        for f in ca.pem tls.pem hwid.db hwidd.yaml; do
                [ -s "$dir/$f" ] || fail "no $dir/$f after the second run"
        done
}

test_refused_before_anything() {
        local before
        before=$(p11_objects)
        init "$T/ca-r1" --key "pkcs11:token=ca;object=r1?pin-source=file:$T/pin&pin-valu=1"
        assert_eq "$RC" 1 "exit status with an unknown query attribute"
        assert_contains "$(cat "$T/last.err")" "query attribute 'pin-valu'"
        init "$T/ca-r2" --key "pkcs11:token=ca;object=r2?pin-source=file:$T/pin" --http-listen bogus
        assert_eq "$RC" 1 "exit status with a bad --http-listen"
        assert_contains "$(cat "$T/last.err")" "--http-listen 'bogus'"
        RC=0
        "$HWID" ca init --subject /CN=x --dir "$T/ca-r3" --key "pkcs11:token=ca;object=r3?pin-source=file:$T/pin" \
                --listen '127.0.0.1:1"' >"$T/last.out" 2>"$T/last.err" || RC=$?
        assert_eq "$RC" 1 "exit status with a quote in --listen"
        assert_contains "$(cat "$T/last.err")" "may not contain quotes"
        for d in ca-r1 ca-r2 ca-r3; do
                [ ! -e "$T/$d" ] || fail "a refused ca init made $T/$d"
        done
        assert_eq "$(p11_objects)" "$before" "the token after refused runs"
}

test_pin_value_end_to_end
test_tls_cn_skips_unspecified
test_failed_init_leaves_nothing
test_refused_before_anything
echo "ca-init: all checks passed"
