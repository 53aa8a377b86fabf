#!/bin/bash
# pg-migrate.sh — `hwid store migrate --from sqlite:PATH --to postgresql://`
# moves a CA in use from SQLite to PostgreSQL. Proves:
#   - every table is copied: the row counts in PostgreSQL (psql) equal those
#     in the SQLite file (sqlite3), and the command says so;
#   - hwidd on PostgreSQL then carries on where SQLite left off: the
#     identity enrolled before is still taken (409), one bound to a TPM
#     is still bound to it (403), the revoked
#     certificate is in the CRL (openssl crl), the pending request can be
#     approved and collected, the token's spent uses stay spent, and
#     `hwid audit verify` accepts the copied chain with the new records;
#   - a record edited with psql makes `hwid audit verify` fail, naming it;
#   - `hwid ca backup` and `restore` on the PostgreSQL store refuse, naming
#     pg_dump and pg_restore, and write nothing;
#   - a second migration into the now non-empty database is refused and
#     changes nothing; bad arguments are usage errors (exit 2).
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=pg-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/pg-lib.sh"

TABLES="tokens requests certificates certificate_dns blocked_keys audit audit_chain attest_challenges ek_allowlist
        identity_bindings"

# Some history on SQLite: two certificates (one revoked), a pending request.
ca_setup
hwidd_start
TOK=$(token_new --uses 5)
enroll keep-1 "$TOK"
expect_status 201 "$DEV/keep-1"
enroll gone-1 "$TOK"
expect_status 201 "$DEV/gone-1"
REVOKED=$(serial_of "$DEV/gone-1.pem")
admin cert revoke "$REVOKED" >/dev/null
MTOK=$(token_new --profile manual --uses 1)
enroll man-1 "$MTOK"
expect_status 202 "$DEV/man-1"
REQ=$(json_get "$DEV/man-1.body" .request_id)
hwidd_stop
# gone-1 bound to a TPM, as its attested enrollment would have left it.
EK=$(printf 'ab%.0s' {1..32})
sqlite3 "$CA_DIR/hwid.db" "INSERT INTO identity_bindings (identity, ek_pub_sha256, serial, bound_at)
        VALUES ('gone-1', '$EK', '$REVOKED', 0)"

pg_start
expect_exit 2 "needs --from sqlite:PATH" -- "$HWID" store migrate --from "$CA_DIR/hwid.db" --to "$PG_URI"
expect_exit 2 "needs --to postgresql://" -- "$HWID" store migrate --from "sqlite:$CA_DIR/hwid.db" --to /tmp/x.db
NCERTS=$(sqlite3 "$CA_DIR/hwid.db" "SELECT count(*) FROM certificates")
out=$(run_ok "$HWID" store migrate --from "sqlite:$CA_DIR/hwid.db" --to "$PG_URI")
assert_contains "$out" "certificates $NCERTS," "migrate's summary"
for t in $TABLES; do
        assert_eq "$(pg_sql "SELECT count(*) FROM $t")" "$(sqlite3 "$CA_DIR/hwid.db" "SELECT count(*) FROM $t")" \
                "rows of $t in PostgreSQL and SQLite"
done
[ "$(pg_sql "SELECT count(*) FROM audit")" -gt 3 ] || fail "the audit log was not copied"

# A second run is refused and adds nothing.
expect_exit 1 "already holds hwid data" -- "$HWID" store migrate --from "sqlite:$CA_DIR/hwid.db" --to "$PG_URI"
assert_eq "$(pg_sql "SELECT count(*) FROM certificates")" "$NCERTS" "certificates after the refused second run"

# hwidd on PostgreSQL carries on.
pg_use_config
hwidd_start
enroll keep-1 "$TOK"
expect_error 409 identity_has_certificate "$DEV/keep-1"
enroll gone-1 "$TOK"
expect_error 403 forbidden "$DEV/gone-1" "gone-1 is bound to the TPM that attested it (EK sha256:$EK"
assert_eq "$(token_used "$TOK")" 2 "token uses after the migration"
curl -sS -o "$DEV/crl.der" "http://127.0.0.1:$HTTP_PORT/crl"
openssl crl -inform DER -in "$DEV/crl.der" -out "$DEV/crl.pem"
assert_contains "$(openssl crl -in "$DEV/crl.pem" -noout -text)" "Serial Number: $REVOKED" "CRL after the migration"
admin request approve "$REQ" >/dev/null
http "$DEV/poll" GET "/v1/requests/$REQ"
expect_status 201 "$DEV/poll"
enroll new-1 "$TOK"
expect_status 201 "$DEV/new-1"
assert_contains "$(admin audit verify)" "verif" "hwid audit verify on PostgreSQL"
# A file copy cannot capture PostgreSQL: ca backup says what to use instead.
expect_exit 1 "pg_dump" -- "$HWID" ca backup --config "$CFG" --out "$T/copy.db"
[ ! -e "$T/copy.db" ] || fail "ca backup wrote a file for a PostgreSQL store"
hwidd_stop
expect_exit 1 "pg_restore" -- "$HWID" ca restore --config "$CFG" --from "$CA_DIR/hwid.db"
[ -z "$(find "$CA_DIR" -maxdepth 1 -name '*restor*')" ] || fail "ca restore left files for a PostgreSQL store"
assert_eq "$(pg_sql "SELECT count(*) FROM certificates")" "$((NCERTS + 2))" "certificates after the refused restore"
# An edit made in the database directly is caught by hwid audit verify.
pg_sql "UPDATE audit SET reason = 'nothing happened' WHERE id = 3" >/dev/null
expect_exit 1 "record 3 was modified" -- "$HWID" audit verify --config "$CFG"
echo "pg-migrate: OK"
