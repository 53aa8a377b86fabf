#!/bin/bash
# pg-replicas.sh — three hwidd replicas on one PostgreSQL (a cluster the
# test starts, password from a passfile), sharing the CA key (one SoftHSM2
# token). Proves the invariants hold across processes, by the database:
#   - 32 concurrent enrollments of one identity spread over the replicas:
#     exactly one 201, 31 409s, one certificate in the store;
#   - a 5-use token used by 30 concurrent enrollments over all replicas:
#     exactly 5 certificates, the token used up;
#   - a request made pending on replica 1, approved by `hwid request
#     approve` (config on PostgreSQL), is collected on replica 2;
#   - a certificate revoked through `hwid cert revoke` is in the CRL that
#     replica 3 serves (openssl crl), regenerated because the revocation
#     sequence moved, and CRL numbers grow across replicas;
#   - kill -9 of a replica under load: every certificate a client received
#     is in the store, each stored one spent one token use, the others keep
#     serving every request;
#   - a database URI holding a password is refused without repeating it;
#   - PostgreSQL stopped under load: the replicas answer 201 or 503
#     store_unavailable (and /readyz 503) meanwhile, nothing else, and
#     neither names the database nor repeats its server's words; every
#     certificate a client received is stored, uses match certificates;
#     they serve again once it is back, without a restart.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=pg-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/pg-lib.sh"

N=32

# race NAME TOKEN TAG [COUNT] — COUNT concurrent enrollments of NAME (a
# name ending in -I: NAME-I), round robin over the 3 replicas; statuses in
# $DEV/TAG-I.code.
race() {
        local name=$1 tok=$2 tag=$3 count=${4:-$N} i pids=() cn
        for i in $(seq "$count"); do
                cn=$name
                [ "${name%-I}" = "$name" ] || cn=${name%-I}-$i
                make_csr "$tag-$i" -subj "/CN=$cn"
        done
        for i in $(seq "$count"); do
                (URL=${REPLICA_URL[$((i % 3 + 1))]} post_csr "$DEV/$tag-$i" "$tok" "$DEV/$tag-$i.csr" &&
                        echo "$CODE" >"$DEV/$tag-$i.code") &
                pids+=($!)
        done
        for i in "${pids[@]}"; do wait "$i"; done
}

count() {
        cat "$DEV/$1"-*.code | grep -cx "$2" || true
}

test_one_winner() {
        local tok
        tok=$(token_new --uses "$N")
        race node-x "$tok" a
        assert_eq "$(count a 201)/$(count a 409)" "1/$((N - 1))" "201s/409s of $N enrollments over 3 replicas"
        assert_eq "$(cert_rows --identity node-x | wc -l)" 1 "certificates of node-x in PostgreSQL"
        assert_eq "$(pg_sql "SELECT count(*) FROM certificates WHERE identity = 'node-x'")" 1 "rows of node-x"
        assert_eq "$(token_used "$tok")" 1 "token uses spent by the race"
}

test_token_uses() {
        local tok
        tok=$(token_new --uses 5)
        race t-I "$tok" u 30
        assert_eq "$(count u 201)/$(count u 401)" "5/25" "201s/401s with a 5-use token over 3 replicas"
        assert_eq "$(pg_sql "SELECT count(*) FROM certificates WHERE identity LIKE 't-%'")" 5 "certificates stored"
        assert_eq "$(pg_sql "SELECT uses_left FROM tokens WHERE id = '${tok%%.*}'")" 0 "uses left"
}

test_approval_across() {
        local tok id
        tok=$(token_new --profile manual --uses 1)
        make_csr man-1
        on_replica 1 post_csr "$DEV/man-1" "$tok" "$DEV/man-1.csr"
        expect_status 202 "$DEV/man-1"
        id=$(json_get "$DEV/man-1.body" .request_id)
        admin request approve "$id" >/dev/null
        on_replica 2 http "$DEV/poll" GET "/v1/requests/$id"
        expect_status 201 "$DEV/poll"
        verify_leaf "$DEV/poll.body"
        assert_eq "$(pg_sql "SELECT status FROM requests WHERE id = '$id'")" issued "request after collection"
}

test_crl_across() {
        local tok serial
        tok=$(token_new)
        on_replica 1 enroll crl-1 "$tok"
        expect_status 201 "$DEV/crl-1"
        serial=$(serial_of "$DEV/crl-1.pem")
        # Replica 3 builds a CRL first, so that it has one to keep.
        curl -sS -o "$DEV/crl0.der" "http://127.0.0.1:${REPLICA_HTTP[3]}/crl"
        admin cert revoke "$serial" >/dev/null
        curl -sS -o "$DEV/crl.der" "http://127.0.0.1:${REPLICA_HTTP[3]}/crl"
        openssl crl -inform DER -in "$DEV/crl.der" -out "$DEV/crl.pem"
        assert_eq "$(openssl crl -in "$DEV/crl.pem" -CAfile "$CA_DIR/ca.pem" -noout 2>&1)" "verify OK" "CRL signature"
        assert_contains "$(openssl crl -in "$DEV/crl.pem" -noout -text)" "Serial Number: $serial" \
                "replica 3's CRL lists the revocation made through the store"
        # Replica 1 regenerates too, in the same second: its number is
        # still above replica 3's (the store gives the numbers).
        curl -sS -o "$DEV/crl1.der" "http://127.0.0.1:${REPLICA_HTTP[1]}/crl"
        [ "$(crl_number "$DEV/crl.der")" -gt "$(crl_number "$DEV/crl0.der")" ] ||
                fail "replica 3's CRL number did not grow"
        [ "$(crl_number "$DEV/crl1.der")" -gt "$(crl_number "$DEV/crl.der")" ] ||
                fail "replica 1's CRL number $(crl_number "$DEV/crl1.der") is not above replica 3's"
}

# crl_number DER — the CRL's cRLNumber, in decimal.
crl_number() {
        local hex
        hex=$(openssl crl -inform DER -in "$1" -noout -crlnumber | sed 's/^crlNumber=//')
        echo $((hex))
}

# load TAG COUNT TOKEN [REPLICA...] — COUNT enrollments in the background on
# each replica (default 1 2 3), one after another per replica; statuses in
# $DEV/TAG-R-I.code (000 when the response was cut off); the PIDs in LOAD_PIDS.
load() {
        local tag=$1 count=$2 tok=$3 r i replicas=(1 2 3)
        shift 3
        [ $# -eq 0 ] || replicas=("$@")
        LOAD_PIDS=()
        for r in "${replicas[@]}"; do
                (for i in $(seq "$count"); do
                        make_csr "$tag-$r-$i"
                        URL=${REPLICA_URL[$r]} post_csr "$DEV/$tag-$r-$i" "$tok" "$DEV/$tag-$r-$i.csr"
                        answered_code >"$DEV/$tag-$r-$i.code"
                done) &
                LOAD_PIDS+=($!)
        done
}

# every_issued_stored TAG — each certificate a client of load TAG received is stored.
every_issued_stored() {
        local f s
        for f in "$DEV/$1"-*.code; do
                [ "$(cat "$f")" = 201 ] || continue
                s=$(serial_of "${f%.code}.body")
                assert_eq "$(pg_sql "SELECT count(*) FROM certificates WHERE serial = '$s'")" 1 \
                        "certificate $s a client received is stored"
        done
}

# tokens_match_certs TOKEN — the token's spent uses are exactly its stored
# certificates (a certificate whose answer was lost still spent its use).
tokens_match_certs() {
        assert_eq "$(token_used "$1")" "$(pg_sql "SELECT count(*) FROM certificates WHERE token_id = '${1%%.*}'")" \
                "uses of token ${1%%.*} against its certificates"
}

test_kill_replica() {
        local tok n
        tok=$(token_new --uses 200)
        load k 30 "$tok"
        sleep 0.5
        kill -KILL "${REPLICA_PID[1]}"
        for f in "${LOAD_PIDS[@]}"; do wait "$f"; done
        wait "${REPLICA_PID[1]}" 2>/dev/null || true
        [ "$(cat "$DEV"/k-1-*.code | grep -cvx 201)" -gt 0 ] || fail "replica 1 was killed after its load was done"
        every_issued_stored k
        n=$(cat "$DEV"/k-*.code | grep -cx 201)
        assert_eq "$(cat "$DEV"/k-2-*.code "$DEV"/k-3-*.code | grep -cx 201)" 60 \
                "enrollments replicas 2 and 3 served while 1 was killed"
        tokens_match_certs "$tok"
        [ "$(token_used "$tok")" -ge "$n" ] || fail "fewer token uses than certificates clients received"
}


test_database_restart() {
        local tok f codes
        tok=$(token_new --uses 200)
        load d 30 "$tok" 2 3
        sleep 0.5
        pg_halt
        make_csr down-1
        on_replica 2 post_csr "$DEV/down-1" "$tok" "$DEV/down-1.csr"
        expect_error 503 store_unavailable "$DEV/down-1" "try again later"
        # What the database said, and where it is, are for the log only.
        assert_not_contains "$(cat "$DEV/down-1.body")" "$PG_PORT" "the database's address in a 503"
        assert_not_contains "$(cat "$DEV/down-1.body")" "PostgreSQL" "the database's words in a 503"
        sleep 1.1 # past /readyz's cache
        on_replica 3 http "$DEV/ready-down" GET /readyz
        expect_status 503 "$DEV/ready-down"
        assert_eq "$(json_get "$DEV/ready-down.body" .checks.store.ok)" false "/readyz's store check, database down"
        assert_not_contains "$(cat "$DEV/ready-down.body")" "$PG_PORT" "the database's address in /readyz"
        sleep 1
        pg_run
        for f in "${LOAD_PIDS[@]}"; do wait "$f"; done
        codes=$(cat "$DEV"/d-*.code | sort | uniq -c | awk '{ print $2 }' | paste -sd' ')
        [[ " $codes " == *" 503 "* ]] || fail "no 503 while the database was down (statuses: $codes)"
        ! cat "$DEV"/d-*.code | grep -qvx -e 201 -e 503 ||
                fail "statuses other than 201 and 503 while the database restarted: $codes"
        every_issued_stored d
        on_replica 2 post_csr "$DEV/down-1" "$tok" "$DEV/down-1.csr"
        expect_status 201 "$DEV/down-1"
        on_replica 3 enroll down-2 "$tok"
        expect_status 201 "$DEV/down-2"
        tokens_match_certs "$tok"
        sleep 1.1
        on_replica 3 http "$DEV/ready-up" GET /readyz
        expect_status 200 "$DEV/ready-up"
}

# A URI holding a password is refused, and the password is not repeated.
test_password_refused() {
        local rc=0 secret=s3cret-$RANDOM
        sed "s|^database: .*|database: \"postgresql://hwid:$secret@127.0.0.1:$PG_PORT/hwid\"|" "$CFG" >"$T/pw.yaml"
        "$HWID" token list --config "$T/pw.yaml" >"$T/pw.out" 2>"$T/pw.err" || rc=$?
        [ $rc -ne 0 ] || fail "hwid accepted a database URI with a password"
        assert_contains "$(cat "$T/pw.err")" "holds a password" "refusal of a password in the URI"
        assert_not_contains "$(cat "$T/pw.err" "$T/pw.out")" "$secret" "the password in hwid's output"
}

ca_setup
pg_start --own
test_password_refused
pg_use_config
for r in 1 2 3; do replica_start "$r"; done
test_one_winner
test_token_uses
test_approval_across
test_crl_across
test_kill_replica
test_database_restart
# A replica stops cleanly (ASan: without leaks) on SIGTERM.
HWIDD_PID=${REPLICA_PID[2]} hwidd_stop
echo "pg-replicas: OK"
