#!/bin/bash
# ops-backup.sh — hwid ca backup under load and hwid ca restore. Proves:
#   - a backup taken while two clients keep enrolling is consistent: the
#     load sees no failure, the copy passes SQLite's integrity check and
#     the audit chain, it is owner-only, never written over a file;
#   - restored into a fresh CA directory, hwidd serves every certificate
#     issued before the backup began: each device's own certificate is
#     accepted over mutual TLS and its status read; the audit chain
#     verifies; new enrollments work;
#   - restore refuses while hwidd runs on the database, and refuses a
#     broken backup leaving the live database as it was;
#   - restored in place, the replaced database is kept aside.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

LOAD=25 # enrollments per client

# load_loop NAME COUNT — COUNT enrollments, one after the other, named
# NAME-i; the name of each one issued goes to $T/issued-NAME, a failure
# to $T/failed-NAME.
load_loop() {
        local i
        for i in $(seq "$2"); do
                enroll "$1-$i" "$TOK"
                if [ "$CODE" = 201 ]; then
                        echo "$1-$i" >>"$T/issued-$1"
                else
                        echo "$1-$i $CODE $(cat "$DEV/$1-$i.body")" >>"$T/failed-$1"
                fi
        done
}

issued() {
        cat "$T"/issued-* 2>/dev/null | wc -l
}

ca_setup
hwidd_start
TOK=$(token_new --uses 200)
: >"$T/issued-a"
: >"$T/issued-b"
load_loop a $LOAD &
A=$!
track_pid "$A"
load_loop b $LOAD &
B=$!
track_pid "$B"
for _ in $(seq 300); do
        [ "$(issued)" -ge 10 ] && break
        sleep 0.1
done
cat "$T"/issued-* >"$T/before-backup"
[ "$(wc -l <"$T/before-backup")" -ge 10 ] || fail "the load did not get going"
run_ok "$HWID" ca backup --config "$CFG" --out "$T/backup.db" >"$T/backup.out"
assert_contains "$(cat "$T/backup.out")" "audit records verified" "backup's report"
during=$(issued)
wait "$A" "$B"
if [ -s "$T/failed-a" ] || [ -s "$T/failed-b" ]; then
        fail "enrollments failed during the backup: $(cat "$T"/failed-*)"
fi
assert_eq "$(issued)" $((2 * LOAD)) "enrollments under load"
echo "backup taken with $(wc -l <"$T/before-backup") issued before it began, $during when it ended" >&2
assert_file_mode "$T/backup.db" 600
assert_eq "$(sqlite3 "$T/backup.db" "PRAGMA integrity_check")" ok "the backup's integrity"
[ ! -e "$T/backup.db.partial" ] || fail "a partial backup was left behind"
expect_exit 1 "already exists" -- "$HWID" ca backup --config "$CFG" --out "$T/backup.db"
assert_contains "$(admin audit list)" "ca.backup" "the backup is audited"

# --- restore into a fresh CA directory ---------------------------------------
CA2=$T/ca2
mkdir -p "$CA2"
cp "$CA_DIR/ca.pem" "$CA_DIR/tls.pem" "$CA2/"
PORT2=$(free_port)
HTTP2=$(free_port)
sed "s/127.0.0.1:$PORT/127.0.0.1:$PORT2/; s/127.0.0.1:$HTTP_PORT/127.0.0.1:$HTTP2/" "$CFG" >"$CA2/hwidd.yaml"
run_ok "$HWID" ca restore --config "$CA2/hwidd.yaml" --from "$T/backup.db" >"$T/restore.out"
assert_contains "$(cat "$T/restore.out")" "restored $CA2/hwid.db" "restore's report"
FIRST_PID=$HWIDD_PID
CFG=$CA2/hwidd.yaml PORT=$PORT2 hwidd_start
SECOND_PID=$HWIDD_PID
URL=https://127.0.0.1:$PORT2
expect_exit 1 "hwidd is running on $CA2/hwid.db" -- "$HWID" ca restore --config "$CA2/hwidd.yaml" --from "$T/backup.db"
n=0
while read -r name; do
        http "$DEV/$name.id" GET "/v1/identities/$name" --cert "$DEV/$name.pem" --key "$DEV/$name.key"
        expect_status 200 "$DEV/$name.id"
        assert_eq "$(json_get "$DEV/$name.id.body" .serial)" "$(serial_of "$DEV/$name.pem")" "$name's serial"
        n=$((n + 1))
done <"$T/before-backup"
echo "the restored hwidd serves all $n certificates issued before the backup" >&2
run_ok "$HWID" audit verify --config "$CA2/hwidd.yaml" >/dev/null
enroll fresh "$(CFG=$CA2/hwidd.yaml token_new)"
expect_status 201 "$DEV/fresh"
HWIDD_PID=$SECOND_PID hwidd_stop

# --- in place: a broken backup is refused, a good one replaces the store ------
HWIDD_PID=$FIRST_PID hwidd_stop
sum=$(sha256sum <"$CA_DIR/hwid.db")
head -c 8192 "$T/backup.db" >"$T/broken.db"
expect_exit 1 "" -- "$HWID" ca restore --config "$CFG" --from "$T/broken.db"
assert_eq "$(sha256sum <"$CA_DIR/hwid.db")" "$sum" "the live database after a refused restore"
[ ! -e "$CA_DIR/hwid.db.restoring" ] || fail "a refused restore left its copy"
run_ok "$HWID" ca restore --config "$CFG" --from "$T/backup.db" >"$T/restore2.out"
assert_contains "$(cat "$T/restore2.out")" "kept as $CA_DIR/hwid.db.before-restore-" "the replaced database"
aside=$(sed -n 's/.*kept as \(.*\)$/\1/p' "$T/restore2.out")
assert_eq "$(sha256sum <"$aside")" "$sum" "the database kept aside"
in_store "$(serial_of "$DEV/$(head -n 1 "$T/before-backup").pem")" || fail "a certificate from before the backup"
run_ok "$HWID" audit verify --config "$CFG" >/dev/null
echo "ok"
