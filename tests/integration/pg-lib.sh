# shellcheck shell=bash disable=SC2034  # variables used by the scripts sourcing this
# pg-lib.sh — a PostgreSQL database of the test's own, and hwidd replicas on
# it. Sourced after tests/lib.sh and ca-lib.sh.
#
# In a test run of scripts/test.sh, the database is made in the run's one
# cluster (tests/pg-cluster.sh, which exports HWID_TEST_PG_DIR and
# HWID_TEST_PG_PORT), under a name of the test's own, and dropped at exit.
# Otherwise, and for a test that stops PostgreSQL, changes its settings or
# reads what the whole server does (its log, its activity, its locks:
# pg_start --own), the test makes a cluster of its own: PostgreSQL refuses
# to run as root, so it is made and run as the postgres user (setpriv, so
# that the PID tracked is the postmaster's own), in a directory of its own
# under /tmp, on a free loopback port, and stopped (fast shutdown) by PID at
# exit, pass or fail, and its directory removed. Password authentication
# (scram-sha-256): hwid gets the password from a passfile named in the URI,
# never from argv.

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
[ -x "$PG_BIN/postgres" ] || { echo "SKIP: no PostgreSQL in $PG_BIN"; exit 77; }
id postgres >/dev/null 2>&1 || { echo "SKIP: no postgres user"; exit 77; }

PG_DIR=$(mktemp -d /tmp/hwid-pg.XXXXXX)
PG_PID=
PG_PASSFILE=$T/pgpass
_PG_SHARED=         # the prefix of this test's databases in the run's cluster
_PG_DBS=()          # the databases made there, dropped at exit

_as_postgres() {
        setpriv --reuid=postgres --regid=postgres --clear-groups -- "$@"
}

# pg_halt — fast shutdown of the cluster (SIGINT to the postmaster), waits.
pg_halt() {
        local i
        [ -n "$PG_PID" ] || return 0
        kill -INT "$PG_PID" 2>/dev/null || true
        for ((i = 0; i < 100; i++)); do
                _lib_is_alive "$PG_PID" || break
                sleep 0.1
        done
        _lib_is_alive "$PG_PID" && kill -KILL "$PG_PID" 2>/dev/null
        wait "$PG_PID" 2>/dev/null || true
        PG_PID=
}

# _pg_drop_databases — this test's databases in the run's cluster go (the
# connections still open to them too).
_pg_drop_databases() {
        local db
        for db in "${_PG_DBS[@]}"; do
                PGPASSFILE=$PG_PASSFILE "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$PG_PORT" -U hwid -d postgres \
                        -c "DROP DATABASE IF EXISTS $db WITH (FORCE)" >/dev/null 2>&1 ||
                        echo "pg-lib.sh: cannot drop database $db" >&2
        done
}

_pg_on_exit() {
        local rc=$?
        set +eu
        if [ "$BASHPID" = "$_LIB_PID" ]; then
                pg_halt
                [ "${KEEP_TMP:-0}" = 1 ] || _pg_drop_databases
                [ "${KEEP_TMP:-0}" = 1 ] || rm -rf "$PG_DIR"
        fi
        trap - ERR
        (exit $rc)
        _lib_on_exit
}
trap _pg_on_exit EXIT

# pg_run — start the postmaster on $PG_PORT and wait until it answers.
pg_run() {
        local i
        start_bg "$PG_DIR/postgres.log" setpriv --reuid=postgres --regid=postgres --clear-groups -- "$PG_BIN/postgres" -D "$PG_DIR/data" -p "$PG_PORT" \
                -c listen_addresses=127.0.0.1 -c unix_socket_directories="$PG_DIR" -c max_connections=200
        # shellcheck disable=SC2153  # BG_PID is set by start_bg
        PG_PID=$BG_PID
        for ((i = 0; i < 100; i++)); do
                "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" && return 0
                _lib_is_alive "$PG_PID" || fail "postgres exited: $(tail -n 20 "$PG_DIR/postgres.log")"
                sleep 0.1
        done
        fail "postgres does not answer on port $PG_PORT"
}

# pg_start [--own] — database hwid for the test: in the run's cluster, or
# in a new cluster of its own (--own, or no run's cluster); user hwid. Sets
# PG_PORT, PG_DB and PG_URI (the password in $PG_PASSFILE, mode 0600).
pg_start() {
        local pw
        if [ "${1:-}" != --own ] && [ -n "${HWID_TEST_PG_PORT:-}" ] && [ -r "${HWID_TEST_PG_DIR:-}/pgpass" ]; then
                PG_PORT=$HWID_TEST_PG_PORT
                (umask 077 && cp "$HWID_TEST_PG_DIR/pgpass" "$PG_PASSFILE")
                _PG_SHARED=${TEST_NAME//[^a-z0-9]/_}_$$_
                pg_new_database hwid
                return
        fi
        PG_PORT=$(free_port)
        pw=$(openssl rand -hex 16)
        chown postgres "$PG_DIR"
        chmod 700 "$PG_DIR"
        printf '%s\n' "$pw" >"$PG_DIR/pw"
        chown postgres "$PG_DIR/pw"
        _as_postgres "$PG_BIN/initdb" -D "$PG_DIR/data" -U hwid -A scram-sha-256 --pwfile="$PG_DIR/pw" \
                --no-sync -E UTF8 --locale=C >"$PG_DIR/initdb.log" 2>&1 ||
                fail "initdb: $(tail -n 20 "$PG_DIR/initdb.log")"
        rm -f "$PG_DIR/pw"
        (umask 077 && printf '127.0.0.1:%s:*:hwid:%s\n' "$PG_PORT" "$pw" >"$PG_PASSFILE")
        pg_run
        pg_new_database hwid
}

# pg_new_database NAME — an empty database NAME (in the run's cluster,
# NAME after the test's own prefix); PG_URI and PG_DB name it.
pg_new_database() {
        local db=$_PG_SHARED$1
        PGPASSFILE=$PG_PASSFILE "$PG_BIN/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U hwid -d postgres \
                -c "CREATE DATABASE $db" >/dev/null || fail "cannot create database $db"
        [ -z "$_PG_SHARED" ] || _PG_DBS+=("$db")
        PG_DB=$db
        PG_URI="postgresql://hwid@127.0.0.1:$PG_PORT/$db?passfile=$PG_PASSFILE&connect_timeout=3"
}

# pg_sql SQL — one value (unaligned, no header) from the hwid database.
pg_sql() {
        PGPASSFILE=$PG_PASSFILE "$PG_BIN/psql" -X -qAt -h 127.0.0.1 -p "$PG_PORT" -U hwid -d "$PG_DB" -c "$1"
}

# pg_unlinked — audit records issuances queued that no linker has chained
# yet: in audit_queue, or in the audit table with a negative id (as
# replicas of schema 8 and older queue them); 0 when there is no queue.
pg_unlinked() {
        pg_sql "SELECT (SELECT count(*) FROM audit_queue) + (SELECT count(*) FROM audit WHERE id < 0)" 2>/dev/null ||
                echo 0
}

# pg_wait_linked SECONDS — until pg_unlinked is 0; fails after SECONDS.
pg_wait_linked() {
        local i
        for ((i = 0; i < $1 * 10; i++)); do
                [ "$(pg_unlinked)" = 0 ] && return 0
                sleep 0.1
        done
        return 1
}

# pg_use_config — point $CFG at PostgreSQL: a copy of it whose database
# line is $PG_URI.
pg_use_config() {
        local uri=${PG_URI//&/\\&}
        sed "s|^database: .*|database: \"$uri\"|" "$CFG" >"$CA_DIR/hwidd-pg.yaml"
        grep -q "^database: \"postgresql://" "$CA_DIR/hwidd-pg.yaml" || fail "no database line in $CFG"
        CFG=$CA_DIR/hwidd-pg.yaml
}

# replica_start N — hwidd number N (1, 2, ...) on $CFG but its own ports:
# REPLICA_PORT[N], REPLICA_URL[N], REPLICA_HTTP[N], REPLICA_PID[N].
declare -ga REPLICA_PORT REPLICA_URL REPLICA_HTTP REPLICA_PID
replica_start() {
        local n=$1 cfg=$CA_DIR/replica-$1.yaml
        REPLICA_PORT[n]=${REPLICA_PORT[n]:-$(free_port)}
        REPLICA_HTTP[n]=${REPLICA_HTTP[n]:-$(free_port)}
        REPLICA_URL[n]=https://127.0.0.1:${REPLICA_PORT[n]}
        sed -e "s|^listen: .*|listen: \"127.0.0.1:${REPLICA_PORT[n]}\"|" \
                -e "s|^http_listen: .*|http_listen: \"127.0.0.1:${REPLICA_HTTP[n]}\"|" "$CFG" >"$cfg"
        start_bg "$T/replica-$n.$RANDOM.log" "${CLOCK[@]}" "$HWIDD" --config "$cfg"
        REPLICA_PID[n]=$BG_PID
        wait_for_port "${REPLICA_PORT[n]}" 20 "$BG_PID"
}

# on_replica N FUNCTION ARGS... — run a ca-lib.sh helper against replica N.
on_replica() {
        local n=$1 saved=$URL
        shift
        URL=${REPLICA_URL[n]}
        "$@"
        URL=$saved
}
