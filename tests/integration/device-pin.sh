#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# device-pin.sh — hwid join checks the CA against the pin before it sends
# anything: with a wrong pin, or against an impostor CA at the server's
# address, the token never leaves the device.
# Proves:
#   - a wrong --ca-hash: join exits 1 naming both pins and "nothing was
#     sent"; hwidd's store is unchanged (audit rows, certificates,
#     requests, the token's spent uses), DIR and its key file are not
#     created, the TPM holds no transient object;
#   - an impostor hwidd (its own CA, same token format) at the URL with the
#     real CA's pin: join refuses after GET /ca, and the impostor records
#     nothing (no audit row, no request, not one log line about a CSR) —
#     the token was never sent to it;
#   - a malformed pin is a usage error (exit 2) that touches nothing;
#   - afterwards the same token still enrolls the device (one use spent).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"

device_ca </dev/null
swtpm_init
D=$T/edge-1
TOK=$(token_new)

# ca_state — what a refused join must leave unchanged on the CA.
ca_state() {
        echo "audit=$(audit_rows) $(store_state "$TOK")"
}

no_trace_on_device() {
        [ ! -e "$D" ] || fail "join created $D though it sent nothing: $(ls -la "$D")"
        assert_no_transient
}

test_wrong_pin() {
        local before wrong
        wrong="sha256:$(printf 'not the CA' | sha256sum | cut -d' ' -f1)"
        before=$(ca_state)
        expect_exit 1 "nothing was sent" --multiline -- join_dev "$D" edge-1 "$TOK" --ca-hash "$wrong"
        assert_contains "$(cat "$T/last.err")" "not the pinned $wrong" "join names the pin it expected"
        assert_contains "$(cat "$T/last.err")" "$PIN" "join names the CA's real pin"
        assert_not_contains "$(cat "$T/last.err" "$T/last.out")" "${TOK#*.}" "token secret in join output"
        assert_eq "$(ca_state)" "$before" "CA store after a join with a wrong pin"
        assert_eq "$(token_used "$TOK")" 0 "token uses spent by a refused join"
        no_trace_on_device
}

test_bad_pin_syntax() {
        local before
        before=$(ca_state)
        expect_exit 2 "--ca-hash must be" -- join_dev "$D" edge-1 "$TOK" --ca-hash "sha256:XYZ"
        expect_exit 2 "--ca-hash must be" -- join_dev "$D" edge-1 "$TOK" --ca-hash "${PIN#sha256:}"
        assert_eq "$(ca_state)" "$before" "CA store after usage errors"
        no_trace_on_device
}

# A second CA (its own SoftHSM2 token and hwidd) stands where the device
# expects the real one; the device holds the real pin.
test_impostor() {
        local port imp=$T/impostor rc=0 pid audit
        softhsm_init impostor
        port=$(free_port)
        run_ok "$HWID" ca init --key "pkcs11:token=impostor;object=ca-key?pin-source=file:$T/softhsm/impostor.pin" \
                --subject "/CN=impostor CA" --dir "$imp" --listen "127.0.0.1:$port" --http-listen none >/dev/null
        start_bg "$T/impostor.log" "$HWIDD" --config "$imp/hwidd.yaml"
        pid=$BG_PID
        wait_for_port "$port" 20 "$pid"
        audit=$(sqlite3 "$imp/hwid.db" 'SELECT count(*) FROM audit')   # hwid ca init's own rows
        HWID_TOKEN=$TOK "$HWID" join --server "https://127.0.0.1:$port" --ca-hash "$PIN" \
                --key "tpm2:file=$D/device.tss2.pem" --cn edge-1 --dir "$D" >"$T/imp-join.out" 2>&1 || rc=$?
        assert_eq "$rc" 1 "join against an impostor: exit code"
        assert_contains "$(cat "$T/imp-join.out")" "nothing was sent" "join against an impostor"
        assert_eq "$(sqlite3 "$imp/hwid.db" 'SELECT count(*) FROM audit')" "$audit" "impostor's audit rows"
        assert_eq "$(sqlite3 "$imp/hwid.db" 'SELECT count(*) FROM requests')" 0 "impostor's requests"
        kill -TERM "$pid"
        wait "$pid" || true
        ! grep -Eiq 'csr|enroll|token|edge-1' "$T/impostor.log" ||
                fail "the impostor saw an enrollment: $(cat "$T/impostor.log")"
        no_trace_on_device
}

test_token_still_works() {
        expect_exit 0 "enrolled edge-1" --multiline -- join_dev "$D" edge-1 "$TOK"
        check_dir "$D" edge-1
        assert_eq "$(token_used "$TOK")" 1 "token uses after the enrollment"
        assert_no_transient
}

test_wrong_pin
test_bad_pin_syntax
test_impostor
test_token_still_works
no_private_keys_in "$T"
echo "device-pin: all checks passed"
