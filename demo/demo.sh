#!/bin/bash
# The hwid demo: a CA whose key lives in SoftHSM2, hwidd serving it, and
# five devices whose keys live in their own software TPMs (swtpm):
#   - two enroll with bootstrap tokens, one waits for manual approval;
#   - one renews (with a new key made in its TPM);
#   - one is revoked: it appears in the CRL and can no longer renew;
#   - with TPM attestation, a software key is refused, a device proves its
#     key lives in its TPM, and a TPM on the EK allowlist needs no token.
# Everything runs on 127.0.0.1 and is stopped at the end.
set -euo pipefail

SRCDIR=${SRCDIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}
BUILDDIR=${BUILDDIR:-$SRCDIR/build}
HWID=${HWID:-$BUILDDIR/cli/hwid}
HWIDD=${HWIDD:-$BUILDDIR/service/hwidd}
W=$(mktemp -d "${TMPDIR:-/tmp}/hwid-demo.XXXXXX")
HWIDD_PID=
export TSS2_LOG=all+NONE

cleanup() {
        [ -n "$HWIDD_PID" ] && kill "$HWIDD_PID" 2>/dev/null && wait "$HWIDD_PID" 2>/dev/null
        [ -d "$W/tpm" ] && "$SRCDIR/swtpm/swtpm-stop" "$W/tpm" >/dev/null 2>&1
        if [ "${KEEP_DEMO:-0}" = 1 ]; then echo "demo files kept in $W"; else rm -rf "$W"; fi
}
trap cleanup EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

# A free loopback port: 20000-29999, or the upper half of the test port
# range when HWID_TEST_PORT_BASE/COUNT give one (as tests/lib.sh does;
# swtpm-start takes the lower half).
free_port() {
        local p base=20000 span=10000
        if [ -n "${HWID_TEST_PORT_BASE:-}" ]; then
                span=$((${HWID_TEST_PORT_COUNT:-22528} - ${HWID_TEST_PORT_COUNT:-22528} / 2))
                base=$((HWID_TEST_PORT_BASE + ${HWID_TEST_PORT_COUNT:-22528} / 2))
        fi
        for _ in $(seq 50); do
                p=$((base + RANDOM % span))
                ss -Hltn "sport = :$p" | grep -q . || { echo "$p"; return; }
        done
        echo "no free port" >&2; return 1
}

start_ca() {
        step "1. The CA: its key is generated inside a SoftHSM2 token and never leaves it"
        mkdir -p "$W/softhsm/tokens" "$W/ca"
        printf 'directories.tokendir = %s/softhsm/tokens\nobjectstore.backend = file\nlog.level = ERROR\n' "$W" \
                >"$W/softhsm/softhsm2.conf"
        export SOFTHSM2_CONF=$W/softhsm/softhsm2.conf
        (umask 077; head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$W/pin")
        # softhsm2-util only takes PINs on its command line: this demo token is throwaway.
        softhsm2-util --init-token --free --label hwid-ca --pin "$(cat "$W/pin")" --so-pin "$(cat "$W/pin")" >/dev/null
        PORT=$(free_port)
        CA_KEY="pkcs11:token=hwid-ca;object=ca-key?pin-source=file:$W/pin"
        run "$HWID" ca init --key "$CA_KEY" --subject "/CN=hwid demo CA/O=demo" --dir "$W/ca" --listen "127.0.0.1:$PORT" \
                --http-listen "127.0.0.1:$(free_port)"
        run "$HWID" key show "$CA_KEY" | grep -E '^(type|custody|location)'
}

start_hwidd() {
        step "2. hwidd serves the CA over HTTPS; its TLS key is in the HSM too"
        "$HWIDD" --config "$W/ca/hwidd.yaml" >"$W/hwidd.log" 2>&1 &
        HWIDD_PID=$!
        for _ in $(seq 100); do
                curl -sf --cacert "$W/ca/ca.pem" "https://127.0.0.1:$PORT/healthz" >/dev/null && break
                sleep 0.1
        done
        run curl -s --cacert "$W/ca/ca.pem" "https://127.0.0.1:$PORT/healthz"
        echo
        SERVER=https://127.0.0.1:$PORT
        PIN=$("$HWID" ca hash "$W/ca/ca.pem")
        echo "CA pin: $PIN"
}

start_devices() {
        step "3. Five devices, each with its own software TPM (with an EK certificate)"
        "$SRCDIR/swtpm/swtpm-start" --count 5 --dir "$W/tpm" >/dev/null
        mapfile -t TCTIS <"$W/tpm/tcti.list"
        printf '  %s\n' "${TCTIS[@]}"
}

token() { "$HWID" token create --config "$W/ca/hwidd.yaml" "$@" | awk '/^token:/ {print $2}'; }

join() {
        local name=$1 tcti=$2 token=$3; shift 3
        printf '$ HWID_TOKEN=*** hwid join --server %s --ca-hash %s --key tpm2:file=%s/%s/device.tss2.pem --cn %s --dir %s/%s\n' \
                "$SERVER" "${PIN:0:20}..." "$W" "$name" "$name" "$W" "$name"
        HWID_TOKEN=$token "$HWID" join --server "$SERVER" --ca-hash "$PIN" --tcti "$tcti" \
                --key "tpm2:file=$W/$name/device.tss2.pem" --cn "$name" --dir "$W/$name" "$@"
}

enroll_two() {
        step "4. edge-1 and edge-2 join with bootstrap tokens (key and CSR made inside their TPMs)"
        join edge-1 "${TCTIS[0]}" "$(token --name-pattern edge-1)"
        join edge-2 "${TCTIS[1]}" "$(token --name-pattern edge-2)"
        run openssl verify -CAfile "$W/ca/ca.pem" "$W/edge-1/cert.pem" "$W/edge-2/cert.pem"
        run "$HWID" key show "tpm2:file=$W/edge-1/device.tss2.pem" --tcti "${TCTIS[0]}" | grep -E '^(custody|tpm-attributes)'
}

enroll_manual() {
        local id rc=0
        step "5. edge-3 joins under the 'manual' profile: an admin approves it"
        join edge-3 "${TCTIS[2]}" "$(token --profile manual)" --no-wait || rc=$?
        [ "$rc" = 3 ] || { echo "expected a pending request (exit 3), got $rc"; exit 1; }
        echo "(exit 3: pending)  The admin compares the key fingerprint with the device's:"
        run "$HWID" request list --config "$W/ca/hwidd.yaml"
        id=$("$HWID" request list --config "$W/ca/hwidd.yaml" | awk '$3 == "edge-3" {print $1}')
        run "$HWID" request approve --config "$W/ca/hwidd.yaml" "$id"
        join edge-3 "${TCTIS[2]}" ""
}

renew_one() {
        step "6. Renewal over mutual TLS with the TPM key; the profile asks for a new key"
        # The generated profile opens renewal in the last third of the
        # lifetime; open it now and require rotation, then reload (SIGHUP).
        sed -i '0,/window: 0.3333/s//window: 1.0\n      rotate_key: true/' "$W/ca/hwidd.yaml"
        kill -HUP "$HWIDD_PID"
        sleep 0.5
        local before after
        before=$(openssl x509 -in "$W/edge-1/cert.pem" -noout -serial)
        run "$HWID" renew --dir "$W/edge-1" --tcti "${TCTIS[0]}"
        after=$(openssl x509 -in "$W/edge-1/cert.pem" -noout -serial)
        echo "  $before -> $after"
}

revoke_one() {
        local rc=0
        step "7. edge-2 is revoked: it is in the CRL (signed in the HSM) and cannot renew"
        run "$HWID" cert revoke --config "$W/ca/hwidd.yaml" --identity edge-2 --reason key-compromise
        curl -s --cacert "$W/ca/ca.pem" -o "$W/crl.der" "$SERVER/crl"
        run openssl crl -inform DER -in "$W/crl.der" -CAfile "$W/ca/ca.pem" -noout -text |
                grep -E 'verify|Serial Number|Key Compromise'
        run "$HWID" renew --dir "$W/edge-2" --tcti "${TCTIS[1]}" || rc=$?
        echo "(exit $rc: bootstrap again)"
}

attested() {
        local cfg=$W/ca/hwidd.yaml tok
        step "8. TPM attestation: before it issues, the CA proves the key lives in a genuine TPM"
        # The TPM manufacturer's EK CA (here swtpm's local CA) and a profile
        # that requires attestation; SIGHUP applies both.
        mkdir -p "$W/ek-roots"
        cp "$W/tpm/localca/swtpm-localca-rootca-cert.pem" "$W/tpm/localca/issuercert.pem" "$W/ek-roots/"
        { printf 'attestation:\n  ek_roots: [%s]\n' "$W/ek-roots"; cat "$cfg"; } >"$cfg.new" && mv "$cfg.new" "$cfg"
        printf '  attested:\n    validity: 30d\n    subject:\n      allowed_rdns: [CN]\n    attestation: required\n' >>"$cfg"
        kill -HUP "$HWIDD_PID"
        sleep 0.5
        tok=$(token --profile attested --uses 2)
        echo "A CSR made with openssl on a laptop (a software key) is refused, token or not:"
        openssl req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/laptop.key" \
                -subj /CN=laptop -out "$W/laptop.csr" 2>/dev/null
        curl -s --cacert "$W/ca/ca.pem" -H "Authorization: Bearer $tok" -H "Content-Type: application/pkcs10" \
                --data-binary "@$W/laptop.csr" "$SERVER/csr"
        echo
        echo "edge-4 proves it: EK certificate, credential activation, TPM2_Certify of its key:"
        join edge-4 "${TCTIS[3]}" "$tok" --attest
        run openssl x509 -in "$W/edge-4/cert.pem" -noout -ext subjectAltName
        run "$HWID" cert show --config "$cfg" "$(openssl x509 -in "$W/edge-4/cert.pem" -noout -serial | cut -d= -f2)" |
                grep -E '^(identity|profile|attested)'
        echo "A factory line lists edge-5's TPM by its EK certificate: it enrolls without a token."
        tpm2_nvread -T "${TCTIS[4]}" -C 0x01c00002 -o "$W/ek-5.der" 0x01c00002 2>/dev/null
        run "$HWID" ek add --config "$cfg" --ek-cert "$W/ek-5.der" --cn edge-5 --profile attested
        join edge-5 "${TCTIS[4]}" "" --attest
}

wrap_up() {
        step "9. What the CA recorded, and what the TPMs hold"
        run "$HWID" cert list --config "$W/ca/hwidd.yaml" --all
        for t in "${TCTIS[@]}"; do
                printf 'transient objects in %s: %s\n' "$t" "$(tpm2_getcap -T "$t" handles-transient | wc -l)"
        done
        printf '\nhwidd log:\n'
        sed 's/^/  /' "$W/hwidd.log"
}

start_ca
start_hwidd
start_devices
enroll_two
enroll_manual
renew_one
revoke_one
attested
wrap_up
step "Done."
