# shellcheck shell=bash
# bench/ocsp.sh — `bench/run.sh --ocsp` (sourced by run.sh, whose CA,
# hwidd and cfssl set-ups it uses): OCSP answers per second on this
# machine, in one run, of
#   - hwidd's responder on its plain-HTTP listener (CA key in SoftHSM2):
#     requests without a nonce, answered from its cache, and requests with
#     a nonce, each signed (the per-address budgets lifted: the load comes
#     from one address);
#   - `cfssl ocspserve` serving responses cfssl signed beforehand
#     (`cfssl ocsprefresh`, `cfssl ocspdump`): a lookup, no signature;
#   - `openssl ocsp -index`: one process, signing each answer with a key in
#     a file;
# each for OCSP_CERTS certificates issued by itself, at 1, 16 and 64
# keep-alive connections (bench/ocsp-load: a POST of a DER request,
# counted when the answer is a signed one).  Writes its section of
# docs/BENCHMARKS.md (or --out FILE) between the markers below, which a
# full run of bench/run.sh keeps as it is.

OCSP_BEGIN='<!-- bench/run.sh --ocsp: begin -->'
OCSP_END='<!-- bench/run.sh --ocsp: end -->'
OCSP_CERTS=100
OCSP_LEVELS=(1 16 64)
OCSP_LOAD=$BUILD/bench/ocsp-load

# ocsp_reqs DIR ISSUER SERIALS [OPENSSL-OCSP-ARGS...] — DIR/N.der: a
# request (SHA-1 certID, as openssl makes it) per serial (hex, a line each).
ocsp_reqs() {
        local dir=$1 issuer=$2 serials=$3 i=0 s
        shift 3
        mkdir -p "$dir"
        while read -r s; do
                i=$((i + 1))
                openssl ocsp -issuer "$issuer" -serial "0x$s" -reqout "$dir/$i.der" "$@" >/dev/null 2>&1 ||
                        die "openssl ocsp -reqout for serial $s"
        done <"$serials"
        [ "$i" -gt 0 ] || die "no serials in $serials"
}

# ocsp_run KEY URL DIR — the load at each level against URL with DIR's
# requests: KEY<c>_rate, _p50, _p99, _errors.
ocsp_run() {
        local key=$1 url=$2 dir=$3 c out
        for c in "${OCSP_LEVELS[@]}"; do
                out=$("$OCSP_LOAD" --url "$url" --connections "$c" --duration "$DUR" "$dir"/*.der) ||
                        die "ocsp-load against $url"
                log "  $key $c connections: $out"
                res "${key}${c}_rate" "$(printf '%.0f' "$(kv rate "$out")")"
                res "${key}${c}_p50" "$(kv p50_ms "$out")"
                res "${key}${c}_p99" "$(kv p99_ms "$out")"
                res "${key}${c}_errors" "$(kv errors "$out")"
        done
}

ocsp_metric() {
        curl -sf --cacert "$W/ca/ca.pem" "$URL/metrics" | awk -v k="$1" '$1 == k { print $2 }'
}

ocsp_hwidd() {
        local plain sig0
        log "hwidd: $OCSP_CERTS certificates, then its OCSP responder"
        sed -i 's/^limits:$/&\n  ocsp_sign_rate_per_ip: 1000000\n  ocsp_sign_burst_per_ip: 1000000\n  ocsp_sign_rate: 1000000\n  ocsp_sign_burst: 1000000/;
                s/^  audit_only: false$/&\n  public_metrics: true/' "$CFG"
        hwidd_start
        "$LOAD" --url "$URL" --cacert "$W/ca/ca.pem" --connections 4 --requests "$OCSP_CERTS" --prefix ocsp \
                >"$W/ocsp-issue.log" || die "issuing hwidd's certificates"
        sqlite3 "$W/ca/hwid.db" "SELECT serial FROM certificates WHERE identity LIKE 'ocsp-%'" >"$W/ocsp/hwid.serials"
        ocsp_reqs "$W/ocsp/hwid" "$W/ca/ca.pem" "$W/ocsp/hwid.serials" -no_nonce
        ocsp_reqs "$W/ocsp/hwid-nonce" "$W/ca/ca.pem" "$W/ocsp/hwid.serials"
        plain=http://$(sed -n 's/^http_listen: "\(.*\)"$/\1/p' "$CFG")/ocsp
        log "hwidd OCSP, no nonce (its cache)"
        sig0=$(ocsp_metric hwid_ocsp_signatures_total)
        ocsp_run OH "$plain" "$W/ocsp/hwid"
        res OH_SIGS "$(($(ocsp_metric hwid_ocsp_signatures_total) - sig0))"
        res OH_HITS "$(ocsp_metric hwid_ocsp_cache_hits_total)"
        log "hwidd OCSP, a nonce each (a signature each)"
        ocsp_run ON "$plain" "$W/ocsp/hwid-nonce"
        stop "$HWIDD_PID"
}

# The cfssl CA's certificates: PEM files in DIR, their serials in FILE.
ocsp_cfssl_certs() {
        local dir=$1 f
        mkdir -p "$dir"
        sqlite3 "$W/cfssl/certs.db" 'SELECT pem FROM certificates' |
                awk -v d="$dir" '/BEGIN CERTIFICATE/ { n++ } n { print > (d "/" n ".pem") }'
        for f in "$dir"/*.pem; do
                openssl x509 -in "$f" -noout -serial | sed 's/^serial=//'
        done >"$W/ocsp/cfssl.serials"
}

ocsp_cfssl() {
        local port
        log "cfssl: $OCSP_CERTS certificates, responses signed beforehand, cfssl ocspserve"
        setup_cfssl
        cfssl_start cfssl-db -db-config "$W/cfssl/db-config.json"
        "$LOAD" --url "https://127.0.0.1:$CFSSL_PORT" --cacert "$W/cfssl/ca.pem" --mode cfssl --connections 4 \
                --requests "$OCSP_CERTS" --prefix ocsp >"$W/ocsp-cfssl-issue.log" || die "issuing cfssl's certificates"
        stop "$CFSSL_PID"
        (cd "$W/cfssl" && cfssl ocsprefresh -db-config db-config.json -ca ca.pem -responder ca.pem \
                -responder-key ca-key.pem) >"$W/ocsprefresh.log" 2>&1 || die "cfssl ocsprefresh"
        (cd "$W/cfssl" && cfssl ocspdump -db-config db-config.json) >"$W/cfssl/responses" 2>"$W/ocspdump.log" ||
                die "cfssl ocspdump"
        [ "$(wc -l <"$W/cfssl/responses")" -ge "$OCSP_CERTS" ] || die "cfssl ocspdump wrote too few responses"
        ocsp_cfssl_certs "$W/ocsp/cfssl-certs"
        ocsp_reqs "$W/ocsp/cfssl" "$W/cfssl/ca.pem" "$W/ocsp/cfssl.serials" -no_nonce
        port=$(free_port)
        bg cfssl-ocspserve cfssl ocspserve -address 127.0.0.1 -port "$port" -responses "$W/cfssl/responses" \
                -loglevel 4
        wait_port "$port" "$BG_PID"
        log "cfssl ocspserve"
        ocsp_run OC "http://127.0.0.1:$port/" "$W/ocsp/cfssl"
        stop "$BG_PID"
}

# openssl ocsp -index on the cfssl CA's key and certificates (the index
# lists them as valid).
ocsp_openssl() {
        local port f end serial subject pid
        : >"$W/ocsp/index.txt"
        for f in "$W/ocsp/cfssl-certs"/*.pem; do
                end=$(date -u -d "$(openssl x509 -in "$f" -noout -enddate | cut -d= -f2)" +%y%m%d%H%M%SZ)
                serial=$(openssl x509 -in "$f" -noout -serial | sed 's/^serial=//')
                subject=$(openssl x509 -in "$f" -noout -subject -nameopt compat | sed 's/^subject=//')
                printf 'V\t%s\t\t%s\tunknown\t%s\n' "$end" "$serial" "$subject" >>"$W/ocsp/index.txt"
        done
        port=$(free_port)
        bg openssl-ocsp openssl ocsp -index "$W/ocsp/index.txt" -port "$port" -CA "$W/cfssl/ca.pem" \
                -rsigner "$W/cfssl/ca.pem" -rkey "$W/cfssl/ca-key.pem" -ignore_err
        pid=$BG_PID
        wait_port "$port" "$pid"
        log "openssl ocsp -index"
        ocsp_run OO "http://127.0.0.1:$port/" "$W/ocsp/cfssl"
        stop "$pid"
}

ocsp_row() {
        local key=$2 c line="| $1 |"
        for c in "${OCSP_LEVELS[@]}"; do
                line+=" $(eval echo "\$${key}${c}_rate") ($(eval echo "\$${key}${c}_p50") / $(eval echo "\$${key}${c}_p99") ms) |"
        done
        echo "$line $(for c in "${OCSP_LEVELS[@]}"; do eval echo -n "\$${key}${c}_errors"; [ "$c" = 64 ] || echo -n ", "; done) |"
}

# A note when the machine was not idle (a load average above its cores).
ocsp_busy() {
        awk -v l="$M_LOAD_START" -v c="$M_CORES" 'BEGIN { if (l > c) print "- The load average above the core count says other work shared the\n  machine: compare the rows of this run with each other, not with\n  another run." }'
}

ocsp_section() {
        cat <<EOF
$OCSP_BEGIN
## 10. OCSP answers per second

\`bench/run.sh --ocsp\`, $M_DATE, tree $M_REV, on $M_CPU ($M_CORES cores,
$M_MEM, $M_OS; load average $M_LOAD_START at the start, $(loadavg) at the
end).  Each responder answers for $OCSP_CERTS certificates issued by its own
CA (ECDSA P-256): requests as \`openssl ocsp -reqout\` makes them (SHA-1
certID), POSTed round robin over keep-alive connections from one address
by \`bench/ocsp-load\` for $DUR s per level; an answer counts when it is a
signed one.  Answers per second (p50 / p99 latency).

| responder | 1 connection | 16 connections | 64 connections | failed (1, 16, 64) |
|---|---|---|---|---|
$(ocsp_row "hwidd, no nonce (its cache; CA key in SoftHSM2)" OH)
$(ocsp_row "hwidd, a nonce each (a SoftHSM2 signature each)" ON)
$(ocsp_row "cfssl ocspserve (responses signed beforehand)" OC)
$(ocsp_row "openssl ocsp -index (one process, signs each, key in a file)" OO)

- hwidd on its plain-HTTP listener (\`http_listen\`: 4 worker threads),
  the status read from its SQLite store at every request; the runs
  without a nonce cost $OH_SIGS signatures in all (the first answer of
  each certificate), the rest came from the cache ($OH_HITS hits).  The
  per-address signing budgets were lifted for the runs with a nonce
  (\`limits.ocsp_sign_*\`): one address asks for everything here.
- cfssl $(pkgver golang-cfssl) (Debian's golang-cfssl): \`cfssl
  ocsprefresh\` signed the responses into its certdb, \`cfssl ocspdump\`
  wrote them out and \`cfssl ocspserve -responses\` serves them from
  memory; a revocation reaches it only at the next refresh and dump.
- \`openssl ocsp -index\` ($(pkgver openssl)) reads index.txt at start and
  serves one request at a time (listening on every address: it has no
  option for one).
$(ocsp_busy)
$OCSP_END
EOF
}

# Replaces the section in OUT (or appends it).
ocsp_write() {
        local section
        section=$(ocsp_section)
        [ -f "$OUT" ] || : >"$OUT"
        awk -v b="$OCSP_BEGIN" -v e="$OCSP_END" -v s="$section" '
                $0 == b { print s; skip = 1; done = 1; next }
                $0 == e { skip = 0; next }
                !skip { print }
                END { if (!done) print "\n" s }' "$OUT" >"$OUT.new"
        mv "$OUT.new" "$OUT"
}

# What a full run keeps of the section (printed; empty if none).
ocsp_kept() {
        [ -f "$OUT" ] || return 0
        awk -v b="$OCSP_BEGIN" -v e="$OCSP_END" '$0 == b { on = 1 } on { print } $0 == e { on = 0 }' "$OUT"
}

ocsp_main() {
        ulimit -n "$(ulimit -Hn)"
        build
        wait_quiet
        machine
        log "work directory $W (load average $M_LOAD_START)"
        mkdir -p "$W/ocsp"
        setup_ca
        ocsp_hwidd
        ocsp_cfssl
        ocsp_openssl
        ocsp_write
        log "done: $OUT (section 10)"
}
