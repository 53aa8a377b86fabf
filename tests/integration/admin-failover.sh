#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# admin-failover.sh — the operator's remote admin commands fail over
# between the replicas of one CA as devices do, but only when a request
# certainly was not carried out. The servers: A, the real hwidd; B, a
# second hwidd on the same database (a replica); LISTENER, a port that
# only records the connections it gets; an impostor hwidd with a CA of its
# own; and a TLS server that takes a request and hangs up without an
# answer. The operator is an admin enrolled with `hwid join --server A
# --server B`, its key in SoftHSM2.
# Proves:
#   - --dir DIR (device.json lists A and B) with A stopped: hwid token
#     create and hwid token list succeed through B (B's log), stderr
#     saying "A is unavailable (...); trying B"; the join command printed
#     names both servers; the server that answered DIR's device last is
#     asked first;
#   - --cert/--key --ca-hash with --server A --server B repeated, A
#     stopped: the same (the CA fetched from B and checked against the pin);
#   - a refusal is final: a 403 (an auditor creating a token) and a 404 (an
#     unknown token revoked) from A end the command with A's answer, and
#     the LISTENER second gets no connection;
#   - a request that was sent is never sent elsewhere: A' takes the request
#     and hangs up; the error names A' and says the request may have been
#     carried out; the LISTENER gets no connection;
#   - a gateway's 502 or 504 (it may have handed the request on) ends the
#     command too, the LISTENER getting no connection; a 503 moves on to it;
#   - tokens asked for in two requests, the second refused (a made-up
#     server): the first request's 1000 tokens are written to --out all
#     the same, mode 0600, stderr saying "wrote 1000 of 1500", exit 1;
#   - every server down: one error naming both, exit code as for one
#     unreachable server, nothing else on stderr but the note;
#   - a server the pinned CA does not verify (the impostor) is refused by
#     TLS and gets no request (its audit log unchanged), with --dir and
#     with --ca-hash (where its /ca fails the pin);
#   - usage: --server twice or not https:// is refused (exit 2).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"
# shellcheck source=policy-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/policy-lib.sh"
# shellcheck source=admin-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/admin-lib.sh"
# shellcheck source=failover-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/failover-lib.sh"

require_tools python3 openssl
softhsm_init ops 4321
device_ca < <(operator_profiles)
A=$URL
ADM=$OPS/op-admin

# The replica B: hwidd's configuration with its own port, the same store.
B_PORT=$(free_port)
B=https://127.0.0.1:$B_PORT
sed -e "s|^listen: .*|listen: \"127.0.0.1:$B_PORT\"|" -e "/^http_listen:/d" "$CFG" >"$CA_DIR/replica-b.yaml"

b_start() {
        B_LOG=$T/hwidd-b.$((${_B_RUNS:=0} + 1)).log
        _B_RUNS=$((_B_RUNS + 1))
        start_bg "$B_LOG" "$HWIDD" --config "$CA_DIR/replica-b.yaml"
        B_PID=$BG_PID
        wait_for_port "$B_PORT" 20 "$B_PID"
}

b_stop() {
        kill -TERM "$B_PID"
        wait "$B_PID" || fail "replica B did not exit cleanly"
}

# op_enroll NAME PROFILE — operator NAME joined with --server A --server B.
op_enroll() {
        local tok
        tok=$(token_new --profile "$2")
        HWID_TOKEN=$tok run_ok "$HWID" join --server "$A" --server "$B" --ca-hash "$PIN" --key "$(op_key "$1")" \
                --cn "$1" --dir "$OPS/$1" >/dev/null
        [ -s "$OPS/$1/cert.pem" ] || fail "operator $1 was not enrolled"
}

# token_id OUT — the id of the token hwid token create printed in OUT.
token_id() {
        sed -n 's/^token: \([a-z0-9]\{6\}\)\..*/\1/p' "$1"
}

test_usage() {
        expect_exit 2 "is given twice" -- "$HWID" token list --dir "$ADM" --server "$A" --server "$A"
        expect_exit 2 "--server must be an https:// URL" -- "$HWID" token list --dir "$ADM" --server "http://127.0.0.1:1"
}

test_dir_failover() {
        local id
        hwidd_stop
        expect_exit 0 "" --multiline -- "$HWID" token create --dir "$ADM" --profile line --name-pattern 'line-9-*'
        assert_contains "$(cat "$T/last.err")" "$A is unavailable (" "token create leaving the stopped A"
        assert_contains "$(cat "$T/last.err")" "; trying $B" "token create moving on to B"
        assert_contains "$(cat "$T/last.out")" "--server $A --server $B --ca-hash $PIN" "the join command's servers"
        id=$(token_id "$T/last.out")
        [ -n "$id" ] || fail "token create printed no token: $(cat "$T/last.out")"
        grep -q "admin:op-admin token.create $id: allow" "$B_LOG" || fail "B's log lacks the token: $(cat "$B_LOG")"
        expect_exit 0 "$A is unavailable" --multiline -- "$HWID" token list --dir "$ADM"
        assert_contains "$(cat "$T/last.out")" "$id" "token list through B"
        hwidd_start
        assert_eq "$(store_sql "SELECT count(*) FROM tokens WHERE id = '$id'")" 1 "the token created through B"

        # The server that answered the device last is asked first: B, so
        # with B stopped the note names B and A answers.
        json_edit "$ADM/device.json" "d['server'] = '$B'"
        b_stop
        expect_exit 0 "$B is unavailable (" --multiline -- "$HWID" token list --dir "$ADM"
        assert_contains "$(cat "$T/last.err")" "; trying $A" "token list moving on to A"
        b_start
        json_edit "$ADM/device.json" "d['server'] = '$A'"
}

test_repeated_servers() {
        local id
        hwidd_stop
        expect_exit 0 "" --multiline -- "$HWID" token create --cert "$ADM/cert.pem" --key "$(op_key op-admin)" \
                --ca-hash "$PIN" --server "$A" --server "$B" --profile line --name-pattern 'line-9-*'
        assert_contains "$(cat "$T/last.err")" "$A is unavailable (" "token create --server A --server B"
        assert_contains "$(cat "$T/last.err")" "; trying $B" "token create --server A --server B moving on"
        id=$(token_id "$T/last.out")
        [ -n "$id" ] || fail "token create printed no token: $(cat "$T/last.out")"
        expect_exit 0 "$A is unavailable" --multiline -- "$HWID" token list --cert "$ADM/cert.pem" \
                --key "$(op_key op-admin)" --ca-hash "$PIN" --server "$A" --server "$B"
        assert_contains "$(cat "$T/last.out")" "$id" "token list --server A --server B"
        hwidd_start
}

# A refusal from A is the command's answer; the LISTENER is never asked.
test_refusals() {
        listener_start
        expect_exit 1 "server answered 403" -- "$HWID" token create --dir "$OPS/op-auditor" --server "$A" \
                --server "$LISTENER" --profile line
        no_connection "a 403"
        expect_exit 1 "server answered 404" -- "$HWID" token revoke --dir "$ADM" --server "$A" \
                --server "$LISTENER" zzzzzz
        no_connection "a 404"
}

# hangup_start [STATUS | tokens N] — a TLS server with a certificate of a
# CA of the test's own ($T/hangup/ca.pem) that reads a request and closes
# without answering, or after answering STATUS, or (tokens) after
# answering N tokens the first time and 403 after; each request it got is
# a line of $T/hangup/requests.  Sets HANGUP (URL).
hangup_start() {
        local h=$T/hangup port status=${1:-} mode=hangup
        [ -z "$status" ] || mode=answer
        [ "$status" != tokens ] || { mode=tokens; status=$2; }
        mkdir -p "$h"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$h/ca.key" -out "$h/ca.pem" \
                -subj "/CN=hangup CA" -days 1 2>/dev/null || fail "openssl: hangup CA"
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$h/tls.key" -subj "/CN=127.0.0.1" \
                -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null |
                openssl x509 -req -CA "$h/ca.pem" -CAkey "$h/ca.key" -CAcreateserial -days 1 -copy_extensions copy \
                        -out "$h/tls.pem" 2>/dev/null || fail "openssl: hangup certificate"
        port=$(free_port)
        : >"$h/requests"
        start_bg "$h/server.log" python3 "$SRCDIR/tests/integration/failover-peer.py" \
                "$mode" "$port" "$h/requests" "$h/tls.pem" "$h/tls.key" $status
        wait_for_port "$port" 10 "$BG_PID"
        HANGUP=https://127.0.0.1:$port
}

# The request reached the first server, which hung up without an answer:
# it may have been carried out, so it goes nowhere else.
test_sent_not_repeated() {
        hangup_start
        : >"$T/listener.log"
        expect_exit 1 "may have been carried out by $HANGUP, so no other server was asked" -- \
                "$HWID" token create --cert "$ADM/cert.pem" --key "$(op_key op-admin)" --ca-file "$T/hangup/ca.pem" \
                --server "$HANGUP" --server "$LISTENER" --profile line
        assert_eq "$(cat "$T/hangup/requests")" "POST /v1/admin/tokens HTTP/1.1" "what the first server got"
        no_connection "a request sent and not answered"
        # What the hangup server holds is no key of hwid's.
        rm -rf "$T/hangup"
}

# A gateway's 502 or 504 may come after it handed the request on: it ends
# the command like any answer.  A 503 says nothing was done: it moves on.
test_gateway_answers() {
        local status
        for status in 502 504; do
                hangup_start "$status"
                : >"$T/listener.log"
                expect_exit 1 "server answered $status" -- "$HWID" token create --cert "$ADM/cert.pem" \
                        --key "$(op_key op-admin)" --ca-file "$T/hangup/ca.pem" --server "$HANGUP" \
                        --server "$LISTENER" --profile line
                no_connection "a $status"
                rm -rf "$T/hangup"
        done
        hangup_start 503
        : >"$T/listener.log"
        "$HWID" token create --cert "$ADM/cert.pem" --key "$(op_key op-admin)" --ca-file "$T/hangup/ca.pem" \
                --server "$HANGUP" --server "$LISTENER" --profile line >"$T/503.out" 2>"$T/503.err" &&
                fail "token create succeeded with a 503 and a listener"
        assert_contains "$(cat "$T/503.err")" "$HANGUP is unavailable (it answered 503); trying $LISTENER" "the note"
        assert_contains "$(cat "$T/503.err")" "no server could take the request: $HANGUP (it answered 503); $LISTENER (" \
                "the error after a 503"
        assert_eq "$(grep -c connection "$T/listener.log" || true)" 1 "connections to the next server after a 503"
        rm -rf "$T/hangup"
}

# Tokens asked for in several requests, the second refused: the first
# request's tokens exist on the server, so they are written all the same
# (and said to be only part), the command still failing with the refusal.
test_partial_tokens() {
        hangup_start tokens 1000
        rm -f "$T/partial.txt"
        "$HWID" token create --cert "$ADM/cert.pem" --key "$(op_key op-admin)" --ca-file "$T/hangup/ca.pem" \
                --server "$HANGUP" --profile line --count 1500 --out "$T/partial.txt" >"$T/partial.out" \
                2>"$T/partial.err" && fail "token create succeeded with its second request refused"
        assert_contains "$(cat "$T/partial.err")" "wrote 1000 of 1500 tokens (profile line) to $T/partial.txt" \
                "what was written"
        assert_contains "$(cat "$T/partial.err")" "server answered 403" "the refusal"
        assert_eq "$(wc -l <"$T/partial.txt")" 1000 "tokens in the file"
        assert_eq "$(sed -n 1p "$T/partial.txt")" "t00000.secret-0" "the first token"
        assert_eq "$(stat -c %a "$T/partial.txt")" 600 "the file's mode"
        assert_eq "$(grep -c . "$T/hangup/requests")" 2 "requests the server got"
        rm -rf "$T/hangup"
}

test_all_down() {
        local rc_one=0 rc_two=0
        hwidd_stop
        b_stop
        "$HWID" token list --dir "$ADM" --server "$A" >"$T/one.out" 2>"$T/one.err" || rc_one=$?
        "$HWID" token list --dir "$ADM" >"$T/two.out" 2>"$T/two.err" || rc_two=$?
        [ "$rc_one" != 0 ] || fail "token list with its one server down succeeded"
        assert_eq "$rc_two" "$rc_one" "exit code with every server down"
        assert_contains "$(cat "$T/two.err")" "no server could take the request: $A (" "the error with both down"
        assert_contains "$(cat "$T/two.err")" "; $B (" "the error naming B"
        assert_eq "$(grep -c . "$T/two.err")" 2 "stderr lines (the note and the error)"
        b_start
        hwidd_start
}

# An hwidd with a CA of its own where B should be: TLS refuses it.
test_impostor() {
        local port imp=$T/impostor pid audit
        softhsm_init impostor
        port=$(free_port)
        IMP=https://127.0.0.1:$port
        run_ok "$HWID" ca init --key "pkcs11:token=impostor;object=ca-key?pin-source=file:$T/softhsm/impostor.pin" \
                --subject "/CN=impostor CA" --dir "$imp" --listen "127.0.0.1:$port" --http-listen none >/dev/null
        start_bg "$T/impostor.log" "$HWIDD" --config "$imp/hwidd.yaml"
        pid=$BG_PID
        wait_for_port "$port" 20 "$pid"
        audit=$(sqlite3 "$imp/hwid.db" 'SELECT count(*) FROM audit')
        hwidd_stop
        expect_exit 1 "$IMP (" --multiline -- "$HWID" token create --dir "$ADM" --server "$A" --server "$IMP" \
                --profile line
        assert_contains "$(cat "$T/last.err")" "no server could take the request" "the impostor's refusal"
        assert_contains "$(cat "$T/last.err")" "certificate" "TLS verification of the impostor"
        expect_exit 1 "is sha256:" --multiline -- "$HWID" token create --cert "$ADM/cert.pem" \
                --key "$(op_key op-admin)" --ca-hash "$PIN" --server "$A" --server "$IMP" --profile line
        assert_contains "$(cat "$T/last.err")" "nothing was sent" "the impostor's CA against the pin"
        assert_eq "$(sqlite3 "$imp/hwid.db" 'SELECT count(*) FROM audit')" "$audit" "impostor's audit rows"
        assert_eq "$(sqlite3 "$imp/hwid.db" 'SELECT count(*) FROM tokens')" 0 "impostor's tokens"
        kill -TERM "$pid"
        wait "$pid" || true
        ! grep -q 'admin:' "$T/impostor.log" || fail "the impostor got an admin request: $(cat "$T/impostor.log")"
        hwidd_start
}

b_start
op_enroll op-admin ops-admin
op_enroll op-auditor ops-auditor
test_usage
test_dir_failover
test_repeated_servers
test_refusals
test_sent_not_repeated
test_gateway_answers
test_partial_tokens
test_all_down
test_impostor
b_stop
no_private_keys_in "$T"
echo "admin-failover: all checks passed"
