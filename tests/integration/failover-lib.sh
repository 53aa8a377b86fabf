# shellcheck shell=bash disable=SC2034  # variables used by the scripts sourcing this
# failover-lib.sh — helpers shared by the *-failover.sh tests (clients that
# know several servers). Sourced after tests/lib.sh.

# listener_start — something that accepts connections on a free port and
# records each one (one line) in $T/listener.log; sets LISTENER (URL).
listener_start() {
        local port
        port=$(free_port)
        : >"$T/listener.log"
        start_bg "$T/listener.out" python3 "$SRCDIR/tests/integration/failover-peer.py" listen "$port" \
                "$T/listener.log"
        wait_for_port "$port" 10 "$BG_PID"
        LISTENER=https://127.0.0.1:$port
}

# no_connection WHAT — the listener got no connection (after WHAT).
no_connection() {
        assert_eq "$(grep -c connection "$T/listener.log" || true)" 0 "connections to the second server after $1"
}

# json_edit FILE PYTHON — a JSON file rewritten by a Python statement on d.
json_edit() {
        python3 - "$1" "$2" <<'PY'
import json, sys
p, stmt = sys.argv[1:]
d = json.load(open(p))
exec(stmt)
json.dump(d, open(p, "w"))
PY
}
