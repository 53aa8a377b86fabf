#!/bin/bash
# bench/run.sh — hwid's one benchmark command (see README, "Benchmarks"):
#
#   bench/run.sh [--quick] [--keep] [--out FILE] [--wait-quiet SECONDS] [--profile-only]
#   bench/run.sh --stores [--quick] [--keep] [--stores-out FILE] [--wait-quiet SECONDS]
#   bench/run.sh --ocsp [--quick] [--keep] [--out FILE] [--wait-quiet SECONDS]
#
# --ocsp measures only OCSP answers per second (bench/ocsp.sh): hwidd's
# responder (from its cache, and signing each answer), `cfssl ocspserve`
# and `openssl ocsp -index`, into its own section of docs/BENCHMARKS.md (or
# FILE), which a full run keeps as it is.
#
# --stores measures only hwidd issuance on SQLite against replicas on one
# PostgreSQL (bench/stores.sh): 1 and 2 replicas at 1/16/64 clients, and 1,
# 2 and 3 replicas with PostgreSQL 0, 0.5 and 1 ms away (bench/pg-relay),
# and 1, 2 and 3 replicas each on a CPU budget of its own (a cgroup's
# quota: bench/stores-budget.sh; needs root), into
# docs/BENCHMARKS-STORES.md (or FILE).
#
# Builds a release build with the benchmark tools (build-bench/, -Dbench=true),
# sets up in a fresh temporary directory a CA whose key and TLS key live in a
# SoftHSM2 token, hwidd, software TPMs (swtpm) for devices, a cfssl CA with an
# ECDSA P-256 key and an `openssl ca` directory, runs every measurement and
# regenerates docs/BENCHMARKS.md (or FILE):
#   1. the signing ceiling: C_Sign on SoftHSM2, TPM signing on swtpm, OpenSSL;
#   2. hwidd issuance over HTTPS with keep-alive at 1, 4, 16, 64 clients
#      (each level the median of three runs);
#   3. the same load against `cfssl serve`, without a store and with its
#      SQLite certdb, and `openssl ca` per certificate;
#   4. the device side: `hwid join` on swtpm, `hwid factory` at 1, 4, 16;
#   5. scale: 1,000,000 valid + 100,000 revoked certificates in the store;
#   6. memory: hwidd's RSS idle, holding 10,000 keep-alive connections, and
#      under tests/integration/ca-flood.sh's flood;
#   7. round trips: PKCS#11 calls per issuance (OpenSC's pkcs11-spy), TPM
#      commands per join and renew, with and without the TCG SRK at
#      0x81000001 (swtpm's command log);
#   8. the profile: hwidd's instructions per issuance by phase (TLS, parse,
#      verify, policy, build, sign, commit, audit, HTTP) under callgrind at
#      1 and 16 clients, and its user and system CPU per issuance; the
#      same phases timed natively by perf, with the kernel's part by
#      system call.
# Everything listens on 127.0.0.1.  Every process it starts is stopped by
# PID when it exits, pass or fail.  --quick shortens every run (and the
# scale store to 100,000 + 10,000) for trying the script, not for numbers.
# The temporary directory is under $BENCH_TMPDIR (default /var/tmp): on a
# disk, because hwidd's commits must really reach it (fsync).  Numbers are
# only worth comparing from an otherwise idle machine: --wait-quiet waits
# (at most SECONDS) for the 1-minute load average to drop below 0.5 first.
# --profile-only sets up the CA and prints section 8's table, nothing else.
set -euo pipefail

SRCDIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
CLK_TCK=$(getconf CLK_TCK)
BUILD=${BUILD:-$SRCDIR/build-bench}
OUT=$SRCDIR/docs/BENCHMARKS.md
QUICK=0
KEEP=0
QUIET_WAIT=0
STORES=0
STORES_OUT=$SRCDIR/docs/BENCHMARKS-STORES.md # read by bench/stores.sh
export STORES_OUT
PROFILE_ONLY=0
OCSP=0

while [ $# -gt 0 ]; do
        case "$1" in
        --quick) QUICK=1; shift ;;
        --keep) KEEP=1; shift ;;
        --profile-only) PROFILE_ONLY=1; shift ;;
        --out) OUT=$2; shift 2 ;;
        --wait-quiet) QUIET_WAIT=$2; shift 2 ;;
        --stores) STORES=1; shift ;;
        --stores-out) STORES_OUT=$2; shift 2 ;;
        --ocsp) OCSP=1; shift ;;
        -h|--help) awk 'NR > 1 && !/^#/ { exit } NR > 1' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "run.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
        esac
done

if [ $QUICK = 1 ]; then
        DUR=2; PROF_N=100; LOAD_REPS=1; SIGN_SECS=1; JOINS=3; ROUNDS=1; FILL_VALID=100000; FILL_REVOKED=10000; OSSL_CA_N=30
else
        DUR=8; PROF_N=400; LOAD_REPS=3; SIGN_SECS=3; JOINS=10; ROUNDS=3; FILL_VALID=1000000; FILL_REVOKED=100000; OSSL_CA_N=200
fi
LEVELS=(1 4 16 64)
MANY=1024
HOLD=10000
SOFTHSM_MODULE=${SOFTHSM_MODULE:-/usr/lib/softhsm/libsofthsm2.so}
SPY_MODULE=${SPY_MODULE:-/usr/lib/x86_64-linux-gnu/pkcs11/pkcs11-spy.so}
export TSS2_LOG=all+NONE
unset HWID_TCTI TPM2TOOLS_TCTI

W=$(mktemp -d "${BENCH_TMPDIR:-/var/tmp}/hwid-bench.XXXXXX")
RES=$W/results.env       # KEY=VALUE lines: what the report is made of
PIDS=()                  # processes to stop at exit
SWTPM_DIRS=()            # swtpm-start directories to stop at exit
: >"$RES"

# --- plumbing -------------------------------------------------------------------

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "FAILED: $*"; exit 1; }
# shellcheck source=bench-lib.sh
source "$SRCDIR/bench/bench-lib.sh"

cleanup() {
        local rc=$? pid i
        set +e
        for d in "${SWTPM_DIRS[@]}"; do
                "$SRCDIR/swtpm/swtpm-stop" "$d" >/dev/null 2>&1
        done
        for pid in "${PIDS[@]}"; do
                kill -TERM "$pid" 2>/dev/null
        done
        for ((i = 0; i < 30; i++)); do
                local alive=0
                for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
                [ $alive = 0 ] && break
                sleep 0.1
        done
        for pid in "${PIDS[@]}"; do
                kill -KILL "$pid" 2>/dev/null
                wait "$pid" 2>/dev/null
        done
        # bench/stores-budget.sh's cgroups, empty now
        for d in ${CGROUPS[@]+"${CGROUPS[@]}"}; do rmdir "$d"; done
        if [ $KEEP = 1 ] || [ $rc -ne 0 ]; then
                log "work directory kept: $W"
        else
                rm -rf "$W"
        fi
        exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# res KEY VALUE — record a result (and set $KEY for the report).
res() {
        printf '%s=%s\n' "$1" "$2" >>"$RES"
        printf -v "$1" '%s' "$2"
}




# bg NAME CMD... — start CMD in the background (output in $W/NAME.log); BG_PID.
bg() {
        local name=$1
        shift
        "$@" >"$W/$name.log" 2>&1 </dev/null &
        BG_PID=$!
        PIDS+=("$BG_PID")
}

# stop PID — TERM and reap one process we started.
stop() {
        kill -TERM "$1" 2>/dev/null || true
        wait "$1" 2>/dev/null || true
}


rss_kib() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
now_ns() { date +%s%N; }

HWID=$BUILD/cli/hwid
HWIDD=$BUILD/service/hwidd
LOAD=$BUILD/bench/load
CEIL=$BUILD/bench/sign-ceiling
FILL=$BUILD/bench/fill-store

# --- 0. build and the machine -----------------------------------------------------

build() {
        log "building a release build in $BUILD"
        "$SRCDIR/scripts/install-deps.sh" >&2
        local opts=(--buildtype=release -Dbench=true -Db_sanitize=none)
        if [ -f "$BUILD/meson-private/coredata.dat" ]; then
                meson setup --reconfigure "$BUILD" "${opts[@]}" >"$W/meson-setup.log" 2>&1
        else
                meson setup "$BUILD" "${opts[@]}" >"$W/meson-setup.log" 2>&1
        fi || { cat "$W/meson-setup.log" >&2; die "meson setup"; }
        meson compile -C "$BUILD" >"$W/meson-compile.log" 2>&1 || { tail -30 "$W/meson-compile.log" >&2; die "build"; }
}

pkgver() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo "?"; }

machine() {
        res M_CPU "$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)"
        res M_CORES "$(nproc)"
        res M_MEM "$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)"
        res M_KERNEL "$(uname -r)"
        res M_OS "$(. /etc/os-release && echo "$PRETTY_NAME")"
        res M_FS "$(df -PT "$W" | awk 'NR == 2 { print $2 " on " $1 }')"
        res M_DATE "$(date -u '+%Y-%m-%d %H:%M UTC')"
        res M_REV "$(git -C "$SRCDIR" rev-parse --short HEAD 2>/dev/null || echo unknown)$(git -C "$SRCDIR" status --porcelain 2>/dev/null | grep -q . && echo '+changes')"
        res M_VERSIONS "OpenSSL $(pkgver libssl3), SoftHSM2 $(pkgver softhsm2), swtpm $(pkgver swtpm), tpm2-tss $(pkgver libtss2-esys-3.0.2-0), libmicrohttpd $(pkgver libmicrohttpd12), GnuTLS $(pkgver libgnutls30), SQLite $(pkgver libsqlite3-0), libcurl $(pkgver libcurl4), cfssl $(pkgver golang-cfssl), gcc $(pkgver gcc-12)"
        res M_LOAD_START "$(loadavg)"
}

# --- 1. the CA, hwidd ---------------------------------------------------------------

setup_ca() {
        log "CA: SoftHSM2 token, hwid ca init"
        bench_softhsm_token "$W"
        PORT=$(free_port)
        URL=https://127.0.0.1:$PORT
        CA_KEY="pkcs11:token=ca;object=ca-key?pin-source=file:$W/pin"
        "$HWID" ca init --key "$CA_KEY" --subject "/CN=hwid bench CA" --dir "$W/ca" \
                --listen "127.0.0.1:$PORT" --http-listen "127.0.0.1:$(free_port)" >"$W/ca-init.log"
        CFG=$W/ca/hwidd.yaml
        bench_tune_config "$CFG"
        new_token
        CA_PIN=$("$HWID" ca hash "$W/ca/ca.pem")
}

# new_token [CONFIG] — a fresh many-use token for the load runs, in the
# store of CONFIG (default $CFG); one token holds 1,000,000 uses, every
# load run may spend up to LOAD_CAP.
new_token() {
        TOKEN=$("$HWID" token create --config "${1:-$CFG}" --uses 1000000 --ttl 2d | awk '/^token:/ { print $2 }')
        [ -n "$TOKEN" ] || die "no token"
        export HWID_TOKEN=$TOKEN # read by bench/load (and hwid join), never on a command line
}

hwidd_start() {
        local cfg=${1:-$CFG}
        bg hwidd "$HWIDD" --config "$cfg"
        HWIDD_PID=$BG_PID
        wait_port "$PORT" "$HWIDD_PID"
        curl -sf --cacert "$W/ca/ca.pem" "$URL/healthz" >/dev/null || die "hwidd does not answer /healthz"
}

# --- 2. the ceiling -----------------------------------------------------------------

ceilings() {
        local out n=$M_CORES tcti
        log "ceiling: PKCS#11 C_Sign on SoftHSM2, OpenSSL, TPM signing on swtpm"
        out=$("$CEIL" p11 --module "$SOFTHSM_MODULE" --token ca --object ca-key --pin-file "$W/pin" --seconds "$SIGN_SECS")
        res C_P11_1 "$(kv rate "$out")"
        out=$("$CEIL" p11 --module "$SOFTHSM_MODULE" --token ca --object ca-key --pin-file "$W/pin" --seconds "$SIGN_SECS" --threads "$n")
        res C_P11_N "$(kv rate "$out")"
        out=$("$CEIL" openssl --seconds "$SIGN_SECS")
        res C_OSSL_SIGN_1 "$(kv rate "$(grep openssl-sign <<<"$out")")"
        res C_OSSL_VERIFY_1 "$(kv rate "$(grep openssl-verify <<<"$out")")"
        out=$("$CEIL" openssl --seconds "$SIGN_SECS" --threads "$n")
        res C_OSSL_SIGN_N "$(kv rate "$(grep openssl-sign <<<"$out")")"
        res C_OSSL_VERIFY_N "$(kv rate "$(grep openssl-verify <<<"$out")")"
        # TPM: a persistent key (one Sign per signature) and a key file
        # (ContextLoad, Sign, FlushContext), both through hsm/.
        SWTPM_DIRS+=("$W/tpm-ceil")
        tcti=$("$SRCDIR/swtpm/swtpm-start" --count 1 --dir "$W/tpm-ceil" 2>"$W/swtpm-ceil.err") || die "swtpm-start"
        "$HWID" key create "tpm2:handle=0x81000010" --tcti "$tcti" >/dev/null
        "$HWID" key create "tpm2:file=$W/tpm-ceil/k.pem" --tcti "$tcti" >/dev/null
        out=$("$CEIL" hsm --key "tpm2:handle=0x81000010" --tcti "$tcti" --seconds "$SIGN_SECS")
        res C_TPM_PERSISTENT "$(kv rate "$out")"
        out=$("$CEIL" hsm --key "tpm2:file=$W/tpm-ceil/k.pem" --tcti "$tcti" --seconds "$SIGN_SECS")
        res C_TPM_FILE "$(kv rate "$out")"
        out=$("$CEIL" hsm --key "$CA_KEY" --seconds "$SIGN_SECS")
        res C_HSM_P11 "$(kv rate "$out")"
        "$SRCDIR/swtpm/swtpm-stop" "$W/tpm-ceil" >/dev/null 2>&1 || true
}

# --- 3. issuance load: hwidd, cfssl, openssl ca --------------------------------------


# load_run PREFIX KEY MODE URL CACERT CONNS [EXTRA...] — LOAD_REPS runs of the
# same load (each with CNs of its own) against the server whose PID is
# $SERVER_PID; keeps the run with the median rate: KEY_rate, KEY_p50,
# KEY_p99, KEY_errors (all runs), KEY_rates (every rate), KEY_srv_cpu and
# KEY_gen_cpu (µs of CPU per request: the server's, from /proc, and the
# load generator's own).
load_run() {
        local prefix=$1 key=$2 mode=$3 url=$4 cacert=$5 conns=$6 out rep t0 n errors=0 rates=() outs=() srv=()
        shift 6
        for ((rep = 1; rep <= LOAD_REPS; rep++)); do
                t0=$(cpu_ticks "$SERVER_PID")
                out=$("$LOAD" --mode "$mode" --url "$url" --cacert "$cacert" --connections "$conns" \
                        --requests "${LOAD_CAP:-60000}" --duration "$DUR" --prefix "${prefix}r$rep" "$@" \
                        2>>"$W/load-errors.log") ||
                        die "load $mode $conns: $(tail -3 "$W/load-errors.log")"
                # While the load made its CSRs the server was idle: its CPU is the run's.
                n=$(kv requests "$out")
                srv+=("$(calc "($(cpu_ticks "$SERVER_PID") - $t0) * 1000000 / $CLK_TCK / ($n > 0 ? $n : 1)")")
                echo "$out" >>"$W/load.log"
                outs+=("$out")
                rates+=("$(kv rate "$out")")
                errors=$((errors + $(kv errors "$out")))
        done
        # The median run: one stall of the machine does not decide a level.
        # By rate; by p99 for a paced load (--rate), whose rate is fixed.
        rep=$(for i in "${!outs[@]}"; do
                        if [[ " $* " == *" --rate "* ]]; then kv p99_ms "${outs[$i]}"; else echo "${rates[$i]}"; fi |
                                tr '\n' ' '
                        echo "$i"
                done | sort -n | awk -v m=$(((LOAD_REPS + 1) / 2)) 'NR == m { print $2 }')
        out=${outs[$rep]}
        res "${key}_rate" "$(kv rate "$out")"
        res "${key}_p50" "$(kv p50_ms "$out")"
        res "${key}_p99" "$(kv p99_ms "$out")"
        res "${key}_errors" "$errors"
        res "${key}_rates" "$(IFS=/; echo "${rates[*]}")"
        res "${key}_p99s" "$(for o in "${outs[@]}"; do kv p99_ms "$o"; done | paste -sd/)"
        res "${key}_n" "$(kv requests "$out")"
        res "${key}_srv_cpu" "$(printf '%.0f' "${srv[$rep]}")"
        res "${key}_gen_cpu" "$(printf '%.0f' "$(kv cpu_us_per_req "$out")")"
        res "${key}_load" "$(loadavg)"
        log "  $mode c=$conns: $(kv rate "$out")/s p50 $(kv p50_ms "$out") ms p99 $(kv p99_ms "$out") ms (runs: ${rates[*]}) errors $errors, CPU/request server ${srv[$rep]} µs, load generator $(kv cpu_us_per_req "$out") µs"
}

hwidd_load() {
        local c peak=0 r
        log "hwidd issuance (durable commits, keep-alive, CSRs made beforehand)"
        SERVER_PID=$HWIDD_PID
        for c in "${LEVELS[@]}"; do
                load_run "h$c" "H$c" hwid "$URL" "$W/ca/ca.pem" "$c"
                r=$(eval echo "\$H${c}_rate")
                peak=$(awk -v a="$peak" -v b="$r" 'BEGIN { print (b > a ? b : a) }')
        done
        res H_PEAK "$peak"
        # Many connections: 1,024 clients, each on a keep-alive connection of its own.
        new_token
        log "hwidd with $MANY clients, one keep-alive connection each"
        load_run "hk" "HK" hwid "$URL" "$W/ca/ca.pem" "$MANY"
        res H_HALF_RATE "$(awk -v p="$peak" 'BEGIN { printf "%d", p / 2 }')"
        # Twice as long: one stall of the machine (other work on it) weighs
        # less on the p99 of twice the samples.
        new_token
        log "hwidd at half the peak ($H_HALF_RATE/s, 16 clients, $((2 * DUR)) s)"
        DUR=$((2 * DUR)) load_run "hh" "HH" hwid "$URL" "$W/ca/ca.pem" 16 --rate "$H_HALF_RATE"
}

setup_cfssl() {
        log "cfssl: ECDSA P-256 CA (cfssl genkey -initca), cfssl serve over TLS on loopback"
        mkdir -p "$W/cfssl"
        (
                cd "$W/cfssl"
                echo '{"CN":"cfssl bench CA","key":{"algo":"ecdsa","size":256}}' >ca-csr.json
                cfssl genkey -initca ca-csr.json 2>/dev/null | cfssljson -bare ca
                cat >config.json <<'EOF'
{"signing":{"default":{"expiry":"720h","usages":["digital signature","client auth"]},
 "profiles":{"tls":{"expiry":"720h","usages":["digital signature","server auth"]}}}}
EOF
                echo '{"CN":"127.0.0.1","hosts":["127.0.0.1"],"key":{"algo":"ecdsa","size":256}}' >tls-csr.json
                cfssl gencert -ca ca.pem -ca-key ca-key.pem -config config.json -profile tls tls-csr.json \
                        2>/dev/null | cfssljson -bare tls
        )
        [ -s "$W/cfssl/ca-key.pem" ] && [ -s "$W/cfssl/tls.pem" ] || die "cfssl CA setup"
        cfssl_certdb
}

# cfssl's SQLite certdb (what it needs to revoke anything or answer OCSP).
# Debian's golang-cfssl ships no migrations: the two tables are made here
# as cfssl's certdb/sqlite migration makes them (the columns its INSERTs
# name).  go-sqlite3's defaults: rollback journal, synchronous=FULL, one
# transaction per certificate.
cfssl_certdb() {
        sqlite3 "$W/cfssl/certs.db" <<'EOF'
CREATE TABLE certificates (
  serial_number            blob NOT NULL,
  authority_key_identifier blob NOT NULL,
  ca_label                 blob,
  status                   blob NOT NULL,
  reason                   int,
  expiry                   timestamp,
  revoked_at               timestamp,
  pem                      blob NOT NULL,
  PRIMARY KEY(serial_number, authority_key_identifier)
);
CREATE TABLE ocsp_responses (
  serial_number            blob NOT NULL,
  authority_key_identifier blob NOT NULL,
  body                     blob NOT NULL,
  expiry                   timestamp,
  PRIMARY KEY(serial_number, authority_key_identifier),
  FOREIGN KEY(serial_number, authority_key_identifier) REFERENCES certificates(serial_number, authority_key_identifier)
);
EOF
        printf '{"driver":"sqlite3","data_source":"%s/cfssl/certs.db"}\n' "$W" >"$W/cfssl/db-config.json"
}

# cfssl_start NAME [ARGS...] — cfssl serve over TLS on a new port (CFSSL_PORT, CFSSL_PID).
cfssl_start() {
        local name=$1
        shift
        CFSSL_PORT=$(free_port)
        bg "$name" cfssl serve -address 127.0.0.1 -port "$CFSSL_PORT" -ca "$W/cfssl/ca.pem" \
                -ca-key "$W/cfssl/ca-key.pem" -config "$W/cfssl/config.json" \
                -tls-cert "$W/cfssl/tls.pem" -tls-key "$W/cfssl/tls-key.pem" -loglevel 4 "$@"
        CFSSL_PID=$BG_PID
        wait_port "$CFSSL_PORT" "$CFSSL_PID"
}

# The same load against cfssl without a store, then with its SQLite certdb.
cfssl_load() {
        local c n
        log "cfssl issuance (same load), no store"
        cfssl_start cfssl
        SERVER_PID=$CFSSL_PID
        for c in "${LEVELS[@]}"; do
                load_run "f$c" "F$c" cfssl "https://127.0.0.1:$CFSSL_PORT" "$W/cfssl/ca.pem" "$c"
        done
        stop "$CFSSL_PID"
        log "cfssl issuance (same load), SQLite certdb (-db-config)"
        cfssl_start cfssl-db -db-config "$W/cfssl/db-config.json"
        SERVER_PID=$CFSSL_PID
        for c in "${LEVELS[@]}"; do
                load_run "d$c" "D$c" cfssl "https://127.0.0.1:$CFSSL_PORT" "$W/cfssl/ca.pem" "$c"
        done
        stop "$CFSSL_PID"
        # It must really have recorded them, or the column measures nothing.
        n=$(sqlite3 "$W/cfssl/certs.db" 'SELECT count(*) FROM certificates')
        [ "$n" -gt 0 ] || die "cfssl serve -db-config recorded no certificate"
        res D_ROWS "$n"
}

openssl_ca_floor() {
        local d=$W/ossl i t0 t1
        log "openssl ca, one process per certificate ($OSSL_CA_N certificates)"
        mkdir -p "$d/new" "$d/csr"
        : >"$d/index.txt"
        openssl rand -hex 16 >"$d/serial"
        openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$d/ca.key" \
                -subj "/CN=openssl bench CA" -days 30 -out "$d/ca.pem" 2>/dev/null
        cat >"$d/ca.cnf" <<EOF
[ca]
default_ca = bench
[bench]
dir = $d
database = \$dir/index.txt
serial = \$dir/serial
new_certs_dir = \$dir/new
certificate = \$dir/ca.pem
private_key = \$dir/ca.key
default_md = sha256
default_days = 30
policy = anything
unique_subject = yes
copy_extensions = none
x509_extensions = leaf
[anything]
commonName = supplied
[leaf]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid:always
EOF
        for ((i = 0; i < OSSL_CA_N; i++)); do
                openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout /dev/null \
                        -subj "/CN=ossl-$i" -out "$d/csr/$i.csr" 2>/dev/null
        done
        t0=$(now_ns)
        for ((i = 0; i < OSSL_CA_N; i++)); do
                openssl ca -batch -notext -config "$d/ca.cnf" -in "$d/csr/$i.csr" -out "$d/new/$i.pem" 2>>"$d/ca.log" ||
                        die "openssl ca: $(tail -2 "$d/ca.log")"
        done
        t1=$(now_ns)
        res O_RATE "$(awk -v n="$OSSL_CA_N" -v t=$((t1 - t0)) 'BEGIN { printf "%.1f", n / (t / 1e9) }')"
        res O_MS "$(awk -v n="$OSSL_CA_N" -v t=$((t1 - t0)) 'BEGIN { printf "%.2f", t / 1e6 / n }')"
        log "  openssl ca: $O_RATE/s, $O_MS ms per certificate"
}

# --- 4. PKCS#11 calls per issuance -----------------------------------------------------

# with_module MODULE CFG — CFG with module-path=MODULE in its PKCS#11 key
# URIs, instead of any module-path= they have (hwid ca init writes one).
with_module() {
        sed -e "/^  key: \"pkcs11:/ { s|[?\&]module-path=[^\&\"]*||; s|\"\$|\&module-path=$1\"| }" "$2"
}

# spy_count FROM TO — "C_Xxx count" for the spy log's lines FROM..TO.
spy_count() {
        sed -n "$1,$2p" "$W/spy.log" | grep -E '^[0-9]+: C_' | awk '{ print $2 }' | sort | uniq -c | awk '{ print $2, $1 }'
}

p11_roundtrips() {
        local cfg=$W/ca/hwidd-spy.yaml n=50 l0 l1 l2 f hs per
        log "PKCS#11 calls per issuance (pkcs11-spy in front of SoftHSM2)"
        [ -f "$SPY_MODULE" ] || die "no $SPY_MODULE (install opensc)"
        # Both keys through the spy, as module-path= in their URIs.
        with_module "$SPY_MODULE" "$CFG" >"$cfg"
        grep -q "module-path=$SPY_MODULE" "$cfg" || die "could not route the keys through pkcs11-spy"
        PKCS11SPY=$SOFTHSM_MODULE PKCS11SPY_OUTPUT=$W/spy.log hwidd_start "$cfg"
        sleep 0.3
        l0=$(wc -l <"$W/spy.log")
        "$LOAD" --url "$URL" --cacert "$W/ca/ca.pem" --connections 1 --requests 0 >/dev/null
        sleep 0.3
        l1=$(wc -l <"$W/spy.log")
        "$LOAD" --url "$URL" --cacert "$W/ca/ca.pem" --connections 1 --requests $n \
                --prefix spy >"$W/spy-load.log"
        [ "$(kv errors "$(cat "$W/spy-load.log")")" = 0 ] || die "issuance through pkcs11-spy failed"
        sleep 0.3
        l2=$(wc -l <"$W/spy.log")
        stop "$HWIDD_PID"
        spy_count $((l0 + 1)) "$l1" >"$W/spy-handshake.txt"
        spy_count $((l1 + 1)) "$l2" >"$W/spy-issue.txt"
        # Per issuance: (connection + n issuances) minus (connection alone), / n.
        P11_TABLE=""
        for f in $(cat "$W/spy-handshake.txt" "$W/spy-issue.txt" | awk '{ print $1 }' | sort -u); do
                hs=$(awk -v f="$f" '$1 == f { print $2 }' "$W/spy-handshake.txt")
                per=$(awk -v f="$f" -v h="${hs:-0}" -v n=$n '$1 == f { printf "%.2f", ($2 - h) / n }' "$W/spy-issue.txt")
                P11_TABLE+="| \`$f\` | ${per:-0} | ${hs:-0} |"$'\n'
                res "P11_$f" "${per:-0}"
                res "P11HS_$f" "${hs:-0}"
        done
        res P11_N "$n"
}

# --- 5. devices: join, factory, TPM commands -------------------------------------------

tpm_name() {
        case $1 in
        0000011F) echo NV_UndefineSpace ;; 00000120) echo EvictControl ;; 0000012A) echo NV_DefineSpace ;;
        00000131) echo CreatePrimary ;; 00000144) echo Startup ;; 00000145) echo Shutdown ;;
        0000014E) echo NV_Read ;; 00000153) echo Create ;; 00000157) echo Load ;; 0000015D) echo Sign ;;
        00000161) echo ContextLoad ;; 00000162) echo ContextSave ;; 00000165) echo FlushContext ;;
        00000169) echo NV_ReadPublic ;; 00000173) echo ReadPublic ;; 00000176) echo StartAuthSession ;;
        00000177) echo VerifySignature ;; 0000017A) echo GetCapability ;; 0000017B) echo GetRandom ;;
        0000017E) echo PCR_Read ;; 00000191) echo CreateLoaded ;; 00000148) echo Certify ;;
        00000147) echo ActivateCredential ;; 00000151) echo PolicySecret ;;
        *) echo "0x$1" ;;
        esac
}

# tpm_commands LOG FROM — commands in swtpm's log after line FROM, "Name count"
# per line.  A command the TPM refused with TPM_RC_RETRY (0x922: not run;
# tpm2-tss sends it again) counts as "RETRY".
tpm_commands() {
        tail -n +$(($2 + 1)) "$1" |
                awk '/SWTPM_IO_Read/ { getline; code = $7 $8 $9 $10 }
                     /SWTPM_IO_Write/ { getline; print ($7 $8 $9 $10 == "00000922" ? "RETRY" : code) }' |
                while read -r code; do [ "$code" = RETRY ] && echo RETRY || tpm_name "$code"; done |
                sort | uniq -c | awk '{ printf "%s %s\n", $2, $1 }'
}

fmt_cmds() { awk '$1 != "RETRY" { printf "%s%s %s", (n++ ? ", " : ""), $1, $2 } $1 == "RETRY" { r = $2 }
                  END { if (r) printf " (and %d refused with TPM_RC_RETRY, resent)", r }' "$1"; }
sum_cmds() { awk '$1 != "RETRY" { s += $2 } END { print s + 0 }' "$1"; }

# attest_config ROOTS_DIR — TPM attestation on the running hwidd (SIGHUP):
# the EK CA of the swtpms in ROOTS_DIR, and a profile that requires it.
attest_config() {
        local reloads
        mkdir -p "$W/ek-roots"
        cp "$1/swtpm-localca-rootca-cert.pem" "$1/issuercert.pem" "$W/ek-roots/"
        { printf 'attestation:\n  ek_roots: [%s]\n' "$W/ek-roots"; cat "$CFG"; } >"$CFG.new"
        mv "$CFG.new" "$CFG"
        printf '  attested:\n    validity: 30d\n    key_types: [ec-p256]\n    subject:\n      allowed_rdns: [CN]\n    attestation: required\n' >>"$CFG"
        reloads=$(grep -c "policy reloaded" "$W/hwidd.log" || true)
        kill -HUP "$HWIDD_PID"
        for _ in $(seq 100); do
                [ "$(grep -c "policy reloaded" "$W/hwidd.log" || true)" -gt "$reloads" ] && return 0
                grep -q "reload refused" "$W/hwidd.log" && die "hwidd refused the attestation config: $(tail -1 "$W/hwidd.log")"
                sleep 0.1
        done
        die "hwidd did not reload its configuration"
}

# attested_join TPM TCTI SUFFIX — the commands of one hwid join --attest on
# swtpm TPM of $W/tpm-log (a fresh key in a key file, persistent RSA EK,
# --ek auto) into $W/tpm-join-attSUFFIX.txt; T_JOIN_ATTSUFFIX*.
attested_join() {
        local log=$W/tpm-log/tpm$1/swtpm.log s=$3 atok l0
        atok=$("$HWID" token create --config "$CFG" --profile attested | awk '/^token:/ { print $2 }')
        l0=$(wc -l <"$log")
        HWID_TOKEN=$atok "$HWID" join --attest --server "$URL" --ca-hash "$CA_PIN" --tcti "$2" \
                --key "tpm2:file=$W/dev-att$1/device.tss2.pem" --cn "dev-att$1" --dir "$W/dev-att$1" \
                >"$W/join-att$1.log" 2>&1 || die "hwid join --attest: $(tail -2 "$W/join-att$1.log")"
        tpm_commands "$log" "$l0" >"$W/tpm-join-att$s.txt"
        res "T_JOIN_ATT$s" "$(fmt_cmds "$W/tpm-join-att$s.txt")"
        res "T_JOIN_ATT${s}_N" "$(sum_cmds "$W/tpm-join-att$s.txt")"
        res "T_JOIN_ATT${s}_CP" "$(awk '$1 == "CreatePrimary" { print $2 }' "$W/tpm-join-att$s.txt")"
}

# tpm_counts TPM TCTI SUFFIX — the commands of a join (a fresh key in a key
# file), of a renew, and of a renew under a profile that asks for a new
# key, on swtpm TPM of $W/tpm-log: T_JOINSUFFIX*, T_RENEWSUFFIX*, T_RENEW_ROTSUFFIX*.
tpm_counts() {
        local i=$1 tcti=$2 s=$3 log=$W/tpm-log/tpm$1/swtpm.log l0 rtok
        # A fresh swtpm answers its very first Sign with TPM_RC_RETRY (even
        # after TPM2_SelfTest): sign once before counting, as a device that
        # has been used.
        "$HWID" key create "tpm2:file=$W/tpm-log/warm$i.pem" --tcti "$tcti" >/dev/null
        "$CEIL" hsm --key "tpm2:file=$W/tpm-log/warm$i.pem" --tcti "$tcti" --seconds 0.001 >/dev/null
        l0=$(wc -l <"$log")
        HWID_TOKEN=$TOKEN "$HWID" join --server "$URL" --ca-hash "$CA_PIN" --tcti "$tcti" \
                --key "tpm2:file=$W/dev-count$i/device.tss2.pem" --cn "dev-count$i" --dir "$W/dev-count$i" \
                >"$W/join-count$i.log" 2>&1 || die "hwid join: $(tail -2 "$W/join-count$i.log")"
        tpm_commands "$log" "$l0" >"$W/tpm-join$s.txt"
        l0=$(wc -l <"$log")
        "$HWID" renew --dir "$W/dev-count$i" --tcti "$tcti" >"$W/renew-count$i.log" 2>&1 ||
                die "hwid renew: $(tail -2 "$W/renew-count$i.log")"
        tpm_commands "$log" "$l0" >"$W/tpm-renew$s.txt"
        rtok=$("$HWID" token create --config "$CFG" --profile rotate | awk '/^token:/ { print $2 }')
        HWID_TOKEN=$rtok "$HWID" join --server "$URL" --ca-hash "$CA_PIN" --tcti "$tcti" \
                --key "tpm2:file=$W/dev-rot$i/device.tss2.pem" --cn "dev-rot$i" --dir "$W/dev-rot$i" \
                >"$W/join-rot$i.log" 2>&1 || die "hwid join (rotate): $(tail -2 "$W/join-rot$i.log")"
        l0=$(wc -l <"$log")
        "$HWID" renew --dir "$W/dev-rot$i" --tcti "$tcti" >"$W/renew-rot$i.log" 2>&1 ||
                die "hwid renew (rotate): $(tail -2 "$W/renew-rot$i.log")"
        tpm_commands "$log" "$l0" >"$W/tpm-renew-rot$s.txt"
        res "T_JOIN$s" "$(fmt_cmds "$W/tpm-join$s.txt")"
        res "T_JOIN${s}_N" "$(sum_cmds "$W/tpm-join$s.txt")"
        res "T_JOIN${s}_CP" "$(awk '$1 == "CreatePrimary" { print $2 }' "$W/tpm-join$s.txt")"
        res "T_JOIN${s}_SIGN" "$(awk '$1 == "Sign" { print $2 }' "$W/tpm-join$s.txt")"
        res "T_RENEW$s" "$(fmt_cmds "$W/tpm-renew$s.txt")"
        res "T_RENEW${s}_N" "$(sum_cmds "$W/tpm-renew$s.txt")"
        res "T_RENEW_ROT$s" "$(fmt_cmds "$W/tpm-renew-rot$s.txt")"
        res "T_RENEW_ROT${s}_N" "$(sum_cmds "$W/tpm-renew-rot$s.txt")"
}

# srk_provision TCTI — the TCG SRK (ECC P-256 template, noDA) made by
# tpm2-tools and persisted at 0x81000001, as systemd-tpm2-setup does.
srk_provision() {
        tpm2_createprimary -T "$1" -C o -g sha256 -G ecc256:aes128cfb \
                -a 'fixedtpm|fixedparent|sensitivedataorigin|userwithauth|noda|restricted|decrypt' \
                -c "$W/tpm-log/srk.ctx" >/dev/null 2>"$W/srk.err" &&
                tpm2_evictcontrol -T "$1" -C o -c "$W/tpm-log/srk.ctx" 0x81000001 >/dev/null 2>>"$W/srk.err" &&
                tpm2_flushcontext -T "$1" -t 2>>"$W/srk.err" || die "provisioning the SRK: $(tail -2 "$W/srk.err")"
}

devices() {
        local tctis tcti i t0 t1 times=() d p n
        log "devices: hwid join on swtpm ($JOINS joins), TPM commands per join and renew"
        # TPM 0 as swtpm_setup leaves it, TPM 1 with the TCG SRK.
        SWTPM_DIRS+=("$W/tpm-log")
        mapfile -t tctis < <("$SRCDIR/swtpm/swtpm-start" --count 2 --dir "$W/tpm-log" --log 2>"$W/swtpm-log.err") ||
                die "swtpm-start --log"
        [ ${#tctis[@]} = 2 ] || die "swtpm-start --log: $(cat "$W/swtpm-log.err")"
        srk_provision "${tctis[1]}"
        tpm_counts 0 "${tctis[0]}" ""
        tpm_counts 1 "${tctis[1]}" _SRK
        attest_config "$W/tpm-log/localca"
        attested_join 0 "${tctis[0]}" ""
        attested_join 1 "${tctis[1]}" _SRK
        "$SRCDIR/swtpm/swtpm-stop" "$W/tpm-log" >/dev/null 2>&1 || true

        # End-to-end join time on a TPM without logging.
        SWTPM_DIRS+=("$W/tpm-dev")
        mapfile -t tctis < <("$SRCDIR/swtpm/swtpm-start" --count 16 --dir "$W/tpm-dev" 2>"$W/swtpm-dev.err") ||
                die "swtpm-start --count 16"
        for ((i = 0; i < JOINS; i++)); do
                t0=$(now_ns)
                HWID_TOKEN=$TOKEN "$HWID" join --server "$URL" --ca-hash "$CA_PIN" --tcti "${tctis[0]}" \
                        --key "tpm2:file=$W/join/$i/device.tss2.pem" --cn "join-$i" --dir "$W/join/$i" \
                        >"$W/join-$i.log" 2>&1 || die "hwid join: $(tail -2 "$W/join-$i.log")"
                t1=$(now_ns)
                times+=($(((t1 - t0) / 1000)))
        done
        res J_MEAN_MS "$(printf '%s\n' "${times[@]}" | awk '{ s += $1 } END { printf "%.1f", s / NR / 1000 }')"
        res J_P50_MS "$(printf '%s\n' "${times[@]}" | sort -n | awk '{ a[NR] = $1 } END { printf "%.1f", a[int((NR + 1) / 2)] / 1000 }')"
        res J_MIN_MS "$(printf '%s\n' "${times[@]}" | sort -n | awk 'NR == 1 { printf "%.1f", $1 / 1000 }')"
        res J_LOAD "$(loadavg)"

        # The factory station: P devices at once, each in its own TPM.
        for p in 1 4 16; do
                n=$((p * ROUNDS))
                [ $n -lt 4 ] && n=4
                d=$W/factory-$p
                mkdir -p "$d"
                "$HWID" token create --config "$CFG" --count "$n" --out "$d/tokens" >/dev/null
                for ((i = 0; i < n; i++)); do
                        echo "fac$p-$i ${tctis[$((i % p))]} tpm2:file=$d/fac$p-$i/device.tss2.pem"
                done >"$d/devices"
                t0=$(now_ns)
                "$HWID" factory --server "$URL" --ca-hash "$CA_PIN" --tokens "$d/tokens" --devices "$d/devices" \
                        --parallel "$p" --out-dir "$d" >"$d/factory.log" 2>&1 || die "hwid factory --parallel $p: $(tail -3 "$d/factory.log")"
                t1=$(now_ns)
                res "FAC${p}_N" "$n"
                res "FAC${p}_PER_MIN" "$(awk -v n=$n -v t=$((t1 - t0)) 'BEGIN { printf "%.0f", n / (t / 1e9) * 60 }')"
                res "FAC${p}_LOAD" "$(loadavg)"
                log "  factory --parallel $p: $n devices, $(eval echo "\$FAC${p}_PER_MIN") devices/min"
        done
        "$SRCDIR/swtpm/swtpm-stop" "$W/tpm-dev" >/dev/null 2>&1 || true
}

# --- 6. memory ----------------------------------------------------------------------

# Two load processes of HOLD/2 each (libcurl keeps 3 descriptors per
# handle), over 16 source addresses; hwidd closes a connection idle for
# limits.timeout (30 s), so they must all be open within that.
memory_held() {
        local pids=() i rss
        log "memory: hwidd holding $HOLD connections"
        for i in 1 2; do
                bg "hold$i" "$LOAD" --url "$URL" --cacert "$W/ca/ca.pem" --hold $((HOLD / 2)) --hold-seconds 20
                pids+=("$BG_PID")
        done
        for ((i = 0; i < 600; i++)); do
                grep -q '^ready' "$W/hold1.log" 2>/dev/null && grep -q '^ready' "$W/hold2.log" 2>/dev/null && break
                kill -0 "${pids[0]}" 2>/dev/null && kill -0 "${pids[1]}" 2>/dev/null ||
                        die "holding $HOLD connections failed: $(tail -2 "$W/hold1.log" "$W/hold2.log")"
                sleep 0.1
        done
        grep -q '^ready' "$W/hold1.log" && grep -q '^ready' "$W/hold2.log" || die "holding $HOLD connections timed out"
        sleep 0.5
        res R_HELD "$(rss_kib "$HWIDD_PID")"
        res R_HELD_CONNS "$(ss -Htn state established "( sport = :$PORT )" | wc -l)"
        stop "${pids[0]}"
        stop "${pids[1]}"
        sleep 1
        res R_AFTER "$(rss_kib "$HWIDD_PID")"
        memory_flood
}

# RSS under tests/integration/ca-flood.sh's flood, of an hwidd started for
# it: 10,000 idle TCP
# connections from 127.0.0.1 and 256 half-open TLS handshakes from each of
# 127.0.0.2-5, reopened as hwidd closes them (it keeps what its per-address
# share and its handshake cap allow).
memory_flood() {
        local pid
        log "memory: hwidd under the flood of ca-flood.sh"
        # A fresh hwidd: the one before still holds what the held
        # connections made its heap grow to (freed, not given back).
        stop "$HWIDD_PID"
        hwidd_start
        bg flood python3 "$SRCDIR/tests/integration/flood.py" "$PORT" "$W/flood.status" --for 15 \
                idle:127.0.0.1:10000 handshake:127.0.0.2:256 handshake:127.0.0.3:256 handshake:127.0.0.4:256 \
                handshake:127.0.0.5:256
        pid=$BG_PID
        sleep 12
        res R_FLOOD "$(rss_kib "$HWIDD_PID")"
        res R_FLOOD_CONNS "$(ss -Htn state established "( sport = :$PORT )" | wc -l)"
        res R_FLOOD_OPENED "$(awk '{ n += $6 } END { print n }' "$W/flood.status")"
        stop "$pid"
        sleep 1
}

# The same, with module-path= in both key URIs: p11-kit then loads only
# SoftHSM2 instead of every registered module (OpenSC brings GLib/GIO).
memory_module_path() {
        local cfg=$W/ca/hwidd-module-path.yaml
        with_module "$SOFTHSM_MODULE" "$CFG" >"$cfg"
        hwidd_start "$cfg"
        res R_IDLE_MP "$(rss_kib "$HWIDD_PID")"
        res R_IDLE_MP_ANON "$(awk '/^RssAnon:/ { print $2 }' "/proc/$HWIDD_PID/status")"
        stop "$HWIDD_PID"
}

# --- 7. scale -------------------------------------------------------------------------

# get_crl OUT — one GET /crl, its time in ms (new connection, TLS included).
get_crl() {
        local t
        t=$(curl -sS --fail-with-body --cacert "$W/ca/ca.pem" -o "$1" -w '%{time_total}' "$URL/crl" 2>"$W/crl.err") ||
                die "GET /crl failed: $(cat "$W/crl.err") $(head -c 300 "$1")"
        awk -v t="$t" 'BEGIN { printf "%.1f", t * 1000 }'
}

scale() {
        local out db=$W/ca/hwid.db t
        log "scale: filling the store with $FILL_VALID valid + $FILL_REVOKED revoked certificates"
        stop "$HWIDD_PID"
        t=$(now_ns)
        "$FILL" --db "$db" --ca "$W/ca/ca.pem" --valid "$FILL_VALID" --revoked "$FILL_REVOKED" 2>"$W/fill.log" ||
                die "fill-store: $(tail -2 "$W/fill.log")"
        res S_FILL_S "$(awk -v t=$(($(now_ns) - t)) 'BEGIN { printf "%.0f", t / 1e9 }')"
        res S_ROWS "$(sqlite3 "$db" 'SELECT count(*) FROM certificates')"
        res S_REVOKED "$(sqlite3 "$db" "SELECT count(*) FROM certificates WHERE status = 'revoked'")"
        res S_DB_MIB "$(du -cm "$db"* | awk 'END { print $1 }')"
        hwidd_start
        res S_RSS_START "$(rss_kib "$HWIDD_PID")"
        log "scale: CRL of $S_REVOKED entries"
        t=$(get_crl "$W/crl1.der")
        res S_CRL_FIRST_MS "$t"
        t=$(get_crl "$W/crl2.der")
        res S_CRL_CACHED_MS "$t"
        "$HWID" cert revoke --config "$CFG" --identity fill-0000000 --reason key-compromise >/dev/null
        t=$(get_crl "$W/crl3.der")
        res S_CRL_REGEN_MS "$t"
        res S_CRL_BYTES "$(stat -c %s "$W/crl3.der")"
        res S_CRL_ENTRIES "$(openssl crl -inform DER -in "$W/crl3.der" -noout -text | grep -c 'Serial Number:')"
        openssl crl -inform DER -in "$W/crl3.der" -CAfile "$W/ca/ca.pem" -noout 2>&1 | grep -q 'verify OK' ||
                die "the CRL does not verify against the CA"
        log "scale: enrollment against the full store"
        SERVER_PID=$HWIDD_PID
        new_token
        load_run "s1" "S1" hwid "$URL" "$W/ca/ca.pem" 1
        load_run "s16" "S16" hwid "$URL" "$W/ca/ca.pem" 16
        res S_RSS_END "$(rss_kib "$HWIDD_PID")"
        res S_DB_MIB_END "$(du -cm "$db"* | awk 'END { print $1 }')"
}

# --- the report -------------------------------------------------------------------------

# --- 8. profile: where an issuance's CPU goes -------------------------------------

# Instructions per issuance, by phase, from callgrind: hwidd runs under
# valgrind --tool=callgrind with the same configuration; at each level the
# load generator first only opens its connections (--requests 0: TLS
# handshakes, warm-up), then sends PROF_N enrollments over new ones; each
# is dumped on its own, and the phases are the difference of inclusive
# costs of the functions below, divided by PROF_N.  Only user space is
# counted (callgrind sees no kernel: syscalls, fdatasync, the network).
# PHASES: "row|functions (inclusive, summed)|functions to subtract".
PHASES=(
        "TLS records (GnuTLS)|gnutls_record_recv gnutls_record_send|"
        "parse: the body, PEM, CSR DER, key import, SPKI hash|ca_body_parse csr_info_parse|X509_REQ_verify_ex"
        "verify: the CSR's signature (P-256)|X509_REQ_verify_ex|"
        "authorize and policy: token, policy, live and DNS lookups|ca_auth_token ca_decision policy_check_enroll store_key_blocked store_cert_live_for store_dns_owner|"
        "build: the TBS as DER, signing context, PEM, record|ca_issue|issuer_sign_tbs store_cert_commit"
        "sign: the TBS hashed, C_SignInit + C_Sign in SoftHSM2 via p11-kit|issuer_sign_tbs|"
        "commit: SQLite rows, indexes, WAL (group commit)|store_cert_commit|sqlite_audit_insert"
        "audit: the record, its hash chain, its row|sqlite_audit_insert|"
        "WAL checkpoints (background thread)|sqlite3_wal_checkpoint_v2|"
        "HTTP: libmicrohttpd, routing, headers, responses, logging|@rest|"
)

# cg_incl FILE — "inclusive-Ir function" for every function in FILE.
cg_incl() {
        callgrind_annotate --inclusive=yes --threshold=100 "$1" 2>/dev/null |
                awk '$1 ~ /^[0-9,]+$/ { ir = $1; gsub(",", "", ir); for (i = 2; i <= NF; i++) if ($i ~ /:/) { f = $i; sub(/^.*:/, "", f); if (!(f in s)) { s[f] = ir; print f, ir } ; break } }'
}

cg_total() { callgrind_annotate "$1" 2>/dev/null | awk '/PROGRAM TOTALS/ && !t { gsub(",", "", $1); t = $1 } END { print t }'; }

# phase_sum INCL FNS — the summed inclusive cost of FNS in the listing INCL.
phase_sum() {
        awk -v fns="$2" 'BEGIN { n = split(fns, a, " "); for (i = 1; i <= n; i++) w[a[i]] = 1 } ($1 in w) { s += $2 } END { print s + 0 }' "$1"
}

# profile_level C — per-issuance instructions by phase at C clients (PROF_C_*).
profile_level() {
        local c=$1 kind i name add sub v sum=0 tot out
        for kind in base full; do
                callgrind_control -z "$CG_PID" >/dev/null
                out=$("$LOAD" --mode hwid --url "$URL" --cacert "$W/ca/ca.pem" --connections "$c" \
                        --requests "$([ $kind = base ] && echo 0 || echo "$PROF_N")" --duration 600 \
                        --prefix "p$c$kind" 2>>"$W/load-errors.log") || die "profile load $c: $(tail -3 "$W/load-errors.log")"
                [ $kind = base ] || [ "$(kv errors "$out")" = 0 ] || die "profile load $c: errors: $out"
                callgrind_control -d "c$c-$kind" "$CG_PID" >/dev/null
                sleep 1
                cp "$(ls -t "$W"/cg.out.* | sed -n 1p)" "$W/cg-c$c-$kind.out"
                cg_incl "$W/cg-c$c-$kind.out" >"$W/cg-c$c-$kind.incl"
        done
        tot=$(( ($(cg_total "$W/cg-c$c-full.out") - $(cg_total "$W/cg-c$c-base.out")) / PROF_N ))
        res "PROF_${c}_conn" $(( $(cg_total "$W/cg-c$c-base.out") / c ))
        res "PROF_${c}_total" "$tot"
        for i in "${!PHASES[@]}"; do
                IFS='|' read -r name add sub <<<"${PHASES[$i]}"
                if [ "$add" = @rest ]; then
                        v=$((tot - sum))
                else
                        v=$(( ( $(phase_sum "$W/cg-c$c-full.incl" "$add") - $(phase_sum "$W/cg-c$c-full.incl" "$sub")
                                - $(phase_sum "$W/cg-c$c-base.incl" "$add") + $(phase_sum "$W/cg-c$c-base.incl" "$sub") ) / PROF_N ))
                fi
                sum=$((sum + v))
                res "PROF_${c}_$i" "$v"
        done
}

# The same, as CPU time: hwidd's user and system time per issuance, natively
# (no valgrind), over PROF_N * 10 enrollments at C clients (PROF_C_us, _sys).
profile_cpu() {
        local c=$1 t0 s0 out n
        read -r t0 s0 < <(awk '{ print $14, $15 }' "/proc/$HWIDD_PID/stat")
        out=$("$LOAD" --mode hwid --url "$URL" --cacert "$W/ca/ca.pem" --connections "$c" \
                --requests $((PROF_N * 10)) --duration 60 --prefix "pn$c" 2>>"$W/load-errors.log") || die "profile cpu $c"
        n=$(kv requests "$out")
        read -r t1 s1 < <(awk '{ print $14, $15 }' "/proc/$HWIDD_PID/stat")
        res "PROF_${c}_us" "$(calc "int(($t1 - $t0) * 1000000 / $CLK_TCK / $n + 0.5)")"
        res "PROF_${c}_sys" "$(calc "int(($s1 - $s0) * 1000000 / $CLK_TCK / $n + 0.5)")"
}

profile() {
        local c
        log "profile: hwidd under callgrind, $PROF_N enrollments at 1 and 16 clients"
        new_token
        bg hwidd-cg valgrind --tool=callgrind --callgrind-out-file="$W/cg.out.%p" "$HWIDD" --config "$CFG"
        CG_PID=$BG_PID
        local i
        for ((i = 0; i < 600; i++)); do
                curl -sf --cacert "$W/ca/ca.pem" "$URL/healthz" >/dev/null 2>&1 && break
                kill -0 "$CG_PID" 2>/dev/null || die "hwidd under valgrind died (see $W/hwidd-cg.log)"
                sleep 0.2
        done
        # Warm up: every read connection's statements prepared, caches filled.
        "$LOAD" --mode hwid --url "$URL" --cacert "$W/ca/ca.pem" --connections 8 --requests 64 --duration 600 \
                --prefix pwarm >/dev/null 2>>"$W/load-errors.log" || die "profile warm-up"
        for c in 1 16; do profile_level "$c"; done
        stop "$CG_PID"
        hwidd_start
        for c in 1 16; do profile_cpu "$c"; done
        if command -v perf >/dev/null; then
                log "profile: hwidd under perf, $PERF_SECS s at 1 and 16 clients"
                for c in 1 16; do perf_profile "$c" || break; done
        fi
        stop "$HWIDD_PID"
}

# The same phases timed natively by perf (linux-perf): hwidd's own CPU,
# user and kernel together, sampled with DWARF call graphs while PERF_SECS
# of enrollments run at C clients; each phase is its functions' share of
# the samples (inclusive, minus what the subtracted functions hold) times
# hwidd's measured CPU per issuance (PROF_C_us + PROF_C_sys).  Unlike the
# callgrind rows, a phase here includes its system calls (the commit's
# WAL writes and fdatasync, the signature's token file reads) and is not
# skewed by instructions of unequal cost (the curve arithmetic's).  The
# names differ from PHASES where -O3 turned a call into a jump (perf sees
# only frames on the stack): the SQLite store's own functions, not
# store.h's dispatchers.
PERF_PHASES=(
        "TLS records (GnuTLS, TCP in the kernel)|gnutls_record_recv gnutls_record_send2|"
        "parse|ca_body_parse csr_info_parse|X509_REQ_verify_ex"
        "verify|X509_REQ_verify_ex|"
        "authorize and policy|ca_auth_token policy_check_enroll sqlite_key_blocked sqlite_cert_live_for sqlite_dns_owner replay_enrollment|"
        "build|ca_issue|issuer_sign_tbs sqlite_cert_commit"
        "sign: the TBS hashed, C_SignInit + C_Sign in SoftHSM2 via p11-kit|issuer_sign_tbs|"
        "commit (SQLite, WAL writes, fdatasync, group commit)|sqlite_cert_commit|sqlite_audit_insert"
        "audit|sqlite_audit_insert|"
        "WAL checkpoints (background thread)|checkpointer|"
        "HTTP: libmicrohttpd, routing, headers, responses, logging|@rest|"
)
# The kernel's part by system call (inclusive), the rest of it being
# interrupts and scheduling outside any call.
PERF_SYSCALLS=(
        "WAL and database file: pwrite, pread, fdatasync, fcntl locks|__x64_sys_pwrite64 __x64_sys_pread64 __x64_sys_fdatasync __x64_sys_fcntl __x64_sys_ftruncate"
        "SoftHSM2's token files: every C_SignInit opens, stats, reads and closes the token's generation file and the key's object file|__x64_sys_openat __x64_sys_newfstatat __x64_sys_read __x64_sys_close"
        "sockets: send, receive, poll, TCP_CORK|__x64_sys_sendmsg __x64_sys_sendto __x64_sys_recvfrom __x64_sys_recvmsg __x64_sys_setsockopt __x64_sys_poll __x64_sys_ppoll __x64_sys_epoll_wait"
        "futex: lock waits and thread wake-ups|__x64_sys_futex"
        "other system calls, and entering and leaving them|@syscalls"
)
PERF_SECS=4

# perf_incl DATA — "symbol percent" (inclusive) for every symbol in DATA,
# compiler suffixes (.constprop.0, .isra.0, .part.0) removed.
perf_incl() {
        perf report -i "$1" --children --sort sym -g none --percent-limit 0 2>/dev/null |
                awk '$1 ~ /%$/ && $2 ~ /%$/ { v = $1; sub("%", "", v); f = $NF; sub(/\.(constprop|isra|part)\..*$/, "", f); if (!(f in s)) { s[f] = v; print f, v } }'
}

# perf_profile C — the PERF_PHASES and PERF_SYSCALLS at C clients, in µs
# per issuance (PERF_C_i, PERF_C_sys_i, PERF_C_kernel).
perf_profile() {
        local c=$1 data=$W/perf-c$c.data i name add sub v sum=0 tot pid lpid t0 kern sys
        tot=$(calc "$(eval echo "\$PROF_${c}_us") + $(eval echo "\$PROF_${c}_sys")")
        # The load makes its CSRs first: sample once hwidd is busy.
        "$LOAD" --mode hwid --url "$URL" --cacert "$W/ca/ca.pem" --connections "$c" \
                --requests $((5000 * (PERF_SECS + 3))) --duration $((PERF_SECS + 2)) --prefix "pp$c" \
                >/dev/null 2>>"$W/load-errors.log" &
        lpid=$!
        t0=$(cpu_ticks "$HWIDD_PID")
        while kill -0 "$lpid" 2>/dev/null && [ $(($(cpu_ticks "$HWIDD_PID") - t0)) -lt 10 ]; do sleep 0.1; done
        perf record -q -F 999 --call-graph dwarf,16384 -p "$HWIDD_PID" -o "$data" -- sleep "$PERF_SECS" \
                >"$W/perf-c$c.log" 2>&1 &
        pid=$!
        wait "$lpid" || die "perf load $c: $(tail -3 "$W/load-errors.log")"
        wait "$pid" || { log "perf record failed: $(tail -3 "$W/perf-c$c.log")"; return 1; }
        perf_incl "$data" >"$data.incl"
        for i in "${!PERF_PHASES[@]}"; do
                IFS='|' read -r name add sub <<<"${PERF_PHASES[$i]}"
                if [ "$add" = @rest ]; then
                        v=$(calc "100 - $sum")
                else
                        v=$(calc "$(phase_sum "$data.incl" "$add") - $(phase_sum "$data.incl" "$sub")")
                fi
                sum=$(calc "$sum + $v")
                res "PERF_${c}_$i" "$(calc "int($v * $tot / 100 + 0.5)")"
        done
        # The kernel's rows share out hwidd's system time from /proc, in
        # proportion to the kernel samples each holds.
        kern=$(perf report -i "$data" --no-children --sort dso -g none 2>/dev/null |
                awk '/\[kernel/ { v = $1; sub("%", "", v); print v; exit }')
        kern=${kern:-0}
        sys=$(eval echo "\$PROF_${c}_sys")
        res "PERF_${c}_kernel" "$sys"
        sum=0
        for i in "${!PERF_SYSCALLS[@]}"; do
                IFS='|' read -r name add <<<"${PERF_SYSCALLS[$i]}"
                if [ "$add" = @syscalls ]; then
                        v=$(calc "$(phase_sum "$data.incl" do_syscall_64) - $sum")
                else
                        v=$(phase_sum "$data.incl" "$add")
                fi
                sum=$(calc "$sum + $v")
                res "PERF_${c}_sys_$i" "$(calc "$kern > 0 ? int($v * $sys / $kern + 0.5) : 0")"
        done
        res "PERF_${c}_irq" "$(calc "$kern > 0 ? int(($kern - $sum) * $sys / $kern + 0.5) : 0")"
        rm -f "$data"
}

# The profile as a table (section 8 of the report): instructions per
# issuance by phase, and the same as µs of hwidd's measured user CPU time
# (each phase's share of the instructions times the user time per
# issuance; kernel time, which callgrind does not see, on its own row).
pct() { awk -v a="$1" -v t="$2" 'BEGIN { printf "%.1f", 100 * a / t }'; }

profile_table() {
        local i name add sub a b
        echo "| phase | 1 client: instructions | µs | share | 16 clients: instructions | µs | share |"
        echo "|---|---|---|---|---|---|---|"
        for i in "${!PHASES[@]}"; do
                IFS='|' read -r name add sub <<<"${PHASES[$i]}"
                a=$(eval echo "\$PROF_1_$i") b=$(eval echo "\$PROF_16_$i")
                echo "| $name | $(calc "int($a / 1000)")k | $(calc "int($a * $PROF_1_us / $PROF_1_total + 0.5)") | $(pct "$a" "$PROF_1_total")% | $(calc "int($b / 1000)")k | $(calc "int($b * $PROF_16_us / $PROF_16_total + 0.5)") | $(pct "$b" "$PROF_16_total")% |"
        done
        echo "| **hwidd in user space** | **$(calc "int($PROF_1_total / 1000)")k** | **$PROF_1_us** | 100% | **$(calc "int($PROF_16_total / 1000)")k** | **$PROF_16_us** | 100% |"
        echo "| hwidd in the kernel (sockets, WAL writes, fdatasync, locks, thread wake-ups) | | $PROF_1_sys | | | $PROF_16_sys | |"
        echo
        echo "Opening a connection (a full TLS handshake, signed with the TLS key in the HSM, and the load"
        echo "generator's warm-up request) costs hwidd $(calc "int($PROF_1_conn / 1000)")k instructions at 1 client,"
        echo "$(calc "int($PROF_16_conn / 1000)")k each at 16: keep-alive, or session resumption (section 9), pays it once."
}

# The perf profile as tables: µs of hwidd's CPU (user and kernel) per
# issuance by phase, then the kernel's part by system call.
perf_table() {
        local i name add sub a b t1 t16
        if [ -z "${PERF_16_kernel:-}" ]; then
                echo "(perf was not available: no native breakdown.)"
                return 0
        fi
        t1=$((PROF_1_us + PROF_1_sys)) t16=$((PROF_16_us + PROF_16_sys))
        echo "| phase (perf: user and kernel time) | 1 client: µs | share | 16 clients: µs | share |"
        echo "|---|---|---|---|---|"
        for i in "${!PERF_PHASES[@]}"; do
                IFS='|' read -r name add sub <<<"${PERF_PHASES[$i]}"
                a=$(eval echo "\$PERF_1_$i") b=$(eval echo "\$PERF_16_$i")
                echo "| $name | $a | $(pct "$a" "$t1")% | $b | $(pct "$b" "$t16")% |"
        done
        echo "| **hwidd, user and kernel** | **$t1** | 100% | **$t16** | 100% |"
        echo
        echo "| of which in the kernel | 1 client: µs | 16 clients: µs |"
        echo "|---|---|---|"
        for i in "${!PERF_SYSCALLS[@]}"; do
                IFS='|' read -r name add <<<"${PERF_SYSCALLS[$i]}"
                echo "| $name | $(eval echo "\$PERF_1_sys_$i") | $(eval echo "\$PERF_16_sys_$i") |"
        done
        echo "| interrupts, page faults and scheduling outside system calls | $PERF_1_irq | $PERF_16_irq |"
        echo "| **all of the kernel's part (system time, /proc)** | **$PERF_1_kernel** | **$PERF_16_kernel** |"
}

ok() { awk "BEGIN { exit !($1) }" && echo "met" || echo "**not met**"; }

# What the 16-client targets against cfssl ask of hwidd on this machine,
# from this run's numbers: the CPU left per issuance at cfssl's rate, and
# how much of it the two operations nobody can skip already take.
budget_text() {
        local b g v s v1 s1 rest
        b=$(calc "int($M_CORES * 1000000 / $F16_rate + 0.5)")
        g=$H16_gen_cpu
        v1=$(calc "int(1000000 / $C_OSSL_VERIFY_1 + 0.5)") s1=$(calc "int(1000000 / $C_P11_1 + 0.5)")
        v=${PERF_16_2:-$v1} s=${PERF_16_5:-$s1}
        rest=$(calc "$b - $g - $v - $s")
        cat <<EOF
**What the two targets against cfssl ask, by this run's numbers.**  At
cfssl's 16-client rate ($F16_rate/s) the machine's $M_CORES cores give $b µs of CPU
per certificate.  The load generator needs $g µs of it per request to hwidd
(section 2–3), which leaves hwidd $(calc "$b - $g") µs.  The two operations no CA
can skip take $(calc "$v + $s") µs of that inside hwidd (section 8, perf): the CSR's
signature verified, $v µs ($v1 µs alone, section 1), and the CA key's
signature in SoftHSM2, $s µs ($s1 µs alone).  Everything else (TLS, HTTP,
parsing, policy, building the certificate, the durable commit and its
audit record) would have to fit in $rest µs; it takes $(calc "$H16_srv_cpu - $v - $s") µs in this run,
${PERF_16_kernel:-?} µs of hwidd's CPU being the kernel's (section 8).  cfssl spends
$F16_srv_cpu µs per certificate: its key is a file (a software P-256 signature is
$(calc "int(1000000 / $C_OSSL_SIGN_1 + 0.5)") µs), and it stores and syncs nothing.
EOF
}

write_doc() {
        local h16=$H16_rate f16=$F16_rate
        res M_LOAD_END "$(loadavg)"
        log "writing $OUT"
        {
                cat <<EOF
# Benchmarks

Generated by \`bench/run.sh\`$([ $QUICK = 1 ] && echo ' --quick (short runs, small store: not for comparison)') on $M_DATE — rerun it to regenerate this file.
All numbers come from one run on one machine; every server and client ran
on it at once, over 127.0.0.1.

| machine | |
|---|---|
| CPU | $M_CPU, $M_CORES cores |
| memory | $M_MEM |
| OS, kernel | $M_OS, Linux $M_KERNEL |
| store on | $M_FS |
| load average (1 min) | $M_LOAD_START at the start, $M_LOAD_END at the end |
| hwid | $M_REV, release build (-O3) |
| versions | $M_VERSIONS |

## Summary: targets

| target | measured | |
|---|---|---|
| issuance at 16 clients ≥ 50% of the signing ceiling (SoftHSM2 C_Sign, one session) | $h16/s = $(calc "100 * $h16 / $C_P11_1")% of $C_P11_1/s | $(ok "$h16 >= 0.5 * $C_P11_1") |
| issuance at 16 clients ≥ 1.5× cfssl | $(calc "$h16 / $f16")× ($h16/s vs $f16/s) | $(ok "$h16 >= 1.5 * $f16") |
| issuance at 16 clients ≥ cfssl with its SQLite certdb (both record every certificate) | $(calc "$h16 / $D16_rate")× ($h16/s vs $D16_rate/s) | $(ok "$h16 >= $D16_rate") |
| issuance at 16 clients ≥ 1.0× cfssl without a store (hwidd still commits every certificate and audit record durably and signs in the HSM) | $(calc "$h16 / $f16")× ($h16/s vs $f16/s) | $(ok "$h16 >= $f16") |
| issuance at 16 clients ≥ 0.6× cfssl without a store (issue 23) | $(calc "$h16 / $f16")× ($h16/s vs $f16/s) | $(ok "$h16 >= 0.6 * $f16") |
| hwidd CPU per issuance ≤ 270 µs at 16 clients (breakdown: section 8) | $H16_srv_cpu µs in the load run ($PROF_16_us µs user + $PROF_16_sys µs system in the profile's) | $(ok "$H16_srv_cpu <= 270") |
| $MANY clients, each on its own keep-alive connection: no errors | $HK_errors errors; $HK_rate/s, p50 $HK_p50 ms, p99 $HK_p99 ms | $(ok "$HK_errors == 0") |
| idle RSS with $HOLD idle connections ≤ 64 MiB | keep-alive TLS connections: $(calc "$R_HELD / 1024") MiB ($R_HELD_CONNS established); under ca-flood.sh's flood ($R_FLOOD_OPENED connections made, $R_FLOOD_CONNS held): $(calc "$R_FLOOD / 1024") MiB (section 6) | $(ok "$R_HELD <= 65536") / $(ok "$R_FLOOD <= 65536") |
| 1 client: p50 ≤ 1.0 ms | p50 $H1_p50 ms (p99 $H1_p99 ms, $H1_rate/s) | $(ok "$H1_p50 <= 1.0") |
| p99 < 20 ms at half the peak load ($H_HALF_RATE/s, 16 clients) | p99 $HH_p99 ms (p50 $HH_p50 ms, achieved $HH_rate/s) | $(ok "$HH_p99 < 20") |
| one signing call, no login, no object search per issuance (HSM) | C_Sign $(echo "${P11_C_Sign:-0}"), C_Login ${P11_C_Login:-0}, C_FindObjectsInit ${P11_C_FindObjectsInit:-0} per issuance | $(ok "${P11_C_Sign:-0} == 1 && ${P11_C_Login:-0} == 0 && ${P11_C_FindObjectsInit:-0} == 0") |
| ≤ 6 TPM commands per join, exactly 1 Sign per CSR; 0 CreatePrimary with the TCG SRK at 0x81000001 (1 without) | SRK: $T_JOIN_SRK_N commands, ${T_JOIN_SRK_CP:-0} CreatePrimary, ${T_JOIN_SRK_SIGN:-0} Sign; none: $T_JOIN_N commands, ${T_JOIN_CP:-0} CreatePrimary, ${T_JOIN_SIGN:-0} Sign | $(ok "$T_JOIN_SRK_N <= 6 && ${T_JOIN_SRK_CP:-0} == 0 && ${T_JOIN_SRK_SIGN:-0} == 1 && $T_JOIN_N <= 6 && ${T_JOIN_CP:-0} <= 1 && ${T_JOIN_SIGN:-0} == 1") |
| attested join (\`hwid join --attest\`, persistent EK) as lean: with the SRK ≤ 14 TPM commands, 1 CreatePrimary (the AK); without ≤ 16, 2 | SRK: $T_JOIN_ATT_SRK_N commands, ${T_JOIN_ATT_SRK_CP:-0} CreatePrimary; none: $T_JOIN_ATT_N commands, ${T_JOIN_ATT_CP:-0} CreatePrimary | $(ok "$T_JOIN_ATT_SRK_N <= 14 && ${T_JOIN_ATT_SRK_CP:-0} <= 1 && $T_JOIN_ATT_N <= 16 && ${T_JOIN_ATT_CP:-0} <= 2") |
| CRL of $S_REVOKED entries in < 2 s | $(calc "$S_CRL_REGEN_MS - $S_CRL_CACHED_MS") ms (GET after a revocation $S_CRL_REGEN_MS ms, cached GET $S_CRL_CACHED_MS ms) | $(ok "$S_CRL_REGEN_MS - $S_CRL_CACHED_MS < 2000") |
| hwidd idle RSS < 16 MiB | $(calc "$R_IDLE / 1024") MiB as generated; $(calc "$R_IDLE_MP / 1024") MiB with \`module-path=\` (section 6) | $(ok "$R_IDLE < 16384") / $(ok "$R_IDLE_MP < 16384") |

$(budget_text)

## 1. The ceiling: signing rate of the key itself

| what | 1 thread | $M_CORES threads |
|---|---|---|
| SoftHSM2 ECDSA P-256 \`C_SignInit\`+\`C_Sign\` (raw PKCS#11 through p11-kit, one session per thread) | $C_P11_1/s | $C_P11_N/s |
| the same key through hwid's \`hsm/\` (provider + session pool) | $C_HSM_P11/s | |
| swtpm ECDSA P-256, persistent key, through \`hsm/\` (\`Sign\`) | $C_TPM_PERSISTENT/s | |
| swtpm ECDSA P-256, key file, through \`hsm/\` (\`ContextLoad\`, \`Sign\`, \`FlushContext\`) | $C_TPM_FILE/s | |
| OpenSSL P-256 sign (software) | $C_OSSL_SIGN_1/s | $C_OSSL_SIGN_N/s |
| OpenSSL P-256 verify (every CSR costs one) | $C_OSSL_VERIFY_1/s | $C_OSSL_VERIFY_N/s |

## 2–3. Issuance: hwidd, cfssl, openssl ca

Each client is a thread with one keep-alive HTTPS connection, POSTing CSRs
made beforehand (P-256 keys, a distinct CN each: hwidd issues one live
certificate per identity) for ${DUR} s after a warm-up request; each level
is run $LOAD_REPS times and the run with the median rate is shown (every
run's rate is listed below the table).  hwidd: \`POST
/csr\` with a many-use bootstrap token, CA key and TLS key in SoftHSM2, every
certificate committed to SQLite (WAL, \`synchronous=FULL\`) before it is
returned, with its audit record.  cfssl: \`cfssl serve\` over TLS, \`POST
/api/v1/cfssl/sign\`, CA key (ECDSA P-256) in a file, no database (it
records nothing).  cfssl + certdb: the same with \`-db-config\`, its SQLite
certdb (what cfssl needs to revoke anything or serve OCSP: the fair peer, a
CA that records what it issued), each certificate committed by go-sqlite3
with its defaults (rollback journal, \`synchronous=FULL\`); it recorded
$D_ROWS certificates.  \`openssl ca\`: one process per certificate,
sequential, key in a file, index.txt not synced.

| clients | hwidd /s | p50 ms | p99 ms | cfssl /s | p50 ms | p99 ms | cfssl + certdb /s | p50 ms | p99 ms | hwidd / cfssl | hwidd / cfssl + certdb | hwidd / ceiling | load avg after (hwidd, cfssl, cfssl + certdb) |
|---|---|---|---|---|---|---|---|---|---|---|---|---|---|
EOF
                for c in "${LEVELS[@]}"; do
                        local hr hp5 hp9 fr fp5 fp9 dr dp5 dp9
                        hr=$(eval echo "\$H${c}_rate"); hp5=$(eval echo "\$H${c}_p50"); hp9=$(eval echo "\$H${c}_p99")
                        fr=$(eval echo "\$F${c}_rate"); fp5=$(eval echo "\$F${c}_p50"); fp9=$(eval echo "\$F${c}_p99")
                        dr=$(eval echo "\$D${c}_rate"); dp5=$(eval echo "\$D${c}_p50"); dp9=$(eval echo "\$D${c}_p99")
                        echo "| $c | $hr | $hp5 | $hp9 | $fr | $fp5 | $fp9 | $dr | $dp5 | $dp9 | $(calc "$hr / $fr")× | $(calc "$hr / $dr")× | $(calc "100 * $hr / $C_P11_1")% | $(eval echo "\$H${c}_load, \$F${c}_load, \$D${c}_load") |"
                done
                cat <<EOF

- hwidd at half its peak ($H_HALF_RATE/s offered by 16 paced clients for
  $((2 * DUR)) s; latency counted from each request's scheduled time, so a
  stall of client, server or machine counts): achieved $HH_rate/s, p50
  $HH_p50 ms, p99 $HH_p99 ms, the median of $LOAD_REPS runs by p99 (each run's
  p99: $HH_p99s ms; load average $HH_load).
- CPU time per request, per level (1, 4, 16, 64 clients; the median
  runs): hwidd $(for c in "${LEVELS[@]}"; do eval echo -n "\$H${c}_srv_cpu"; [ "$c" = 64 ] || echo -n ", "; done) µs, cfssl $(for c in "${LEVELS[@]}"; do eval echo -n "\$F${c}_srv_cpu"; [ "$c" = 64 ] || echo -n ", "; done) µs, cfssl + certdb $(for c in "${LEVELS[@]}"; do eval echo -n "\$D${c}_srv_cpu"; [ "$c" = 64 ] || echo -n ", "; done) µs (from /proc);
  the load generator $(for c in "${LEVELS[@]}"; do eval echo -n "\$H${c}_gen_cpu"; [ "$c" = 64 ] || echo -n ", "; done) µs against hwidd, $(for c in "${LEVELS[@]}"; do eval echo -n "\$F${c}_gen_cpu"; [ "$c" = 64 ] || echo -n ", "; done) µs against cfssl
  (getrusage).  All of it shares the machine's $M_CORES cores.
- Every run's rate, per level (1, 4, 16, 64 clients): hwidd $(for c in "${LEVELS[@]}"; do eval echo -n "\$H${c}_rates"; [ "$c" = 64 ] || echo -n "; "; done); cfssl $(for c in "${LEVELS[@]}"; do eval echo -n "\$F${c}_rates"; [ "$c" = 64 ] || echo -n "; "; done); cfssl + certdb $(for c in "${LEVELS[@]}"; do eval echo -n "\$D${c}_rates"; [ "$c" = 64 ] || echo -n "; "; done).
- \`openssl ca\` per certificate: $O_RATE certificates/s ($O_MS ms each).
- Failed requests per level: hwidd $(for c in "${LEVELS[@]}"; do eval echo -n "\$H${c}_errors"; [ "$c" = 64 ] || echo -n ", "; done); cfssl $(for c in "${LEVELS[@]}"; do eval echo -n "\$F${c}_errors"; [ "$c" = 64 ] || echo -n ", "; done); cfssl + certdb $(for c in "${LEVELS[@]}"; do eval echo -n "\$D${c}_errors"; [ "$c" = 64 ] || echo -n ", "; done).
- hwidd with $MANY clients, each on a keep-alive connection of its own
  (the per-address share lifted: they all come from 127.0.0.1): $HK_rate/s,
  p50 $HK_p50 ms, p99 $HK_p99 ms, $HK_errors failed requests (every run: $HK_rates/s; p99 $HK_p99s ms).
- "hwidd / ceiling" divides by the one-session SoftHSM2 \`C_Sign\` rate
  ($C_P11_1/s); against the $M_CORES-thread rate ($C_P11_N/s) hwidd at 16 clients is
  $(calc "100 * $h16 / $C_P11_N")%.

## 4. Devices

| | |
|---|---|
| \`hwid join\` end to end (new key in swtpm, CSR signed there, pinned CA, enroll) | mean $J_MEAN_MS ms, median $J_P50_MS ms, best $J_MIN_MS ms ($JOINS joins; load average $J_LOAD) |
| \`hwid factory --parallel 1\` ($FAC1_N devices) | $FAC1_PER_MIN devices/min (load average $FAC1_LOAD) |
| \`hwid factory --parallel 4\` ($FAC4_N devices, one swtpm each) | $FAC4_PER_MIN devices/min (load average $FAC4_LOAD) |
| \`hwid factory --parallel 16\` ($FAC16_N devices, one swtpm each) | $FAC16_PER_MIN devices/min (load average $FAC16_LOAD) |

## 5. Scale

A store filled by \`bench/fill-store\` with $FILL_VALID valid and $FILL_REVOKED
revoked certificates (real leaf DER, ~hwidd's size; one audit record per
issuance and per revocation), issued over 60 days for 90 days, plus what the
runs above issued: $S_ROWS certificates, $S_REVOKED revoked.

| | |
|---|---|
| database size (with WAL) | $S_DB_MIB MiB after the fill, $S_DB_MIB_END MiB at the end |
| filling it (direct SQL, not an issuance path) | $S_FILL_S s |
| CRL: first GET after start (built and signed) | $S_CRL_FIRST_MS ms |
| CRL: GET after one more revocation (rebuilt and signed) | $S_CRL_REGEN_MS ms |
| CRL: GET served from cache | $S_CRL_CACHED_MS ms |
| CRL size | $S_CRL_BYTES bytes, $S_CRL_ENTRIES entries (verified with \`openssl crl -CAfile\`) |
| enrollment, 1 client | $S1_rate/s, p50 $S1_p50 ms, p99 $S1_p99 ms (empty store: $H1_rate/s, p50 $H1_p50 ms, p99 $H1_p99 ms) |
| enrollment, 16 clients | $S16_rate/s, p50 $S16_p50 ms, p99 $S16_p99 ms (empty store: $H16_rate/s) |
| hwidd RSS | $(calc "$S_RSS_START / 1024") MiB after start, $(calc "$S_RSS_END / 1024") MiB after the runs |

## 6. Memory (hwidd RSS)

| | |
|---|---|
| idle, after start and one \`/healthz\` (configuration as \`hwid ca init\` writes it) | $(calc "$R_IDLE / 1024") MiB ($(calc "$R_IDLE_ANON / 1024") MiB of it anonymous, the rest mapped libraries) |
| the same with \`module-path=\` in the key URIs (p11-kit loads SoftHSM2 only) | $(calc "$R_IDLE_MP / 1024") MiB ($(calc "$R_IDLE_MP_ANON / 1024") MiB anonymous) |
| after the issuance runs, idle | $(calc "$R_LOADED / 1024") MiB |
| holding $HOLD keep-alive TLS connections ($R_HELD_CONNS established) | $(calc "$R_HELD / 1024") MiB ($(calc "($R_HELD - $R_LOADED) / $HOLD") KiB per connection) |
| after they closed | $(calc "$R_AFTER / 1024") MiB |
| under ca-flood.sh's flood: 10,000 idle TCP connections from one address, 256 half-open handshakes from each of 4 others, reopened as closed ($R_FLOOD_OPENED made in 12 s, $R_FLOOD_CONNS held) | $(calc "$R_FLOOD / 1024") MiB |

## 7. Hardware round trips

PKCS#11 calls per issuance, counted by OpenSC's \`pkcs11-spy\` in front of
SoftHSM2 (both of hwidd's keys through it): $P11_N issuances on one
keep-alive connection, minus what opening that connection costs (its TLS
handshake signs with the TLS key in the token).

| call | per issuance | per new TLS connection |
|---|---|---|
${P11_TABLE}
TPM commands, from swtpm's command log, on a TPM without a persistent
storage key and on one with the TCG SRK at 0x81000001 (ECC P-256, the TCG
template, noDA: as systemd-tpm2-setup or a factory image provisions it).
Both have their RSA EK persistent at 0x81010001 (swtpm_setup); no
persistent AK (there is no standard handle for one: hwid's AK is a primary
key of the endorsement hierarchy, one CreatePrimary).  A real TPM spends
tens of milliseconds per command and up to seconds per CreatePrimary.

| operation | no persistent SRK | TCG SRK at 0x81000001 |
|---|---|---|
| \`hwid join\` (new key file) | $T_JOIN_N: $T_JOIN | $T_JOIN_SRK_N: $T_JOIN_SRK |
| \`hwid renew\` (same key) | $T_RENEW_N: $T_RENEW | $T_RENEW_SRK_N: $T_RENEW_SRK |
| \`hwid renew\` (profile with \`rotate_key\`) | $T_RENEW_ROT_N: $T_RENEW_ROT | $T_RENEW_ROT_SRK_N: $T_RENEW_ROT_SRK |
| \`hwid join --attest\` (new key file, persistent RSA EK, \`--ek auto\`; docs/ATTESTATION.md) | $T_JOIN_ATT_N: $T_JOIN_ATT | $T_JOIN_ATT_SRK_N: $T_JOIN_ATT_SRK |

## 8. Where an issuance's CPU goes

hwidd as in section 2–3 (token enrollment, CA key in SoftHSM2, durable
commit with its audit record), under \`valgrind --tool=callgrind\`:
after a warm-up, $PROF_N enrollments on keep-alive connections at 1 and
at 16 clients, minus what opening those connections cost (a run of the
load generator that only connects).  Instructions per issuance, by
phase, from the inclusive costs of the functions named in
\`bench/run.sh\` (PHASES); "HTTP" is the rest of hwidd: libmicrohttpd,
routing, headers, responses, the log line.  "µs" spreads hwidd's user
CPU time per issuance, measured natively right after ($((PROF_N * 10))
enrollments per level, from /proc), over the phases by their share of
instructions; the kernel's part is its own row (callgrind counts user
space only).  \`bench/run.sh --profile-only\` prints this table alone.

$(profile_table)

The same enrollments timed natively by \`perf record --call-graph dwarf\`
($PERF_SECS s at each level; bench/run.sh PERF_PHASES): each phase's share of
hwidd's CPU samples, user and kernel together, times hwidd's measured CPU
per issuance.  A phase here includes its system calls (the commit's WAL
writes and \`fdatasync\`, the signature's token file reads) and weighs
instructions by what they cost (the curve arithmetic runs at more
instructions per cycle than parsing or SQLite), so it is the table to read
for time; the one above is the one to read for work done.  The second table
shares out hwidd's system time (from /proc) by system call, in proportion
to the kernel samples under each.

$(perf_table)
EOF
                echo
                echo "## 9. Analysis"
                echo
                echo "How these numbers came to be -- what was optimized, measured before and"
                echo "after, and what stands in the way of the targets -- is in"
                echo "[bench/NOTES.md](../bench/NOTES.md), one copy, written by hand."
        } >"$OUT"
}

wait_quiet() {
        local deadline=$((SECONDS + QUIET_WAIT))
        while awk -v l="$(loadavg)" 'BEGIN { exit !(l >= 0.5) }' && [ $SECONDS -lt $deadline ]; do
                log "load average $(loadavg): waiting for a quiet machine"
                sleep 15
        done
}

main() {
        local kept
        ulimit -n "$(ulimit -Hn)"
        build
        wait_quiet
        machine
        log "work directory $W (load average $M_LOAD_START)"
        setup_ca
        if [ $PROFILE_ONLY = 1 ]; then
                profile
                profile_table
                echo
                perf_table
                return 0
        fi
        ceilings
        hwidd_start
        res R_IDLE "$(rss_kib "$HWIDD_PID")"
        res R_IDLE_ANON "$(awk '/^RssAnon:/ { print $2 }' "/proc/$HWIDD_PID/status")"
        hwidd_load
        res R_LOADED "$(rss_kib "$HWIDD_PID")"
        memory_held
        stop "$HWIDD_PID"
        memory_module_path
        p11_roundtrips
        profile
        hwidd_start
        setup_cfssl
        cfssl_load
        openssl_ca_floor
        devices
        scale
        stop "$HWIDD_PID"
        kept=$(ocsp_kept) # bench/run.sh --ocsp's section stays
        write_doc
        [ -z "$kept" ] || printf '\n%s\n' "$kept" >>"$OUT"
        log "done: $OUT"
}

# shellcheck source=ocsp.sh
source "$SRCDIR/bench/ocsp.sh"
if [ $STORES = 1 ]; then
        # shellcheck source=stores.sh
        source "$SRCDIR/bench/stores.sh"
        stores_main
elif [ $OCSP = 1 ]; then
        ocsp_main
else
        main
fi
