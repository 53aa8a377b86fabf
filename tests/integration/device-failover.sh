#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# device-failover.sh — a device that knows several servers (hwid join
# --server repeated, DIR/device.json "servers") fails over between them.
# The servers: A, the real hwidd; B, a second hwidd on the same database
# (a replica), its CA key reached through the fault shim so that it can be
# made to answer 503 (hsm_unavailable) to whatever needs a signature;
# DEAD, a loopback port where nothing listens; and, for refusals, a
# listener that only records the connections it gets.
# Proves:
#   - hwid join --server DEAD --server B --server A, B answering 503:
#     enrolled through A, saying why it left DEAD and B (503); device.json
#     lists the three in that order and A as the one that answered; the
#     certificate verifies; one use of the token spent;
#   - hwid factory --server DEAD --server B --server A enrolls its device
#     the same way, device.json alike;
#   - hwid renew with A stopped (B healthy): renewed by B (B's log),
#     device.json then names B; with B answering 503 to the renewal itself
#     (its status answer is 200): renewed by A, device.json names A again;
#   - hwid agent --once with A stopped: renews through B;
#   - a device.json from before lists (server alone) renews; a "servers"
#     that is not a list of https:// URLs is refused (exit 1), DIR kept;
#   - a definitive refusal is never retried elsewhere: a 401 (unknown
#     token), 403 (a name outside the token's pattern) and 409 (a name
#     already live) from the first server end hwid join with exit 1 naming
#     the status, and the second server (the listener) sees no connection;
#     a revoked certificate (401) ends hwid renew with exit 4, no
#     connection to the listener either;
#   - usage: a --server that is not https://, or given twice, is refused
#     (exit 2) before anything is sent;
#   - no transient object is left in the TPM.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"
# shellcheck source=failover-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/failover-lib.sh"

require_tools python3
: "${HWID_P11_SHIM:=$BUILDDIR/tests/p11-fault-shim.so}"
[ -f "$HWID_P11_SHIM" ] || fail "fault shim not built: $HWID_P11_SHIM"
SHIM_TARGET=$(_lib_find_softhsm_module) || missing_hardware "the SoftHSM2 module libsofthsm2.so"

device_ca <<'EOF'
  device:
    validity: 1h
    key_types: [ec-p256]
    renewal:
      window: 1.0
EOF
swtpm_init
D=$T/edge-1
DEAD=https://127.0.0.1:$(free_port)

# The replica B: hwidd's configuration with its own ports, the CA key
# through the shim (faults from $T/b-shim.ctl), the same database.
B_PORT=$(free_port)
B=https://127.0.0.1:$B_PORT
B_CTL=$T/b-shim.ctl
shim_enc=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1], safe=""))' "$HWID_P11_SHIM")
sed -e "s|^listen: .*|listen: \"127.0.0.1:$B_PORT\"|" -e "/^http_listen:/d" \
        -e "/^ca:/,/^[a-z]/ s|module-path=[^\"&]*|module-path=$shim_enc|" "$CFG" >"$CA_DIR/replica-b.yaml"
grep -q "module-path=$shim_enc" "$CA_DIR/replica-b.yaml" || fail "B's CA key is not loaded through the shim"

# b_fault LINE — what B's CA key does from now on ("fail 0xe0 100000
# ca-key": 503 to every signature; "fail 0xe0 0": signs).
b_fault() {
        echo "$1" >"$B_CTL.new"
        mv "$B_CTL.new" "$B_CTL"
}

b_start() {
        B_LOG=$T/hwidd-b.$((${_B_RUNS:=0} + 1)).log
        _B_RUNS=$((_B_RUNS + 1))
        start_bg "$B_LOG" env HWID_SHIM_TARGET="$SHIM_TARGET" HWID_SHIM_CONTROL="$B_CTL" \
                "$HWIDD" --config "$CA_DIR/replica-b.yaml"
        B_PID=$BG_PID
        wait_for_port "$B_PORT" 20 "$B_PID"
}

# left_b WHO — WHO's messages say B was unavailable and it went on to A.  B
# answers 503; or, once a failed signature (the retried audit checkpoint's)
# has marked the token unplugged, it refuses the TLS handshake, its TLS key
# being in the same token: which one depends on timing, the failover not.
left_b() {
        assert_contains "$(cat "$T/last.err")" "$B is unavailable (" "$1 leaving B"
        assert_contains "$(cat "$T/last.err")" "trying $URL" "$1 going on to A"
}

test_usage() {
        expect_exit 2 "--server must be an https:// URL" -- join_dev "$D" edge-1 x.y --server http://127.0.0.1:1
        expect_exit 2 "is given twice" -- join_dev "$D" edge-1 x.y --server "$URL"
        [ ! -e "$D" ] || fail "a usage error created $D"
}

test_join() {
        local tok err
        tok=$(token_new --profile device)
        b_fault "fail 0xe0 100000 ca-key"
        expect_exit 0 "enrolled edge-1" --multiline -- env HWID_TOKEN="$tok" "$HWID" join --server "$DEAD" \
                --server "$B" --server "$URL" --ca-hash "$PIN" --key "tpm2:file=$D/device.tss2.pem" --cn edge-1 \
                --dir "$D"
        err=$(cat "$T/last.err")
        assert_contains "$err" "$DEAD is unavailable" "join leaving the dead server"
        assert_contains "$err" "$B is unavailable (it answered 503); trying $URL" "join leaving B"
        check_dir "$D" edge-1
        assert_eq "$(json_get "$D/device.json" '.servers | join(" ")')" "$DEAD $B $URL" "device.json servers"
        assert_eq "$(json_get "$D/device.json" .server)" "$URL" "device.json: the server that answered"
        assert_eq "$(token_used "$tok")" 1 "token uses after a join with failover"
        assert_no_transient
}

# hwid factory takes the servers too, for every device (B still 503).
test_factory() {
        local f=$T/factory
        mkdir -p "$f"
        admin token create --profile device --count 1 --out "$f/tokens" >/dev/null
        echo "edge-f - tpm2:file=$f/edge-f/device.tss2.pem" >"$f/devices"
        expect_exit 0 "" --multiline -- "$HWID" factory --server "$DEAD" --server "$B" --server "$URL" \
                --ca-hash "$PIN" --tokens "$f/tokens" --devices "$f/devices" --out-dir "$f" --parallel 1 --verbose
        assert_contains "$(cat "$T/last.out")" "1 enrolled" "the factory's summary"
        left_b "the factory's device"
        check_dir "$f/edge-f" edge-f
        assert_eq "$(json_get "$f/edge-f/device.json" '.servers | join(" ")')" "$DEAD $B $URL" "the factory device's servers"
        assert_eq "$(json_get "$f/edge-f/device.json" .server)" "$URL" "the factory device's server"
        assert_no_transient
}

test_renew() {
        local before
        hwidd_stop
        b_fault "fail 0xe0 0"
        before=$(dir_serial "$D")
        expect_exit 0 "" --multiline -- "$HWID" renew --dir "$D"
        assert_contains "$(cat "$T/last.err")" "$URL is unavailable" "renew leaving the stopped A"
        [ "$(dir_serial "$D")" != "$before" ] || fail "renew through B kept the serial"
        grep -q "renewed edge-1" "$B_LOG" || fail "B's log shows no renewal: $(cat "$B_LOG")"
        check_dir "$D" edge-1
        assert_eq "$(json_get "$D/device.json" .server)" "$B" "device.json after renewing through B"
        assert_eq "$(json_get "$D/device.json" '.servers | join(" ")')" "$DEAD $B $URL" "device.json servers after renewing"

        hwidd_start
        b_fault "fail 0xe0 100000 ca-key"
        before=$(dir_serial "$D")
        expect_exit 0 "" --multiline -- "$HWID" renew --dir "$D"
        left_b "renew"
        [ "$(dir_serial "$D")" != "$before" ] || fail "renew through A kept the serial"
        check_dir "$D" edge-1
        assert_eq "$(json_get "$D/device.json" .server)" "$URL" "device.json after renewing through A"
        assert_no_transient
}

test_agent() {
        local before
        hwidd_stop
        b_fault "fail 0xe0 0"
        before=$(dir_serial "$D")
        expect_exit 0 "" --multiline -- "$HWID" agent --dir "$D" --renew-at 0.001 --jitter 0 --once \
                --min-backoff 1s --max-backoff 2s
        assert_contains "$(cat "$T/last.err")" "edge-1 renewed" "the agent's log"
        assert_contains "$(cat "$T/last.err")" "$URL is unavailable" "the agent leaving the stopped A"
        [ "$(dir_serial "$D")" != "$before" ] || fail "the agent kept the serial"
        check_dir "$D" edge-1
        assert_eq "$(json_get "$D/device.json" .server)" "$B" "device.json after the agent renewed through B"
        hwidd_start
        assert_no_transient
}

# set_json PYTHON — device.json rewritten by a Python statement on d.
set_json() {
        json_edit "$D/device.json" "$1"
}

# device.json as hwid wrote it before lists (server alone) still renews;
# a damaged list is refused, DIR unchanged.
test_device_json() {
        local saved before
        saved=$(cat "$D/device.json")
        set_json "del d['servers']; d['server'] = '$URL'"
        before=$(dir_serial "$D")
        expect_exit 0 "" --multiline -- "$HWID" renew --dir "$D"
        [ "$(dir_serial "$D")" != "$before" ] || fail "a device.json without servers did not renew"
        set_json "d['servers'] = '$URL'"
        before=$(dir_serial "$D")
        expect_exit 1 "servers is not a list" -- "$HWID" renew --dir "$D"
        set_json "d['servers'] = ['$URL', 'http://127.0.0.1:1']"
        expect_exit 1 "servers[1] is not an https:// URL" -- "$HWID" renew --dir "$D"
        assert_eq "$(dir_serial "$D")" "$before" "DIR after refusing a damaged device.json"
        echo "$saved" >"$D/device.json"
        check_dir "$D" edge-1
}

# join_refused DIR NAME TOKEN STATUS — join with A first and the listener
# second, refused by A with STATUS; nothing reaches the listener.
join_refused() {
        local dir=$1 name=$2 tok=$3 status=$4
        expect_exit 1 "server answered $status" --multiline -- env HWID_TOKEN="$tok" "$HWID" join --server "$URL" \
                --server "$LISTENER" --ca-hash "$PIN" --key "tpm2:file=$dir/device.tss2.pem" --cn "$name" \
                --dir "$dir"
        no_connection "a $status at join"
        [ ! -e "$dir/device.json" ] || fail "a refused join wrote $dir/device.json"
}

test_refusals() {
        local tok
        listener_start
        join_refused "$T/r401" edge-401 "abcdef.0123456789abcdef0123" 401
        tok=$(token_new --profile device --name-pattern 'edge-*')
        join_refused "$T/r403" other-403 "$tok" 403
        tok=$(token_new --profile device)
        join_refused "$T/r409" edge-1 "$tok" 409
        assert_eq "$(token_used "$tok")" 0 "token uses after a 409"

        # A renewal refused for good by the first server it asks.
        set_json "d['server'], d['servers'] = '$URL', ['$URL', '$LISTENER']"
        admin cert revoke --identity edge-1 >/dev/null
        expect_exit 4 "bootstrap again" --multiline -- "$HWID" renew --dir "$D"
        no_connection "a revocation at renew"
        assert_no_transient
}

b_start
test_usage
test_join
test_factory
test_renew
test_agent
test_device_json
test_refusals
kill -TERM "$B_PID"
wait "$B_PID" || fail "replica B did not exit cleanly"
no_private_keys_in "$T"
echo "device-failover: all checks passed"
