# shellcheck shell=bash disable=SC2034  # variables used by the scripts sourcing this
# policy-lib.sh — helpers shared by the policy-*.sh tests (authorization,
# audit-only mode, reloading the policy). Sourced after tests/lib.sh and
# ca-lib.sh, whose CA setup, hwidd start/stop and curl helpers it builds on.
#
# The audit log is read with `hwid audit list` and the decisions with curl:
# a reason must be the same text in the client's JSON body and in the log.

# --- configuration -------------------------------------------------------------

# policy_setup — ca_setup, and keep the generated hwidd.yaml as the base
# every policy_config starts from. hwidd then runs on hwidd.yaml itself.
policy_setup() {
        ca_setup
        cp "$CA_DIR/hwidd.yaml" "$CA_DIR/generated.yaml"
        CFG=$CA_DIR/hwidd.yaml
}

# policy_config [KEY: VALUE]... — rewrite $CFG: the generated configuration
# with the given lines as its policy: block (instead of `audit_only: false`)
# and the profiles read from stdin (YAML indented by 2) appended to its
# profiles: block. Written next to $CFG and renamed over it, so that a
# reload never reads half a file.
policy_config() {
        local line body=
        for line in "$@"; do
                body+="  $line"$'\n'
        done
        grep -qx '  audit_only: false' "$CA_DIR/generated.yaml" || fail "generated config has no audit_only line"
        [ "$(tail -n 1 "$CA_DIR/generated.yaml" | cut -c1-2)" = "  " ] ||
                fail "profiles: is not the last block of the generated config"
        {
                awk -v body="$body" '$0 == "  audit_only: false" { printf "%s", body; next } { print }' \
                        "$CA_DIR/generated.yaml"
                cat
        } >"$CFG.new"
        mv "$CFG.new" "$CFG"
}

# line_of TEXT FILE — the number of the first line of FILE that is TEXT.
line_of() {
        local n
        n=$(grep -nxF -- "$1" "$2" | head -n 1 | cut -d: -f1) || true
        [ -n "$n" ] || fail "no line '$1' in $2"
        echo "$n"
}

# --- hwidd's log ----------------------------------------------------------------

# log_count TEXT — how many lines of this hwidd's log contain TEXT.
log_count() {
        grep -cF -- "$1" "$HWIDD_LOG" || true
}

# hwidd_reload TEXT — SIGHUP, then wait until the log holds one more line
# with TEXT than before ("policy reloaded", "reload refused"); prints it.
hwidd_reload() {
        local want i
        want=$(($(log_count "$1") + 1))
        kill -HUP "$HWIDD_PID"
        for ((i = 0; i < 100; i++)); do
                [ "$(log_count "$1")" -lt "$want" ] || break
                _lib_is_alive "$HWIDD_PID" || fail "hwidd died after SIGHUP"
                sleep 0.1
        done
        [ "$(log_count "$1")" -ge "$want" ] || fail "no '$1' in hwidd's log 10 s after SIGHUP"
        _lib_is_alive "$HWIDD_PID" || fail "hwidd died after SIGHUP"
        grep -F -- "$1" "$HWIDD_LOG" | tail -n 1
}

# --- HTTP answers ---------------------------------------------------------------

# json_msg OUT — the "message" of the JSON error body OUT.body.
json_msg() {
        json_get "$1.body" .message
}

# get_as OUT PATH NAME — GET PATH over mutual TLS as $DEV/NAME.pem/.key
# (NAME empty: without a client certificate).
get_as() {
        local out=$1 path=$2 name=$3 creds=()
        [ -z "$name" ] || creds=(--cert "$DEV/$name.pem" --key "$DEV/$name.key")
        http "$out" GET "$path" "${creds[@]}"
}

# enrolled NAME TOKEN [OPENSSL-REQ-ARGS...] — enroll must give 201.
enrolled() {
        enroll "$@"
        expect_status 201 "$DEV/$1"
}

# --- the audit log --------------------------------------------------------------

# audit_rows — every record of `hwid audit list`, oldest first, no header.
audit_rows() {
        admin audit list --limit 0 | tail -n +2
}

# audit_reasons ACTOR ACTION TARGET OUTCOME — the REASON of every audit
# record with these columns (each a glob: '*' for any), one per line, oldest
# first. (WHEN is a date and a time; the other columns but REASON hold no
# blanks.)
audit_reasons() {
        local d t actor action target outcome reason
        audit_rows | while read -r d t actor action target outcome reason; do
                # shellcheck disable=SC2053  # globs on purpose
                if [[ $actor == $1 && $action == $2 && $target == $3 && $outcome == $4 ]]; then
                        printf '%s\n' "$reason"
                fi
        done
}

# expect_audit ACTOR ACTION TARGET OUTCOME REASON — the last record with
# these columns exists and says exactly REASON.
expect_audit() {
        local last
        last=$(audit_reasons "$1" "$2" "$3" "$4" | tail -n 1)
        [ -n "$last" ] || fail "no audit record '$1 $2 $3 $4'; the log:"$'\n'"$(audit_rows | tail -n 15)"
        assert_eq "$last" "$5" "reason of the audit record '$1 $2 $3 $4'"
}

# expect_denied STATUS SLUG OUT ACTOR ACTION TARGET PART... — the last
# request was refused: STATUS and a JSON error SLUG whose message holds
# every PART; the audit log has a `deny` record for ACTOR ACTION TARGET
# with the very same message. Sets MSG.
expect_denied() {
        local status=$1 slug=$2 out=$3 actor=$4 action=$5 target=$6 part
        shift 6
        expect_error "$status" "$slug" "$out"
        MSG=$(json_msg "$out")
        for part in "$@"; do
                assert_contains "$MSG" "$part" "reason of the $status"
        done
        expect_audit "$actor" "$action" "$target" deny "$MSG"
}

# expect_refused_unauthenticated STATUS SLUG OUT ACTION TARGET PART... — the
# last request, which carried no valid credential, was refused: STATUS and a
# JSON error SLUG whose message holds every PART; hwidd logged it with the
# very same message (the first few of a minute are logged one by one) and
# wrote no audit record of its own for it (such refusals are summed up in
# one record a minute: docs/CONFIG.md, `audit`). Sets MSG.
expect_refused_unauthenticated() {
        local status=$1 slug=$2 out=$3 action=$4 target=$5 part
        shift 5
        expect_error "$status" "$slug" "$out"
        MSG=$(json_msg "$out")
        for part in "$@"; do
                assert_contains "$MSG" "$part" "reason of the $status"
        done
        grep -qF -- "anonymous $action $target: deny — $MSG" "$HWIDD_LOG" ||
                fail "hwidd did not log 'anonymous $action $target: deny — $MSG'"
        [ -z "$(audit_reasons anonymous "$action" "$target" deny)" ] ||
                fail "an audit record of its own for an unauthenticated '$action'"
}

# --- certificates ---------------------------------------------------------------

# ext CERT NAME — the lines of extension NAME (openssl x509 -ext), joined.
ext() {
        openssl x509 -in "$1" -noout -ext "$2" 2>/dev/null | tr -s ' \n' ' ' | sed 's/ $//'
}

# expect_not_a_ca PEM KEY — CA:FALSE, no keyCertSign/cRLSign, and openssl
# refuses a chain through a certificate PEM/KEY signs.
expect_not_a_ca() {
        local pem=$1 key=$2
        assert_eq "$(ext "$pem" basicConstraints)" "X509v3 Basic Constraints: critical CA:FALSE" "basicConstraints"
        assert_not_contains "$(ext "$pem" keyUsage)" "Certificate Sign" "keyUsage of $pem"
        assert_not_contains "$(ext "$pem" keyUsage)" "CRL Sign" "keyUsage of $pem"
        check_not_a_ca "$pem" "$key"
}
