# shellcheck shell=bash
# bench/stores-passes.sh — sourced by bench/stores.sh: the paced run's
# requests beside the passes of a kernel memory monitor (DAMON's kdamond
# threads), which on the virtual machines this bench has run on sample
# memory every 500 ms and stall both cores for some tens of ms each time
# (docs/HA.md, "Latency at half the peak").  bench/cpu-passes records each
# pass from the thread's own CPU time; the split is by whether a request
# started from PASS_MARGIN s before a pass to PASS_MARGIN s after it (a
# request in flight when the stall comes is slowed by it, and one after it
# waits behind the backlog it left).

CPU_PASSES=$BUILD/bench/cpu-passes
PASS_MARGIN=0.05
PASS_WATCHERS=()

# passes_watch_start — a bench/cpu-passes for each kdamond thread, if any.
passes_watch_start() {
        local pid
        PASS_WATCHERS=()
        rm -f "$W"/passes-*.txt
        for pid in $(pgrep '^kdamond'); do
                "$CPU_PASSES" --pid "$pid" >"$W/passes-$pid.txt" 2>>"$W/cpu-passes.log" </dev/null &
                PASS_WATCHERS+=("$!")
                PIDS+=("$!")
        done
}

passes_watch_stop() {
        local pid
        for pid in "${PASS_WATCHERS[@]}"; do stop "$pid"; done
        PASS_WATCHERS=()
}

# passes_summary — "PASSES PERIOD_S CPU_MS" of the passes recorded: how
# many, the median time between two, the median CPU of one; "0 - -" when
# none (no kdamond on this machine).
passes_summary() {
        sort -g "$W"/passes-*.txt 2>/dev/null | awk '
                { n++; cpu[n] = $3; if (n > 1) gap[n - 1] = $1 - start; start = $1 }
                function median(a, k,   i, j, t) {
                        for (i = 2; i <= k; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) {
                                t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
                        return a[int((k + 1) / 2)]
                }
                END { if (!n) { print "0 - -"; exit }
                      printf "%d %s %.1f\n", n, (n > 1 ? sprintf("%.3f", median(gap, n - 1)) : "-"), median(cpu, n) }'
}

# passes_split FILE... — the requests of the latency files (load
# --latencies) near a pass and the others: "P99_NEAR N_NEAR P99_OTHERS
# N_OTHERS", as paced_split.
passes_split() {
        sort -g "$W"/passes-*.txt 2>/dev/null |
                awk -v m="$PASS_MARGIN" '{ printf "%.4f %.4f\n", $1 - m, $2 + m }' >"$W/pass-windows.txt"
        windows_split "$W/pass-windows.txt" "$@"
}

# passes_results FILE... — the passes and the split of the latency files,
# as results (LH_PASSES, LH_PASS_PERIOD, LH_PASS_CPU; LH_NEAR_P99/N and
# LH_FAR_P99/N).
passes_results() {
        read -r LH_PASSES LH_PASS_PERIOD LH_PASS_CPU < <(passes_summary)
        res LH_PASSES "$LH_PASSES"; res LH_PASS_PERIOD "$LH_PASS_PERIOD"; res LH_PASS_CPU "$LH_PASS_CPU"
        read -r LH_NEAR_P99 LH_NEAR_N LH_FAR_P99 LH_FAR_N < <(passes_split "$@")
        res LH_NEAR_P99 "$LH_NEAR_P99"; res LH_NEAR_N "$LH_NEAR_N"; res LH_FAR_P99 "$LH_FAR_P99"; res LH_FAR_N "$LH_FAR_N"
        log "  paced: $LH_PASSES kdamond passes; p99 $LH_NEAR_P99 ms of $LH_NEAR_N requests near one," \
                "$LH_FAR_P99 of $LH_FAR_N others"
}

# passes_write — the doc's paragraph on them.
passes_write() {
        if [ "${LH_PASSES:-0}" = 0 ]; then
                echo "No kernel memory monitor (DAMON's kdamond) ran on this machine during the paced runs."
                return
        fi
        echo "This machine's kernel runs a memory monitor (DAMON's kdamond: it samples which pages are used, to"
        echo "page out the others) that ran $LH_PASSES times during the paced runs, every $LH_PASS_PERIOD s (median),"
        echo "$LH_PASS_CPU ms of CPU each (\`bench/cpu-passes\`). The same requests by whether they started from"
        echo "$(awk -v m="$PASS_MARGIN" 'BEGIN { print m * 1000 }') ms before one of its passes to as long after it:" \
                "$LH_NEAR_N did (p99 $LH_NEAR_P99 ms), $LH_FAR_N did not (p99 $LH_FAR_P99 ms)."
}
