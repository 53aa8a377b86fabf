#!/bin/bash
# est-pop.sh — EST proof-of-possession linking (RFC 7030 §3.5) with the
# profile option est.pop_linking, driven by openssl s_client alone: it prints
# the connection's RFC 9266 tls-exporter (-keymatexport
# EXPORTER-Channel-Binding) on TLS 1.3, the CSR is made with that value
# (base64) as its challengePassword, then sent on the same connection.
# Proves:
#   - simpleenroll (Basic) and simplereenroll (mutual TLS) with the binding of
#     the connection get 200 and a certificate openssl verifies;
#   - a CSR without challengePassword, or with the binding of another
#     connection, is 403 saying why; nothing issued, no token use spent;
#   - a profile without the option ignores challengePassword;
#   - csrattrs of a linked profile names challengePassword (§4.5.2).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

require_tools xxd
EST=/.well-known/est

# linked_post OUT PATH NAME KEY PASSWORD-MODE [S_CLIENT-ARGS...] — one TLS 1.3
# connection: read its tls-exporter, make a CSR for NAME with KEY whose
# challengePassword is (MODE) "bind": that binding, "none": absent, "other:V":
# V; POST it to PATH on that connection. CODE, OUT.hdr, OUT.body as http().
linked_post() {
        local out=$1 path=$2 name=$3 key=$4 mode=$5 hex cp="" fd pid i len
        shift 5
        rm -f "$out.in"
        mkfifo "$out.in"
        # Unbuffered: s_client prints the server's session tickets with
        # stdio and the response with write(2); buffered, the tickets land
        # in the middle of the response.
        stdbuf -o0 openssl s_client -connect "127.0.0.1:$PORT" -CAfile "$CA_DIR/ca.pem" -verify_return_error -tls1_3 \
                -keymatexport EXPORTER-Channel-Binding -keymatexportlen 32 -ign_eof "$@" \
                <"$out.in" >"$out.raw" 2>"$out.err" &
        pid=$!
        track_pid "$pid"
        exec {fd}>"$out.in"
        for i in $(seq 100); do
                grep -q "Keying material:" "$out.raw" && break
                sleep 0.1
        done
        hex=$(sed -n 's/^ *Keying material: *//p' "$out.raw")
        [ ${#hex} = 64 ] || fail "s_client printed no keying material: $(cat "$out.err")"
        case $mode in
        bind) cp=$(xxd -r -p <<<"$hex" | openssl base64 -A) ;;
        other:*) cp=${mode#other:} ;;
        esac
        printf '[req]\ndistinguished_name = dn\nattributes = attrs\nprompt = no\n[dn]\nCN = %s\n[attrs]\n' "$name" \
                >"$out.cnf"
        [ -z "$cp" ] || printf 'challengePassword = %s\n' "$cp" >>"$out.cnf"
        openssl req -new -key "$key" -config "$out.cnf" -outform DER 2>"$out.req.err" | openssl base64 -e \
                >"$out.b64" || fail "openssl req: $(cat "$out.req.err")"
        len=$(wc -c <"$out.b64")
        { printf 'POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/pkcs10\r\n' "$path"
          [ -z "${AUTH:-}" ] || printf 'Authorization: Basic %s\r\n' "$(printf %s "$AUTH" | openssl base64 -A)"
          printf 'Content-Length: %d\r\nConnection: close\r\n\r\n' "$len"
          cat "$out.b64"; } >&"$fd"
        exec {fd}>&-
        wait "$pid" || true
        tr -d '\r' <"$out.raw" | sed -n '/^HTTP\/1.1 /,$p' >"$out.resp"
        sed '/^$/q' "$out.resp" >"$out.hdr"
        sed '1,/^$/d' "$out.resp" | grep -v -E '^(closed|DONE|read:errno=[0-9]+)$' >"$out.body" || true
        CODE=$(head -n 1 "$out.hdr" | cut -d' ' -f2)
}

# est_cert OUT PEM — the certs-only answer in OUT.body as PEM.
est_cert() {
        openssl base64 -d -in "$1.body" | openssl pkcs7 -inform DER -print_certs -out "$2" ||
                fail "openssl cannot read the PKCS#7 in $1.body"
        verify_leaf "$2"
}

newkey() {
        openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null || fail "genpkey"
}

test_enroll_linked() {
        local tok before
        tok=$(token_new --profile linked --uses 2)
        newkey "$DEV/l1.key"
        before=$(store_state "$tok")
        AUTH="${tok%%.*}:${tok#*.}" linked_post "$DEV/l1-none" "$EST/simpleenroll" l1 "$DEV/l1.key" none
        expect_status 403 "$DEV/l1-none"
        assert_contains "$(cat "$DEV/l1-none.body")" "challengePassword must be the base64" "no challengePassword"
        # The binding of another connection: a relayed CSR.
        AUTH="${tok%%.*}:${tok#*.}" linked_post "$DEV/l1-a" "$EST/simpleenroll" l1 "$DEV/l1.key" none
        AUTH="${tok%%.*}:${tok#*.}" linked_post "$DEV/l1-other" "$EST/simpleenroll" l1 "$DEV/l1.key" "other:$(
                sed -n 's/^ *Keying material: *//p' "$DEV/l1-a.raw" | xxd -r -p | openssl base64 -A)"
        expect_status 403 "$DEV/l1-other"
        assert_contains "$(cat "$DEV/l1-other.body")" "not this TLS connection's tls-exporter" "a relayed CSR"
        assert_eq "$(store_state "$tok")" "$before" "store after the refusals"
        AUTH="${tok%%.*}:${tok#*.}" linked_post "$DEV/l1" "$EST/simpleenroll" l1 "$DEV/l1.key" bind
        expect_status 200 "$DEV/l1"
        est_cert "$DEV/l1" "$DEV/l1.pem"
        assert_eq "$(token_used "$tok")" 1 "token uses after the linked enrollment"
}

test_reenroll_linked() {
        local old
        old=$(serial_of "$DEV/l1.pem")
        newkey "$DEV/l1b.key"
        linked_post "$DEV/l1r-none" "$EST/simplereenroll" l1 "$DEV/l1b.key" none \
                -cert "$DEV/l1.pem" -key "$DEV/l1.key"
        expect_status 403 "$DEV/l1r-none"
        linked_post "$DEV/l1r" "$EST/simplereenroll" l1 "$DEV/l1b.key" bind -cert "$DEV/l1.pem" -key "$DEV/l1.key"
        expect_status 200 "$DEV/l1r"
        est_cert "$DEV/l1r" "$DEV/l1r.pem"
        read -ra f <<<"$(cert_rows | awk -v s="$old" '$1 == s')"
        assert_eq "${f[1]}" superseded "the old certificate after a linked simplereenroll"
}

test_csrattrs() {
        http "$DEV/attrs" GET "$EST/linked/csrattrs"
        expect_status 200 "$DEV/attrs"
        assert_contains "$(openssl base64 -d -in "$DEV/attrs.body" | openssl asn1parse -inform DER)" challengePassword \
                "csrattrs of a linked profile"
        http "$DEV/attrs-d" GET "$EST/default/csrattrs"
        assert_not_contains "$(openssl base64 -d -in "$DEV/attrs-d.body" | openssl asn1parse -inform DER)" \
                challengePassword "csrattrs of a profile without linking"
}

test_unlinked_profile() {
        local tok
        tok=$(token_new)
        newkey "$DEV/u1.key"
        AUTH="${tok%%.*}:${tok#*.}" linked_post "$DEV/u1" "$EST/simpleenroll" u1 "$DEV/u1.key" other:whatever
        expect_status 200 "$DEV/u1"
}

ca_setup
add_profiles <<'EOF'
  linked:
    validity: 1h
    key_types: [ec-p256]
    renewal:
      window: 1.0
    est:
      pop_linking: true
EOF
hwidd_start
test_enroll_linked
test_reenroll_linked
test_unlinked_profile
test_csrattrs
hwidd_stop
echo "est-pop: all checks passed"
