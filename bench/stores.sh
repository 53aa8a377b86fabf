# shellcheck shell=bash
# bench/stores.sh — `bench/run.sh --stores`: hwidd issuance on the SQLite
# store against replicas on one PostgreSQL, in the same run (sourced by
# run.sh, whose plumbing it uses), into $STORES_OUT (default
# docs/BENCHMARKS-STORES.md):
#   1. SQLite, and 1 and 2 replicas on PostgreSQL reached directly, at 1,
#      16 and 64 clients (2 replicas not at 1: a client reaches one);
#   2. the round-trip time: PostgreSQL behind bench/pg-relay (a delaying
#      TCP relay: this kernel has no netem) at 0, 0.5 and 1 ms, with 1, 2
#      and 3 replicas, 16 clients split over them; each cell the median of
#      LOAD_REPS runs, with its p99; the CPU an issuance costs hwidd,
#      PostgreSQL and the relay; and one replica at 0.5 ms paced at half
#      its rate, for the p99 there, its requests split by whether they
#      met autovacuum or this machine's memory monitor (stores-passes.sh);
#   3. 1, 2 and 3 replicas each on a CPU budget of its own (a cgroup's
#      quota: bench/stores-budget.sh), at 0.5 ms.
# One load process drives all the replicas of a run, and replicas just
# started are warmed up for 2 s (store_warm) before a run counts.
# PostgreSQL is a cluster of the run's own (initdb as the postgres user,
# fsync and synchronous_commit on: the same durability as SQLite's
# synchronous=FULL), on loopback, stopped by PID at exit.

# shellcheck source=stores-budget.sh
source "$SRCDIR/bench/stores-budget.sh"
# shellcheck source=stores-passes.sh
source "$SRCDIR/bench/stores-passes.sh"

PG_BIN=${PG_BIN:-/usr/lib/postgresql/15/bin}
RELAY=$BUILD/bench/pg-relay
STORE_LEVELS=(1 16 64)
RTTS_US=(0 500 1000)
RTT_CLIENTS=16
declare -A RELAY_URI
REPLICA_PIDS=()
REPLICA_URLS=()

# pg_bench_start — the cluster, user and database hwid; sets PG_URI, PG_PORT.
pg_bench_start() {
        local pw
        [ -x "$PG_BIN/postgres" ] || die "no PostgreSQL in $PG_BIN (apt-get install postgresql)"
        chmod 711 "$W"          # postgres must reach $W/pg; $W's files stay owner-only
        mkdir -p "$W/pg"
        chown postgres "$W/pg"
        chmod 700 "$W/pg"
        pw=$(openssl rand -hex 16)
        PG_PORT=$(free_port)
        printf '%s\n' "$pw" >"$W/pg/pw"
        chown postgres "$W/pg/pw"
        setpriv --reuid=postgres --regid=postgres --clear-groups -- "$PG_BIN/initdb" -D "$W/pg/data" -U hwid \
                -A scram-sha-256 --pwfile="$W/pg/pw" -E UTF8 --locale=C >"$W/initdb.log" 2>&1 || die "initdb"
        rm -f "$W/pg/pw"
        (umask 077 && printf '127.0.0.1:%s:*:hwid:%s\n' "$PG_PORT" "$pw" >"$W/pgpass")
        # Every autovacuum pass is logged, with its duration, each line
        # stamped in Unix time: the paced run's p99 is split by whether a
        # request met one.
        bg postgres setpriv --reuid=postgres --regid=postgres --clear-groups -- "$PG_BIN/postgres" -D "$W/pg/data" \
                -p "$PG_PORT" -c listen_addresses=127.0.0.1 -c unix_socket_directories="$W/pg" -c max_connections=200 \
                -c log_autovacuum_min_duration=0 -c "log_line_prefix=%n [%p] "
        # shellcheck disable=SC2153  # BG_PID is set by bg
        PG_PID=$BG_PID
        wait_port "$PG_PORT" "$PG_PID"
        # Listening is not yet accepting: "the database system is starting up".
        local i
        for ((i = 0; i < 100; i++)); do
                "$PG_BIN/pg_isready" -q -h 127.0.0.1 -p "$PG_PORT" && break
                sleep 0.1
        done
        PGPASSFILE=$W/pgpass "$PG_BIN/psql" -q -h 127.0.0.1 -p "$PG_PORT" -U hwid -d postgres -c 'CREATE DATABASE hwid' ||
                die "cannot create the database"
        PG_URI="postgresql://hwid@127.0.0.1:$PG_PORT/hwid?passfile=$W/pgpass"
}

# relay_start RTT_US — bench/pg-relay adding RTT_US µs to every round trip
# in front of PostgreSQL: RELAY_URI[RTT_US], RELAY_PID[RTT_US].
declare -A RELAY_PID RELAY_PORT
relay_start() {
        local rtt=$1 port
        port=$(free_port)
        RELAY_PORT[$rtt]=$port
        bg "relay-$rtt" "$RELAY" --listen "$port" --to "127.0.0.1:$PG_PORT" --rtt-us "$rtt" --realtime
        RELAY_PID[$rtt]=$BG_PID
        wait_port "$port" "$BG_PID"
        sed -n "s/^127.0.0.1:$PG_PORT:/127.0.0.1:$port:/p" "$W/pgpass" | head -1 >>"$W/pgpass"
        RELAY_URI[$rtt]="postgresql://hwid@127.0.0.1:$port/hwid?passfile=$W/pgpass"
}

# replicas_start N URI — N hwidd replicas of $CFG on database URI, each with
# listeners of its own: REPLICA_PIDS, REPLICA_URLS; REPLICA_CFG is the
# first one's configuration (hwid commands on the same database).
replicas_start() {
        local n=$1 uri=$2 i port cfg
        REPLICA_PIDS=()
        REPLICA_URLS=()
        for ((i = 1; i <= n; i++)); do
                port=$(free_port)
                cfg=$W/ca/replica-$i.yaml
                sed -e "s|^database: .*|database: \"$uri\"|" -e "s|^listen: .*|listen: \"127.0.0.1:$port\"|" \
                        -e "s|^http_listen: .*|http_listen: \"127.0.0.1:$(free_port)\"|" "$CFG" >"$cfg"
                bg "hwidd-r$i-$RANDOM" "$HWIDD" --config "$cfg"
                wait_port "$port" "$BG_PID"
                REPLICA_PIDS+=("$BG_PID")
                REPLICA_URLS+=("https://127.0.0.1:$port")
        done
        REPLICA_CFG=$W/ca/replica-1.yaml
}

replicas_stop() {
        local pid
        for pid in "${REPLICA_PIDS[@]}"; do stop "$pid"; done
        REPLICA_CFG=
        REPLICA_PIDS=()
        REPLICA_URLS=()
}

# ticks PID... — their user + system CPU so far, in clock ticks.
ticks() {
        local pid sum=0
        for pid in "$@"; do sum=$((sum + $(cpu_ticks "$pid"))); done
        echo "$sum"
}

# pg_ticks — PostgreSQL's CPU so far: the postmaster with the children it
# reaped, and those alive (the backends, the WAL writer...).
pg_ticks() {
        local sum pid
        sum=$(awk '{ print $14 + $15 + $16 + $17 }' "/proc/$PG_PID/stat")
        for pid in $(ps -o pid= --ppid "$PG_PID"); do
                sum=$((sum + $(cpu_ticks "$pid" 2>/dev/null || echo 0)))
        done
        echo "$sum"
}

# us_per TICKS N — µs of CPU per request.
us_per() { awk -v t="$1" -v n="$2" -v hz="$CLK_TCK" 'BEGIN { printf "%.0f", (n > 0 ? t * 1000000 / hz / n : 0) }'; }

# store_run CONNS [--rate R] -- URL... — one run of CONNS clients split over
# the URLs (one load process: its CSRs are made before one clock starts for
# all; loads side by side made theirs while the others' clocks ran), DUR
# seconds: RUN_RATE, RUN_P99 (of every request), RUN_N, and the CPU per
# request of hwidd ($REPLICA_PIDS or $SERVER_PID), PostgreSQL and the relay
# ($RUN_RELAY): RUN_CPU_*.  With LATENCIES=1 each request's start and
# latency go to $W/latencies-$RUN_TAG.txt (load --latencies).
store_run() {
        local conns=$1 extra=() urls=() u out h0 p0=0 r0=0
        shift
        while [ "$1" != -- ]; do extra+=("$1"); shift; done
        shift
        for u in "$@"; do urls+=(--url "$u"); done
        RUN_TAG=$((${RUN_TAG:-0} + 1))
        # Connection i goes to URL i mod their number: CONNS % n get one more.
        "$LOAD" --mode hwid "${urls[@]}" --cacert "$W/ca/ca.pem" --connections "$conns" \
                --requests "${LOAD_CAP:-60000}" --duration "$DUR" --prefix "s$RUN_TAG" "${extra[@]}" \
                ${LATENCIES:+--latencies "$W/latencies-$RUN_TAG.txt"} \
                >"$W/run-$RUN_TAG.out" 2>>"$W/load-errors.log" &
        # The servers' CPU counts from the load's start: they idle while it
        # makes its CSRs.
        h0=$(ticks "${REPLICA_PIDS[@]:-$SERVER_PID}")
        [ -z "${PG_PID:-}" ] || p0=$(pg_ticks)
        [ -z "${RUN_RELAY:-}" ] || r0=$(ticks "$RUN_RELAY")
        wait $! || die "load: $(tail -3 "$W/load-errors.log")"
        out=$(cat "$W/run-$RUN_TAG.out")
        echo "$out" >>"$W/load.log"
        # The load counts every answer: a rate with refusals in it is not
        # an issuance rate.
        [ "$(kv errors "$out")" = 0 ] ||
                die "load on $*: $(kv errors "$out") of $(kv requests "$out") requests failed;" \
                        "$(grep 'first error' "$W/load-errors.log" | tail -1)"
        RUN_RATE=$(kv rate "$out") RUN_N=$(kv requests "$out") RUN_P99=$(kv p99_ms "$out")
        RUN_CPU_HWIDD=$(us_per $(($(ticks "${REPLICA_PIDS[@]:-$SERVER_PID}") - h0)) "$RUN_N")
        RUN_CPU_PG=$([ -z "${PG_PID:-}" ] && echo 0 || us_per $(($(pg_ticks) - p0)) "$RUN_N")
        RUN_CPU_RELAY=$([ -z "${RUN_RELAY:-}" ] && echo 0 || us_per $(($(ticks "$RUN_RELAY") - r0)) "$RUN_N")
}

# store_warm CONNS [--rate R] -- URL... — a run of 2 s, not counted, for
# replicas just started (their connection pools grow one connection at a
# time, and each new connection compiles the functions it calls): the
# tables are of the steady state; RUN_P99 is the cold start's.
store_warm() {
        LOAD_CAP=4000 DUR=2 store_run "$@"
        log "  warm-up: $RUN_RATE/s p99 $RUN_P99 ms"
}

# level_add KEY — the run just made, one of KEY's.
declare -A LEVEL_RUNS
level_add() {
        LEVEL_RUNS[$1]+="$RUN_RATE $RUN_P99 $RUN_CPU_HWIDD $RUN_CPU_PG $RUN_CPU_RELAY"$'\n'
}

# level_done KEY [paced] — KEY's median run by rate (by p99 when paced)
# gives KEY_rate, KEY_p99 and KEY_cpu (hwidd, PostgreSQL, relay: µs per
# issuance); KEY_rates has every rate, in the order they ran.
level_done() {
        local key=$1 runs m n col=1
        runs=$(printf '%s' "${LEVEL_RUNS[$key]}")
        n=$(wc -l <<<"$runs")
        [ "${2:-}" != paced ] || col=2
        m=$(sort -n -k$col <<<"$runs" | sed -n "$(((n + 1) / 2))p")
        read -r RUN_RATE RUN_P99 RUN_CPU_HWIDD RUN_CPU_PG RUN_CPU_RELAY <<<"$m"
        res "${key}_rate" "$RUN_RATE"
        res "${key}_p99" "$RUN_P99"
        res "${key}_rates" "$(awk '{ print $1 }' <<<"$runs" | paste -sd/)"
        res "${key}_cpu" "$RUN_CPU_HWIDD/$RUN_CPU_PG/$RUN_CPU_RELAY"
        log "  $key: $RUN_RATE/s p99 $RUN_P99 ms (runs: $(eval echo "\$${key}_rates")); CPU µs/issuance hwidd" \
                "$RUN_CPU_HWIDD, PostgreSQL $RUN_CPU_PG, relay $RUN_CPU_RELAY; load $(loadavg)"
}

# store_level KEY CONNS [--rate R] -- URL... — LOAD_REPS runs in a row,
# then level_done KEY.
store_level() {
        local key=$1 conns=$2 rep
        shift 2
        for ((rep = 1; rep <= LOAD_REPS; rep++)); do
                store_run "$conns" "$@"
                level_add "$key"
        done
        if [[ " $* " == *" --rate "* ]]; then level_done "$key" paced; else level_done "$key"; fi
}

stores_levels() {
        local prefix=$1 c
        shift
        new_token "${REPLICA_CFG:-$CFG}" # the replicas' database, or SQLite's
        store_warm 16 -- "$@"
        for c in "${STORE_LEVELS[@]}"; do
                # Fewer clients than replicas would leave a replica idle
                # (each client keeps one connection to one replica).
                ((c >= $#)) || continue
                store_level "$prefix$c" "$c" -- "$@"
        done
}

# order REP ITEM... — the items as given in odd runs REP, reversed in even ones.
order() {
        local rep=$1
        shift
        if ((rep % 2)); then echo "$@"; else printf '%s\n' "$@" | tac | paste -sd' '; fi
}

# The latency table: each RTT, 1 to 3 replicas, then the paced run.
stores_latency() {
        local rtt k half rep
        res L_LOAD_START "$(loadavg)"
        for rtt in "${RTTS_US[@]}"; do relay_start "$rtt"; done
        # Every RTT and number of replicas once, then again in the reverse
        # order, and so on: what drifts in a run on one database (the
        # machine, the tables' size, autovacuum's backlog) weighs on each
        # alike, not on the ones that always run last.
        for ((rep = 1; rep <= LOAD_REPS; rep++)); do
                for rtt in $(order "$rep" "${RTTS_US[@]}"); do
                        RUN_RELAY=${RELAY_PID[$rtt]}
                        for k in $(order "$rep" 1 2 3); do
                                log "PostgreSQL through the relay at $rtt µs, $k hwidd (run $rep of $LOAD_REPS)"
                                replicas_start "$k" "${RELAY_URI[$rtt]}"
                                new_token "$REPLICA_CFG"
                                store_warm "$RTT_CLIENTS" -- "${REPLICA_URLS[@]}"
                                store_run "$RTT_CLIENTS" -- "${REPLICA_URLS[@]}"
                                level_add "L${rtt}_$k"
                                replicas_stop
                        done
                done
        done
        for rtt in "${RTTS_US[@]}"; do
                for k in 1 2 3; do level_done "L${rtt}_$k"; done
        done
        half=$(awk -v r="$L500_1_rate" 'BEGIN { printf "%d", r / 2 }')
        log "one hwidd at 0.5 ms, paced at half its rate ($half/s)"
        RUN_RELAY=${RELAY_PID[500]}
        replicas_start 1 "${RELAY_URI[500]}"
        new_token "$REPLICA_CFG"
        store_warm "$RTT_CLIENTS" --rate "$half" -- "${REPLICA_URLS[@]}"
        res L_COLD_P99 "$RUN_P99"
        res L_HALF_RATE "$half"
        rm -f "$W"/latencies-*.txt
        passes_watch_start
        LATENCIES=1 DUR=$((2 * DUR)) store_level LH "$RTT_CLIENTS" --rate "$half" -- "${REPLICA_URLS[@]}"
        passes_watch_stop
        replicas_stop
        read -r LH_VAC_P99 LH_VAC_N LH_CALM_P99 LH_CALM_N < <(paced_split "$W"/latencies-*.txt)
        res LH_VAC_P99 "$LH_VAC_P99"; res LH_VAC_N "$LH_VAC_N"; res LH_CALM_P99 "$LH_CALM_P99"; res LH_CALM_N "$LH_CALM_N"
        log "  paced: p99 $LH_VAC_P99 ms of $LH_VAC_N requests during autovacuum, $LH_CALM_P99 of $LH_CALM_N others"
        passes_results "$W"/latencies-*.txt
        RUN_RELAY=
        res L_LOAD_END "$(loadavg)"
}

# autovacuum_windows — each autovacuum pass PostgreSQL logged (a vacuum or
# an analyze of one table), "START END" in Unix time: the log line comes at
# its end (its first field, log_line_prefix's %n), and its "elapsed:" gives
# the start.
autovacuum_windows() {
        awk '/ LOG:  automatic (aggressive )?(vacuum|analyze) of table / { end = $1 }
             end && /elapsed: [0-9.]+ s/ {
                     match($0, /elapsed: [0-9.]+/)
                     printf "%.3f %.3f\n", end - substr($0, RSTART + 9, RLENGTH - 9), end
                     end = 0
             }' "$W/postgres.log"
}

# paced_split FILE... — the requests of the latency files (load
# --latencies) that started during an autovacuum pass, and the others:
# "P99_DURING N_DURING P99_OTHERS N_OTHERS" (p99 in ms as load computes it;
# "-" for none).
paced_split() {
        autovacuum_windows >"$W/autovacuum.txt"
        windows_split "$W/autovacuum.txt" "$@"
}

# windows_split WINDOWS FILE... — the requests of the latency files that
# started within one of the windows ("START END" lines, Unix time) and
# the others, as paced_split says.
windows_split() {
        local split windows=$1
        shift
        split=$(awk -v windows="$windows" '
                     BEGIN { while ((getline w < windows) > 0) { split(w, f, " "); a[++n] = f[1]; b[n] = f[2] } }
                     FNR == 1 { t0 = $3; next }
                     { t = t0 + $1; c = "others"
                       for (i = 1; i <= n; i++) if (t >= a[i] && t <= b[i]) { c = "during"; break }
                       print c, $2 }' "$@")
        echo "$(class_p99 during <<<"$split") $(class_p99 others <<<"$split")"
}

# class_p99 CLASS — of the lines "CLASS LATENCY" on stdin, CLASS's p99
# and how many: "P99 N".
class_p99() {
        awk -v c="$1" '$1 == c { print $2 }' | sort -g |
                awk '{ v[NR] = $1 } END { if (!NR) { print "- 0"; exit }
                                      i = int(0.99 * NR); if (i < 0.99 * NR) i++
                                      printf "%.2f %d\n", v[i], NR }'
}

# pg_psql SQL — one statement on the run's database, as hwid.
pg_psql() {
        PGPASSFILE=$W/pgpass "$PG_BIN/psql" -X -qAt -h 127.0.0.1 -p "$PG_PORT" -U hwid -d hwid -c "$1"
}

# The write path alone, PostgreSQL only: one hwid_issue() call against the
# same writes as a pipeline of prepared statements (bench/pgbench/), with
# pgbench through the relay at 0 and 0.5 ms: one client's latency, 16
# clients' rate, PostgreSQL's CPU per issuance (W<rtt>_<script>_<clients>).
stores_write_path() {
        local rtt f c out n p0
        pg_psql "INSERT INTO tokens (id, secret_hash, profile, created_at, expires_at, uses_total, uses_left)
                 SELECT 'pgb' || lpad(c::text, 3, '0'), decode(repeat('00', 32), 'hex'), 'default', 0, 4000000000,
                        100000000, 100000000 FROM generate_series(0, 63) AS c
                 ON CONFLICT (id) DO NOTHING" >/dev/null
        for rtt in 0 500; do
                for f in function pipeline; do
                        for c in 1 16; do
                                p0=$(pg_ticks)
                                out=$(PGPASSFILE=$W/pgpass "$PG_BIN/pgbench" -h 127.0.0.1 -p "${RELAY_PORT[$rtt]}" \
                                        -U hwid -n -M prepared -c "$c" -j 2 -T "$DUR" \
                                        -f "$SRCDIR/bench/pgbench/issue-$f.sql" hwid 2>&1) || die "pgbench $f: $out"
                                echo "$out" >"$W/pgbench-$rtt-$f-$c.out"
                                n=$(sed -n 's/^number of transactions actually processed: \([0-9]*\).*/\1/p' <<<"$out")
                                res "W${rtt}_${f}_${c}_tps" "$(sed -n 's/^tps = \([0-9.]*\) .*/\1/p' <<<"$out" | xargs printf '%.0f')"
                                res "W${rtt}_${f}_${c}_ms" "$(sed -n 's/^latency average = \([0-9.]*\) ms/\1/p' <<<"$out")"
                                res "W${rtt}_${f}_${c}_cpu" "$(us_per $(($(pg_ticks) - p0)) "$n")"
                                log "  write path $f, $rtt µs, $c clients: $(eval echo "\$W${rtt}_${f}_${c}_tps")/s," \
                                        "$(eval echo "\$W${rtt}_${f}_${c}_ms") ms, PostgreSQL $(eval echo "\$W${rtt}_${f}_${c}_cpu") µs"
                        done
                done
        done
        res M_FSYNC "$("$PG_BIN/pg_test_fsync" -s 2 -f "$W/fsync.test" 2>/dev/null |
                awk '/one 8kB write/ { on = 1 } on && $1 == "fdatasync" { print $(NF - 1); exit }')"
        rm -f "$W/fsync.test"
}

stores_write_write_path() {
        local rtt f
        echo "## Write path"
        echo
        echo "PostgreSQL alone (pgbench, \`-M prepared\`, through the relay): one issuance's writes as hwidd sends"
        echo "them, one \`hwid_issue()\` call (\`bench/pgbench/issue-function.sql\`), against the same writes as a"
        echo "pipeline of statements, \`BEGIN\` to \`COMMIT\` (\`issue-pipeline.sql\`): one round trip each. Each"
        echo "client has a token of its own (pgbench sends one issuance a transaction: clients sharing a token would"
        echo "take turns on its row). PostgreSQL's CPU per issuance with one client (with 16, the 16 connections"
        echo "each run opens -- SCRAM, a backend each, the functions compiled for it -- weigh on the few"
        echo "hundred issuances of a run). A WAL flush (fdatasync of 8 kB, \`pg_test_fsync\`) took ${M_FSYNC:-?} µs"
        echo "on this disk: commits no longer wait for each other's flush (issuances queue their audit records;"
        echo "hwidd links them once a second: docs/HA.md)."
        echo
        echo "| write | RTT | 1 client: latency | 1 client: PostgreSQL CPU per issuance | 16 clients: rate |"
        echo "|---|---|---|---|---|"
        for rtt in 0 500; do
                for f in function pipeline; do
                        echo "| $f | $rtt µs | $(eval echo "\$W${rtt}_${f}_1_ms") ms |" \
                                "$(eval echo "\$W${rtt}_${f}_1_cpu") µs | $(eval echo "\$W${rtt}_${f}_16_tps")/s |"
                done
        done
}

# cell KEY — "rate/s (p99 P)" of a level.
cell() {
        local r p
        r=$(eval echo "\${$1_rate:-?}")
        p=$(eval echo "\${$1_p99:-?}")
        echo "$r/s (p99 $p)"
}

# ratio A B — A / B to 2 decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

# verdict BOOL — "met" or "NOT met".
verdict() { if awk "BEGIN { exit !($1) }"; then echo met; else echo "NOT met"; fi; }

stores_write_levels() {
        local c q
        echo "## Clients: SQLite against PostgreSQL reached directly"
        echo
        echo "Issuances per second over HTTPS with keep-alive, durable commits; the clients split evenly over the"
        echo "replicas by one load process; p99 in ms (of every request); each the median of $LOAD_REPS runs, after"
        echo "a warm-up run of 2 s not counted."
        echo
        echo "| clients | SQLite, 1 hwidd | PostgreSQL, 1 hwidd | PostgreSQL, 2 hwidd |"
        echo "|---|---|---|---|"
        for c in "${STORE_LEVELS[@]}"; do
                q=$(cell "Q$c")
                ((c >= 2)) || q="(one client reaches one replica)"
                echo "| $c | $(cell "S$c") | $(cell "P$c") | $q |"
        done
}

stores_write_latency() {
        local rtt label k row mono=1 prev cur
        echo "## Round-trip time to PostgreSQL"
        echo
        echo "PostgreSQL behind \`bench/pg-relay\` (each chunk sent on half the round-trip time after it was read,"
        echo "each way), $RTT_CLIENTS clients split over the replicas by one load process; the median of $LOAD_REPS runs"
        echo "(every run's rate in the last column; the runs went through every RTT and number of replicas, then"
        echo "again in the reverse order, and so on, so that what drifts as the tables grow weighs on each alike)"
        echo "and its p99 in ms. Each run starts its replicas and warms them"
        echo "up for 2 s first, not counted: a replica's connection pool grows one connection at a time, and each"
        echo "new connection compiles the functions it calls (the paced run's warm-up, a cold start: p99"
        echo "$L_COLD_P99 ms). Load average $L_LOAD_START when these runs began, $L_LOAD_END when they ended."
        echo
        echo "| RTT to PostgreSQL | 1 hwidd | 2 hwidd | 3 hwidd | runs (1 / 2 / 3 hwidd) |"
        echo "|---|---|---|---|---|"
        for rtt in "${RTTS_US[@]}"; do
                label=$(awk -v u="$rtt" 'BEGIN { print (u == 0 ? "0 (through the relay)" : u / 1000 " ms") }')
                row="| $label |"
                prev=0
                for k in 1 2 3; do
                        row+=" $(cell "L${rtt}_$k") |"
                        cur=$(eval echo "\$L${rtt}_${k}_rate")
                        awk -v a="$cur" -v b="$prev" 'BEGIN { exit !(a < b) }' && mono=0
                        prev=$cur
                done
                echo "$row $(eval echo "\$L${rtt}_1_rates") · $(eval echo "\$L${rtt}_2_rates") · $(eval echo "\$L${rtt}_3_rates") |"
        done
        echo "| SQLite, 1 hwidd, same run ($RTT_CLIENTS clients) | $(cell "S$RTT_CLIENTS") | | | $(eval echo "\$S${RTT_CLIENTS}_rates") |"
        echo
        echo "CPU per issuance (µs; hwidd / PostgreSQL / relay), median runs:"
        echo
        echo "| RTT | 1 hwidd | 2 hwidd | 3 hwidd |"
        echo "|---|---|---|---|"
        for rtt in "${RTTS_US[@]}"; do
                echo "| $rtt µs | $(eval echo "\$L${rtt}_1_cpu") | $(eval echo "\$L${rtt}_2_cpu") | $(eval echo "\$L${rtt}_3_cpu") |"
        done
        echo
        stores_write_targets "$mono"
}

stores_write_targets() {
        local a b c d
        a=$(ratio "$L500_1_rate" "$L0_1_rate")
        b=$(ratio "$L1000_1_rate" "$L500_1_rate")
        c=$(ratio "$L500_1_rate" "$(eval echo "\$S${RTT_CLIENTS}_rate")")
        d=$LH_p99
        echo "| target (issue 24) | this run | |"
        echo "|---|---|---|"
        echo "| 1 hwidd at 0.5 ms ≥ 80% of its rate at 0 through the relay | $a | $(verdict "$a >= 0.8") |"
        echo "| 1 ms within 20% of 0.5 ms | $b | $(verdict "$b >= 0.8 && $b <= 1.2") |"
        echo "| 1 hwidd at 0.5 ms ≥ 25% of SQLite's rate | $c | $(verdict "$c >= 0.25") |"
        echo "| adding a replica never lowers the rate | $([ "$1" = 1 ] && echo yes || echo no) | $(verdict "$1 == 1") |"
        echo "| p99 < 25 ms at half the peak (1 hwidd, 0.5 ms, paced at $L_HALF_RATE/s) | $d ms | $(verdict "$d < 25") |"
        echo
        echo "The paced runs' requests by whether they started while autovacuum vacuumed or analyzed a table"
        echo "(PostgreSQL logs every pass here, with its duration): $LH_VAC_N did (p99 $LH_VAC_P99 ms), $LH_CALM_N"
        echo "did not (p99 $LH_CALM_P99 ms)."
        echo
        passes_write
}

stores_write() {
        {
                echo "# Stores: SQLite against PostgreSQL"
                echo
                echo "Generated by \`bench/run.sh --stores\` on $(date -u +%F) at $M_REV ($M_CPU, $M_CORES cores, load"
                echo "average $M_LOAD_START at the start). hwidd, PostgreSQL, the relay and the load generator share"
                echo "the machine: rates are only comparable within one run, and only from an otherwise idle machine."
                echo
                stores_write_latency
                echo
                stores_write_budget
                echo
                stores_write_write_path
                echo
                stores_write_levels
        } >"$STORES_OUT"
}

stores_main() {
        ulimit -n 8192 2>/dev/null || ulimit -n "$(ulimit -Hn)"
        build
        wait_quiet
        machine
        setup_ca
        log "SQLite, one hwidd"
        hwidd_start
        SERVER_PID=$HWIDD_PID
        stores_levels S "$URL"
        stop "$HWIDD_PID"
        SERVER_PID=
        pg_bench_start
        log "PostgreSQL directly, one hwidd, then two"
        replicas_start 1 "$PG_URI"
        stores_levels P "${REPLICA_URLS[@]}"
        replicas_stop
        replicas_start 2 "$PG_URI"
        stores_levels Q "${REPLICA_URLS[@]}"
        replicas_stop
        stores_latency
        stores_budget
        log "the write path: one function call against one pipeline (pgbench)"
        stores_write_path
        if kill -INT "$PG_PID" 2>/dev/null; then
                wait "$PG_PID" 2>/dev/null || true
        fi
        stores_write
        log "done: $STORES_OUT"
}
