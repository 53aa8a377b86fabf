#!/bin/bash
# ca-audit.sh — the audit trail and the logs cannot be forged and do not
# leak capabilities; hwidd keeps its secrets out of core dumps. A real
# hwidd (CA key in SoftHSM2), curl and openssl as the device, sqlite3 as an
# independent reader of the store.
# Proves:
#   - a CSR whose CN holds CR LF and a fake record (and a bidi override) is
#     refused, and its audit record stays one row of `hwid audit list`,
#     with the characters shown as \x0d\x0a and \u{202E}; the store itself
#     holds them escaped (no CR, LF or U+202E byte in the audit table), and
#     the hwidd log line is one line;
#   - a record written raw into the table (as before this escaping, or by
#     anything else) is escaped again when shown;
#   - a request id (the device's poll capability) never appears whole in
#     the hwidd log or the audit table, only its first 8 characters, while
#     `hwid request list` still shows it whole to the admin who approves;
#   - hwidd runs with core dumps off (RLIMIT_CORE 0 in /proc/PID/limits).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

DATE_RE='^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}Z  '

# audit_lines — `hwid audit list --limit 0` without its header.
audit_lines() {
        admin audit list --limit 0 | tail -n +2
}

# every_line_a_record — each line of `hwid audit list` starts with a date.
every_line_a_record() {
        local line
        while IFS= read -r line; do
                [[ $line =~ $DATE_RE ]] || fail "a line of hwid audit list is no record: '$line'"
        done < <(audit_lines)
}

test_core_dumps_off() {
        local core
        core=$(awk '/^Max core file size/ { print $5, $6 }' "/proc/$HWIDD_PID/limits")
        assert_eq "$core" "0 0" "hwidd's core file size limit (soft hard)"
}

test_forged_row() {
        local tok=$1 rows fake rle row
        fake='2030-01-01 00:00Z  admin:root  cert.revoke  e9  allow'
        rle=$'\xe2\x80\xae'
        rows=$(audit_lines | wc -l)
        make_csr forge -utf8 -subj "/CN=edge-x"$'\r\n'"$fake$rle"
        # The CN really holds CR LF (openssl, an independent reader).
        assert_contains "$(openssl req -in "$DEV/forge.csr" -noout -subject -nameopt RFC2253,esc_ctrl)" '\0D\0A' \
                "the CSR's CN holds CR LF"
        post_csr "$DEV/forge" "$tok" "$DEV/forge.csr"
        expect_error 400 bad_csr "$DEV/forge"
        assert_eq "$(audit_lines | wc -l)" $((rows + 1)) "rows after one refused enrollment"
        every_line_a_record
        row=$(audit_lines | tail -n 1)
        assert_contains "$row" 'edge-x\x0d\x0a2030-01-01' "CR LF shown escaped, in the same row"
        assert_contains "$row" 'allow\u{202E}' "the bidi override shown escaped"
        assert_eq "$(sqlite3 "$CA_DIR/hwid.db" "SELECT count(*) FROM audit WHERE instr(target, char(13)) OR
                instr(target, char(10)) OR instr(target, char(8238)) OR instr(reason, char(10)) OR
                instr(reason, char(8238))")" 0 "audit rows holding CR, LF or U+202E"
        assert_eq "$(sqlite3 "$CA_DIR/hwid.db" "SELECT count(*) FROM audit WHERE target LIKE 'edge-x\\x0d\\x0a2030%'")" \
                1 "the stored target, escaped"
        assert_eq "$(grep -c "admin:root  cert.revoke" "$HWIDD_LOG" || true)" 1 "the log holds the record once"
        assert_eq "$(grep -c '^2030-01-01' "$HWIDD_LOG" || true)" 0 "no log line starts with the forged record"
}

# A row written behind hwidd's back (dated now: older rows fall to the
# audit retention, which hwidd applies while the test runs).
test_raw_row_displayed_escaped() {
        local row
        sqlite3 "$CA_DIR/hwid.db" "INSERT INTO audit (at, actor, action, target, outcome, reason)
                VALUES (CAST(strftime('%s', 'now') AS INTEGER), 'token:abc123', 'enroll', 'raw' || char(13,10) || 'line',
                        'deny', 'a' || char(9) || 'b' || char(27) || '[2J' || char(8238) || 'c')"
        every_line_a_record
        row=$(audit_lines | grep 'raw\\x0d' || true)
        [ -n "$row" ] || fail "the raw row is not shown on one line"
        assert_contains "$row" 'raw\x0d\x0aline' "target of the raw row"
        assert_contains "$row" 'a\x09b\x1b[2J\u{202E}c' "reason of the raw row"
}

test_request_ids() {
        local tok out id short
        tok=$(token_new --profile manual --uses 2)
        make_csr wait-1
        post_csr "$DEV/wait-1" "$tok" "$DEV/wait-1.csr"
        expect_status 202 "$DEV/wait-1"
        id=$(json_get "$DEV/wait-1.body" .request_id)
        [[ $id =~ ^[0-9a-f]{32}$ ]] || fail "no request id in the 202: $(cat "$DEV/wait-1.body")"
        short=${id:0:8}
        # The admin sees it whole, to approve it.
        assert_contains "$(admin request list)" "$id" "hwid request list shows the whole id"
        admin request approve "$id" >/dev/null
        http "$DEV/wait-1-poll" GET "/v1/requests/$id"
        expect_status 201 "$DEV/wait-1-poll"
        assert_contains "$(audit_lines)" "request $short..." "the audit names the request by its prefix"
        assert_contains "$(cat "$HWIDD_LOG")" "request $short..." "the log names the request by its prefix"
        assert_not_contains "$(cat "$HWIDD_LOG")" "$id" "the whole request id in the hwidd log"
        assert_not_contains "$(audit_lines)" "$id" "the whole request id in hwid audit list"
        assert_eq "$(sqlite3 "$CA_DIR/hwid.db" "SELECT count(*) FROM audit WHERE
                instr(coalesce(target, ''), '$id') OR instr(coalesce(reason, ''), '$id')")" 0 \
                "audit rows holding the whole request id"
}

ca_setup
hwidd_start
TOK=$(token_new --uses 5)
test_core_dumps_off
test_forged_row "$TOK"
test_raw_row_displayed_escaped
test_request_ids
hwidd_stop
echo "ca-audit: all checks passed"
