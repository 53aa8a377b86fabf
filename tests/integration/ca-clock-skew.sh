#!/bin/bash
# ca-clock-skew.sh — a wrong clock is not a revocation. hwidd runs on the
# real clock, or set back with libfaketime (a CA host whose clock is behind
# the one that issued a device's certificate); curl and openssl are the
# client. Proves:
#   - issuance backdates notBefore by clock_skew (default 5m);
#   - a client certificate whose notBefore is ahead of hwidd's clock by no
#     more than clock_skew is accepted (200);
#   - one further ahead is answered 401 `not_yet_valid`, never `expired`, for
#     GET /v1/identities and POST /v1/renew alike: the JSON body carries
#     "server_time" (hwidd's Unix time) and the message names the server's
#     time in ISO 8601; nothing is issued;
#   - clock_skew is configurable and a SIGHUP applies it: with 30m the same
#     certificate is accepted.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=policy-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/policy-lib.sh"

# hwidd_start_at OFFSET — hwidd with its wall clock moved by OFFSET
# (libfaketime: "-20m", through tests/lib.sh's wrong_clock); monotonic
# time, which paces connections, is real.
hwidd_start_at() {
        wrong_clock "$1"
        _HWIDD_RUNS=$((${_HWIDD_RUNS:-0} + 1))
        HWIDD_LOG=$T/hwidd.$_HWIDD_RUNS.log
        start_bg "$HWIDD_LOG" "${WRONG_CLOCK[@]}" FAKETIME_NO_CACHE=1 "$HWIDD" --config "$CFG"
        HWIDD_PID=$BG_PID
        wait_for_port "$PORT" 20 "$HWIDD_PID"
}

unix_of() {
        date -d "$(openssl x509 -in "$1" -noout "-$2" | cut -d= -f2)" +%s
}

test_backdate() {
        local before after nb
        before=$(date +%s)
        enrolled dev-1 "$(token_new)"
        after=$(date +%s)
        nb=$(unix_of "$DEV/dev-1.pem" startdate)
        [ "$nb" -ge $((before - 300 - 1)) ] && [ "$nb" -le $((after - 300 + 1)) ] ||
                fail "notBefore $nb is not the issuance time ($before..$after) less 5 minutes"
}

# The CA's clock 8 minutes behind: notBefore is 3 minutes ahead of it.
test_within_skew() {
        hwidd_start_at -8m
        get_as "$DEV/id-8m" /v1/identities/dev-1 dev-1
        expect_status 200 "$DEV/id-8m"
        hwidd_stop
}

# expect_not_yet_valid OUT — the 401 a device needs to tell a clock problem.
expect_not_yet_valid() {
        local st now msg
        expect_error 401 not_yet_valid "$1"
        st=$(json_get "$1.body" .server_time)
        now=$(date +%s)
        [[ $st =~ ^[0-9]+$ ]] || fail "no numeric server_time in $(cat "$1.body")"
        # hwidd's clock is 20 minutes behind ours.
        [ $((now - 1200 - st)) -le 60 ] && [ $((st - (now - 1200))) -le 60 ] ||
                fail "server_time $st is not hwidd's clock (about $((now - 1200)))"
        msg=$(json_get "$1.body" .message)
        assert_contains "$msg" "the server's time is $(date -u -d "@$st" +%Y-%m-%dT%H:)" "message of a not_yet_valid"
        assert_not_contains "$msg" "expired" "message of a not_yet_valid"
}

# The CA's clock 20 minutes behind: notBefore is 15 minutes ahead of it.
test_beyond_skew() {
        local before
        hwidd_start_at -20m
        before=$(cert_rows)
        get_as "$DEV/id-20m" /v1/identities/dev-1 dev-1
        expect_not_yet_valid "$DEV/id-20m"
        openssl req -new -key "$DEV/dev-1.key" -subj /CN=dev-1 -out "$DEV/dev-1-renew.csr" 2>/dev/null
        renew "$DEV/renew-20m" "$DEV/dev-1.pem" "$DEV/dev-1.key" "$DEV/dev-1-renew.csr"
        expect_not_yet_valid "$DEV/renew-20m"
        assert_eq "$(cert_rows)" "$before" "certificates after the refused renewal"
        # Refused before anyone was authenticated: logged (and counted in the
        # minute's summary record), never an audit row of its own.
        grep -qF -- "anonymous renew -: deny — $(json_get "$DEV/renew-20m.body" .message)" "$HWIDD_LOG" ||
                fail "hwidd did not log the not_yet_valid refusal"
}

# clock_skew: 30m, applied by a reload: the same certificate is accepted.
test_skew_configurable() {
        sed -i 's/^clock_skew: .*$/clock_skew: 30m/' "$CFG"
        grep -qx 'clock_skew: 30m' "$CFG" || fail "could not set clock_skew"
        hwidd_reload "policy reloaded" >/dev/null
        get_as "$DEV/id-30m" /v1/identities/dev-1 dev-1
        expect_status 200 "$DEV/id-30m"
        hwidd_stop
}

ca_setup
sed -i '1a clock_skew: 5m' "$CFG"
hwidd_start
test_backdate
hwidd_stop
test_within_skew
test_beyond_skew
test_skew_configurable
echo "ca-clock-skew: all checks passed"
