# shellcheck shell=bash
# bench/stores-budget.sh — replicas that bring CPU of their own (sourced by
# bench/stores.sh): each hwidd replica in a cgroup of its own with a CPU
# quota (BUDGET_US of every BUDGET_PERIOD_US), as if each ran on a small
# host of its own, PostgreSQL behind the relay at 0.5 ms; 1, 2 and 3
# replicas, interleaved as in the latency table.  On this machine every
# process shares two cores, so a replica more can only share them; with a
# budget each, what a replica adds is measured rather than worked out from
# CPU per issuance.  Needs root and the cpu controller (cgroup v2's
# cpu.max, or v1's cpu.cfs_quota_us); without them the section says so.

BUDGET_US=${BUDGET_US:-1500}
BUDGET_PERIOD_US=${BUDGET_PERIOD_US:-10000}
CGROUPS=()

# cgroup_base — where groups with a CPU quota can be made: "v2 DIR" or
# "v1 DIR"; nothing if nowhere.
cgroup_base() {
        if grep -qw cpu /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null && [ -w /sys/fs/cgroup ]; then
                echo "v2 /sys/fs/cgroup"
        elif [ -w /sys/fs/cgroup/cpu ] && [ -f /sys/fs/cgroup/cpu/cpu.cfs_quota_us ]; then
                echo "v1 /sys/fs/cgroup/cpu"
        fi
}

# cgroup_budget PID — PID (all its threads) into a new group of its own
# with the budget; the group joins CGROUPS.
cgroup_budget() {
        local kind dir g
        read -r kind dir <<<"$(cgroup_base)"
        [ -n "$kind" ] || die "no cgroup with the cpu controller to write"
        g=$dir/hwid-bench-$$-$1
        mkdir "$g" || die "cannot make the cgroup $g"
        CGROUPS+=("$g")
        if [ "$kind" = v2 ]; then
                echo "$BUDGET_US $BUDGET_PERIOD_US" >"$g/cpu.max"
        else
                echo "$BUDGET_PERIOD_US" >"$g/cpu.cfs_period_us"
                echo "$BUDGET_US" >"$g/cpu.cfs_quota_us"
        fi || die "cannot set the CPU quota of $g"
        echo "$1" >"$g/cgroup.procs" || die "cannot move $1 into $g"
}

# cgroups_remove — the groups made, once their processes are gone.
cgroups_remove() {
        local g
        for g in "${CGROUPS[@]}"; do rmdir "$g" 2>/dev/null; done
        CGROUPS=()
}

# throttled — the time (ms) the kernel held the budgeted replicas back, so
# far: each group's throttled time, summed.
throttled() {
        local g sum=0 t
        for g in "${CGROUPS[@]}"; do
                t=$(awk '$1 == "throttled_usec" { print int($2 / 1000) } $1 == "throttled_time" { print int($2 / 1000000) }' \
                        "$g/cpu.stat" 2>/dev/null)
                sum=$((sum + ${t:-0}))
        done
        echo "$sum"
}

# stores_budget — B<k>: 1 to 3 budgeted replicas at 0.5 ms, LOAD_REPS
# runs each, interleaved; B_NONE says why not when it cannot run.
stores_budget() {
        local rep k pid
        if [ -z "$(cgroup_base)" ]; then
                res B_NONE "no cgroup with the cpu controller to write here (root, cgroup v2 cpu.max or v1 cpu.cfs_quota_us)"
                log "replicas on a CPU budget: skipped ($B_NONE)"
                return
        fi
        RUN_RELAY=${RELAY_PID[500]}
        for ((rep = 1; rep <= LOAD_REPS; rep++)); do
                for k in $(order "$rep" 1 2 3); do
                        log "$k hwidd on a CPU budget of $BUDGET_US µs per $BUDGET_PERIOD_US each, 0.5 ms (run $rep of $LOAD_REPS)"
                        replicas_start "$k" "${RELAY_URI[500]}"
                        for pid in "${REPLICA_PIDS[@]}"; do cgroup_budget "$pid"; done
                        new_token "$REPLICA_CFG"
                        store_warm "$RTT_CLIENTS" -- "${REPLICA_URLS[@]}"
                        store_run "$RTT_CLIENTS" -- "${REPLICA_URLS[@]}"
                        level_add "B$k"
                        log "  held back by their budget: $(throttled) ms in all"
                        replicas_stop
                        cgroups_remove
                done
        done
        for k in 1 2 3; do level_done "B$k"; done
        RUN_RELAY=
}

stores_write_budget() {
        echo "## Replicas that bring CPU of their own"
        echo
        if [ -n "${B_NONE:-}" ]; then
                echo "Not measured in this run: $B_NONE."
                return
        fi
        echo "Each hwidd replica in a cgroup of its own with a CPU quota of $BUDGET_US µs every $BUDGET_PERIOD_US µs"
        echo "($(awk -v q="$BUDGET_US" -v p="$BUDGET_PERIOD_US" 'BEGIN { printf "%.0f", 100 * q / p }')% of one core),"
        echo "as if each ran on a small host of its own; PostgreSQL, the relay and the load generator share"
        echo "the rest of the two cores. PostgreSQL behind the relay at 0.5 ms, $RTT_CLIENTS clients split over the"
        echo "replicas; the median of $LOAD_REPS runs, interleaved as above, and its p99 in ms (the quota's more"
        echo "than the cluster's: a replica that spent its budget waits for the next period). A replica more"
        echo "adds its budget: what it adds to the rate is what the cluster gives it, with no lock across"
        echo "replicas in the way."
        echo
        echo "| | 1 hwidd | 2 hwidd | 3 hwidd |"
        echo "|---|---|---|---|"
        echo "| rate | $(cell B1) | $(cell B2) | $(cell B3) |"
        echo "| runs | $B1_rates | $B2_rates | $B3_rates |"
        echo "| against 1 hwidd | 1.00 | $(ratio "$B2_rate" "$B1_rate") | $(ratio "$B3_rate" "$B1_rate") |"
        echo "| CPU per issuance (µs; hwidd / PostgreSQL / relay) | $B1_cpu | $B2_cpu | $B3_cpu |"
}
