# shellcheck shell=bash
# ops-lib.sh — helpers shared by the ops-*.sh tests (health, metrics, HSM
# recovery, audit chain, backups). Sourced after tests/lib.sh and ca-lib.sh.

require_tools promtool

# public_metrics — GET /metrics without credentials (policy.public_metrics).
public_metrics() {
        sed -i 's/^  audit_only: false$/&\n  public_metrics: true/' "$CFG"
        grep -q '^  public_metrics: true$' "$CFG" || fail "could not turn public_metrics on in $CFG"
}

# scrape OUT — GET /metrics into OUT.body, which Prometheus' own checker
# (promtool check metrics) must accept as text format 0.0.4.
scrape() {
        http "$1" GET /metrics
        expect_status 200 "$1"
        assert_contains "$(header Content-Type "$1")" "text/plain; version=0.0.4" "Content-Type of /metrics"
        promtool check metrics <"$1.body" >"$1.promtool" 2>&1 ||
                fail "promtool check metrics refuses /metrics: $(head -n 20 "$1.promtool")"
}

# metric OUT SERIES — the value of SERIES (exactly as exposed, labels
# included) in the scrape OUT; 0 when it is not there (yet).
metric() {
        awk -v k="$2" '$1 == k { v = $2; found = 1 } END { print found ? v : 0 }' "$1.body"
}

# metric_delta BEFORE AFTER SERIES — how much SERIES moved between scrapes.
metric_delta() {
        awk -v a="$(metric "$1" "$3")" -v b="$(metric "$2" "$3")" 'BEGIN { printf "%.0f\n", b - a }'
}

# ready OUT — GET /readyz into OUT; CODE is its status.
ready() {
        http "$1" GET /readyz
}

# check_of OUT NAME — "true"/"false": whether /readyz's check NAME passed.
check_of() {
        json_get "$1.body" ".checks.$2.ok"
}
