#!/bin/bash
# certmonger.sh — hwid's CA helper for certmonger (libexec's certmonger-submit,
# docs/USING.md "certmonger") under Debian's certmonger, on a private D-Bus
# bus, with the keys in swtpm behind tpm2-abrmd.
#
# certmonger runs its children with a cleared environment: they read the
# system's OpenSSL configuration and reach the TPM through tpm2-tss's default
# TCTI (tpm2-abrmd on the system bus). On a host, a drop-in bind-mounts
# /etc/hwid/openssl-tpm2.cnf over /etc/ssl/openssl.cnf for certmonger.service
# (USING.md); here certmonger runs in a mount namespace of its own with the
# same configuration over the system's, and the test's bus over /run/dbus.
# Nothing outside that namespace sees either.
#
# Proves:
#   - `getcert request -c hwid -k KEY.tss2.pem`, KEY made in the TPM by
#     `hwid key create`: certmonger signs its request in the TPM, the helper
#     enrolls it with the bootstrap token (MONITORING, a certificate openssl
#     verifies against the CA for the TPM key), and FETCH-ROOTS stores the
#     pinned CA (getcert -F);
#   - renewal: started as certmonger's monitor starts it at a threshold
#     (getcert resubmit: the monitor looks at most every 30 minutes) before
#     the profile's window opens, the helper answers "later" (status 5,
#     hwidd refused 403 renewal_not_open) with the seconds until it opens;
#     certmonger comes back by itself with the cookie and the helper renews
#     over mutual TLS with the same TPM key: a new serial, the same key,
#     hwidd's audit records the refusal, then the renewal;
#   - manual approval: the request waits (202 → status 5 with a cookie) and
#     is listed by `hwid request list`; after `hwid request approve` the
#     next poll collects the certificate;
#   - key custody: a request whose key certmonger made itself (NSS
#     database, software) is refused (CA_REJECTED, the helper says why) and
#     hwidd never sees it; certmonger wrote no software key beside the TPM
#     keys;
#   - why not a PKCS#11 token through NSS: Debian's certmonger opens NSS
#     databases without their module list (NSS_INIT_NOMODDB), so a SoftHSM2
#     token added with modutil is never found (NEED_KEYINFO_READ_TOKEN, and
#     its key-generation child lists only NSS's own tokens);
#   - no sanitizer report from the helper; no transient object left in the
#     TPM.
# shellcheck source-path=SCRIPTDIR source=../lib.sh disable=SC2119
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"

require_tools certmonger getcert dbus-daemon tpm2-abrmd unshare modutil certutil tpm2_getcap
: "${CERTMONGER_SUBMIT:=$BUILDDIR/cli/certmonger-submit}"
[ -x "$CERTMONGER_SUBMIT" ] || fail "no helper at $CERTMONGER_SUBMIT"

ca_setup
add_profiles <<'EOF'
  certmonger:
    validity: 1m
    key_types: [ec-p256]
    renewal:
      window: 0.5
EOF
sed -i 's/^  retry_after: .*/  retry_after: 1s/' "$CFG"   # approval polls come quickly
sed -i '1a clock_skew: 0s' "$CFG"                         # the window opens 30 s after issuance
hwidd_start
PIN=$(run_ok "$HWID" ca hash "$CA_DIR/ca.pem")
swtpm_init

# The keys, made in the TPM by hwid (before tpm2-abrmd takes the TPM).
CM=$T/cm
mkdir -p "$CM"
for k in web approved; do
        run_ok "$HWID" key create "tpm2:file=$CM/$k.tss2.pem" >/dev/null
done
[ "$(head -n 1 "$CM/web.tss2.pem")" = "-----BEGIN TSS2 PRIVATE KEY-----" ] || fail "no TSS2 key file"
WEB_PUB=$(key_pubkey "tpm2:file=$CM/web.tss2.pem")
APPROVED_PUB=$(key_pubkey "tpm2:file=$CM/approved.tss2.pem")

# One bus for certmonger, tpm2-abrmd and getcert, reachable inside the
# namespace at the system bus's path.
# No service activation on it: a getcert before certmonger is up would
# otherwise start the session's certmonger, outside the namespace.
mkdir "$T/bus" "$T/cmstate" "$T/cmstate/requests" "$T/cmstate/cas" "$T/cmstate/local" "$T/cmstate/tmp" "$T/san"
cat >"$T/bus.conf" <<EOF
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path=$T/bus/system_bus_socket</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
EOF
BUS=$(dbus-daemon --config-file="$T/bus.conf" --fork --nopidfile --print-address=1 --print-pid=1) ||
        fail "cannot start a D-Bus bus"
track_pid "$(sed -n 2p <<<"$BUS")"
export DBUS_SESSION_BUS_ADDRESS=unix:path=$T/bus/system_bus_socket
# Under the default name, which tpm2-tss's default TCTI asks for.
start_bg "$T/tabrmd.log" tpm2-abrmd --session --allow-root --tcti="$HWID_TCTI"
TABRMD_PID=$BG_PID
TABRMD_TCTI=tabrmd:bus_type=session
for _ in $(seq 150); do
        TPM2TOOLS_TCTI=$TABRMD_TCTI tpm2_getcap properties-fixed >/dev/null 2>&1 && break
        sleep 0.1
done

export CERTMONGER_REQUESTS_DIR=$T/cmstate/requests CERTMONGER_CAS_DIR=$T/cmstate/cas \
        CERTMONGER_LOCAL_CA_DIR=$T/cmstate/local CERTMONGER_TMPDIR=$T/cmstate/tmp \
        CERTMONGER_CONFIG_DIR=$T/cmstate CERTMONGER_SYSTEM_LOCK_FILE=$T/cmstate/lock HOME=$T/cmstate
SSL_CNF=$(readlink -f "$(openssl version -d | sed 's/^OPENSSLDIR: "\(.*\)"$/\1/')/openssl.cnf")
[ -d /run/dbus ] || mkdir -p /run/dbus
# shellcheck disable=SC2016  # the inner shell expands its own arguments
start_bg "$T/certmonger.log" unshare --mount --propagation private sh -c \
        'mount --bind "$1" /run/dbus && mount --bind "$2" "$3" && exec certmonger -s -n -d 3' \
        sh "$T/bus" "$SRCDIR/contrib/openssl-tpm2.cnf" "$SSL_CNF"
CERTMONGER_PID=$BG_PID
for _ in $(seq 200); do
        getcert list-cas -s >/dev/null 2>&1 && break
        sleep 0.1
done
getcert list-cas -s >/dev/null 2>&1 || fail "certmonger did not come up: $(tail -n 5 "$T/certmonger.log")"

# helper_cmd TOKEN-FILE KEY... — the helper's command line for getcert add-ca
# -e, its sanitizer reports in files (certmonger discards standard error).
helper_cmd() {
        local tok=$1 k cmd
        shift
        cmd="/usr/bin/env ASAN_OPTIONS=log_path=$T/san/asan UBSAN_OPTIONS=log_path=$T/san/ubsan:print_stacktrace=1"
        cmd+=" $CERTMONGER_SUBMIT --server $URL --ca-hash $PIN --token-file $tok"
        for k in "$@"; do
                cmd+=" --key tpm2:file=$k"
        done
        echo "$cmd"
}

# status ID — the request's status in getcert list.
status() {
        getcert list -s -i "$1" | sed -n 's/^[[:space:]]*status: //p'
}

# wait_status ID STATUS SECONDS — until the request's status matches STATUS
# (a glob).
wait_status() {
        local s=
        for _ in $(seq $(($3 * 10))); do
                s=$(status "$1")
                # shellcheck disable=SC2053  # a glob
                [[ $s == $2 ]] && return 0
                sleep 0.1
        done
        fail "request $1 is $s, not $2, after $3 s: $(getcert list -s -i "$1")"
}

# audited ACTION TARGET — the outcomes hwidd's audit recorded, in order.
audited() {
        store_sql "SELECT outcome FROM audit WHERE action = '$1' AND target = '$2' ORDER BY id" | tr '\n' ' '
}

token_new --profile certmonger >"$T/token.web"
token_new --profile manual >"$T/token.approved"
chmod 600 "$T/token.web" "$T/token.approved"
run_ok getcert add-ca -s -c hwid -e "$(helper_cmd "$T/token.web" "$CM/web.tss2.pem")" >/dev/null
run_ok getcert add-ca -s -c hwid-approved -e "$(helper_cmd "$T/token.approved" "$CM/approved.tss2.pem")" >/dev/null

# --- enrollment with the token, then renewal by itself ----------------------
start=$(date +%s)
run_ok getcert request -s -c hwid -I web -k "$CM/web.tss2.pem" -G ec -g 256 -f "$CM/web.pem" -F "$CM/ca.pem" -N CN=web-1 \
        >/dev/null
wait_status web MONITORING 60
cp "$CM/web.pem" "$T/web.first.pem"
# Renewal, as certmonger's monitor starts it when a certificate nears its end
# (enroll_ttls; the monitor looks at most every 30 minutes, hence resubmit
# here), at once: the window is not open yet, so the helper says when
# (status 5); certmonger comes back by itself then, and the helper renews
# over mutual TLS with the same TPM key.
run_ok getcert resubmit -s -i web >/dev/null
verify_leaf "$T/web.first.pem" -CAfile "$CA_DIR/ca.pem"
assert_eq "$(cert_pubkey "$T/web.first.pem")" "$WEB_PUB" "the certificate's key vs the TPM key"
for _ in $(seq 100); do [ -s "$CM/ca.pem" ] && break; sleep 0.1; done
cmp -s "$CM/ca.pem" "$CA_DIR/ca.pem" || fail "getcert -F stored $(cat "$CM/ca.pem") rather than the CA"
first=$(serial_of "$T/web.first.pem")
echo "certmonger: web-1 enrolled in $(($(date +%s) - start)) s (serial $first)"

for _ in $(seq 450); do
        cmp -s "$CM/web.pem" "$T/web.first.pem" || break
        sleep 0.1
done
! cmp -s "$CM/web.pem" "$T/web.first.pem" || fail "no renewal within 45 s: $(getcert list -s -i web)"
wait_status web MONITORING 20
verify_leaf "$CM/web.pem" -CAfile "$CA_DIR/ca.pem"
assert_eq "$(cert_pubkey "$CM/web.pem")" "$WEB_PUB" "the renewed certificate's key vs the TPM key"
[ "$(serial_of "$CM/web.pem")" != "$first" ] || fail "the renewal kept the serial"
outcomes=$(audited renew web-1)
[[ $outcomes == "deny "*"allow"* ]] || fail "hwidd's audit of web-1's renewals: '$outcomes' (a refusal, then a renewal)"
grep -q 'Setting "CERTMONGER_CA_COOKIE" to "renew"' "$T/certmonger.log" ||
        fail "certmonger did not come back with the helper's cookie"
echo "certmonger: web-1 renewed over mutual TLS once the window opened, $(($(date +%s) - start)) s after enrollment"

# --- manual approval: "later" with a cookie, then the certificate -----------
run_ok getcert request -s -c hwid-approved -I approved -k "$CM/approved.tss2.pem" -G ec -g 256 -f "$CM/approved.pem" \
        -N CN=approved-1 >/dev/null
for _ in $(seq 300); do
        row=$(admin request list | awk '$2 == "pending" && $3 == "approved-1" { print $1 }')
        [ -n "$row" ] && break
        sleep 0.1
done
[ -n "$row" ] || fail "no pending request for approved-1: $(getcert list -s -i approved)"
sleep 2
[ ! -s "$CM/approved.pem" ] || fail "a certificate before approval"
s=$(status approved)   # waiting, or asking again
[[ $s == CA_WORKING || $s == SUBMITTING ]] || fail "certmonger's status while approval is pending: $s"
admin request approve "$row" >/dev/null
wait_status approved MONITORING 30
verify_leaf "$CM/approved.pem" -CAfile "$CA_DIR/ca.pem"
assert_eq "$(cert_pubkey "$CM/approved.pem")" "$APPROVED_PUB" "the approved certificate's key vs the TPM key"

# --- key custody: certmonger's own (software) key is refused ----------------
mkdir "$T/nssdb"
certutil -N -d "sql:$T/nssdb" --empty-password
run_ok getcert request -s -c hwid -I soft -d "sql:$T/nssdb" -n soft -N CN=soft-1 >/dev/null
wait_status soft CA_REJECTED 30
assert_contains "$(getcert list -s -i soft)" "none of the helper's --key keys" "why the software key is refused"
assert_eq "$(store_sql "SELECT count(*) FROM audit WHERE target = 'soft-1'")" 0 "hwidd's records of soft-1"

# --- a PKCS#11 token through NSS: never loaded ------------------------------
echo | modutil -dbdir "sql:$T/nssdb" -add softhsm -libfile "$SOFTHSM_MODULE" -force >/dev/null 2>&1
modutil -dbdir "sql:$T/nssdb" -list 2>/dev/null | grep -q "token: ca" ||
        fail "modutil does not see the SoftHSM2 token"
run_ok getcert request -s -c hwid -I hsm -d "sql:$T/nssdb" -n hsm -t ca -N CN=hsm-1 >/dev/null
wait_status hsm "*NEED_KEYINFO_READ_TOKEN" 30
tokens=$(sed -n "s/.*Found token '\(.*\)'\.$/\1/p" "$T/certmonger.log" | sort -u | tr '\n' ',')
assert_eq "$tokens" "NSS Certificate DB," "the tokens certmonger's children found (no SoftHSM2 slot)"

# --- what is left ------------------------------------------------------------
assert_eq "$(cd "$CM" && find . -type f -printf '%f\n' | sort | tr '\n' ' ')" "approved.pem approved.tss2.pem ca.pem web.pem web.tss2.pem " \
        "the files certmonger wrote (no software key of its own)"
no_private_keys_in "$CM"
san=$(cat "$T"/san/* 2>/dev/null || true)
[ -z "$san" ] || fail "the helper's sanitizer reports: $san"
kill "$CERTMONGER_PID" "$TABRMD_PID"
wait "$CERTMONGER_PID" "$TABRMD_PID" 2>/dev/null || true
assert_no_transient
echo "certmonger: done in $(($(date +%s) - start)) s"
