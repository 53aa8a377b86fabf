#!/bin/bash
# pg-plans.sh — an issuance on PostgreSQL reads the certificates it
# touches, not every valid certificate, however old its connection's plans:
#   - hwid_issue_one() is PL/pgSQL, whose plans are cached per connection
#     (a generic plan from the sixth call on), made for the tables as they
#     were then: here, nearly empty, when a full scan of any index on valid
#     certificates looks as cheap as a look-up by key;
#   - 40 enrollments and 8 renewals with DNS names make those plans on
#     hwidd's connections, after an ANALYZE of tables a page long (what
#     autovacuum leaves after a new CA's first issuances); autovacuum is
#     off, so no later ANALYZE replaces them;
#   - 20,000 valid certificates with DNS names arrive behind hwidd's back;
#   - 10 enrollments and 10 renewals (each path: a new identity, a DNS name
#     taken over, a certificate superseded) must each read at most
#     MAX_READS index entries and rows of certificates and their DNS
#     names (PostgreSQL's own counters, flushed when hwidd's connections
#     close). A plan that scans the valid certificates reads 20,000 per
#     issuance;
#   - and no statement that those issuances run inside hwid_issue() is
#     planned again on every call (pg_stat_statements, hwidd on one
#     connection, whose plans the warm-up made): a statement that PL/pgSQL
#     never gives a generic plan costs planning time on every issuance.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=pg-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/pg-lib.sh"

BULK=20000
MAX_READS=50

# device NAME — enroll NAME (DNS name NAME.plans.example) with $TOK.
device() {
        enroll "$1" "$TOK" -addext "subjectAltName=DNS:$1.plans.example"
        expect_status 201 "$DEV/$1"
}

# renew_device NAME — renew NAME's certificate with a new CSR, same names.
renew_device() {
        make_csr "$1-next" -subj "/CN=$1" -addext "subjectAltName=DNS:$1.plans.example"
        renew "$DEV/$1-next" "$DEV/$1.pem" "$DEV/$1.key" "$DEV/$1-next.csr"
        expect_status 201 "$DEV/$1-next"
        cp "$DEV/$1-next.body" "$DEV/$1.pem"
        cp "$DEV/$1-next.key" "$DEV/$1.key"
}

# certificate_reads — index entries and rows of certificates and their
# DNS names read so far.
certificate_reads() {
        pg_sql "SELECT (SELECT coalesce(sum(idx_tup_read), 0) FROM pg_stat_user_indexes
                        WHERE relname IN ('certificates', 'certificate_dns'))
                     + (SELECT coalesce(sum(seq_tup_read), 0) FROM pg_stat_user_tables
                        WHERE relname IN ('certificates', 'certificate_dns'))"
}

ca_setup
sed -i 's/window: 0.3333/window: 1.0/' "$CFG"
add_profiles <<'YAML'
  named:
    validity: 30d
    san:
      dns: ["{cn}.plans.example"]
    renewal:
      window: 1.0
YAML
pg_start --own
pg_sql "ALTER SYSTEM SET autovacuum = off" >/dev/null
pg_sql "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'" >/dev/null
pg_halt
pg_run
pg_sql "CREATE EXTENSION pg_stat_statements" >/dev/null
pg_sql "ALTER SYSTEM SET pg_stat_statements.track = 'all'" >/dev/null
pg_sql "ALTER SYSTEM SET pg_stat_statements.track_planning = on" >/dev/null
pg_sql "SELECT pg_reload_conf()" >/dev/null
pg_use_config
# One connection: every issuance runs on the plans the warm-up made.
echo "database_connections: 1" >>"$CFG"
hwidd_start
TOK=$(token_new --profile named --uses 1000)

# Statistics of tables a page long, as autovacuum would leave them after
# a new CA's first issuances: every plan made now is made for them.
for i in $(seq 3); do device "warm-$i"; done
pg_sql "ANALYZE" >/dev/null
for i in $(seq 4 40); do device "warm-$i"; done
for i in $(seq 8); do renew_device "warm-$i"; done

pg_sql "INSERT INTO certificates (serial, identity, subject, profile, spki_sha256, der, not_before, not_after,
                status, created_at)
        SELECT upper(to_hex(4096 + g)), 'bulk-' || g, 'CN=bulk-' || g, 'named', md5(g::text) || md5(g::text || 'k'),
               '\\x30'::bytea, 0, 4000000000, 'valid', 0 FROM generate_series(1, $BULK) AS g;
        INSERT INTO certificate_dns (serial, name, live)
        SELECT upper(to_hex(4096 + g)), 'bulk-' || g || '.plans.example', true FROM generate_series(1, $BULK) AS g" \
        >/dev/null
assert_eq "$(pg_sql "SELECT count(*) FROM certificates WHERE status = 'valid'")" $((BULK + 40)) "valid certificates"
pg_sql "SELECT pg_stat_reset()" >/dev/null
pg_sql "SELECT pg_stat_statements_reset()" >/dev/null

for i in $(seq 10); do device "new-$i"; done
for i in $(seq 11 20); do renew_device "warm-$i"; done
# hwidd's connections hand PostgreSQL their counters as they close.
HWIDD_PID=$HWIDD_PID hwidd_stop
reads=$(certificate_reads)
echo "20 issuances beside $BULK valid certificates read $reads entries of certificates and DNS names"
if [ "$reads" -gt $((20 * MAX_READS)) ]; then
        echo "what was read (sequential scans by table, then index scans by index):"
        pg_sql "SELECT relname, seq_scan, seq_tup_read FROM pg_stat_user_tables WHERE seq_tup_read > 0"
        pg_sql "SELECT relname, indexrelname, idx_scan, idx_tup_read FROM pg_stat_user_indexes WHERE idx_tup_read > 0"
        fail "20 issuances read $reads index entries and rows of certificates and DNS names: more than" \
                "$MAX_READS each" \
                "(a cached plan scans the valid certificates)"
fi
assert_eq "$(pg_sql "SELECT count(*) FROM certificates WHERE status = 'valid'")" $((BULK + 50)) \
        "valid certificates after 10 enrollments and 10 renewals"

# The statements run inside the functions (not the top level) that ran
# at least 10 times in those 20 issuances: none planned on most of its
# runs.  (The SQL functions that the audit linker's hashing calls are
# planned once per call of the linker, once a second: a few plans for
# many runs.)
replanned=$(pg_sql "SELECT sum(plans) || ' plans of ' || sum(calls) || ' runs: ' || left(regexp_replace(query, '\s+', ' ', 'g'), 100)
        FROM pg_stat_statements WHERE NOT toplevel GROUP BY query HAVING sum(calls) >= 10 AND sum(plans) * 2 > sum(calls)")
echo "statements planned on most of their runs in 20 issuances: ${replanned:-none}"
[ -z "$replanned" ] || fail "statements of an issuance planned again on every call: $replanned"
assert_eq "$(pg_sql "SELECT count(*) > 0 FROM pg_stat_statements WHERE NOT toplevel AND calls >= 10")" t \
        "pg_stat_statements saw the functions' statements"
echo "pg-plans: OK"
