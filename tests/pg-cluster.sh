#!/bin/bash
# tests/pg-cluster.sh — one PostgreSQL cluster for a whole test run
# (scripts/test.sh), in which each test that needs PostgreSQL makes a
# database of its own (tests/integration/pg-lib.sh's pg_start):
#
#   tests/pg-cluster.sh start   prints HWID_TEST_PG_DIR=... and
#                               HWID_TEST_PG_PORT=... (for eval; export them)
#   tests/pg-cluster.sh stop DIR
#
# As pg-lib.sh makes a cluster of a test's own: initdb and postgres as the
# postgres user (setpriv), in a directory of its own under /tmp, user hwid
# with a password (scram-sha-256) that DIR/pgpass holds (mode 0600, read by
# root only), on a free loopback port of the test range (free_port; the
# postmaster listening there keeps every test off it). postgres runs as a
# daemon (pg_ctl): it outlives this script, until `stop` (fast shutdown),
# which also removes DIR. Needs root; exits 1 without a cluster otherwise.
set -euo pipefail
PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}

as_postgres() {
        setpriv --reuid=postgres --regid=postgres --clear-groups -- "$@"
}

start() {
        local dir port pw
        if [ "$(id -u)" != 0 ] || [ ! -x "$PG_BIN/postgres" ] || ! id postgres >/dev/null 2>&1; then
                echo "pg-cluster: needs root, the postgres user and $PG_BIN" >&2
                exit 1
        fi
        # free_port, from tests/lib.sh (sourced in a subshell: its private
        # directory and its cleanup go with it).
        port=$(
                # shellcheck source=tests/lib.sh
                source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
                free_port
        )
        dir=$(mktemp -d /tmp/hwid-pg-run.XXXXXX)
        pw=$(openssl rand -hex 16)
        chown postgres "$dir"
        chmod 700 "$dir"
        printf '%s\n' "$pw" >"$dir/pw"
        chown postgres "$dir/pw"
        as_postgres "$PG_BIN/initdb" -D "$dir/data" -U hwid -A scram-sha-256 --pwfile="$dir/pw" \
                --no-sync -E UTF8 --locale=C >"$dir/initdb.log" 2>&1 || {
                tail -n 20 "$dir/initdb.log" >&2
                rm -rf "$dir"
                exit 1
        }
        rm -f "$dir/pw"
        (umask 077 && printf '127.0.0.1:%s:*:hwid:%s\n' "$port" "$pw" >"$dir/pgpass")
        # Each test holds a few connections (hwidd's, its replicas', psql).
        as_postgres "$PG_BIN/pg_ctl" start -w -t 60 -D "$dir/data" -l "$dir/postgres.log" \
                -o "-p $port -c listen_addresses=127.0.0.1 -c unix_socket_directories=$dir -c max_connections=500" \
                >"$dir/pg_ctl.log" 2>&1 </dev/null || {
                tail -n 20 "$dir/postgres.log" >&2
                rm -rf "$dir"
                exit 1
        }
        echo "HWID_TEST_PG_DIR=$dir"
        echo "HWID_TEST_PG_PORT=$port"
}

stop() {
        local dir=$1
        if [[ $dir != /tmp/hwid-pg-run.* ]] || [ ! -d "$dir" ]; then
                echo "pg-cluster: no cluster in '$dir'" >&2
                exit 1
        fi
        as_postgres "$PG_BIN/pg_ctl" stop -w -t 60 -m fast -D "$dir/data" >/dev/null 2>&1 ||
                echo "pg-cluster: pg_ctl stop failed: $(tail -n 5 "$dir/postgres.log")" >&2
        rm -rf "$dir"
}

case ${1:-} in
start) start ;;
stop) stop "${2:?usage: $0 stop DIR}" ;;
*) echo "usage: $0 start | stop DIR" >&2; exit 2 ;;
esac
