#!/bin/bash
# token-key.sh — bootstrap tokens derived with the CA's token key
# (ca.token_key: an HMAC key in the HSM that never leaves it), so that the
# store holds nothing a token can be spent with (issue 36). CA key and
# token key in SoftHSM2, behind the fault shim, which counts the token
# key's C_SignInit calls (its HMACs). Proves:
#   - hwid ca init makes the token key next to the CA key (label
#     ca-key-tokens) and names it in hwidd.yaml; SoftHSM2 reports it
#     sensitive, never extractable, made on the token, a 32-byte generic
#     secret for signing (pkcs11-tool), refuses its value (p11-read-secret),
#     and hwid ca token-key reports the same custody;
#   - a token printed by `hwid token create` enrolls over the native API and
#     over EST (HTTP Basic); a wrong secret for its id is refused as an
#     unknown id is (401);
#   - the store (SQLite file and WAL, or a pg_dump) holds neither the
#     secret, nor its SHA-256 (raw or hex): only the token's nonce;
#   - an unknown token id costs the HSM nothing; a known one one HMAC the
#     first time its secret is checked, over the native API or EST, and
#     none after that (hwidd remembers a salted hash of it in memory,
#     service/ca/token-memo.h), a wrong secret of it included (refused);
#     after a restart one HMAC again; a legacy token none; /metrics counts
#     the checks by device and from memory (hwid_token_checks_total);
#   - /readyz checks the token key (an HMAC): 503 naming token_key while
#     it fails, 200 again once it works;
#   - a legacy token (its row as hwid stored one before: SHA-256 of the
#     secret) still enrolls, and is refused as expired once it has expired;
#   - the row of a token copied into another CA's store (that CA has its own
#     token key) does not enroll there, where that CA's own tokens do;
#   - a CA whose hwidd.yaml names no token key (as before this change):
#     hwidd starts, legacy tokens enroll, a derived token gets a clear 500,
#     `hwid token create` fails naming hwid ca token-key, which makes a key
#     and prints the line to add; with it, new tokens enroll and those
#     derived with the old key no longer do.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"
# shellcheck source=est-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/est-lib.sh"
# shellcheck source=ops-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ops-lib.sh"

require_tools pkcs11-tool python3
: "${HWID_P11_SHIM:=$BUILDDIR/tests/p11-fault-shim.so}"
[ -f "$HWID_P11_SHIM" ] || fail "fault shim not built: $HWID_P11_SHIM"
: "${HWID_P11_READ_SECRET:=$BUILDDIR/tests/p11-read-secret}"
[ -x "$HWID_P11_READ_SECRET" ] || fail "p11-read-secret not built: $HWID_P11_READ_SECRET"
HWID_SHIM_TARGET=$(_lib_find_softhsm_module) || missing_hardware "the SoftHSM2 module libsofthsm2.so"
export HWID_SHIM_TARGET
export HWID_SHIM_CONTROL=$T/shim.ctl

# --- helpers ------------------------------------------------------------------

# count_hmacs — the shim counts the token key's C_SignInit calls from 0.
count_hmacs() {
        echo "count 0 ca-key-tokens" >"$HWID_SHIM_CONTROL.new"
        mv "$HWID_SHIM_CONTROL.new" "$HWID_SHIM_CONTROL"
}

# hmacs — how many since count_hmacs.
hmacs() {
        awk '$1 == "count" { print $2 }' "$HWID_SHIM_CONTROL"
}

# sha256_hex TEXT — lower-case hex SHA-256 of TEXT (no newline).
sha256_hex() {
        printf '%s' "$1" | openssl dgst -sha256 -r | cut -c1-64
}

# ascii_hex TEXT — the bytes of TEXT in hex.
ascii_hex() {
        printf '%s' "$1" | od -An -tx1 -v | tr -d ' \n'
}

# sql_blob HEX — a binary literal in the store's SQL dialect.
sql_blob() {
        if [ -n "${PG_URI:-}" ]; then echo "'\\x$1'::bytea"; else echo "x'$1'"; fi
}

# blob_hex COLUMN ID — a token's binary column in hex, read from the store.
blob_hex() {
        if [ -n "${PG_URI:-}" ]; then
                store_sql "SELECT encode($1, 'hex') FROM tokens WHERE id = '$2'"
        else
                store_sql "SELECT lower(hex($1)) FROM tokens WHERE id = '$2'"
        fi
}

# store_holds HEX — whether the store holds these bytes anywhere, as
# they are or written in hex (as pg_dump prints a bytea): in the SQLite
# file and its WAL, or in what pg_dump prints of the database.
store_holds() {
        local files=()
        if [ -n "${PG_URI:-}" ]; then
                store_dump >"$T/dump" || fail "pg_dump failed"
                files=("$T/dump")
        else
                files=("$CA_DIR/hwid.db")
                [ ! -e "$CA_DIR/hwid.db-wal" ] || files+=("$CA_DIR/hwid.db-wal")
        fi
        python3 -c 'import sys
data = b"".join(open(f, "rb").read() for f in sys.argv[2:])
want = sys.argv[1].lower()
sys.exit(0 if bytes.fromhex(want) in data or want.encode() in data.lower() else 1)' "$1" "${files[@]}"
}

# store_holds_none_of TOKEN — neither the secret, its SHA-256 nor the hex
# of that is in the store.
store_holds_none_of() {
        local secret=${1#*.} sha
        sha=$(sha256_hex "$secret")
        ! store_holds "$(ascii_hex "$secret")" || fail "the store holds the secret of ${1%%.*}"
        ! store_holds "$sha" || fail "the store holds the SHA-256 of the secret of ${1%%.*}"
        ! store_holds "$(ascii_hex "$sha")" || fail "the store holds the hex SHA-256 of the secret of ${1%%.*}"
}

# random_secret — 24 characters of the secrets' alphabet [a-z0-9].
random_secret() {
        openssl rand -hex 12
}

# add_legacy_token ID SECRET — a token row as hwid stored one before token
# keys: the SHA-256 of its secret, no nonce; 5 uses, a day to live.
add_legacy_token() {
        local now
        now=$(date +%s)
        store_sql "INSERT INTO tokens (id, secret_hash, profile, created_at, expires_at, uses_total, uses_left)
                   VALUES ('$1', $(sql_blob "$(sha256_hex "$2")"), 'default', $now, $((now + 86400)), 5, 5)"
}

# est_enroll NAME TOKEN — EST simpleenroll of a new CSR for NAME with TOKEN
# as HTTP Basic credentials; CODE; on 200 the certificate is $DEV/NAME.pem.
est_enroll() {
        make_csr "$1"
        openssl req -in "$DEV/$1.csr" -outform DER | openssl base64 -e >"$DEV/$1.b64"
        http "$DEV/$1" POST "$EST/simpleenroll" --user "${2%%.*}:${2#*.}" -H "Content-Type: application/pkcs10" \
                --data-binary "@$DEV/$1.b64"
}

# use_ca A|B — the CA the helpers of ca-lib.sh work on.
use_ca() {
        CA_DIR=${CA_DIRS[$1]}
        CFG=$CA_DIR/hwidd.yaml
        PORT=${PORTS[$1]}
        URL=https://127.0.0.1:$PORT
        if [ -n "${PG_URI:-}" ]; then
                PG_DB=${PG_DBS[$1]}
                PG_URI=${PG_URIS[$1]}
        fi
}

declare -A CA_DIRS PORTS PG_DBS PG_URIS

# --- the tests ----------------------------------------------------------------

test_key_made_by_ca_init() {
        local out
        grep -q "^  token_key: \"pkcs11:.*object=ca-key-tokens" "$CFG" ||
                fail "hwid ca init named no token key next to the CA key: $(grep token_key "$CFG")"
        grep -q "^  token_key: .*module-path=.*p11-fault-shim.so" "$CFG" || fail "the token key is not behind the shim"
        assert_contains "$(cat "$T/ca-init.out")" "created the token key" "hwid ca init's report"
        # (OpenSC lists a secret key's encrypt, decrypt, wrap and unwrap as
        # its usage: it has none of them.)
        assert_eq "$(pkcs11-tool --module "$SOFTHSM_MODULE" --token-label ca --login --pin "$(cat "$T/pin")" \
                --list-objects --type secrkey 2>/dev/null | tr -s ' ' | grep -vE '^ ?ID:')" \
                "Secret Key Object; Generic secret length 32
 label: ca-key-tokens
 Usage: none
 Access: sensitive, always sensitive, never extractable, local" "the token key as SoftHSM2 reports it"
        "$HWID_P11_READ_SECRET" "$SOFTHSM_MODULE" ca ca-key-tokens "$T/pin" >"$T/secret.out" 2>&1 ||
                fail "p11-read-secret on the token key: $(tr '\n' ';' <"$T/secret.out")"
        assert_contains "$(cat "$T/secret.out")" "refused (CKR_ATTRIBUTE_SENSITIVE)" "the token key's value refused"
        assert_not_contains "$(cat "$T/secret.out")" READABLE "the token key's value handed out"
        out=$(admin ca token-key)
        assert_contains "$out" "using the token key pkcs11:" "hwid ca token-key on a CA that has one"
        assert_contains "$out" "custody: sensitive=yes always-sensitive=yes extractable=no never-extractable=yes local=yes value-readable=no" "custody of the token key"
        assert_contains "$out" "names it (ca.token_key)" "hwid ca token-key finds the key configured"
}

test_enroll_and_store() {
        local tok secret id
        tok=$(token_new --uses 5)
        id=${tok%%.*}
        secret=${tok#*.}
        [ ${#secret} = 24 ] || fail "a token secret of ${#secret} characters: $tok"
        enroll tk-native "$tok"
        expect_status 201 "$DEV/tk-native"
        verify_leaf "$DEV/tk-native.pem"
        est_enroll tk-est "$tok"
        expect_est_cert "$DEV/tk-est" tk-est
        enroll tk-wrong "$id.$(random_secret)"
        expect_error 401 bad_token "$DEV/tk-wrong" "unknown bootstrap token"
        store_holds_none_of "$tok"
        assert_eq "$(store_sql "SELECT length(nonce) FROM tokens WHERE id = '$id' AND secret_hash IS NULL")" 32 \
                "what the store keeps of a derived token"
        store_holds "$(blob_hex nonce "$id")" || fail "store_holds does not find the nonce it must find"
        TOK=$tok
}

test_hmac_cost() {
        local tok id secret last
        tok=$(token_new --uses 5)
        id=${tok%%.*}
        count_hmacs
        scrape "$T/cost-m0"
        enroll cost-unknown "zz9zz9.$(random_secret)"
        expect_error 401 bad_token "$DEV/cost-unknown" "unknown bootstrap token"
        assert_eq "$(hmacs)" 0 "HMACs for an unknown token id"
        enroll cost-wrong "$id.$(random_secret)"
        expect_error 401 bad_token "$DEV/cost-wrong"
        assert_eq "$(hmacs)" 1 "HMACs for a known id with a wrong secret, never checked before"
        enroll cost-native "$tok"
        expect_status 201 "$DEV/cost-native"
        assert_eq "$(hmacs)" 2 "HMACs for the token's first enrollment (over the native API)"
        est_enroll cost-est "$tok"
        expect_est_cert "$DEV/cost-est" cost-est
        enroll cost-again "$tok"
        expect_status 201 "$DEV/cost-again"
        assert_eq "$(hmacs)" 2 "HMACs for the same token again, over EST and the native API (remembered)"
        secret=${tok#*.}
        last=x
        [ "${secret: -1}" != x ] || last=y
        enroll cost-wrong-again "$id.${secret:0:23}$last"
        expect_error 401 bad_token "$DEV/cost-wrong-again" "unknown bootstrap token"
        assert_eq "$(hmacs)" 2 "HMACs for a wrong secret (its last character) of a remembered token"
        scrape "$T/cost-m1"
        assert_eq "$(metric_delta "$T/cost-m0" "$T/cost-m1" 'hwid_token_checks_total{by="device"}')" 2 \
                "token checks by the device in /metrics"
        assert_eq "$(metric_delta "$T/cost-m0" "$T/cost-m1" 'hwid_token_checks_total{by="memory"}')" 3 \
                "token checks from memory in /metrics"
        # A hwidd restarted has forgotten: one HMAC, then none again.
        hwidd_stop
        hwidd_start
        count_hmacs
        enroll cost-restart "$tok"
        expect_status 201 "$DEV/cost-restart"
        enroll cost-restart-2 "$tok"
        expect_status 201 "$DEV/cost-restart-2"
        assert_eq "$(hmacs)" 1 "HMACs for two enrollments with the token after a restart"
}

# /readyz proves the token key by an HMAC: one that fails makes it 503
# naming token_key (the CA key's check, same token, still passing), and it
# is ready again once the key works.
test_readyz() {
        local i
        echo "fail 0x30 100000 ca-key-tokens" >"$HWID_SHIM_CONTROL.new"
        mv "$HWID_SHIM_CONTROL.new" "$HWID_SHIM_CONTROL"
        sleep 1.1 # the verdict is kept for a second
        http "$T/r1" GET /readyz
        assert_eq "$CODE" 503 "/readyz while the token key fails"
        assert_eq "$(json_get "$T/r1.body" .checks.token_key.ok)" false "/readyz's token_key check"
        assert_eq "$(json_get "$T/r1.body" .checks.ca_key.ok)" true "/readyz's ca_key check, the token key failing"
        echo "fail 0x30 0" >"$HWID_SHIM_CONTROL.new"
        mv "$HWID_SHIM_CONTROL.new" "$HWID_SHIM_CONTROL"
        for ((i = 0; i < 50; i++)); do
                sleep 0.2
                http "$T/r2" GET /readyz
                [ "$CODE" = 200 ] && break
        done
        assert_eq "$CODE" 200 "/readyz once the token key works again ($(cat "$T/r2.body"))"
        assert_eq "$(json_get "$T/r2.body" .checks.token_key.ok)" true "/readyz's token_key check, working"
}

test_legacy() {
        local secret
        secret=$(random_secret)
        add_legacy_token leg001 "$secret"
        store_holds "$(sha256_hex "$secret")" || fail "store_holds does not find a legacy token's hash"
        count_hmacs
        enroll leg-1 "leg001.$secret"
        expect_status 201 "$DEV/leg-1"
        verify_leaf "$DEV/leg-1.pem"
        est_enroll leg-est "leg001.$secret"
        expect_est_cert "$DEV/leg-est" leg-est
        enroll leg-wrong "leg001.$(random_secret)"
        expect_error 401 bad_token "$DEV/leg-wrong" "unknown bootstrap token"
        assert_eq "$(hmacs)" 0 "HMACs for a legacy token"
        store_sql "UPDATE tokens SET expires_at = $(($(date +%s) - 1)) WHERE id = 'leg001'"
        enroll leg-2 "leg001.$secret"
        expect_error 401 bad_token "$DEV/leg-2" "has expired"
}

# CA B: its own token (so its own CA key and token key), store and port.
# (Not labelled "ca...": pkcs11-tool --token-label ca would pick it too.)
setup_ca_b() {
        local pg_db=${PG_DB:-} pg_uri=${PG_URI:-}
        softhsm_init other
        CA_DIRS[B]=$T/cab
        PORTS[B]=$(free_port)
        run_ok "$HWID" ca init --key "pkcs11:token=other;object=ca-key?pin-source=file:$T/softhsm/other.pin" \
                --subject "/CN=hwid test CA B" --dir "$T/cab" --listen "127.0.0.1:${PORTS[B]}" \
                --http-listen "127.0.0.1:$(free_port)" >"$T/cab-init.out"
        if [ -n "$pg_uri" ]; then
                CA_DIR=$T/cab ca_use_pg
                PG_DBS[B]=$PG_DB
                PG_URIS[B]=$PG_URI
                PG_DB=$pg_db
                PG_URI=$pg_uri
        fi
}

test_row_copied_to_other_ca() {
        local tok id cols own
        tok=$(token_new)
        id=${tok%%.*}
        cols=$(store_sql "SELECT profile, created_at, expires_at FROM tokens WHERE id = '$id'")
        IFS='|' read -r -a cols <<<"$cols"
        local nonce
        nonce=$(blob_hex nonce "$id")
        [ ${#nonce} = 64 ] || fail "no nonce read for $id: '$nonce'"
        hwidd_stop
        use_ca B
        admin token list >/dev/null # makes B's store (a new PostgreSQL database has no tables yet)
        store_sql "INSERT INTO tokens (id, nonce, profile, created_at, expires_at, uses_total, uses_left)
                   VALUES ('$id', $(sql_blob "$nonce"), '${cols[0]}', ${cols[1]}, ${cols[2]}, 1, 1)"
        hwidd_start
        enroll copied "$tok"
        expect_error 401 bad_token "$DEV/copied" "unknown bootstrap token"
        own=$(token_new)
        enroll own-b "$own"
        expect_status 201 "$DEV/own-b"
        hwidd_stop
        use_ca A
}

test_ca_without_token_key() {
        local out secret rc=0 line
        secret=$(random_secret)
        sed -i '/^  token_key: /d' "$CFG"
        hwidd_start
        grep -q "no token key (ca.token_key)" "$HWIDD_LOG" || fail "hwidd said nothing of its missing token key"
        add_legacy_token leg002 "$secret"
        enroll leg-3 "leg002.$secret"
        expect_status 201 "$DEV/leg-3"
        enroll no-key "$TOK"
        expect_error 500 config "$DEV/no-key" "names none (ca.token_key)"
        out=$("$HWID" token create --config "$CFG" 2>&1) || rc=$?
        assert_eq "$rc" 1 "exit code of hwid token create without a token key"
        assert_contains "$out" "hwid ca token-key --config FILE" "hwid token create without a token key"
        hwidd_stop
        # A new key (the old one removed from the token): what ca token-key prints goes in.
        pkcs11-tool --module "$SOFTHSM_MODULE" --token-label ca --login --pin "$(cat "$T/pin")" \
                --delete-object --type secrkey --label ca-key-tokens >/dev/null 2>&1 ||
                fail "pkcs11-tool cannot remove the token key"
        [ -z "$(pkcs11-tool --module "$SOFTHSM_MODULE" --token-label ca --login --pin "$(cat "$T/pin")" \
                --list-objects --type secrkey 2>/dev/null)" ] || fail "the token key is still on the token"
        out=$(admin ca token-key)
        assert_contains "$out" "created the token key" "hwid ca token-key on a CA without one"
        line=$(grep '^  token_key: ' <<<"$out") || fail "hwid ca token-key printed no line to add: $out"
        # under ca: (the first "  key:" line; tls: has one too)
        awk -v add="$line" '{ print } /^  key: / && !done { print add; done = 1 }' "$CFG" >"$CFG.new"
        mv "$CFG.new" "$CFG"
        hwidd_start
        enroll new-key "$(token_new)"
        expect_status 201 "$DEV/new-key"
        enroll old-key "$TOK"
        expect_error 401 bad_token "$DEV/old-key" "unknown bootstrap token"
        hwidd_stop
}

ca_setup --key "pkcs11:token=ca;object=ca-key?module-path=$HWID_P11_SHIM&pin-source=file:$T/pin"
CA_DIRS[A]=$CA_DIR
PORTS[A]=$PORT
PG_DBS[A]=${PG_DB:-}
PG_URIS[A]=${PG_URI:-}
test_key_made_by_ca_init
public_metrics
hwidd_start
test_enroll_and_store
test_hmac_cost
test_readyz
test_legacy
setup_ca_b
test_row_copied_to_other_ca
test_ca_without_token_key
echo "token-key: all checks passed"
