#!/bin/bash
# bench-lib.sh — what bench/run.sh and bench/compare.sh set up alike: the
# plumbing (ports, key=value lines, the load and a process's CPU), the
# CA's SoftHSM2 token and the changes they make to the hwidd.yaml that
# `hwid ca init` wrote.  Sourced; the caller defines die() and W (its work
# directory).

# kv FIELD LINE — the value of FIELD=... in a key=value line.
kv() {
        awk -v k="$1" '{ for (i = 1; i <= NF; i++) { n = index($i, "="); if (substr($i, 1, n - 1) == k) { print substr($i, n + 1); exit } } }' <<<"$2"
}

# calc EXPR — floating point arithmetic (awk), printed with up to 2 decimals.
calc() { awk "BEGIN { v = $1; printf (v == int(v) ? \"%d\" : \"%.2f\"), v }"; }

# Ports in HWID_TEST_PORT_BASE's range when it is set (as the tests do),
# else 22000-31999.
free_port() {
        local p i base=${HWID_TEST_PORT_BASE:-22000} count=${HWID_TEST_PORT_COUNT:-10000}
        for ((i = 0; i < 200; i++)); do
                p=$((base + (RANDOM * 32768 + RANDOM) % count))
                ss -Hltn "sport = :$p" | grep -q . && continue
                grep -qx "$p" "$W/.ports" 2>/dev/null && continue
                echo "$p" >>"$W/.ports"
                echo "$p"
                return 0
        done
        die "no free port"
}

# wait_port PORT PID — until something listens on PORT (10 s), PID alive.
wait_port() {
        local port=$1 pid=$2 i
        for ((i = 0; i < 200; i++)); do
                ss -Hltn "sport = :$port" | grep -q . && return 0
                kill -0 "$pid" 2>/dev/null || die "process $pid died before listening on $port (see $W)"
                sleep 0.05
        done
        die "nothing listens on port $port"
}

loadavg() { cut -d' ' -f1 /proc/loadavg; }

# cpu_ticks PID — user + system CPU time of PID so far, in clock ticks.
cpu_ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }

# bench_softhsm_token DIR — a throwaway SoftHSM2 token labelled "ca", its
# files in DIR/softhsm, its PIN (random) in DIR/pin; SOFTHSM2_CONF is
# exported (a caller's `local -x` keeps it local to the caller).
bench_softhsm_token() {
        mkdir -p "$1/softhsm/tokens"
        printf 'directories.tokendir = %s/softhsm/tokens\nobjectstore.backend = file\nlog.level = ERROR\nslots.removable = false\n' \
                "$1" >"$1/softhsm/softhsm2.conf"
        export SOFTHSM2_CONF=$1/softhsm/softhsm2.conf
        (umask 077; head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$1/pin")
        # softhsm2-util takes PINs only on its command line: a throwaway token.
        softhsm2-util --init-token --free --label ca --pin "$(cat "$1/pin")" --so-pin "$(cat "$1/pin")" >/dev/null
}

# bench_tune_config CFG — renewal open at once (window 1.0) so that renew
# can be counted, and a "rotate" profile that also asks for a new key.  The
# load comes from one address (127.0.0.1), thousands of requests a second
# on up to 1,024 connections: the per-address limits, which a real fleet's
# many addresses never meet, are lifted.  Nothing else differs from what
# hwid ca init writes.
bench_tune_config() {
        sed -i 's/window: 0.3333/window: 1.0/; s/^  rate_per_ip: 200$/  rate_per_ip: 0/;
                s/^  max_connections_per_ip: 1024$/  max_connections_per_ip: 16384/' "$1"
        grep -q '^  rate_per_ip: 0$' "$1" || die "could not lift rate_per_ip in $1"
        cat >>"$1" <<EOF
  rotate:
    validity: 30d
    key_types: [ec-p256]
    extended_key_usage: [clientAuth]
    subject:
      allowed_rdns: [CN]
    approval: auto
    renewal:
      window: 1.0
      rotate_key: true
EOF
}
