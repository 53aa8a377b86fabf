#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# ca-rollover-forged.sh — a device adopts a new CA only by proof: a link
# certificate from a key it already trusts (docs/DEVICE.md). The server is
# tests/hostile-ca.py, its PKI made here with the openssl CLI: the old CA O
# (which the device pins, and which signs the server's TLS certificate),
# a genuine new CA N with its genuine link NewWithOld (N's key certified by
# O), and a forger's CA F that signs the renewed certificate in each
# forged rollover (the server hands out DIR/issuer.pem).
# Proves, each time with `hwid renew` exiting 1, saying the certificate is
# signed by no CA the device trusts and that the server's offer was not
# adopted, and DIR/ca.pem, cert.pem and the generation byte for byte as
# they were:
#   - a "new CA" without any link (/ca = O + F);
#   - a link signed by another key (L: F's name and key, issuer O's name,
#     signed by X);
#   - a genuine link whose subject key is not the new CA's (NewWithOld of
#     N served with F, which bears N's name);
# and then the genuine rollover (/ca = O + N + NewWithOld, the renewal
# signed by N) is adopted: DIR/ca.pem = O + N, the new certificate N's,
# which openssl verifies against DIR/ca.pem. hwid join with O's pin
# refuses the forged CA the same way and leaves no identity.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

require_tools openssl ss
PY=/usr/bin/python3
"$PY" -c 'import cryptography' 2>/dev/null || missing_hardware "python3-cryptography (for tests/hostile-ca.py)"
printf 'leak:load_providers\n' >"$T/lsan.supp"
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$T/lsan.supp}

P=$T/pki        # the server's PKI
S=$T/served     # what it answers (read at every request)
mkdir -p "$P" "$S" "$T/keys"
D=$T/edge-1
CA_EXT=$'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash'

# root NAME CN — a self-signed CA $P/NAME.pem, its key $P/NAME.key.
root() {
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$P/$1.key" -subj "/CN=$2" \
                -days 2 -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
                -out "$P/$1.pem" 2>/dev/null || fail "openssl could not make $1"
}

# cross NAME SUBJECT-OF KEY-OF ISSUER-NAME-OF SIGNER — $P/NAME.pem: SUBJECT-OF's
# subject and KEY-OF's key, issued in ISSUER-NAME-OF's name, signed by
# SIGNER's key (a link certificate, genuine or not).
cross() {
        local name=$1 subj
        subj=$(openssl x509 -in "$P/$2.pem" -noout -subject -nameopt compat | sed 's/^subject=//')
        openssl req -new -key "$P/$3.key" -subj "$subj" -out "$P/$name.csr" 2>/dev/null ||
                fail "openssl could not make $name's request"
        printf '%s\nauthorityKeyIdentifier=keyid\n' "$CA_EXT" >"$P/$name.ext"
        # The issuer's name comes from a certificate of ISSUER-NAME-OF's name
        # whose key is SIGNER's: openssl x509 -req names -CA's subject.
        openssl req -new -x509 -key "$P/$5.key" -subj "$(openssl x509 -in "$P/$4.pem" -noout -subject -nameopt compat |
                sed 's/^subject=//')" -days 2 -addext basicConstraints=critical,CA:TRUE \
                -addext keyUsage=critical,keyCertSign,cRLSign -out "$P/$name.signer.pem" 2>/dev/null ||
                fail "openssl could not make $name's signer"
        openssl x509 -req -in "$P/$name.csr" -CA "$P/$name.signer.pem" -CAkey "$P/$5.key" -CAcreateserial \
                -CAserial "$P/$name.srl" -days 1 -extfile "$P/$name.ext" -out "$P/$name.pem" 2>/dev/null ||
                fail "openssl could not make $name"
}

setup_pki() {
        root O "rollover test CA"
        root N "rollover test CA G2"
        root X "a forger's other key"
        # F: a forger's CA of N's name (a forged "new CA"), its own key.
        root F "rollover test CA G2"
        cross NWO N N O O          # genuine: N's key certified by O
        cross LX F F O X           # F certified in O's name, signed by X
        printf '%s\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1\nauthorityKeyIdentifier=keyid\n' \
                'basicConstraints=critical,CA:FALSE' >"$P/tls.ext"
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$P/tls.key" -subj "/CN=127.0.0.1" \
                -out "$P/tls.csr" 2>/dev/null &&
                openssl x509 -req -in "$P/tls.csr" -CA "$P/O.pem" -CAkey "$P/O.key" -CAcreateserial \
                        -CAserial "$P/O.srl" -days 1 -extfile "$P/tls.ext" -out "$P/tls.pem" 2>/dev/null ||
                fail "openssl could not make the TLS certificate"
        openssl verify -partial_chain -CAfile "$P/O.pem" "$P/NWO.pem" >/dev/null || fail "the genuine link does not verify"
        ! openssl verify -partial_chain -CAfile "$P/O.pem" "$P/LX.pem" >/dev/null 2>&1 || fail "LX verifies with O"
        cp "$P/O.pem" "$S/ca-answer"
        PIN=$(run_ok "$HWID" ca hash "$P/O.pem")
}

start_server() {
        PORT=$(free_port)
        URL=https://127.0.0.1:$PORT
        start_bg "$T/server.log" "$PY" "$SRCDIR/tests/hostile-ca.py" --port "$PORT" --tls-cert "$P/tls.pem" \
                --tls-key "$P/tls.key" --ca-cert "$P/O.pem" --ca-key "$P/O.key" --dir "$S"
        wait_for_port "$PORT" 20 "$BG_PID"
}

# serve ISSUER CERT... — GET /ca answers the certificates of $P; ISSUER
# signs the certificates the server issues from now on.
serve() {
        local issuer=$1 c
        shift
        : >"$S/ca-answer"
        for c in "$@"; do cat "$P/$c.pem" >>"$S/ca-answer"; done
        cp "$P/$issuer.pem" "$S/issuer.pem"
        cp "$P/$issuer.key" "$S/issuer.key"
}

# snapshot — what the device holds, byte for byte.
snapshot() {
        cat "$D/ca.pem" "$D/cert.pem"
        readlink "$D/current"
}

# forged WHAT CERT... — the server offers CERT... and signs with F: the
# renewal is refused and DIR stays as it was.
forged() {
        local what=$1 before
        shift
        serve F "$@"
        before=$(snapshot)
        expect_exit 1 "is not signed by the pinned CA, nor by a CA a link from it proved" --multiline -- \
                "$HWID" renew --dir "$D"
        assert_contains "$(cat "$T/last.err")" "not adopted" "hwid renew's warning ($what)"
        assert_eq "$(snapshot)" "$before" "$D after a forged rollover ($what)"
        [ ! -e "$D/needs-bootstrap" ] || fail "a forged rollover marked $D needs-bootstrap ($what)"
}

setup_pki
start_server
swtpm_init
expect_exit 0 "enrolled edge-1" --multiline -- env HWID_TOKEN=abcdef.0123456789abcdef "$HWID" join --server "$URL" \
        --ca-hash "$PIN" --key "tpm2:file=$T/keys/device.tss2.pem" --cn edge-1 --dir "$D"
cmp -s "$D/ca.pem" "$P/O.pem" || fail "$D/ca.pem is not O after the join"

forged "no link" O F
forged "a link signed by another key" O F LX
forged "a genuine link for another key" O F NWO

# A join with O's pin, the forged CA offered and signing: refused, no identity.
serve F O F LX
expect_exit 1 "is not signed by the pinned CA, nor by a CA a link from it proved" --multiline -- \
        env HWID_TOKEN=abcdef.0123456789abcdef "$HWID" join --server "$URL" --ca-hash "$PIN" \
        --key "tpm2:file=$T/keys/device-2.tss2.pem" --cn edge-2 --dir "$T/edge-2"
[ ! -e "$T/edge-2/current" ] && [ ! -e "$T/edge-2/ca.pem" ] || fail "join stored a forged rollover in $T/edge-2"

# The genuine rollover: adopted, and the certificate of the new CA kept.
serve N O N NWO
expect_exit 0 "adopted 1 new CA" --multiline -- "$HWID" renew --dir "$D"
cat "$P/O.pem" "$P/N.pem" >"$T/want-ca.pem"
cmp -s "$D/ca.pem" "$T/want-ca.pem" || fail "$D/ca.pem is not O + N after the genuine rollover"
openssl verify -partial_chain -CAfile "$P/N.pem" "$D/cert.pem" >/dev/null || fail "the renewed certificate is not N's"
out=$(openssl verify -CAfile "$D/ca.pem" "$D/cert.pem" 2>&1) || fail "openssl verify against $D/ca.pem: $out"
assert_no_transient
echo "ca-rollover-forged: OK"
