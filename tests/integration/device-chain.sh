#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# device-chain.sh — a device stores only what chains to the CA it pinned.
# The server is tests/hostile-ca.py, a small CA server (its PKI made here
# with the openssl CLI) that speaks hwidd's device API and adds
# certificates to its answers, as a hostile server or a man in the middle
# of the first connection would. The device pins the intermediate I
# (signed by the root R); the server adds an unrelated root U and a forged
# root F (R's name, its own key, no key identifier: only a signature check
# tells it from R).
# Proves:
#   - hwid join with /ca = I + U + F + R stores DIR/ca.pem = I + R (in that
#     order), and warns that 2 certificates were left out;
#   - the certificate answer leaf + I + U + F + R is stored as cert.pem =
#     leaf + I + R, with a warning; openssl verifies the leaf against
#     DIR/ca.pem; neither U nor F is in any file of DIR;
#   - hwid renew, with the same additions, stores leaf + I + R again;
#   - a certificate put in front of the issued one (U + leaf) is refused:
#     join exits 1 and DIR holds no identity; renew exits 1 and DIR keeps
#     its certificate;
#   - a /ca answer without the pinned certificate is refused before
#     anything is sent (no POST reaches the server); one with it after an
#     unrelated root stores the pinned CA and its chain alone;
#   - the clock contract: 401 {"error":"not_yet_valid","server_time":T}
#     makes hwid renew exit 1 naming T (an hour behind) as the server's
#     clock, never needs-bootstrap; 401 "expired" with the server's clock
#     past the certificate's end makes it exit 4 and mark DIR; 401
#     "expired" with the server's clock before the certificate's start is
#     taken for what it is (a clock problem): exit 1, no mark;
#   - an answer naming a JSON member twice ({"rotate_key": false, ...,
#     "rotate_key": true}) is refused by the client (exit 1, naming it),
#     the certificate kept: a client reads JSON as strictly as hwidd.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"

require_tools openssl ss
PY=/usr/bin/python3
"$PY" -c 'import cryptography' 2>/dev/null || missing_hardware "python3-cryptography (for tests/hostile-ca.py)"
printf 'leak:load_providers\n' >"$T/lsan.supp"
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$T/lsan.supp}

P=$T/pki        # the server's PKI
S=$T/served     # what it answers (read at every request)
mkdir -p "$P" "$S"
D=$T/edge-1

# root NAME CN [OPENSSL-REQ-ARGS...] — a self-signed CA $P/NAME.pem.
root() {
        local name=$1 cn=$2
        shift 2
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$P/$name.key" \
                -subj "/CN=$cn" -days 2 -addext basicConstraints=critical,CA:TRUE \
                -addext keyUsage=critical,keyCertSign,cRLSign "$@" -out "$P/$name.pem" 2>/dev/null ||
                fail "openssl could not make $name"
}

# signed NAME CN ISSUER EXTS — $P/NAME.pem for a new key, signed by ISSUER.
signed() {
        local name=$1 cn=$2 issuer=$3
        printf '%s\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n' "$4" >"$P/$name.ext"
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$P/$name.key" \
                -subj "/CN=$cn" -out "$P/$name.csr" 2>/dev/null &&
                openssl x509 -req -in "$P/$name.csr" -CA "$P/$issuer.pem" -CAkey "$P/$issuer.key" \
                        -CAcreateserial -CAserial "$P/$issuer.srl" -days 1 -extfile "$P/$name.ext" \
                        -out "$P/$name.pem" 2>/dev/null || fail "openssl could not make $name"
}

fp() {
        openssl x509 -in "$1" -noout -fingerprint -sha256 | cut -d= -f2
}

# fingerprints FILE — the SHA-256 fingerprint of each certificate in FILE.
fingerprints() {
        local dir=$T/fp n i
        rm -rf "$dir" && mkdir -p "$dir"
        n=$(awk -v d="$dir" '/-----BEGIN CERTIFICATE-----/ { n++ } n { print > (d "/" n ".pem") } END { print n + 0 }' "$1")
        for ((i = 1; i <= n; i++)); do
                fp "$dir/$i.pem"
        done
}

setup_pki() {
        root R "chain test root"
        signed I "chain test intermediate" R $'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign'
        root U "unrelated root"
        root F "chain test root" -addext subjectKeyIdentifier=none -addext authorityKeyIdentifier=none
        signed tls 127.0.0.1 I $'basicConstraints=critical,CA:FALSE\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1'
        cat "$P/tls.pem" "$P/I.pem" >"$P/tls-chain.pem"
        cat "$P/I.pem" "$P/U.pem" "$P/F.pem" "$P/R.pem" >"$S/ca-answer"
        cat "$P/I.pem" "$P/U.pem" "$P/F.pem" "$P/R.pem" >"$S/leaf-extra"
        PIN=$(run_ok "$HWID" ca hash "$P/I.pem")
        WANT_CA=$(printf '%s\n' "$(fp "$P/I.pem")" "$(fp "$P/R.pem")")
}

start_server() {
        PORT=$(free_port)
        URL=https://127.0.0.1:$PORT
        start_bg "$T/server.log" "$PY" "$SRCDIR/tests/hostile-ca.py" --port "$PORT" --tls-cert "$P/tls-chain.pem" \
                --tls-key "$P/tls.key" --ca-cert "$P/I.pem" --ca-key "$P/I.key" --dir "$S"
        wait_for_port "$PORT" 20 "$BG_PID"
}

join_dev() {
        HWID_TOKEN=abcdef.0123456789abcdef "$HWID" join --server "$URL" --ca-hash "$PIN" \
                --key "tpm2:file=$T/keys/device.tss2.pem" --cn edge-1 --dir "$D" "$@"
}

# no_stranger — neither U nor F is in any file of DIR.
no_stranger() {
        local f all
        all=$(for f in "$D"/ca.pem "$D"/gen-*/cert.pem; do fingerprints "$f"; done)
        assert_not_contains "$all" "$(fp "$P/U.pem")" "the unrelated root in $D"
        assert_not_contains "$all" "$(fp "$P/F.pem")" "the forged root in $D"
}

check_cert_chain() {
        local leaf
        leaf=$(fingerprints "$D/cert.pem" | sed -n 1p)
        assert_eq "$(fingerprints "$D/cert.pem")" "$(printf '%s\n' "$leaf" "$WANT_CA")" "certificates in $D/cert.pem"
        openssl x509 -in "$D/cert.pem" -out "$T/leaf.pem"
        run_ok openssl verify -CAfile "$D/ca.pem" "$T/leaf.pem" >/dev/null
}

test_join() {
        mkdir -p "$T/keys"
        expect_exit 0 "enrolled edge-1" --multiline -- join_dev
        assert_contains "$(cat "$T/last.err")" "sent 2 certificates that do not chain to the pinned CA: not stored" \
                "join's warning about /ca"
        assert_contains "$(cat "$T/last.err")" "came with 2 certificates that do not chain to it: not stored" \
                "join's warning about the certificate answer"
        assert_eq "$(fingerprints "$D/ca.pem")" "$WANT_CA" "certificates in $D/ca.pem"
        check_cert_chain
        no_stranger
        assert_no_transient
}

test_renew() {
        local before
        before=$(fingerprints "$D/cert.pem" | sed -n 1p)
        expect_exit 0 "came with 2 certificates that do not chain to it: not stored" --multiline -- \
                "$HWID" renew --dir "$D"
        [ "$(fingerprints "$D/cert.pem" | sed -n 1p)" != "$before" ] || fail "renew kept the old certificate"
        assert_eq "$(fingerprints "$D/ca.pem")" "$WANT_CA" "certificates in $D/ca.pem after renew"
        check_cert_chain
        no_stranger
        assert_no_transient
}

# A certificate in front of the issued one replaces what was asked for.
test_replaced_leaf() {
        local before d2=$T/edge-2
        cp "$P/U.pem" "$S/leaf-prefix"
        before=$(fingerprints "$D/cert.pem")
        expect_exit 1 "not signed by the pinned CA" --multiline -- "$HWID" renew --dir "$D"
        assert_eq "$(fingerprints "$D/cert.pem")" "$before" "$D/cert.pem after a refused answer"
        expect_exit 1 "not signed by the pinned CA" --multiline -- env HWID_TOKEN=abcdef.0123456789abcdef "$HWID" join \
                --server "$URL" --ca-hash "$PIN" --key "tpm2:file=$T/keys/device-2.tss2.pem" --cn edge-2 --dir "$d2"
        [ ! -e "$d2/current" ] && [ ! -e "$d2/cert.pem" ] || fail "join stored a refused answer in $d2"
        rm -f "$S/leaf-prefix"
        assert_no_transient
}

# The pin must be one of /ca's certificates (the first, but for a CA
# rollover's answer, whose first is the new CA): an answer without it is
# refused before anything is sent; with it elsewhere, only it (and what
# chains above it) is trusted.
test_pin_first() {
        local d3=$T/edge-3 d4=$T/edge-4 posts
        cat "$P/U.pem" "$P/R.pem" >"$S/ca-answer"
        posts=$(grep -c '^POST' "$T/server.log" || true)
        expect_exit 1 "nothing was sent" --multiline -- env HWID_TOKEN=abcdef.0123456789abcdef "$HWID" join \
                --server "$URL" --ca-hash "$PIN" --key "tpm2:file=$T/keys/device-3.tss2.pem" --cn edge-3 --dir "$d3"
        assert_contains "$(cat "$T/last.err")" "not the pinned $PIN" "join's refusal"
        assert_eq "$(grep -c '^POST' "$T/server.log" || true)" "$posts" "requests posted after a pin mismatch"
        [ ! -e "$d3" ] || fail "join created $d3 after a pin mismatch"
        cat "$P/U.pem" "$P/I.pem" "$P/R.pem" >"$S/ca-answer"
        expect_exit 0 "enrolled edge-4" --multiline -- env HWID_TOKEN=abcdef.0123456789abcdef "$HWID" join \
                --server "$URL" --ca-hash "$PIN" --key "tpm2:file=$T/keys/device-4.tss2.pem" --cn edge-4 --dir "$d4"
        assert_eq "$(fingerprints "$d4/ca.pem")" "$WANT_CA" "certificates in $d4/ca.pem"
}

# refuse STATUS SLUG SERVER_TIME — the server's answer to mutual TLS.
refuse() {
        printf '%s\n{"error":"%s","message":"refused by the test","server_time":%s}' "$1" "$2" "$3" >"$S/refusal"
}

test_clock_contract() {
        local now before
        now=$(date +%s)
        before=$(fingerprints "$D/cert.pem")
        refuse 401 not_yet_valid $((now - 3600))
        expect_exit 1 "the server's clock reads $(date -u -d @$((now - 3600)) +%Y-%m-%dT%H)" --multiline -- \
                "$HWID" renew --dir "$D"
        assert_contains "$(cat "$T/last.err")" "not a revocation" "hwid renew on 401 not_yet_valid"
        [ ! -e "$D/needs-bootstrap" ] || fail "401 not_yet_valid marked $D needs-bootstrap"
        refuse 401 expired $((now - 3600))
        expect_exit 1 "refused the certificate as expired, yet by its own clock it is not valid yet" --multiline -- \
                "$HWID" renew --dir "$D"
        [ ! -e "$D/needs-bootstrap" ] || fail "401 expired before notBefore marked $D needs-bootstrap"
        assert_eq "$(fingerprints "$D/cert.pem")" "$before" "$D/cert.pem after refusals"
        refuse 401 expired $((now + 7200))
        expect_exit 4 "bootstrap again" --multiline -- "$HWID" renew --dir "$D"
        [ -s "$D/needs-bootstrap" ] || fail "401 expired past the certificate's end did not mark $D"
        rm -f "$S/refusal"
}

# What the CA says about the identity, a member twice: which one is meant?
test_duplicate_member() {
        local before
        before=$(fingerprints "$D/cert.pem")
        printf '{"rotate_key": false, "renew_after": 0, "rotate_key": true}' >"$S/identity"
        expect_exit 1 "the server's answer is not valid JSON: an object names a member twice" --multiline -- \
                "$HWID" renew --dir "$D"
        assert_eq "$(fingerprints "$D/cert.pem")" "$before" "$D/cert.pem after an answer with a member twice"
        rm -f "$S/identity"
}

setup_pki
start_server
swtpm_init
test_join
test_renew
test_replaced_leaf
test_pin_first
test_clock_contract
test_duplicate_member
no_private_keys_in "$D"
echo "device-chain: all checks passed"
