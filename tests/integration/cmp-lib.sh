# shellcheck shell=bash disable=SC2034  # variables used by the scripts sourcing this
# cmp-lib.sh — what the CMP tests (cmp-*.sh) share: `openssl cmp` (Debian
# 12's OpenSSL 3.0) as the client of a real hwidd. Sourced after lib.sh and
# ca-lib.sh; uses $PORT, $CA_DIR and $DEV from there.

CMP=/.well-known/cmp

# cmp_secret TOKEN FILE — the token's CMP shared secret into FILE: its
# secret as printed, the part after the dot (docs/CMP.md), never on a
# command line.
cmp_secret() {
        (umask 077 && printf %s "${1#*.}" >"$2")
}

# cmp_run OUT [PATH] -- ARGS... — one `openssl cmp` session against hwidd at
# PATH (default $CMP), trusting ca.pem for TLS and for the answers'
# signatures; its output in OUT.log, its exit code in RC.
cmp_run() {
        local out=$1 path=$CMP
        shift
        if [ "$1" != -- ]; then path=$1; shift; fi
        shift
        # A certificate request needs somewhere to save what it gets.
        [[ " $* " =~ \ -cmd\ (ir|cr|kur|p10cr)\  ]] && [[ ! " $* " =~ \ -certout\  ]] && set -- "$@" -certout "$out.cert"
        RC=0
        openssl cmp -server "127.0.0.1:$PORT" -path "$path" -tls_used -tls_trusted "$CA_DIR/ca.pem" \
                -trusted "$CA_DIR/ca.pem" -recipient "/CN=hwid test CA" -msg_timeout 30 -total_timeout 90 \
                "$@" >"$out.log" 2>&1 || RC=$?
}

# cmp_ok OUT — the session succeeded.
cmp_ok() {
        [ "$RC" = 0 ] || fail "openssl cmp failed ($RC): $(grep -v 'CMP info' "$1.log" | head -c 1500)"
}

# cmp_refused OUT FAILINFO [TEXT] — the session failed with PKIFailureInfo
# FAILINFO (and TEXT in the status string).
cmp_refused() {
        local out=$1 info=$2 text=${3:-}
        [ "$RC" != 0 ] || fail "openssl cmp succeeded, expected $info"
        assert_contains "$(cat "$out.log")" "PKIFailureInfo: $info" "failure info"
        [ -z "$text" ] || assert_contains "$(cat "$out.log")" "$text" "status string"
}

# cmp_post OUT FILE [CURL-ARGS...] — FILE as a raw CMP request (curl).
cmp_post() {
        local out=$1 file=$2
        shift 2
        http "$out" POST "$CMP" -H "Content-Type: application/pkixcmp" --data-binary "@$file" "$@"
}

# ec_key FILE — a P-256 key made by openssl.
ec_key() {
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null || fail "openssl genpkey"
}
