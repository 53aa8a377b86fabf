#!/bin/bash
# ca-cli.sh — the command-line surface of the CA side, and hwidd's start and
# stop. Proves:
#   - `--help` of hwidd, of hwid and of every admin subcommand exits 0 with
#     its usage on stdout and nothing on stderr;
#   - hwidd refuses a broken configuration (a bad value, an unknown key, a
#     YAML syntax error, a missing file) with exit 1 and one line naming
#     FILE:LINE (and the field), and does not listen; the admin commands
#     refuse it the same way; `hwidd --check` accepts the generated one; no
#     --config is a usage error (2);
#   - `hwid ca hash` prints sha256:<hex> of ca.pem's SubjectPublicKeyInfo
#     (computed by openssl), the pin `hwid token create` puts in the join
#     command; `hwid ca init` on a directory holding a CA refuses (exit 1)
#     and leaves it as it was;
#   - SIGTERM is graceful: a request in flight (its body still trickling in)
#     completes with 201 and is in the store, new connections are refused
#     meanwhile, and hwidd exits 0.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

ADMIN_COMMANDS=(
        "ca init" "ca import" "ca hash" "token create" "token list" "token revoke"
        "request list" "request approve" "request deny" "cert list" "cert show" "cert revoke"
        "key create" "key show" "csr"
)

# help_ok CMD... — CMD --help: exit 0, "Usage:" on stdout, stderr empty.
help_ok() {
        expect_exit 0 "" -- "$@" --help
        assert_contains "$(head -n 1 "$T/last.out")" "Usage:" "first line of $* --help"
        [ ! -s "$T/last.err" ] || fail "$* --help wrote to stderr: $(cat "$T/last.err")"
}

test_help() {
        local c
        help_ok "$HWIDD"
        help_ok "$HWID"
        for c in "${ADMIN_COMMANDS[@]}"; do
                # shellcheck disable=SC2086  # "group cmd" splits on purpose
                help_ok "$HWID" $c
                assert_contains "$(cat "$T/last.out")" "hwid $c" "usage of hwid $c names it"
        done
}

# broken NAME LINE WHAT — $CA_DIR/NAME.yaml (already written) makes hwidd and
# hwid token list fail with "FILE:LINE:" and WHAT, and hwidd not listen.
broken() {
        local file=$CA_DIR/$1.yaml line=$2 what=$3
        expect_exit 1 "$file:$line:" -- "$HWIDD" --config "$file"
        assert_contains "$(cat "$T/last.err")" "$what" "hwidd's reason for $1.yaml"
        ! _lib_port_listening "$PORT" || fail "hwidd listens with a broken config ($1.yaml)"
        expect_exit 1 "$file:$line:" -- "$HWID" token list --config "$file"
}

# first_line PATTERN — the number of the first line of hwidd.yaml matching.
first_line() {
        grep -n -m 1 -- "$1" "$CA_DIR/hwidd.yaml" | cut -d: -f1
}

test_broken_config() {
        local l
        l=$(first_line '^    validity: 30d$')
        sed "${l}s/30d/30x/" "$CA_DIR/hwidd.yaml" >"$CA_DIR/bad-duration.yaml"
        broken bad-duration "$l" "profiles.default.validity: '30x' is not a duration"
        l=$(first_line '^  max_body: 64KiB$')
        sed "${l}s/max_body/max_bdy/" "$CA_DIR/hwidd.yaml" >"$CA_DIR/typo.yaml"
        broken typo "$l" "limits.max_bdy: unknown key"
        l=$(first_line '^      allowed_rdns: ')
        sed "${l}s/\\]\$//" "$CA_DIR/hwidd.yaml" >"$CA_DIR/syntax.yaml"
        expect_exit 1 "$CA_DIR/syntax.yaml:" -- "$HWIDD" --config "$CA_DIR/syntax.yaml"
        [[ $(cat "$T/last.err") =~ syntax\.yaml:[0-9]+: ]] || fail "no line in: $(cat "$T/last.err")"
        expect_exit 1 "$CA_DIR/missing.yaml" -- "$HWIDD" --config "$CA_DIR/missing.yaml"
        expect_exit 2 "--config" -- "$HWIDD"
        expect_exit 0 "" -- "$HWIDD" --config "$CFG" --check
        assert_contains "$(cat "$T/last.out")" "usable" "hwidd --check"
}

test_pin_and_reinit() {
        local pin before
        pin=sha256:$(openssl x509 -in "$CA_DIR/ca.pem" -noout -pubkey | openssl pkey -pubin -outform DER |
                sha256sum | cut -d' ' -f1)
        assert_eq "$(run_ok "$HWID" ca hash "$CA_DIR/ca.pem")" "$pin" "hwid ca hash vs openssl"
        assert_contains "$(admin token create)" "--ca-hash $pin " "the join command's CA pin"
        before=$(sha256sum "$CA_DIR"/ca.pem "$CA_DIR"/tls.pem "$CA_DIR"/hwidd.yaml)
        expect_exit 1 "already exists" -- "$HWID" ca init --key "$(ca_key_uri)" --subject /CN=again --dir "$CA_DIR"
        assert_eq "$(sha256sum "$CA_DIR"/ca.pem "$CA_DIR"/tls.pem "$CA_DIR"/hwidd.yaml)" "$before" \
                "the CA directory after a refused ca init"
}

# The body of a slow enrollment: a PEM CSR and 6 KiB of trailing newlines,
# sent at 2 KiB/s, so that the request is in flight for about 3 s.
test_graceful_stop() {
        local tok slow_pid code serial
        tok=$(token_new)
        make_csr slow-1
        { cat "$DEV/slow-1.csr"; head -c 6144 /dev/zero | tr '\0' '\n'; } >"$DEV/slow-1.body-in"
        hwidd_start
        (post_csr "$DEV/slow-1" "$tok" "$DEV/slow-1.body-in" --limit-rate 2k -H "Expect:" &&
                echo "$CODE" >"$DEV/slow-1.code") &
        slow_pid=$!
        sleep 1
        [ ! -e "$DEV/slow-1.code" ] || fail "the slow request finished before SIGTERM"
        kill -TERM "$HWIDD_PID"
        sleep 0.3
        http "$DEV/late" GET /healthz
        assert_eq "$CODE" 000 "a new connection after SIGTERM"
        _lib_is_alive "$HWIDD_PID" || fail "hwidd exited with a request in flight"
        wait "$slow_pid"
        code=$(cat "$DEV/slow-1.code")
        assert_eq "$code" 201 "the request in flight at SIGTERM ($(cat "$DEV/slow-1.body"))"
        code=0
        wait "$HWIDD_PID" || code=$?
        assert_eq "$code" 0 "hwidd exit code after a graceful stop"
        serial=$(serial_of "$DEV/slow-1.body")
        in_store "$serial" || fail "the certificate given out during the stop ($serial) is not in the store"
        assert_contains "$(cat "$HWIDD_LOG")" "finishing in-flight requests" "hwidd's log of the stop"
}

ca_setup
test_help
test_broken_config
test_pin_and_reinit
test_graceful_stop
echo "ca-cli: all checks passed"
