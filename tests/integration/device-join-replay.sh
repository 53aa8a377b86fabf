#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# device-join-replay.sh — a join never burns its token for nothing.
# Proves, against a real hwidd:
#   - enrollment is idempotent (curl and openssl as the client): the same
#     token, key and name again get the same certificate back (200, byte
#     for byte), with no second certificate and no second use of the token
#     (single- and multi-use tokens), audited as enroll-replay; the same
#     token with another key, or with the same key for another name, is
#     still refused (401, used up); so is a replay once the certificate is
#     revoked, or once the token has expired;
#   - hwid join into a read-only DIR (a read-only tmpfs, in a private mount
#     namespace) or a full one (a 16 KiB tmpfs) fails before it sends
#     anything: exit 1 naming DIR, the token unused, nothing issued; the
#     same token then enrolls into a writable DIR;
#   - hwid join cut off after the CA answered (strace kills it at its first
#     symlink, i.e. before DIR holds the identity): run again with the same
#     token and key, it gets the very certificate the CA issued (one
#     certificate in the store, one use of the token) and DIR verifies.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"

require_tools unshare mount strace
unshare -m true 2>/dev/null || missing_hardware "mount namespaces (unshare -m; run as root)"
device_ca </dev/null
swtpm_init
mkdir -p "$T/keys"

cert_count() {
        cert_rows --identity "$1" | wc -l
}

test_server_replay() {
        local tok multi rows
        tok=$(token_new)
        enroll n1 "$tok"
        expect_status 201 "$DEV/n1"
        rows=$(cert_rows | wc -l)
        post_csr "$DEV/n1-again" "$tok" "$DEV/n1.csr"
        expect_status 200 "$DEV/n1-again"
        cmp -s "$DEV/n1.pem" "$DEV/n1-again.body" || fail "the replayed enrollment got another certificate"
        assert_eq "$(cert_rows | wc -l)" "$rows" "certificates after a replayed enrollment"
        assert_eq "$(token_used "$tok")" 1 "token uses after a replayed enrollment"
        assert_contains "$(admin audit list)" "enroll-replay" "audit of the replay"
        # Another key for the same name, or the same key for another name: no.
        make_csr n1-other
        openssl req -new -key "$DEV/n1-other.key" -subj /CN=n1 -out "$DEV/n1-otherkey.csr" 2>/dev/null
        post_csr "$DEV/n1-otherkey" "$tok" "$DEV/n1-otherkey.csr"
        expect_error 401 bad_token "$DEV/n1-otherkey" "used up"
        openssl req -new -key "$DEV/n1.key" -subj /CN=n1b -out "$DEV/n1b.csr" 2>/dev/null
        post_csr "$DEV/n1b" "$tok" "$DEV/n1b.csr"
        expect_error 401 bad_token "$DEV/n1b" "used up"
        # A token with uses left is not spent again by a replay.
        multi=$(token_new --uses 3)
        enroll n2 "$multi"
        expect_status 201 "$DEV/n2"
        post_csr "$DEV/n2-again" "$multi" "$DEV/n2.csr"
        expect_status 200 "$DEV/n2-again"
        cmp -s "$DEV/n2.pem" "$DEV/n2-again.body" || fail "the replay with a multi-use token got another certificate"
        assert_eq "$(token_used "$multi")" 1 "multi-use token uses after a replay"
        # Revoked: the certificate is no longer the identity's live one.
        admin cert revoke --identity n1 >/dev/null
        post_csr "$DEV/n1-revoked" "$tok" "$DEV/n1.csr"
        expect_error 401 bad_token "$DEV/n1-revoked" "used up"
}

test_expired_token() {
        local tok
        tok=$(token_new --ttl 3s)
        enroll n3 "$tok"
        expect_status 201 "$DEV/n3"
        sleep 4
        post_csr "$DEV/n3-late" "$tok" "$DEV/n3.csr"
        expect_error 401 bad_token "$DEV/n3-late" "expired"
}

# join_in_mount NAME TOKEN MOUNT-OPTIONS — hwid join with DIR $T/NAME on a
# fresh tmpfs mounted with MOUNT-OPTIONS, in a private mount namespace (it
# goes away with the command); the key lives outside DIR.
join_in_mount() {
        local name=$1 tok=$2 opts=$3
        mkdir -p "$T/$name"
        expect_exit 1 "$4" --multiline -- env HWID_TOKEN="$tok" unshare -m sh -c \
                'mount -t tmpfs -o "$1" tmpfs "$2" && exec "$3" join --server "$4" --ca-hash "$5" \
                        --key "tpm2:file=$6" --cn "$7" --dir "$2"' \
                join "$opts" "$T/$name" "$HWID" "$URL" "$PIN" "$T/keys/$name.tss2.pem" "$name"
}

test_unwritable_dir() {
        local tok name before
        for name in edge-ro edge-full; do
                tok=$(token_new)
                before=$(cert_rows | wc -l)
                if [ $name = edge-ro ]; then
                        join_in_mount $name "$tok" ro,size=1m "cannot write to $T/$name"
                else
                        join_in_mount $name "$tok" size=16k "no room in $T/$name"
                fi
                assert_eq "$(token_used "$tok")" 0 "token uses after a join into $name"
                assert_eq "$(cert_rows | wc -l)" "$before" "certificates after a join into $name"
                [ -z "$(ls -A "$T/$name")" ] || fail "the failed join left files in $T/$name: $(ls -A "$T/$name")"
                expect_exit 0 "enrolled $name" --multiline -- env HWID_TOKEN="$tok" "$HWID" join --server "$URL" \
                        --ca-hash "$PIN" --key "tpm2:file=$T/keys/$name.tss2.pem" --cn $name --dir "$T/$name"
                check_dir "$T/$name" $name
                assert_eq "$(token_used "$tok")" 1 "token uses after the join into a writable $name"
        done
        assert_no_transient
}

test_cut_off() {
        local tok d=$T/edge-cut rc=0 serial
        tok=$(token_new)
        (ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 HWID_TOKEN=$tok strace -f -qq -o /dev/null \
                -e trace=symlink -e inject=symlink:signal=KILL:when=1 "$HWID" join --server "$URL" --ca-hash "$PIN" \
                --key "tpm2:file=$d/device.tss2.pem" --cn edge-cut --dir "$d" >"$T/cut.log" 2>&1
                exit $?) 2>/dev/null || rc=$?
        assert_eq "$rc" 137 "hwid join killed after the CA answered: $(tail -n 2 "$T/cut.log")"
        [ ! -e "$d/current" ] || fail "the killed join left an identity in $d"
        assert_eq "$(cert_count edge-cut)" 1 "certificates for edge-cut after the killed join"
        assert_eq "$(token_used "$tok")" 1 "token uses after the killed join"
        serial=$(cert_rows --identity edge-cut | awk '{ print $1 }')
        run_ok tpm2_flushcontext -t     # the killed process's objects, as a resource manager would
        expect_exit 0 "enrolled edge-cut" --multiline -- join_dev "$d" edge-cut "$tok"
        assert_contains "$(cat "$T/last.err")" "using the key already at" "the second join's key"
        assert_eq "$(dir_serial "$d")" "$serial" "the certificate the second join got"
        assert_eq "$(cert_count edge-cut)" 1 "certificates for edge-cut after the second join"
        assert_eq "$(token_used "$tok")" 1 "token uses after the second join"
        check_dir "$d" edge-cut
        assert_no_transient
}

test_server_replay
test_expired_token
test_unwritable_dir
test_cut_off
no_private_keys_in "$T/keys" "$T/edge-ro" "$T/edge-full" "$T/edge-cut"   # $DEV holds openssl's keys
echo "device-join-replay: all checks passed"
