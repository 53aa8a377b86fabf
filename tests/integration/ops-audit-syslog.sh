#!/bin/bash
# ops-audit-syslog.sh — audit records copied to syslog for an external
# collector (audit.syslog, audit.syslog_socket), received by a real
# listener: a Unix datagram socket bound by this test, as journald or
# rsyslog bind /dev/log. Proves:
#   - every audit record hwidd and the admin commands commit arrives once,
#     as one RFC 3164 datagram ("<PRI>TIME hwidd[PID]: hwid-audit ...",
#     facility authpriv, info for allow and notice otherwise) whose id and
#     hash are the database's own;
#   - field values are quoted and escaped: a CN with a quote, a backslash
#     and a right-to-left override reaches the collector as \" \\ \\u{202E},
#     on one line with printable ASCII only;
#   - the audit chain's signed checkpoints reach it too, one
#     "hwid-audit-checkpoint kind=H id=N ... hash=H ... sig=S" line each,
#     as stored (docs/OPERATIONS.md);
#   - a collector that is gone costs nothing: enrollment goes on, and the
#     copies that could not be delivered are counted in /metrics.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=ops-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ops-lib.sh"

SOCK=$T/log.sock
GOT=$T/syslog.txt
DB=$CA_DIR/hwid.db

# The listener: each datagram as one line of GOT.
syslog_listen "$SOCK" "$GOT"
LISTENER=$SYSLOG_PID

ca_setup
sed -i "s|^profiles:\$|audit:\n  syslog: true\n  syslog_socket: $SOCK\n&|" "$CFG"
public_metrics
before=$(sqlite3 "$DB" "SELECT max(id) FROM audit")
hwidd_start
TOK=$(token_new --uses 5)
enroll dev-1 "$TOK"
expect_status 201 "$DEV/dev-1"
# A name hwid refuses (an invisible formatting character): 400, audited
# with the name as sent as its target.
EVIL="ev\"il\\\\na$(printf '\u202e')me" # CN: ev"il\na, U+202E, me
make_csr odd -utf8 -subj "/CN=$EVIL"
post_csr "$DEV/odd" "$TOK" "$DEV/odd.csr"
expect_error 400 bad_csr "$DEV/odd"
admin token revoke "${TOK%%.*}" >/dev/null

# Every record after the start, once, with the database's id and hash.
want=$(sqlite3 "$DB" "SELECT id || ' ' || lower(hex(hash)) FROM audit WHERE id > $before ORDER BY id")
for _ in $(seq 50); do
        [ "$(grep -vc hwid-audit-checkpoint "$GOT")" -ge "$(wc -l <<<"$want")" ] &&
                grep -q hwid-audit-checkpoint "$GOT" && break
        sleep 0.1
done
# The checkpoints apart (hwidd signs one of the head when it starts).
grep hwid-audit-checkpoint "$GOT" >"$T/checkpoints.txt" || fail "no checkpoint reached syslog: $(cat "$GOT")"
cp_want=$(sqlite3 "$DB" "SELECT 'kind=' || kind || ' id=' || id || ' record_at=' || record_at || ' hash=' ||
        lower(hex(hash)) FROM audit_checkpoints ORDER BY seq LIMIT 1")
assert_contains "$(head -n 1 "$T/checkpoints.txt")" "hwidd[$HWIDD_PID]: hwid-audit-checkpoint $cp_want at=" \
        "the first checkpoint as syslog received it"
REC=$T/records.txt
grep -v hwid-audit-checkpoint "$GOT" >"$REC"
got=$(sed -n 's/.*hwid-audit id=\([0-9]*\) at=[^ ]* hash=\([0-9a-f]*\) .*/\1 \2/p' "$REC" | sort -n)
assert_eq "$got" "$want" "the records syslog received (id and hash)"
assert_eq "$(wc -l <"$REC")" "$(wc -l <<<"$want")" "one datagram per record"
# Only printable ASCII, and every line a syslog message with our header.
if LC_ALL=C grep -n '[^ -~]' "$GOT" >/dev/null; then
        fail "a datagram holds bytes outside printable ASCII: $(LC_ALL=C grep -n '[^ -~]' "$GOT" | head -n 2)"
fi
grep -vqE '^<8[56]>[A-Z][a-z]{2} [ 0-9][0-9] [0-9]{2}:[0-9]{2}:[0-9]{2} hwidd?\[[0-9]+\]: hwid-audit id=' "$REC" &&
        fail "a datagram without the syslog header: $(grep -vE '^<8[56]>' "$REC" | head -n 1)"
line=$(grep 'action="enroll"' "$GOT" | grep 'outcome="allow"' | head -n 1)
assert_contains "$line" "<86>" "an allowed action is authpriv.info"
assert_contains "$line" "hwidd[$HWIDD_PID]: " "hwidd's own records"
assert_contains "$line" 'actor="token:' "actor"
assert_contains "$line" 'target="dev-1"' "target"
odd=$(grep 'outcome="deny"' "$GOT" | grep 'ev\\"il' | head -n 1)
[ -n "$odd" ] || fail "the denial of the odd name did not reach syslog: $(cat "$GOT")"
assert_contains "$odd" "<85>" "a denial is authpriv.notice"
assert_contains "$odd" "ev\\\"il\\\\" "quote and backslash escaped"
# Stored escaped (\u{202E}), then its backslash escaped for the syslog line.
assert_contains "$odd" 'target="ev\"il\\na\\u{202E}me"' "the right-to-left override escaped"
assert_contains "$(grep 'action="token.revoke"' "$GOT")" "hwid[" "the admin command's record, as hwid"

# The collector gone: issuance goes on, the lost copies are counted.
kill "$LISTENER"
wait "$LISTENER" 2>/dev/null || true
rm -f "$SOCK"
TOK2=$(token_new)
enroll dev-2 "$TOK2"
expect_status 201 "$DEV/dev-2"
scrape "$T/m"
[ "$(metric "$T/m" hwid_audit_syslog_dropped_total)" -ge 1 ] ||
        fail "no dropped syslog copy counted: $(grep syslog "$T/m.body")"
hwidd_stop
run_ok "$HWID" audit verify --config "$CFG" >/dev/null
echo "ok"
