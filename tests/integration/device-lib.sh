# shellcheck shell=bash disable=SC2034  # variables used by the scripts sourcing this
# device-lib.sh — helpers shared by the device-*.sh tests (hwid join, renew,
# agent, factory against a real hwidd, device keys in swtpm). Sourced after
# tests/lib.sh; brings in ca-lib.sh for the CA side.
#
# Checks use tools that are not hwid where one exists: openssl verifies
# every certificate and reads its public key and serial; `hwid cert list`
# and sqlite3 read the CA's store. A device key's public half is read with
# `hwid key show` (from the TPM itself).

# shellcheck source-path=SCRIPTDIR source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

# device_ca [PROFILES...] — a CA (SoftHSM2) with the generated profiles plus
# the YAML on stdin (indented by 2, under `profiles:`), hwidd running, one
# swtpm for the device (HWID_TCTI); sets PIN (the CA pin) too.
device_ca() {
        ca_setup
        add_profiles
        hwidd_start
        PIN=$(run_ok "$HWID" ca hash "$CA_DIR/ca.pem")
        [[ $PIN =~ ^sha256:[0-9a-f]{64}$ ]] || fail "hwid ca hash printed '$PIN'"
}

# join_dev DIR NAME TOKEN [ARGS...] — hwid join with the token in the
# environment (never on the command line) and the key in DIR, on the
# test's clock.
join_dev() {
        local dir=$1 name=$2 tok=$3
        shift 3
        HWID_TOKEN=$tok "${CLOCK[@]}" "$HWID" join --server "$URL" --ca-hash "$PIN" \
                --key "tpm2:file=$dir/device.tss2.pem" --cn "$name" --dir "$dir" "$@"
}

# cert_pubkey PEM — the certificate's public key (PEM), read by openssl.
cert_pubkey() {
        openssl x509 -in "$1" -noout -pubkey
}

# key_pubkey URI — the public key the TPM holds at URI (hwid key show).
key_pubkey() {
        local out
        out=$("$HWID" key show "$1") || fail "hwid key show $1 failed"
        sed -n '/^-----BEGIN PUBLIC KEY-----$/,/^-----END PUBLIC KEY-----$/p' <<<"$out"
}

# dir_serial DIR — serial of DIR/cert.pem.
dir_serial() {
        serial_of "$1/cert.pem"
}

# check_dir DIR NAME — DIR holds a certificate for NAME that openssl verifies
# against the pinned CA (DIR/ca.pem, the same as the CA's), for the key that
# DIR/key.uri names (the TPM's public key equals the certificate's).
check_dir() {
        local dir=$1 name=$2 uri
        [ -e "$dir/cert.pem" ] || fail "$dir holds no cert.pem"
        cmp -s "$dir/ca.pem" "$CA_DIR/ca.pem" || fail "$dir/ca.pem is not the CA certificate"
        verify_leaf "$dir/cert.pem" -CAfile "$CA_DIR/ca.pem"
        assert_eq "$(openssl x509 -in "$dir/cert.pem" -noout -subject -nameopt RFC2253)" "subject=CN=$name" \
                "subject of $dir/cert.pem"
        uri=$(cat "$dir/key.uri")
        assert_eq "$(key_pubkey "$uri")" "$(cert_pubkey "$dir/cert.pem")" \
                "public key of $dir/cert.pem vs the TPM key $uri"
}

# audit_rows — rows in the CA's audit table (every request hwidd decided).
audit_rows() {
        sqlite3 "$CA_DIR/hwid.db" 'SELECT count(*) FROM audit'
}

# jose_peer — the independent JOSE implementation, python3-jwcrypto through
# jws-peer.py (Debian's python, which has it): sets PY and PEER.
jose_peer() {
        PY=/usr/bin/python3
        PEER=$SRCDIR/tests/integration/jws-peer.py
        "$PY" -c 'import jwcrypto, cryptography' 2>/dev/null ||
                missing_hardware "python3-jwcrypto and python3-cryptography"
}

# wait_log_line FILE PATTERN TIMEOUT PID — until FILE has a line matching
# PATTERN (grep -E), while PID lives.
wait_log_line() {
        local file=$1 pat=$2 deadline=$((SECONDS + $3)) pid=$4
        until grep -qE "$pat" "$file"; do
                [ $SECONDS -lt $deadline ] || fail "after ${3}s, no '$pat' in $file: $(tail -n 5 "$file")"
                _lib_is_alive "$pid" || fail "$file: the process exited: $(tail -n 5 "$file")"
                sleep 0.1
        done
}

# tabrmd_start — tpm2-abrmd between openssl's tpm2 provider and swtpm, on a
# D-Bus session bus of the test's own: the provider needs a resource manager
# for a TLS handshake (it keeps hash sequences and contexts that swtpm's three
# object slots cannot hold: tpm2-openssl's own advice). Sets TABRMD_TCTI;
# tabrmd_stop gives swtpm back to hwid and tpm2-tools (one client at a time).
tabrmd_start() {
        local bus
        bus=$(dbus-daemon --session --fork --nopidfile --print-address=1 --print-pid=1) ||
                fail "cannot start a D-Bus session bus"
        track_pid "$(sed -n 2p <<<"$bus")"
        export DBUS_SESSION_BUS_ADDRESS
        DBUS_SESSION_BUS_ADDRESS=$(sed -n 1p <<<"$bus")
        start_bg "$T/tabrmd.log" tpm2-abrmd --session --allow-root --tcti="$HWID_TCTI" \
                --dbus-name=com.intel.tss2.Tabrmd.hwidtest
        TABRMD_PID=$BG_PID
        TABRMD_TCTI=tabrmd:bus_type=session,bus_name=com.intel.tss2.Tabrmd.hwidtest
        for _ in $(seq 150); do      # 15 s: a loaded machine starts it slowly
                TPM2TOOLS_TCTI=$TABRMD_TCTI tpm2_getcap properties-fixed >/dev/null 2>&1 && return 0
                sleep 0.1
        done
        fail "tpm2-abrmd did not come up: $(cat "$T/tabrmd.log")"
}

tabrmd_stop() {
        kill "$TABRMD_PID" 2>/dev/null
        wait "$TABRMD_PID" 2>/dev/null || true
}
