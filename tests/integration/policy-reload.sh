#!/bin/bash
# policy-reload.sh — hwidd's configuration is checked whole: at start a
# faulty file stops it; on SIGHUP a faulty file is refused and the policy in
# force stays; a valid one takes effect. Real hwidd on 127.0.0.1 (CA key in
# SoftHSM2), curl as the client, `hwid audit list` as the record.
# Every faulty file below would, if adopted even in part, turn on audit-only
# mode, open /metrics and change the CN pattern of profile `edge` from
# `edge-*` to `node-*` — all visible from outside.
# Proves:
#   - hwidd refuses to start (exit 1, one line naming FILE:LINE: field)
#     on a YAML syntax error, an unknown key, a bad duration, a bad boolean;
#   - SIGHUP with a YAML syntax error, a bad value or an unknown key: hwidd
#     logs the error naming FILE:LINE (and the field), stays up, and the old
#     policy still decides: `edge-N` is issued, `node-N` is refused (403
#     naming the pattern 'edge-*'), /metrics stays closed;
#   - SIGHUP with a valid file takes effect: the new CN pattern `node-*`
#     (node-N issued, edge-N refused naming 'node-*'), public_metrics opens
#     /metrics; then audit_only: true lets the refused request through,
#     recorded as would-deny with the very reason the client got before, and
#     hwidd announces audit-only mode; audit_only: false closes it again.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=policy-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/policy-lib.sh"

# edge_config AUDIT PATTERN VALIDITY [POLICY-LINE...] — $CFG with
# audit_only: AUDIT and the POLICY-LINEs, and a profile `edge` whose CN must
# match PATTERN.
edge_config() {
        local audit=$1 pattern=$2 validity=$3
        shift 3
        policy_config "audit_only: $audit" "$@" <<EOF
  edge:
    validity: $validity
    subject:
      cn_pattern: "$pattern"
EOF
}

# to_hwidd CMD... — CMD writes hwidd's configuration file rather than $CFG,
# which the admin commands read (a faulty file would stop them too).
to_hwidd() {
        CFG=$HWIDD_CFG "$@"
}

# faulty_config KIND — $CFG: the next policy (audit-only, public metrics,
# CN pattern node-*) with one fault of KIND; WANT is what hwidd must say.
faulty_config() {
        case $1 in
        syntax)
                edge_config true "node-*" 1h " public_metrics: true" # indented one too far
                WANT="$CFG:$(line_of "   public_metrics: true" "$CFG"): YAML syntax error" ;;
        unknown-key)
                edge_config true "node-*" 1h "public_metrics: true" "audit_onyl: true"
                WANT="$CFG:$(line_of "  audit_onyl: true" "$CFG"): policy.audit_onyl: unknown key" ;;
        bad-duration)
                edge_config true "node-*" 30x "public_metrics: true"
                WANT="$CFG:$(line_of "    validity: 30x" "$CFG"): profiles.edge.validity: '30x'" ;;
        bad-bool)
                edge_config maybe "node-*" 1h "public_metrics: true"
                WANT="$CFG:$(line_of "  audit_only: maybe" "$CFG"): policy.audit_only: 'maybe'" ;;
        *) fail "faulty_config: no fault '$1'" ;;
        esac
}

test_start_refused() {
        local kind file
        for kind in syntax unknown-key bad-duration bad-bool; do
                file=$CA_DIR/faulty-$kind.yaml
                CFG=$file faulty_config "$kind"
                expect_exit 1 "$WANT" -- timeout 10 "$HWIDD" --config "$file"
                ! _lib_port_listening "$PORT" || fail "something listens on $PORT after hwidd refused $file"
        done
}

# metrics_closed — anonymous GET /metrics is refused.
metrics_closed() {
        get_as "$DEV/metrics" /metrics ""
        expect_error 401 unauthenticated "$DEV/metrics" "admin role"
}

# allowed NAME / refused NAME PATTERN — enrollment of NAME with the token
# $EDGE_TOKEN (bound to profile edge) is issued / refused for PATTERN.
allowed() {
        enrolled "$1" "$EDGE_TOKEN"
        assert_eq "$(openssl x509 -in "$DEV/$1.pem" -noout -subject -nameopt RFC2253)" "subject=CN=$1" "subject of $1"
}
refused() {
        local before
        before=$(cert_rows)
        enroll "$1" "$EDGE_TOKEN"
        expect_denied 403 forbidden "$DEV/$1" "token:${EDGE_TOKEN%%.*}" enroll "$1" "'$1'" "'$2'" "profile 'edge'"
        assert_eq "$(cert_rows)" "$before" "store after the refusal of $1"
}

# The policy hwidd started with: CN pattern edge-*, /metrics closed.
expect_first_policy() {
        allowed "edge-$1"
        refused "node-$1" "edge-*"
        metrics_closed
}

test_reload_refused() {
        local kind line
        for kind in syntax bad-duration unknown-key; do
                to_hwidd faulty_config "$kind"
                line=$(hwidd_reload "reload refused")
                assert_contains "$line" "$WANT" "hwidd's log line for the faulty $kind reload"
                assert_contains "$line" "keeping the old policy" "hwidd's log line for the faulty $kind reload"
                expect_first_policy "$kind"
        done
        assert_eq "$(log_count "AUDIT-ONLY")" 0 "audit-only announcements after refused reloads"
}

test_reload_takes_effect() {
        local msg
        to_hwidd edge_config false "node-*" 1h "public_metrics: true"
        hwidd_reload "policy reloaded" >/dev/null
        allowed node-b
        refused edge-b "node-*"
        msg=$MSG
        get_as "$DEV/metrics" /metrics ""
        expect_status 200 "$DEV/metrics"
        assert_contains "$(cat "$DEV/metrics.body")" "hwid_http_requests_total " "anonymous /metrics when public"

        to_hwidd edge_config true "node-*" 1h "public_metrics: true"
        hwidd_reload "policy reloaded" >/dev/null
        assert_eq "$(log_count "AUDIT-ONLY MODE")" 1 "audit-only announcements after turning it on"
        allowed edge-b
        expect_audit "token:${EDGE_TOKEN%%.*}" enroll edge-b would-deny "$msg"

        to_hwidd edge_config false "node-*" 1h
        hwidd_reload "policy reloaded" >/dev/null
        refused edge-c "node-*"
        metrics_closed
}

policy_setup
test_start_refused
edge_config false "edge-*" 1h
hwidd_start
HWIDD_CFG=$CFG
CFG=$CA_DIR/admin.yaml
cp "$HWIDD_CFG" "$CFG"
assert_eq "$(log_count "AUDIT-ONLY")" 0 "audit-only announcements of an enforcing hwidd"
EDGE_TOKEN=$(token_new --profile edge --uses 50)
expect_first_policy first
test_reload_refused
test_reload_takes_effect
hwidd_stop
echo "policy-reload: all checks passed"
