#!/bin/bash
# ca-durability.sh — "every certificate returned to anyone is in the store
# first" (invariant 2), under kill -9.
# A stream of 40 enrollments (distinct names, one token with many uses) runs
# from parallel curls; hwidd is killed with SIGKILL part-way (once some have
# been answered and while others are in flight); the rest of the stream
# meets a dead port. hwidd is restarted on the same store. Proves:
#   - every certificate a client received (HTTP 201) is in `hwid cert list`
#     by serial (openssl x509 -serial), for the identity it names, with the
#     same bytes (`hwid cert show`); no client got anything but 201 or no
#     answer at all;
#   - no serial repeats in the store;
#   - the token's spent uses equal the certificates issued with it (a use is
#     spent iff a certificate was committed);
#   - the store passes SQLite's integrity check, and the restarted hwidd
#     enrolls again with the same token.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

N=40
KILL_AFTER=8    # answered enrollments before the kill

# one_enrollment I — enroll dur-I; the status goes to $DEV/dur-I.code
# (000 for a response the kill cut off: answered_code).
one_enrollment() {
        post_csr "$DEV/dur-$1" "$TOK" "$DEV/dur-$1.csr"
        answered_code >"$DEV/dur-$1.code"
}

answered() {
        grep -lx 201 "$DEV"/dur-*.code 2>/dev/null | wc -l
}

finished() {
        find "$DEV" -name 'dur-*.code' | wc -l
}

# wait_finished N — until N enrollments have finished (at most 15 s).
wait_finished() {
        local deadline=$((SECONDS + 15))
        while [ "$(finished)" -lt "$1" ] && [ $SECONDS -lt $deadline ]; do
                sleep 0.05
        done
}

# stream — launch the N enrollments in bursts of 5 at once; right after a
# burst, kill -9 hwidd if KILL_AFTER of them have their certificate (so the
# burst is in flight), else let the burst before finish and go on; the
# bursts after the kill meet a dead port.
stream() {
        local i pids=() killed=0 inflight
        for i in $(seq "$N"); do
                one_enrollment "$i" &
                pids+=($!)
                if [ $((i % 5)) != 0 ] || [ "$killed" != 0 ]; then
                        continue
                fi
                if [ "$(answered)" -ge $KILL_AFTER ]; then
                        kill -KILL "$HWIDD_PID"
                        inflight=$((i - $(finished)))
                        wait "$HWIDD_PID" 2>/dev/null || true
                        killed=$i
                        continue
                fi
                wait_finished $((i - 5))
        done
        [ "$killed" != 0 ] || fail "fewer than $KILL_AFTER of $N enrollments were answered"
        for i in "${pids[@]}"; do wait "$i"; done
        echo "killed hwidd after launching $killed of $N enrollments, $inflight unanswered then" >&2
}

check_received() {
        local i code serial received=0 lost=0
        for i in $(seq "$N"); do
                code=$(cat "$DEV/dur-$i.code")
                case $code in
                201)
                        received=$((received + 1))
                        serial=$(serial_of "$DEV/dur-$i.body")
                        in_store "$serial" || fail "dur-$i received $serial, which the store does not have"
                        assert_eq "$(cert_rows | awk -v s="$serial" '$1 == s { print $3 }')" "dur-$i" \
                                "identity of $serial in the store"
                        [ "$(admin cert show "$serial" | sed -n '/BEGIN CERT/,/END CERT/p')" = \
                                "$(cat "$DEV/dur-$i.body")" ] || fail "the store's $serial differs from dur-$i's"
                        ;;
                000) lost=$((lost + 1)) ;;
                *) fail "dur-$i got HTTP $code: $(cat "$DEV/dur-$i.body")" ;;
                esac
        done
        [ $received -ge $KILL_AFTER ] || fail "only $received enrollments answered"
        [ $lost -ge 1 ] || fail "no enrollment met the killed hwidd"
        echo "$received received, $lost unanswered" >&2
}

check_store() {
        local dups issued
        dups=$(cert_rows | awk '{ print $1 }' | sort | uniq -d)
        [ -z "$dups" ] || fail "serials repeat in the store: $dups"
        issued=$(cert_rows | awk '$3 ~ /^dur-/' | wc -l)
        assert_eq "$(token_used "$TOK")" "$issued" "token uses spent vs certificates issued with it"
        assert_eq "$(sqlite3 "$CA_DIR/hwid.db" 'PRAGMA integrity_check')" ok "SQLite integrity check"
}

ca_setup
hwidd_start
TOK=$(token_new --uses 100)
for i in $(seq "$N"); do
        make_csr "dur-$i"
done
stream
hwidd_start
check_received
check_store
enroll dur-after "$TOK"
expect_status 201 "$DEV/dur-after"
in_store "$(serial_of "$DEV/dur-after.pem")" || fail "the enrollment after the restart is not in the store"
check_store
hwidd_stop
echo "ca-durability: all checks passed"
