#!/bin/bash
# cmp-hostile.sh — CMP's front door against the attacks of issue 36, each a
# class: the messages `openssl cmp` cannot make are made by
# tests/cmp-forge.py from requests openssl cmp wrote (-reqout), and sent with
# curl from addresses of their own (127.0.0.0/8), as many clients would.
# Proves:
#   - PasswordBasedMac parameters outside the allow-list (one-way function
#     SHA-256/384/512, MAC HMAC-SHA-256/384/512, 100 to 10,000 iterations,
#     8 to 64 bytes of salt, parameters that are not PBMParameter) are
#     refused (badAlg, saying which) before any MAC is computed, as is a
#     senderKID that is no token id or names no token (badMessageCheck):
#     hwid_cmp_pbm_total{result="computed"} does not move, nothing changes
#     in the store (token uses, certificates, audit records); `openssl cmp`
#     with its default hmac-sha1, or with -digest sha1, is refused, with
#     -mac hmacWithSHA256 it enrolls;
#   - a replayed enrollment (the same token, key and name, with a fresh
#     transactionID) gets its certificate with implicitConfirm and opens no
#     transaction: a certConf rejecting it revokes nothing, a client that
#     rejects it revokes nothing; 80 replays from one address hold nothing
#     (another token's ir from there is answered), and are audited once
#     (hwid_enroll_replays_total counts the rest);
#   - one token holds at most 16 open transactions, from however many
#     addresses (the 17th: HTTP 429), while another token's are answered;
#   - a certConf, pollReq or error message for someone else's open
#     transaction, unprotected or protected by another token, is refused
#     (an error message acknowledged) and leaves it open: its own certConf
#     then gets pkiConf;
#   - a PKIMessage that is BER, not DER (an indefinite length, a length in
#     more bytes than it needs), is HTTP 400;
#   - a proof of possession that does not verify (an ir's POPOSigningKey,
#     a p10cr's CSR signature): badPOP, saying so;
#   - rr of a certificate of another CA (another CA of the same name, signed
#     with one's own certificate; another name, MAC-protected or
#     unprotected): badCertId, nothing revoked;
#   - signed answers to unauthenticated or failing messages (unprotected,
#     a MAC that does not verify) are bounded per address (a burst of 16,
#     then one a second): beyond, HTTP 429 with Retry-After and no
#     PKIMessage, and while the address is over its share nothing it sends
#     is looked at (no MAC computed, even for a real token); another address
#     is answered, and this one after Retry-After.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=cmp-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/cmp-lib.sh"
# shellcheck source=ops-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ops-lib.sh"
require_tools python3
FORGE=(python3 "$SRCDIR/tests/cmp-forge.py")

# offline_req OUT ARGS... — the request openssl cmp makes for ARGS, written
# to OUT without any server (-rspin of nothing: it stops after writing it).
offline_req() {
        local out=$1
        shift
        openssl cmp -recipient "/CN=hwid test CA" -ref offline -secret pass:offline -mac hmacWithSHA256 \
                -rspin /dev/null -certout "$out.unused" -reqout "$out" "$@" >"$out.log" 2>&1 || true
        [ -s "$out" ] || fail "openssl cmp wrote no request for $out: $(head -c 600 "$out.log")"
}

# forged OUT IN TOKEN [FORGE-ARGS...] — IN with a fresh transactionID, its
# senderKID TOKEN's id, MAC-protected with TOKEN's shared secret.
forged() {
        local out=$1 in=$2 tok=$3
        shift 3
        cmp_secret "$tok" "$out.mac"
        "${FORGE[@]}" forge "$in" "$out" --tid --kid "${tok%%.*}" --secret "$out.mac" "$@" || fail "cmp-forge $*"
}

# send OUT FILE [ADDR] — POST FILE from ADDR (default 127.0.0.1); a CMP
# answer's summary (cmp-forge.py show) in ANSWER.
send() {
        local out=$1 file=$2 addr=${3:-127.0.0.1}
        cmp_post "$out" "$file" --interface "$addr"
        ANSWER=""
        [ "$CODE" != 200 ] || ANSWER=$("${FORGE[@]}" show "$out.body") || fail "no PKIMessage in $out.body"
}

# answered OUT PART... — the last send got a signed CMP answer saying each PART.
answered() {
        local out=$1 part
        shift
        expect_status 200 "$out"
        assert_eq "$(header Content-Type "$out")" application/pkixcmp "Content-Type of $out"
        for part in "$@"; do
                assert_contains "$ANSWER" "$part" "the answer to $out"
        done
}

audit_rows() {
        store_sql "SELECT count(*) FROM audit"
}

test_pbm() {
        local tok before audits i=10 args text case
        tok=$(token_new --profile cmp)
        before=$(store_state "$tok")
        audits=$(audit_rows)
        ec_key "$DEV/p.key"
        offline_req "$DEV/p.ir" -cmd ir -newkey "$DEV/p.key" -subject /CN=cmp-p
        scrape "$DEV/p0"
        for case in "--owf sha3-512|one-way function" "--owf md5|one-way function" "--owf sha1|one-way function" \
                "--mac hmac-sha1|MAC algorithm" "--mac hmac-md5|MAC algorithm" "--iter 100000|iteration count" \
                "--iter 10000000|iteration count" "--iter 99|iteration count" "--salt-len 0|salt" \
                "--salt-len 200|salt" "--pbm-param 0500|parameters" "--pbm-param 3003020101|parameters"; do
                args=${case%%|*}
                text=${case#*|}
                i=$((i + 1))
                # shellcheck disable=SC2086  # the forge's arguments, split on purpose
                forged "$DEV/pbm.$i" "$DEV/p.ir" "$tok" $args
                send "$DEV/pbm.$i" "$DEV/pbm.$i" "127.0.0.$i"
                answered "$DEV/pbm.$i" failinfo=badAlg "$text"
        done
        # No such token, and no token id at all: refused before any MAC too.
        cmp_secret "$tok" "$DEV/p.mac"
        "${FORGE[@]}" forge "$DEV/p.ir" "$DEV/pbm.none" --tid --kid zzzzzz --secret "$DEV/p.mac"
        send "$DEV/pbm.none" "$DEV/pbm.none" 127.0.0.30
        answered "$DEV/pbm.none" failinfo=badMessageCheck "does not verify"
        "${FORGE[@]}" forge "$DEV/p.ir" "$DEV/pbm.noid" --tid --kid "a b" --secret "$DEV/p.mac"
        send "$DEV/pbm.noid" "$DEV/pbm.noid" 127.0.0.31
        answered "$DEV/pbm.noid" failinfo=badMessageCheck "not a bootstrap token id"
        # The stock client: its default MAC (hmac-sha1), or SHA-1 as its one-way function.
        cmp_run "$DEV/pbm.sha1" -- -cmd ir -ref "${tok%%.*}" -secret "file:$DEV/p.mac" -newkey "$DEV/p.key" \
                -subject /CN=cmp-p
        cmp_refused "$DEV/pbm.sha1" badAlg "hmacWithSHA256"
        cmp_run "$DEV/pbm.owf" -- -cmd ir -ref "${tok%%.*}" -secret "file:$DEV/p.mac" -newkey "$DEV/p.key" \
                -subject /CN=cmp-p -mac hmacWithSHA256 -digest sha1
        cmp_refused "$DEV/pbm.owf" badAlg "one-way function"
        scrape "$DEV/p1"
        assert_eq "$(metric_delta "$DEV/p0" "$DEV/p1" 'hwid_cmp_pbm_total{result="computed"}')" 0 \
                "MACs computed for refused parameters or unknown tokens"
        assert_eq "$(metric_delta "$DEV/p0" "$DEV/p1" 'hwid_cmp_pbm_total{result="refused"}')" 16 \
                "MACs refused before computing"
        assert_eq "$(store_state "$tok")" "$before" "store after refused MACs"
        assert_eq "$(audit_rows)" "$audits" "audit records after refused MACs"
        # As docs/CMP.md says: -mac hmacWithSHA256.
        cmp_run "$DEV/pbm.ok" -- -cmd ir -ref "${tok%%.*}" -secret "file:$DEV/p.mac" -mac hmacWithSHA256 \
                -newkey "$DEV/p.key" -subject /CN=cmp-p -certout "$DEV/cmp-p.pem"
        cmp_ok "$DEV/pbm.ok"
        scrape "$DEV/p2"
        [ "$(metric_delta "$DEV/p1" "$DEV/p2" 'hwid_cmp_pbm_total{result="computed"}')" -ge 1 ] ||
                fail "a valid MAC was not counted as computed"
}

test_replay() {
        local tok serial i
        tok=$(token_new --profile cmp)
        make_csr cmp-r
        cmp_secret "$tok" "$DEV/r.mac"
        cmp_run "$DEV/r1" -- -cmd p10cr -csr "$DEV/cmp-r.csr" -ref "${tok%%.*}" -secret "file:$DEV/r.mac" \
                -mac hmacWithSHA256 -certout "$DEV/cmp-r.pem" -reqout "$DEV/r1.req,$DEV/r1.conf"
        cmp_ok "$DEV/r1"
        serial=$(serial_of "$DEV/cmp-r.pem")
        # The same p10cr again (its answer lost), by a client that rejects
        # what it gets (it trusts another CA): it revokes nothing.
        cmp_run "$DEV/r2" -- -cmd p10cr -csr "$DEV/cmp-r.csr" -ref "${tok%%.*}" -secret "file:$DEV/r.mac" \
                -mac hmacWithSHA256 -out_trusted "$DEV/self.pem"
        assert_contains "$(cert_rows --identity cmp-r)" valid "cmp-r after a client rejected its replay"
        # A replay with a fresh transactionID: the certificate, implicitly
        # confirmed; a certConf of the same token rejecting it is refused.
        forged "$DEV/r3" "$DEV/r1.req" "$tok"
        send "$DEV/r3" "$DEV/r3"
        answered "$DEV/r3" body=cp status=0 implicit_confirm=yes
        "${FORGE[@]}" follow "$DEV/r3.body" "$DEV/r3.conf" --kid "${tok%%.*}" --secret "$DEV/r3.mac" --reject
        send "$DEV/r3c" "$DEV/r3.conf"
        answered "$DEV/r3c" body=error
        assert_eq "$(cert_rows --identity cmp-r | awk -v s="$serial" '$1 == s' | grep -c valid)" 1 \
                "cmp-r after a certConf rejected its replay"
        # Replays hold no transaction: 80 from one address, then another
        # token's ir from there is answered; one audit record for them all.
        scrape "$DEV/r0"
        for i in $(seq 80); do
                forged "$DEV/rn" "$DEV/r1.req" "$tok"
                send "$DEV/rn" "$DEV/rn" 127.0.0.40
                answered "$DEV/rn" status=0 implicit_confirm=yes
        done
        ec_key "$DEV/r4.key"
        offline_req "$DEV/r4.ir" -cmd ir -newkey "$DEV/r4.key" -subject /CN=cmp-r4
        forged "$DEV/r4" "$DEV/r4.ir" "$(token_new --profile cmp)"
        send "$DEV/r4" "$DEV/r4" 127.0.0.40
        answered "$DEV/r4" body=ip status=0
        scrape "$DEV/r1m"
        [ "$(metric_delta "$DEV/r0" "$DEV/r1m" 'hwid_enroll_replays_total{audited="false"}')" -ge 80 ] ||
                fail "replays not counted"
        [ "$(store_sql "SELECT count(*) FROM audit WHERE action = 'enroll-replay' AND target = 'cmp-r'")" -le 1 ] ||
                fail "an audit record per replay"
        assert_eq "$(token_used "$tok")" 1 "the replayed token's uses"
}

# One token holds 16 open transactions at most, whatever its addresses.
test_per_sender() {
        local tok i
        tok=$(token_new --profile again --uses 40)
        ec_key "$DEV/a.key"
        offline_req "$DEV/a.ir" -cmd ir -newkey "$DEV/a.key" -subject /CN=again-1
        for i in $(seq 16); do
                forged "$DEV/a.$i" "$DEV/a.ir" "$tok"
                send "$DEV/a.$i" "$DEV/a.$i" "127.0.0.$((50 + i))"
                answered "$DEV/a.$i" body=ip status=0 implicit_confirm=no
        done
        forged "$DEV/a.17" "$DEV/a.ir" "$tok"
        send "$DEV/a.17" "$DEV/a.17" 127.0.0.67
        expect_status 429 "$DEV/a.17"
        assert_contains "$(cat "$DEV/a.17.body")" "open CMP transactions" "the 429's reason"
        assert_eq "$(token_used "$tok")" 16 "token uses after the refused 17th"
        ec_key "$DEV/a2.key"
        offline_req "$DEV/a2.ir" -cmd ir -newkey "$DEV/a2.key" -subject /CN=again-2
        forged "$DEV/a2" "$DEV/a2.ir" "$(token_new --profile again)"
        send "$DEV/a2" "$DEV/a2" 127.0.0.67
        answered "$DEV/a2" body=ip status=0
}

test_certconf_foreign() {
        local tok other serial
        tok=$(token_new --profile cmp)
        other=$(token_new --profile cmp)
        ec_key "$DEV/f.key"
        offline_req "$DEV/f.ir" -cmd ir -newkey "$DEV/f.key" -subject /CN=cmp-f
        forged "$DEV/f1" "$DEV/f.ir" "$tok"
        send "$DEV/f1" "$DEV/f1"
        answered "$DEV/f1" body=ip status=0 implicit_confirm=no
        # Someone else rejects it, polls it, reports an error in it:
        # unprotected, then with another token.
        "${FORGE[@]}" follow "$DEV/f1.body" "$DEV/f.anon" --reject
        send "$DEV/f.anon" "$DEV/f.anon" 127.0.0.70
        answered "$DEV/f.anon" body=error
        "${FORGE[@]}" follow "$DEV/f1.body" "$DEV/f.poll" --kind pollReq
        send "$DEV/f.poll" "$DEV/f.poll" 127.0.0.72
        answered "$DEV/f.poll" body=error
        "${FORGE[@]}" follow "$DEV/f1.body" "$DEV/f.error" --kind error
        send "$DEV/f.error" "$DEV/f.error" 127.0.0.73
        answered "$DEV/f.error" body=pkiconf
        cmp_secret "$other" "$DEV/f.other.mac"
        "${FORGE[@]}" follow "$DEV/f1.body" "$DEV/f.other" --reject --kid "${other%%.*}" --secret "$DEV/f.other.mac"
        send "$DEV/f.other" "$DEV/f.other" 127.0.0.71
        answered "$DEV/f.other" body=error
        "${FORGE[@]}" follow "$DEV/f1.body" "$DEV/f.other.error" --kind error --kid "${other%%.*}" \
                --secret "$DEV/f.other.mac"
        send "$DEV/f.other.error" "$DEV/f.other.error" 127.0.0.74
        answered "$DEV/f.other.error" body=pkiconf
        assert_contains "$(cert_rows --identity cmp-f)" valid "cmp-f after others' certConf"
        # Its own certConf: the transaction is still there.
        "${FORGE[@]}" follow "$DEV/f1.body" "$DEV/f.own" --kid "${tok%%.*}" --secret "$DEV/f1.mac"
        send "$DEV/f.own" "$DEV/f.own"
        answered "$DEV/f.own" body=pkiconf
        serial=$(cert_rows --identity cmp-f | awk '{ print $1 }')
        grep -q "confirm $serial: allow" "$HWIDD_LOG" || fail "the rightful certConf was not recorded"
}

test_ber() {
        offline_req "$DEV/g.der" -cmd genm -infotype caCerts -unprotected_requests
        send "$DEV/g" "$DEV/g.der" 127.0.0.80
        answered "$DEV/g" body=genp
        "${FORGE[@]}" forge "$DEV/g.der" "$DEV/g.ber" --ber indefinite
        send "$DEV/g.ber" "$DEV/g.ber" 127.0.0.80
        expect_status 400 "$DEV/g.ber"
        assert_contains "$(cat "$DEV/g.ber.body")" "DER" "the 400's reason"
        "${FORGE[@]}" forge "$DEV/g.der" "$DEV/g.long" --ber long
        send "$DEV/g.long" "$DEV/g.long" 127.0.0.80
        expect_status 400 "$DEV/g.long"
}

test_badpop() {
        local tok before
        tok=$(token_new --profile cmp)
        before=$(store_state "$tok")
        ec_key "$DEV/b.key"
        offline_req "$DEV/b.ir" -cmd ir -newkey "$DEV/b.key" -subject /CN=cmp-b
        forged "$DEV/b" "$DEV/b.ir" "$tok" --break-popo
        send "$DEV/b" "$DEV/b"
        answered "$DEV/b" failinfo=badPOP "proof of possession"
        assert_not_contains "$ANSWER" "secret" "badPOP's text"
        # A p10cr whose CSR's signature does not verify (its last bit flipped).
        make_csr cmp-b2
        openssl req -in "$DEV/cmp-b2.csr" -outform DER -out "$DEV/cmp-b2.der"
        python3 -c 'import sys; d = bytearray(open(sys.argv[1], "rb").read()); d[-1] ^= 1
open(sys.argv[1], "wb").write(d)' "$DEV/cmp-b2.der"
        cmp_secret "$tok" "$DEV/b2.mac"
        cmp_run "$DEV/b2" -- -cmd p10cr -csr "$DEV/cmp-b2.der" -ref "${tok%%.*}" -secret "file:$DEV/b2.mac" \
                -mac hmacWithSHA256
        cmp_refused "$DEV/b2" badPOP "proof of possession"
        assert_eq "$(store_state "$tok")" "$before" "store after bad proofs of possession"
}

# foreign_ca NAME SUBJECT — a CA of openssl's own (NAME-ca.pem) and a leaf
# it issued (NAME.pem).
foreign_ca() {
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$DEV/$1-ca.key" \
                -subj "$2" -days 1 -out "$DEV/$1-ca.pem" 2>/dev/null || fail "openssl req -x509"
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$DEV/$1.key" \
                -subj "/CN=cmp-rr" 2>/dev/null |
                openssl x509 -req -CA "$DEV/$1-ca.pem" -CAkey "$DEV/$1-ca.key" -days 1 -out "$DEV/$1.pem" \
                        2>/dev/null || fail "openssl x509 -req"
}

test_rr_foreign() {
        local tok
        tok=$(token_new --profile cmp)
        make_csr cmp-rr
        cmp_secret "$tok" "$DEV/rr.mac"
        cmp_run "$DEV/rr.own" -- -cmd p10cr -csr "$DEV/cmp-rr.csr" -ref "${tok%%.*}" -secret "file:$DEV/rr.mac" \
                -mac hmacWithSHA256 -certout "$DEV/cmp-rr.pem"
        cmp_ok "$DEV/rr.own"
        foreign_ca twin "/CN=hwid test CA"
        foreign_ca other "/CN=elsewhere CA"
        cmp_run "$DEV/rr.twin" -- -cmd rr -cert "$DEV/cmp-rr.pem" -key "$DEV/cmp-rr.key" -oldcert "$DEV/twin.pem"
        cmp_refused "$DEV/rr.twin" badCertId "not one this CA issued"
        cmp_run "$DEV/rr.mac" -- -cmd rr -ref "${tok%%.*}" -secret "file:$DEV/rr.mac" -mac hmacWithSHA256 \
                -oldcert "$DEV/other.pem"
        cmp_refused "$DEV/rr.mac" badCertId "issuer is another"
        cmp_run "$DEV/rr.none" -- -cmd rr -unprotected_requests -ref none -oldcert "$DEV/other.pem"
        cmp_refused "$DEV/rr.none" badCertId "issuer is another"
        assert_contains "$(cert_rows --identity cmp-rr)" valid "cmp-rr after rr of other CAs' certificates"
}

# flood ADDR FILE N — FILE sent N times from ADDR; N200 answers were CMP
# answers, N429 unsigned 429s with Retry-After; FLOOD_SECONDS it took.
flood() {
        local i start=$SECONDS
        N200=0 N429=0
        for i in $(seq "$3"); do
                send "$DEV/fl" "$2" "$1"
                case $CODE in
                200) N200=$((N200 + 1)) ;;
                429)
                        N429=$((N429 + 1))
                        assert_not_contains "$(header Content-Type "$DEV/fl")" pkixcmp "a throttled answer"
                        [ -n "$(header Retry-After "$DEV/fl")" ] || fail "a 429 without Retry-After"
                        ;;
                *) fail "HTTP $CODE to $2" ;;
                esac
        done
        FLOOD_SECONDS=$((SECONDS - start))
        [ "$N429" -ge 1 ] || fail "none of $3 messages from $1 was throttled"
        [ "$N200" -le $((16 + FLOOD_SECONDS + 1)) ] ||
                fail "$N200 signed answers to $2 from $1 in $FLOOD_SECONDS s"
}

# Signed answers to messages nobody authenticated: a burst of 16 per
# address, then one a second; beyond, 429 unsigned, and while the address
# is over its share nothing it sends is looked at (no MAC computed).
test_flood() {
        local tok
        flood 127.0.0.90 "$DEV/g.der" 40
        # MACs of an existing token, all wrong: one computed per signed
        # answer, none for a 429.
        tok=$(token_new --profile cmp)
        ec_key "$DEV/fl.key"
        offline_req "$DEV/fl.ir" -cmd ir -newkey "$DEV/fl.key" -subject /CN=cmp-fl
        echo 0000000000000000000000000000000000000000000000000000000000000000 >"$DEV/fl.wrong.mac"
        "${FORGE[@]}" forge "$DEV/fl.ir" "$DEV/fl.wrong" --tid --kid "${tok%%.*}" --secret "$DEV/fl.wrong.mac"
        scrape "$DEV/fl0"
        flood 127.0.0.92 "$DEV/fl.wrong" 40
        scrape "$DEV/fl1"
        assert_eq "$(metric_delta "$DEV/fl0" "$DEV/fl1" 'hwid_cmp_pbm_total{result="computed"}')" "$N200" \
                "MACs computed for a flood of wrong ones"
        # The right MAC from there: 429 while throttled, answered after Retry-After.
        forged "$DEV/fl.right" "$DEV/fl.ir" "$tok"
        send "$DEV/fl.right" "$DEV/fl.right" 127.0.0.92
        if [ "$CODE" = 429 ]; then
                sleep "$(header Retry-After "$DEV/fl.right")"
                send "$DEV/fl.right" "$DEV/fl.right" 127.0.0.92
        fi
        answered "$DEV/fl.right" body=ip status=0
        # Another address was never throttled.
        send "$DEV/fl.other" "$DEV/g.der" 127.0.0.91
        answered "$DEV/fl.other" body=genp
}

ca_setup
add_profiles <<'YAML'
  cmp:
    validity: 30d
    key_types: [ec-p256]
    subject:
      allowed_rdns: [CN]
      cn_pattern: "cmp-*"
  again:
    validity: 30d
    key_types: [ec-p256]
    allow_reenroll: true
    subject:
      allowed_rdns: [CN]
      cn_pattern: "again-*"
YAML
public_metrics
hwidd_start
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$DEV/self.key" \
        -subj /CN=self -days 1 -out "$DEV/self.pem" 2>/dev/null
test_pbm
test_replay
test_per_sender
test_certconf_foreign
test_ber
test_badpop
test_rr_foreign
test_flood
hwidd_stop
echo "cmp-hostile: all checks passed"
