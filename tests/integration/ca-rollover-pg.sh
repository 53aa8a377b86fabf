#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# ca-rollover-pg.sh — hwidd replicas on one PostgreSQL switch CA
# generations together, without a restart: the active generation is in the
# store, which each replica reads once a second (docs/HA.md, docs/OPERATIONS.md
# "Rolling the CA over"). Two replicas, the CA keys in one SoftHSM2 token.
# Proves:
#   - `hwid ca rollover prepare` on the CA host (its configuration on
#     PostgreSQL): within 3 s both replicas serve the new CA and its links
#     in GET /ca, and generation 1 still signs on both;
#   - `hwid ca rollover activate`: within 3 s both replicas serve the new CA
#     first, and an enrollment on each is signed by the new CA (openssl),
#     naming /crl/2; a renewal of an old certificate on the other replica
#     gets a new CA's certificate;
#   - a generation-1 certificate revoked after the switch is in the /crl of
#     the replica that did not revoke it, verified with the old CA alone;
#   - a third replica started after the switch signs with generation 2.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=pg-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/pg-lib.sh"

G2_URI="pkcs11:token=ca;object=ca-key-g2?pin-source=file:$T/pin"
OLD=$CA_DIR/ca.pem

first_fp() {
        openssl x509 -in "$1" -noout -fingerprint -sha256 | cut -d= -f2
}

count_certs() {
        grep -c -- "-----BEGIN CERTIFICATE-----" "$1" || true
}

# wait_all WHAT COND — until COND (a function of a replica's number) holds
# for replicas 1 and 2; 3 s at most.
wait_all() {
        local what=$1 cond=$2 n deadline=$((SECONDS + 3))
        for n in 1 2; do
                until "$cond" "$n"; do
                        [ $SECONDS -lt $deadline ] || fail "replica $n: $what not within 3 s"
                        sleep 0.1
                done
        done
}

fetch_ca() {
        on_replica "$1" http "$T/ca-$1" GET /ca
        [ "$CODE" = 200 ]
}

serves_four() {
        fetch_ca "$1" && [ "$(count_certs "$T/ca-$1.body")" = 4 ]
}

serves_new_first() {
        fetch_ca "$1" && [ "$(first_fp "$T/ca-$1.body")" = "$(first_fp "$NEW")" ]
}

# enroll_on N NAME TOKEN — an enrollment on replica N; $DEV/NAME.pem.
enroll_on() {
        on_replica "$1" enroll "$2" "$3"
        expect_status 201 "$DEV/$2"
}

issued_by() {
        openssl verify -partial_chain -CAfile "$2" "$1" >/dev/null 2>&1
}

ca_setup
# Renewal open at once, so that a certificate just issued can be renewed.
sed -i 's/window: 0.3333/window: 1.0/' "$CFG"
pg_start
pg_use_config
replica_start 1
replica_start 2
TOK=$(token_new --uses 20)
enroll_on 1 old-1 "$TOK"
enroll_on 2 old-2 "$TOK"

admin ca rollover prepare --key "$G2_URI" >/dev/null
wait_all "the new CA served" serves_four
NEW=$T/new-ca.pem
awk '/-----BEGIN CERTIFICATE-----/ { n++ } n == 2' "$T/ca-1.body" >"$NEW"
cmp -s <(awk '/-----BEGIN CERTIFICATE-----/ { n++ } n == 2' "$T/ca-2.body") "$NEW" ||
        fail "the replicas serve different new CAs"
enroll_on 2 before-1 "$TOK"
issued_by "$DEV/before-1.pem" "$OLD" || fail "a prepared generation signed before activate"

start=$SECONDS
admin ca rollover activate >/dev/null
wait_all "the switch" serves_new_first
echo "both replicas serve generation 2 first $((SECONDS - start)) s after activate"
enroll_on 1 after-1 "$TOK"
enroll_on 2 after-2 "$TOK"
for c in after-1 after-2; do
        issued_by "$DEV/$c.pem" "$NEW" || fail "$c is not signed by the new CA"
        ! issued_by "$DEV/$c.pem" "$OLD" || fail "$c is signed by the old CA"
        openssl x509 -in "$DEV/$c.pem" -noout -ext crlDistributionPoints | grep -q "/crl/2$" ||
                fail "$c names no /crl/2"
done

# A renewal of a generation-1 certificate, on the other replica.
make_csr old-1-renew -subj "/CN=old-1"
on_replica 2 renew "$DEV/old-1-renew" "$DEV/old-1.pem" "$DEV/old-1.key" "$DEV/old-1-renew.csr"
expect_status 201 "$DEV/old-1-renew"
issued_by "$DEV/old-1-renew.body" "$NEW" || fail "the renewal of an old certificate is not the new CA's"

# A revocation of an old certificate after the switch, in the old CRL of
# the replica that did not revoke it.
serial=$(serial_of "$DEV/old-2.pem")
admin cert revoke "$serial" >/dev/null
curl -sS -f -o "$T/g1.crl" "http://127.0.0.1:${REPLICA_HTTP[1]}/crl" || fail "GET /crl on replica 1"
text=$(openssl crl -inform DER -in "$T/g1.crl" -CAfile "$OLD" -noout -text 2>&1) || fail "openssl crl: $text"
assert_contains "$text" "verify OK" "replica 1's /crl with the old CA"
assert_contains "$text" "Serial Number: $serial" "replica 1's /crl"
curl -sS -f -o "$T/g2.crl" "http://127.0.0.1:${REPLICA_HTTP[2]}/crl/2" || fail "GET /crl/2 on replica 2"
text=$(openssl crl -inform DER -in "$T/g2.crl" -CAfile "$NEW" -noout -text 2>&1) || fail "openssl crl: $text"
assert_not_contains "$text" "$serial" "replica 2's /crl/2"

replica_start 3
on_replica 3 enroll late-1 "$TOK"
expect_status 201 "$DEV/late-1"
issued_by "$DEV/late-1.pem" "$NEW" || fail "a replica started after the switch signs with the old CA"
for n in 1 2 3; do
        kill -TERM "${REPLICA_PID[n]}"
        wait "${REPLICA_PID[n]}" || fail "replica $n exit code"
done
echo "ca-rollover-pg: OK"
