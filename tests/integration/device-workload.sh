#!/bin/bash
# shellcheck disable=SC2119,SC2015  # lib.sh helpers take optional arguments; A && B || fail
# device-workload.sh — hwid agent --config serves workloads on Unix sockets:
# the certificate, and JWTs signed by the device key in swtpm, to the
# callers its configuration allows. Peers: curl (--unix-socket) as the
# workload, run as other users with setpriv; python3-jwcrypto as a relying
# party that has nothing but the CA; `hwid jws verify`; swtpm's command log
# counts the TPM's signatures.
# Proves:
#   - 1,000 token requests for one audience (8 at a time, on a cold cache)
#     cost the TPM exactly one Sign; each gets the same token; a second
#     audience gets a second token for one more Sign; the tokens carry aud,
#     iss and sub (the identity), the operator's claims, exp - iat = the
#     configured ttl, and x5c, x5t#S256 and x5t (SHA-1) in the header; both
#     hwid jws verify and jwcrypto (JWT: signature, exp, aud; the chain to
#     the CA) accept them;
#   - a socket configured for sub alone gives tokens without iss;
#   - GET /v1/certificate answers the certificate DIR holds, its chain and
#     the CA;
#   - the sockets get the configured mode, owner and group before anyone
#     can connect: a uid outside the group cannot even connect to a 0660
#     socket; a uid outside the allow-lists gets 403 on a 0666 one and a
#     log line (5 lines a minute per uid at most, the rest counted); a
#     caller allowed by its primary group or by a supplementary group
#     (SO_PEERGROUPS) gets its token;
#   - 400 for no audience or an unknown parameter, 403 for an audience the
#     socket does not serve, 404, 405 for POST;
#   - 400 at once, and the connection closed, for a NUL in the target
#     ("audience=billing%00"), a control character in a field, or a body
#     framed two ways (Content-Length with Transfer-Encoding, or a field
#     with whitespace before its colon or folded onto a second line): the
#     request behind it on the connection is never answered;
#   - a uid holding its share of a socket's connections (32) gets its 33rd
#     shut down as it arrives, and a log line; its others are answered,
#     and other callers are served meanwhile;
#   - the agent holds no TPM connection between signatures: hwid jws sign
#     runs on the same swtpm meanwhile;
#   - a stale socket file (agent killed with -9) is replaced; a socket a
#     running agent serves is not taken over; a regular file is not
#     replaced; configuration errors stop the agent before it starts,
#     naming the member;
#   - renewals and workload signatures take turns at the TPM: while a
#     renewal is held up (hwidd stopped mid-handshake), a token still good
#     is handed out at once and a token to make waits for the renewal;
#   - after the agent renews (with a new key), the next token carries the
#     new certificate at once (well before the old token's reuse ended),
#     and jwcrypto verifies it with the new key; meanwhile requests on a
#     socket re-signing every second all succeed;
#   - SIGTERM removes the sockets; no transient object is left in the TPM.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=device-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/device-lib.sh"
# shellcheck source=tpm-log-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/tpm-log-lib.sh"

require_tools setpriv curl
jose_peer

device_ca <<'EOF'
  fast:
    validity: 4m
    key_types: [ec-p256]
    renewal:
      window: 1.0
      rotate_key: true
EOF
swtpm_init --log
# The sockets live where other users can reach them ($T is 0700).
chmod 0711 "$T"
RUN=$T/run
mkdir -m 0755 "$RUN"
W=$T/wl
mkdir -p "$W"
NOBODY=(setpriv --reuid=nobody --regid=nogroup --clear-groups)

# claims TOKEN-FILE — the claims of a compact JWS, as JSON (no check).
claims() {
        b64url_decode "$(cut -d. -f2 "$1")"
}

# get OUT SOCKET PATH [CURL-ARGS...] — a request as root; the body in OUT,
# the status in $STATUS.
get() {
        local out=$1 sock=$2 path=$3
        shift 3
        STATUS=$(curl -sS --unix-socket "$sock" -o "$out" -w '%{http_code}' "$@" "http://localhost$path") ||
                fail "curl $path on $sock: $(cat "$out" 2>/dev/null)"
}

# get_as OUT SOCKET PATH SETPRIV-ARGS... — the same as another user; the
# body and the status (last line) in OUT; curl's exit code in $CURL_RC.
get_as() {
        local out=$1 sock=$2 path=$3
        shift 3
        CURL_RC=0
        setpriv "$@" curl -sS --unix-socket "$sock" -w '\n%{http_code}' "http://localhost$path" >"$out" 2>&1 ||
                CURL_RC=$?
}

# token_of OUT SOCKET AUDIENCE — a token (status 200) into OUT.jws.
token_of() {
        get "$1.json" "$2" "/v1/token?audience=$3"
        assert_eq "$STATUS" 200 "token for $3 on $2: $(cat "$1.json")"
        json_get "$1.json" .token >"$1.jws"
}

# signs_since LINE — how many TPM2_Sign swtpm ran since LINE of its log.
signs_since() {
        commands_since 0 "$1" | grep -c '^Sign$' || true
}

# agent_start NAME DIR CONFIG [ARGS...] — the agent serving CONFIG, once it
# has asked the CA when to renew (a TLS handshake: a TPM2_Sign of its own);
# AGENT_PID, AGENT_LOG.
agent_start() {
        local name=$1 dir=$2 config=$3
        shift 3
        AGENT_LOG=$T/agent-$name.log
        start_bg "$AGENT_LOG" "$HWID" agent --dir "$dir" --config "$config" --min-backoff 1s --max-backoff 2s "$@"
        AGENT_PID=$BG_PID
        wait_log_line "$AGENT_LOG" "next renewal at" 30 "$AGENT_PID"
}

agent_stop() {
        local rc=0
        kill -TERM "$AGENT_PID"
        wait "$AGENT_PID" || rc=$?
        assert_eq "$rc" 0 "agent exit code after SIGTERM: $(tail -n 3 "$AGENT_LOG")"
}

D1=$T/edge-1
D2=$T/edge-2
expect_exit 0 "enrolled edge-1" --multiline -- join_dev "$D1" edge-1 "$(token_new)"

cat >"$T/agent-1.json" <<EOF
{
  "workload_sockets": [
    { "path": "$RUN/open.sock", "mode": "0666", "allow_uids": [0, "root"], "allow_gids": [],
      "audiences": ["billing", "payroll"], "claims": {"site": "plant-7", "tier": 2},
      "token_ttl": 600, "reuse": 0.5, "max_connections_per_uid": 32 },
    { "path": "$RUN/users.sock", "mode": "0660", "group": "users", "allow_gids": ["users"],
      "audiences": ["billing"], "identity_claims": ["sub"] }
  ]
}
EOF

test_cost() {
        local mark i
        agent_start 1 "$D1" "$T/agent-1.json"
        mark=$(log_lines 0)
        mkdir "$W/many"
        for ((i = 1; i <= 1000; i++)); do
                printf 'url = "http://localhost/v1/token?audience=billing"\noutput = "%s/many/%d"\n' "$W" "$i"
        done >"$W/many.curl"
        curl -sS --no-progress-meter --unix-socket "$RUN/open.sock" --parallel --parallel-max 8 -K "$W/many.curl" \
                -w '%{http_code}\n' >"$W/many.status" || fail "curl: 1,000 token requests"
        assert_eq "$(sort "$W/many.status" | uniq -c | awk '{ print $1, $2 }')" "1000 200" "statuses of 1,000 requests"
        assert_eq "$(cat "$W"/many/* | json_get - .token | sort -u | wc -l)" 1 "distinct tokens in 1,000 answers"
        assert_eq "$(signs_since "$mark")" 1 "TPM2_Sign for 1,000 requests of one audience"
        json_get "$W/many/1" .token >"$W/billing.jws"
        mark=$(log_lines 0)
        token_of "$W/payroll" "$RUN/open.sock" payroll
        echo "  TPM commands for a token: $(commands_since 0 "$mark" | tr '\n' ' ')" >&2
        [ "$(cat "$W/payroll.jws")" != "$(cat "$W/billing.jws")" ] || fail "two audiences got one token"
        for ((i = 0; i < 6; i++)); do
                token_of "$W/again-$((i % 2))" "$RUN/open.sock" "$([ $((i % 2)) = 0 ] && echo billing || echo payroll)"
        done
        cmp -s "$W/again-0.jws" "$W/billing.jws" && cmp -s "$W/again-1.jws" "$W/payroll.jws" ||
                fail "the cached tokens were not handed out again"
        assert_eq "$(signs_since "$mark")" 1 "TPM2_Sign for the second audience, and 6 requests more"
        assert_eq "$(grep -c "open.sock: token for audience" "$AGENT_LOG")" 2 "signatures the agent logged"
}

test_tokens() {
        local d
        "$PY" "$PEER" verify "$W/billing.jws" "$D1/cert.pem" ES256 >/dev/null || fail "jwcrypto: the token's header"
        "$PY" "$PEER" jwt "$W/billing.jws" "$CA_DIR/ca.pem" billing >"$W/billing.claims" ||
                fail "jwcrypto, as a relying party with the CA, refuses the token"
        "$PY" "$PEER" jwt "$W/payroll.jws" "$CA_DIR/ca.pem" payroll >/dev/null || fail "jwcrypto refuses payroll's"
        expect_exit 1 "" --multiline -- "$PY" "$PEER" jwt "$W/billing.jws" "$CA_DIR/ca.pem" payroll
        run_ok "$HWID" jws verify --ca "$CA_DIR/ca.pem" --token "$W/billing.jws" >"$W/billing.out"
        d='"\(.signer.identity) \(.claims.aud) \(.claims.iss) \(.claims.sub) \(.claims.site) \(.claims.tier)'
        d+=' \(.claims.exp - .claims.iat)"'
        assert_eq "$(json_get "$W/billing.out" "$d")" "edge-1 billing edge-1 edge-1 plant-7 2 600" \
                "what hwid jws verify says of the billing token"
        assert_eq "$(json_get "$W/billing.out" .signer.serial)" "$(dir_serial "$D1")" "the token's signer"
        # Certificate and chain.
        get "$W/cert.json" "$RUN/open.sock" /v1/certificate
        assert_eq "$STATUS" 200 "GET /v1/certificate"
        json_get "$W/cert.json" .certificate | sed '/^$/d' >"$W/cert.pem"
        cmp -s "$W/cert.pem" "$D1/cert.pem" || fail "GET /v1/certificate: not DIR's certificate"
        json_get "$W/cert.json" .chain | sed '/^$/d' >"$W/chain.pem"
        cmp -s "$W/chain.pem" "$CA_DIR/ca.pem" || fail "GET /v1/certificate: the chain is not the CA"
        verify_leaf "$W/cert.pem" -CAfile "$W/chain.pem"
        assert_eq "$(json_get "$W/cert.json" '"\(.identity) \(.generation)"')" "edge-1 1" "identity and generation"
        # A socket for sub alone; callers by group.
        get_as "$W/g-primary" "$RUN/users.sock" "/v1/token?audience=billing" --reuid=nobody --regid=users \
                --clear-groups
        assert_eq "$(tail -n 1 "$W/g-primary")" 200 "a caller whose primary group is allowed: $(cat "$W/g-primary")"
        get_as "$W/g-supp" "$RUN/users.sock" "/v1/token?audience=billing" --reuid=nobody --regid=nogroup \
                --groups=users
        assert_eq "$(tail -n 1 "$W/g-supp")" 200 "a caller with an allowed supplementary group: $(cat "$W/g-supp")"
        head -n 1 "$W/g-supp" | json_get - .token >"$W/sub.jws"
        d=$(claims "$W/sub.jws")
        assert_eq "$(json_get "$d" '"\(has("iss")) \(.sub) \(.aud)"')" "false edge-1 billing" \
                "claims of a token for sub alone"
        run_ok "$HWID" jws verify --ca "$CA_DIR/ca.pem" --token "$W/sub.jws" >/dev/null
}

test_callers() {
        local i
        assert_eq "$(stat -c '%a %U %G' "$RUN/open.sock" "$RUN/users.sock" | tr '\n' '|')" \
                "666 root root|660 root users|" "the sockets' modes and owners"
        get_as "$W/n-users" "$RUN/users.sock" "/v1/token?audience=billing" "${NOBODY[@]:1}"
        assert_eq "$CURL_RC" 7 "nobody connecting to a 0660 socket of group users: $(cat "$W/n-users")"
        for ((i = 1; i <= 8; i++)); do
                get_as "$W/n-$i" "$RUN/open.sock" "/v1/token?audience=billing" "${NOBODY[@]:1}"
                assert_eq "$(tail -n 1 "$W/n-$i")" 403 "nobody on the open socket: $(cat "$W/n-$i")"
        done
        assert_eq "$(sed '$d' "$W/n-1" | json_get - .error)" forbidden "the refusal's error slug"
        assert_contains "$(cat "$W/n-1")" "uid 65534 (gid 65534) may not use this socket"
        assert_not_contains "$(cat "$W/n-1")" "eyJ" "a refusal holds no token"
        assert_eq "$(grep -c "open.sock: refused uid 65534 gid 65534 (pid [0-9]*): not in allow_uids" "$AGENT_LOG")" 5 \
                "refusals logged for 8 refused requests"
        get_as "$W/n-cert" "$RUN/open.sock" /v1/certificate "${NOBODY[@]:1}"
        assert_eq "$(tail -n 1 "$W/n-cert")" 403 "nobody asking for the certificate"
        # Bad requests from an allowed caller.
        get "$W/bad" "$RUN/open.sock" "/v1/token"
        assert_eq "$STATUS $(json_get "$W/bad" .error)" "400 invalid_argument" "no audience"
        get "$W/bad" "$RUN/open.sock" "/v1/token?audience=billing&scope=all"
        assert_eq "$STATUS" 400 "an unknown parameter"
        assert_contains "$(cat "$W/bad")" "unknown or repeated parameter 'scope'"
        get "$W/bad" "$RUN/open.sock" "/v1/token?audience=billing&audience=payroll"
        assert_eq "$STATUS" 400 "two audiences"
        get "$W/bad" "$RUN/open.sock" "/v1/token?audience=hr"
        assert_eq "$STATUS" 403 "an audience the socket does not serve"
        assert_contains "$(cat "$W/bad")" "audience 'hr' is not served on $RUN/open.sock"
        get "$W/bad" "$RUN/open.sock" "/v1/token?audience=billing" -X POST -d x
        assert_eq "$STATUS" 405 "POST"
        get "$W/bad" "$RUN/open.sock" "/v1/tokens"
        assert_eq "$STATUS" 404 "an unknown path"
}

# raw SOCKET REQUEST [SETPRIV-ARGS...] — REQUEST (a printf format) written
# on SOCKET at once, as root or as SETPRIV-ARGS say; prints what came back
# until the agent closed the connection, or 3 s passed (it kept it open).
RAW_PY='
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(3)
s.connect(sys.argv[1])
s.sendall(sys.stdin.buffer.read())
got = b""
try:
    while True:
        part = s.recv(65536)
        if not part:
            break
        got += part
except OSError:
    pass
sys.stdout.write(got.decode(errors="replace").replace("\r", ""))'
raw() {
        local sock=$1 req=$2
        shift 2
        # shellcheck disable=SC2059  # the request is the format
        if [ $# -gt 0 ]; then
                printf "$req" | setpriv "$@" "$PY" -c "$RAW_PY" "$sock"
        else
                printf "$req" | "$PY" -c "$RAW_PY" "$sock"
        fi
}

# What HTTP does not allow is 400 as soon as the headers are in, and the
# connection closed: a NUL in the target (the audience "billing%00x" is
# not "billing"), a body framed two ways or by a field with whitespace
# before its colon or folded onto a second line (the request behind it is
# never answered: no smuggling).  A caller not allowed still gets its 403 first.
test_malformed() {
        local out req smuggled='GET /v1/certificate HTTP/1.1\r\nHost: x\r\n\r\n'
        for req in 'GET /v1/token?audience=billing%%00 HTTP/1.1\r\nHost: x\r\n\r\n' \
                'GET /v1/token?audience=billing%%00x HTTP/1.1\r\nHost: x\r\n\r\n' \
                'GET /v1/token%%00x?audience=billing HTTP/1.1\r\nHost: x\r\n\r\n' \
                'GET /v1/token?audience=billing HTTP/1.1\r\nHost: x\r\nX-A: a\001b\r\n\r\n' \
                "GET /v1/token?audience=billing HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n$smuggled" \
                "GET /v1/token?audience=billing HTTP/1.1\r\nHost: x\r\nContent-Length : 41\r\n\r\n$smuggled" \
                "GET /v1/token?audience=billing HTTP/1.1\r\nHost: x\r\nTransfer-Encoding\t: chunked\r\n\r\n0\r\n\r\n$smuggled" \
                "GET /v1/token?audience=billing HTTP/1.1\r\nHost: x\r\nContent-Length:\r\n 41\r\n\r\n$smuggled"; do
                out=$(raw "$RUN/open.sock" "$req")
                assert_eq "$(head -n 1 <<<"$out")" "HTTP/1.1 400 Bad Request" "$req"
                assert_contains "$out" '"error":"invalid_argument"' "$req"
                assert_contains "$out" "Connection: close" "$req"
                assert_eq "$(grep -c '^HTTP/1.1' <<<"$out")" 1 "answers to $req"
                assert_not_contains "$out" "eyJ" "a refusal holds no token ($req)"
        done
        out=$(raw "$RUN/open.sock" 'GET /v1/token?audience=billing%%00 HTTP/1.1\r\nHost: x\r\n\r\n' "${NOBODY[@]:1}")
        assert_eq "$(head -n 1 <<<"$out")" "HTTP/1.1 403 Forbidden" "nobody's malformed request"
        out=$(raw "$RUN/open.sock" 'GET /v1/token?audience=billing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n')
        assert_eq "$(head -n 1 <<<"$out")" "HTTP/1.1 200 OK" "a sound request, raw"
}

# A uid's share of connections: uid 4242 (allowed nowhere) holds 32, its
# share of open.sock; a 33rd is shut down as it arrives, and logged, while
# the first still gets its answer (403) and root is served meanwhile.
test_share() {
        local holder rc=0
        setpriv --reuid=4242 --regid=4242 --clear-groups "$PY" -c '
import socket, sys, time
def conn():
    s = socket.socket(socket.AF_UNIX)
    s.connect(sys.argv[1])
    return s
def ask(s):
    try:  # a connection shut down may be so before or after the request is sent
        s.sendall(b"GET /v1/certificate HTTP/1.1\r\nHost: x\r\n\r\n")
        return s.recv(4096)
    except (BrokenPipeError, ConnectionResetError):
        return b""
held = [conn() for i in range(32)]
time.sleep(1)
print("33rd:", len(ask(conn())))
print("1st:", ask(held[0]).split(b"\r\n")[0].decode(), flush=True)
time.sleep(4)
' "$RUN/open.sock" >"$W/share.out" 2>&1 &
        holder=$!
        track_pid "$holder"
        wait_log_line "$W/share.out" "^1st:" 30 "$holder"
        token_of "$W/share-root" "$RUN/open.sock" billing
        wait "$holder" || rc=$?
        assert_eq "$rc" 0 "uid 4242's connections: $(cat "$W/share.out")"
        assert_eq "$(tr '\n' '|' <"$W/share.out")" "33rd: 0|1st: HTTP/1.1 403 Forbidden|" "uid 4242's 33rd and 1st connections"
        assert_contains "$(cat "$AGENT_LOG")" \
                "open.sock: refused uid 4242 gid 4242 (pid $holder): it has max_connections_per_uid connections open already"
}

# Another program signs on the same swtpm while the agent runs: the agent
# holds no TPM connection between its signatures.
test_tpm_shared() {
        timeout 30 "$HWID" jws sign --dir "$D1" --claims '{"aud":"cli"}' >"$W/cli.jws" ||
                fail "hwid jws sign while the agent serves"
        run_ok "$HWID" jws verify --ca "$CA_DIR/ca.pem" --token "$W/cli.jws" >/dev/null
}

test_socket_files() {
        local rc=0
        # A socket served by a running agent is not taken over.
        expect_exit 1 "$RUN/open.sock: another program is serving on it" -- \
                "$HWID" agent --dir "$D1" --config "$T/agent-1.json" --once
        # kill -9 leaves the socket files: the next agent replaces them.
        kill -KILL "$AGENT_PID"
        wait "$AGENT_PID" || rc=$?
        assert_eq "$rc" 137 "the killed agent"
        [ -S "$RUN/open.sock" ] || fail "kill -9 removed the socket?"
        agent_start 1b "$D1" "$T/agent-1.json"
        token_of "$W/after-kill" "$RUN/open.sock" billing
        agent_stop
        [ ! -e "$RUN/open.sock" ] && [ ! -e "$RUN/users.sock" ] || fail "the agent left its sockets behind"
        # A file that is no socket is left alone.
        echo keep >"$RUN/open.sock"
        expect_exit 1 "$RUN/open.sock exists and is not a socket: not replaced" -- \
                "$HWID" agent --dir "$D1" --config "$T/agent-1.json"
        assert_eq "$(cat "$RUN/open.sock")" keep "the file in the way"
        rm "$RUN/open.sock"
        [ ! -e "$RUN/users.sock" ] || fail "a failed start left a socket"
}

# bad_config JSON WHY — the agent refuses it before it starts.
bad_config() {
        printf '%s\n' "$1" >"$T/bad.json"
        expect_exit 1 "$2" -- "$HWID" agent --dir "$D1" --config "$T/bad.json"
        assert_not_contains "$(cat "$T/last.err")" "watching" "the agent started on a bad configuration"
}

test_config_errors() {
        local s='"path": "'$RUN'/x.sock", "allow_uids": [0]'
        bad_config "{\"workload_sockets\": [{$s, \"audiences\": [\"a\"], \"colour\": 1}]}" \
                "bad.json: workload_sockets[0]: unknown member 'colour'"
        bad_config "{\"workload_sockets\": [{$s, \"audiences\": [\"a\"], \"claims\": {\"aud\": \"x\"}}]}" \
                "workload_sockets[0].claims: may not set 'aud'"
        bad_config "{\"workload_sockets\": [{$s, \"audiences\": [\"a\"], \"owner\": \"no-such-user\"}]}" \
                "workload_sockets[0].owner: no user 'no-such-user' on this system"
        [ ! -e "$RUN/x.sock" ] || fail "a refused configuration left a socket"
}

cat >"$T/agent-2.json" <<EOF
{
  "workload_sockets": [
    { "path": "$RUN/edge-2.sock", "mode": "0600", "allow_uids": [0], "audiences": ["billing", "fresh"] },
    { "path": "$RUN/hot.sock", "mode": "0600", "allow_uids": [0], "audiences": ["a", "b"],
      "token_ttl": 10, "reuse": 0.1 }
  ]
}
EOF

# hot_requests — tokens for a and b on hot.sock (a new signature each
# second), back to back until $W/stop-hot exists; statuses in $W/hot.status.
hot_requests() {
        local a
        until [ -e "$W/stop-hot" ]; do
                for a in a b; do
                        curl -s --unix-socket "$RUN/hot.sock" -o /dev/null -w '%{http_code}\n' \
                                "http://localhost/v1/token?audience=$a" || echo "curl exit $?"
                done
                sleep 0.05
        done >"$W/hot.status"
}

# The agent renews (a new key) while requests on hot.sock keep it signing.
# The renewal is held up first (hwidd stopped with SIGSTOP: its TLS
# handshake waits), with the TPM's turn taken: a token still good is
# handed out meanwhile, one to make waits for the renewal.
test_renewal() {
        local serial0 serial1 reuse_ends hot due rc=0
        expect_exit 0 "enrolled edge-2" --multiline -- join_dev "$D2" edge-2 "$(token_new --profile fast)"
        serial0=$(dir_serial "$D2")
        agent_start 2 "$D2" "$T/agent-2.json" --renew-at 0.1 --jitter 0
        token_of "$W/r-before" "$RUN/edge-2.sock" billing
        hot_requests &
        hot=$!
        track_pid "$hot"
        due=$(date -d "$(sed -n 's/.*next renewal at \([0-9TZ:-]*\) .*/\1/p' "$AGENT_LOG" | head -n 1)" +%s)
        kill -STOP "$HWIDD_PID"
        [ "$(date +%s)" -lt "$due" ] || fail "too slow: the renewal was due before hwidd was stopped"
        sleep $((due + 2 - $(date +%s)))
        get "$W/r-during.json" "$RUN/edge-2.sock" "/v1/token?audience=billing" --max-time 5
        assert_eq "$STATUS" 200 "a token still good, during the renewal"
        cmp -s "$W/r-during.json" "$W/r-before.json" || fail "not the token from before: $(cat "$W/r-during.json")"
        rc=0
        curl -sS --unix-socket "$RUN/edge-2.sock" --max-time 3 "http://localhost/v1/token?audience=fresh" \
                >"$W/r-fresh.json" 2>&1 || rc=$?
        assert_eq "$rc" 28 "a token to make during the renewal (curl timed out waiting): $(cat "$W/r-fresh.json")"
        kill -CONT "$HWIDD_PID"
        wait_log_line "$AGENT_LOG" "edge-2 renewed: generation 2" 60 "$AGENT_PID"
        token_of "$W/r-after" "$RUN/edge-2.sock" billing
        reuse_ends=$(json_get "$W/r-before.json" '.issued_at + ((.expires_at - .issued_at) / 2 | floor)')
        [ "$(date +%s)" -lt "$reuse_ends" ] || fail "the renewal came after the first token's reuse ended"
        serial1=$(dir_serial "$D2")
        [ "$serial1" != "$serial0" ] || fail "the renewal kept the serial"
        for t in r-before r-after; do
                run_ok "$HWID" jws verify --ca "$CA_DIR/ca.pem" --token "$W/$t.jws" >"$W/$t.out"
        done
        assert_eq "$(json_get "$W/r-before.out" .signer.serial) $(json_get "$W/r-after.out" .signer.serial)" \
                "$serial0 $serial1" "the tokens' certificates before and after the renewal"
        "$PY" "$PEER" verify "$W/r-after.jws" "$D2/cert.pem" ES256 >/dev/null ||
                fail "jwcrypto: the new token is not signed by the new key"
        "$PY" "$PEER" jwt "$W/r-after.jws" "$CA_DIR/ca.pem" billing >/dev/null || fail "jwcrypto refuses the new token"
        token_of "$W/r-fresh" "$RUN/edge-2.sock" fresh
        sleep 2 # hot.sock signs on after the renewal
        touch "$W/stop-hot"
        rc=0
        wait "$hot" || rc=$?
        assert_eq "$rc" 0 "the requests on hot.sock"
        [ "$(grep -c . "$W/hot.status")" -ge 20 ] || fail "only $(grep -c . "$W/hot.status") requests on hot.sock"
        assert_eq "$(sort -u "$W/hot.status" | tr '\n' ' ')" "200 " "statuses on hot.sock during the renewal"
        [ "$(grep -c "hot.sock: token for audience" "$AGENT_LOG")" -ge 6 ] ||
                fail "hot.sock did not keep signing: $(grep -c "hot.sock: token" "$AGENT_LOG") signatures"
        assert_not_contains "$(cat "$AGENT_LOG")" "cannot sign a token" "the agent's log"
        agent_stop
}

test_cost
test_tokens
test_callers
test_malformed
test_share
test_tpm_shared
test_socket_files
test_config_errors
test_renewal
assert_no_transient
echo "device-workload: all checks passed"
