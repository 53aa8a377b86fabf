#!/bin/bash
# ca-canonical.sh — names and keys are compared canonically, against a real
# hwidd (SoftHSM2) with the openssl CLI as the independent peer:
#   - identities ignore ASCII case: with edge-cam1 live, CN=edge-CAM1 asking
#     for DNS:edge-cam1.edge.example is refused 409 (it was issued);
#     edge-cam1's certificate reads its identity spelt EDGE-CAM1; a token
#     pattern 'plant-*' admits CN=PLANT-7; of two approved requests for
#     man-1 and MAN-1, only the first is issued;
#   - a DNS name belongs to one live certificate: cam-b asking for
#     DOOR.shared.example while cam-a holds door.shared.example is 409
#     naming cam-a; once cam-a is revoked cam-b gets it;
#   - a CSR whose EC key spells out explicit curve parameters is 400
#     bad_csr naming them, and changes nothing;
#   - a CSR with a compressed point gets a certificate whose key is the
#     named curve with the uncompressed point (openssl reads it, it is the
#     device's key, openssl verify accepts it) and which hwidd's own TLS
#     accepts for mutual TLS;
#   - rotate_key compares keys, not encodings: a renewal with the current
#     key re-encoded compressed is refused 403; a new key renews;
#   - an IP address is no DNS name: a CN 127.0.0.1 under a profile whose
#     {cn} template is added as a DNS SAN is refused 403 saying so (no
#     DNS:127.0.0.1 signed), a CSR asking for DNS:10.0.0.9 or DNS:::1 is
#     400 bad_csr, each changing nothing; the address as an IP SAN is
#     issued, and openssl reads DNS:dev-9 and IP Address:10.0.0.9.
# shellcheck source-path=SCRIPTDIR source=../lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
# shellcheck source=ca-lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/ca-lib.sh"

# csr_for KEY NAME [OPENSSL-REQ-ARGS...] — $DEV/NAME.csr for /CN=NAME with KEY.
csr_for() {
        local key=$1 name=$2
        shift 2
        openssl req -new -key "$key" -subj "/CN=$name" -out "$DEV/$name.csr" "$@" 2>"$DEV/$name.err" ||
                fail "openssl req for $name: $(cat "$DEV/$name.err")"
}

# ec_key FILE [compressed|explicit] — a P-256 key made by openssl.
ec_key() {
        local file=$1 form=${2:-}
        case $form in
        explicit) openssl ecparam -name prime256v1 -param_enc explicit -genkey -noout -out "$file" ;;
        *) openssl ecparam -name prime256v1 -genkey -noout -out "$file" ;;
        esac
        if [ "$form" = compressed ]; then
                openssl ec -in "$file" -conv_form compressed -out "$file.c" 2>/dev/null
                mv "$file.c" "$file"
        fi
}

# spki_der PEM-OR-KEY — the key's SubjectPublicKeyInfo in DER, point uncompressed, hex.
key_spki_hex() {
        openssl ec -in "$1" -pubout -conv_form uncompressed -outform DER 2>/dev/null | od -An -tx1 | tr -d ' \n'
}
cert_spki_hex() {
        openssl x509 -in "$1" -noout -pubkey | openssl pkey -pubin -outform DER | od -An -tx1 | tr -d ' \n'
}

ca_setup
add_profiles <<'YAML'
  named:
    validity: 30d
    san:
      dns: ["{cn}.edge.example"]
  shared:
    validity: 30d
    san:
      dns: ["*.shared.example"]
  rotating:
    validity: 30d
    renewal:
      window: 1.0
      rotate_key: true
  manual-named:
    validity: 30d
    approval: manual
  by-cn:
    validity: 30d
    san:
      dns: ["{cn}"]
      ip: ["10.0.0.0/8", "127.0.0.0/8", "::1/128"]
      add_dns_templates: true
YAML
hwidd_start
TOK=$(token_new --profile named --uses 10)

# --- identities ignore case; DNS names are canonical -------------------------------
ec_key "$DEV/cam1.key"
csr_for "$DEV/cam1.key" edge-cam1 -addext "subjectAltName=DNS:edge-cam1.edge.example"
post_csr "$DEV/edge-cam1" "$TOK" "$DEV/edge-cam1.csr"
expect_status 201 "$DEV/edge-cam1"
cp "$DEV/edge-cam1.body" "$DEV/edge-cam1.pem"
ec_key "$DEV/cam1b.key"
csr_for "$DEV/cam1b.key" edge-CAM1 -addext "subjectAltName=DNS:edge-cam1.edge.example"
before=$(store_state "$TOK")
post_csr "$DEV/edge-CAM1" "$TOK" "$DEV/edge-CAM1.csr"
expect_error 409 identity_has_certificate "$DEV/edge-CAM1" "edge-cam1"
assert_eq "$(store_state "$TOK")" "$before" "store after the case-folded identity"
# The node reads its own identity however it is spelt.
http "$DEV/self" GET /v1/identities/EDGE-CAM1 --cert "$DEV/edge-cam1.pem" --key "$DEV/cam1.key"
expect_status 200 "$DEV/self"
assert_eq "$(json_get "$DEV/self.body" .identity)" edge-cam1 "identity read as EDGE-CAM1"

STOK=$(token_new --profile shared --uses 10)
ec_key "$DEV/a.key"
csr_for "$DEV/a.key" cam-a -addext "subjectAltName=DNS:door.shared.example"
post_csr "$DEV/cam-a" "$STOK" "$DEV/cam-a.csr"
expect_status 201 "$DEV/cam-a"
ec_key "$DEV/b.key"
csr_for "$DEV/b.key" cam-b -addext "subjectAltName=DNS:DOOR.shared.example"
before=$(store_state "$STOK")
post_csr "$DEV/cam-b" "$STOK" "$DEV/cam-b.csr"
expect_error 409 identity_has_certificate "$DEV/cam-b" "cam-a"
assert_contains "$(json_get "$DEV/cam-b.body" .message)" "DNS name DOOR.shared.example" "the name in the 409"
assert_eq "$(store_state "$STOK")" "$before" "store after the taken DNS name"
admin cert revoke "$(serial_of "$DEV/cam-a.body")" >/dev/null
post_csr "$DEV/cam-b" "$STOK" "$DEV/cam-b.csr"
expect_status 201 "$DEV/cam-b"
openssl x509 -in "$DEV/cam-b.body" -noout -ext subjectAltName | grep -q "DNS:DOOR.shared.example" ||
        fail "cam-b's certificate lacks the name as requested"

# Token name patterns compare as identities do.
PTOK=$(token_new --profile default --name-pattern 'plant-*')
ec_key "$DEV/p.key"
csr_for "$DEV/p.key" PLANT-7
post_csr "$DEV/PLANT-7" "$PTOK" "$DEV/PLANT-7.csr"
expect_status 201 "$DEV/PLANT-7"

# Approval: two requests for one identity, spelt differently: one certificate.
MTOK=$(token_new --profile manual-named --uses 2)
ec_key "$DEV/m1.key"
ec_key "$DEV/m2.key"
csr_for "$DEV/m1.key" man-1
csr_for "$DEV/m2.key" MAN-1
post_csr "$DEV/man-1" "$MTOK" "$DEV/man-1.csr"
expect_status 202 "$DEV/man-1"
post_csr "$DEV/MAN-1" "$MTOK" "$DEV/MAN-1.csr"
expect_status 202 "$DEV/MAN-1"
id1=$(json_get "$DEV/man-1.body" .request_id)
id2=$(json_get "$DEV/MAN-1.body" .request_id)
admin request approve "$id1" >/dev/null
admin request approve "$id2" >/dev/null
http "$DEV/poll1" GET "/v1/requests/$id1"
expect_status 201 "$DEV/poll1"
http "$DEV/poll2" GET "/v1/requests/$id2"
expect_error 409 identity_has_certificate "$DEV/poll2" "identities ignore case"
assert_eq "$(cert_rows | awk 'tolower($3) == "man-1"' | wc -l)" 1 "certificates of man-1"

# --- explicit EC parameters: refused ------------------------------------------------
ec_key "$DEV/x.key" explicit
csr_for "$DEV/x.key" explicit-1
openssl req -in "$DEV/explicit-1.csr" -noout -text | grep -q "Field Type: prime-field" ||
        fail "openssl did not make a CSR with explicit parameters"
DTOK=$(token_new --profile default --uses 5)
before=$(store_state "$DTOK")
post_csr "$DEV/explicit-1" "$DTOK" "$DEV/explicit-1.csr"
expect_error 400 bad_csr "$DEV/explicit-1" "explicit curve parameters"
assert_eq "$(store_state "$DTOK")" "$before" "store after the explicit parameters"

# --- compressed point: the certificate has the canonical key ---------------------------
ec_key "$DEV/z.key" compressed
csr_for "$DEV/z.key" compressed-1
openssl req -in "$DEV/compressed-1.csr" -noout -text | grep -A1 'pub:' | tail -n 1 | grep -qE '^ +0[23]:' ||
        fail "openssl did not make a CSR with a compressed point"
post_csr "$DEV/compressed-1" "$DTOK" "$DEV/compressed-1.csr"
expect_status 201 "$DEV/compressed-1"
cp "$DEV/compressed-1.body" "$DEV/compressed-1.pem"
text=$(openssl x509 -in "$DEV/compressed-1.pem" -noout -text)
assert_contains "$text" "ASN1 OID: prime256v1" "named curve in the certificate"
assert_not_contains "$text" "Field Type" "explicit parameters in the certificate"
grep -A1 'pub:' <<<"$text" | tail -n 1 | grep -qE '^ +04:' || fail "the certificate's point is not uncompressed"
assert_eq "$(cert_spki_hex "$DEV/compressed-1.pem")" "$(key_spki_hex "$DEV/z.key")" "the certificate's key"
verify_leaf "$DEV/compressed-1.pem"
http "$DEV/zself" GET /v1/identities/compressed-1 --cert "$DEV/compressed-1.pem" --key "$DEV/z.key"
expect_status 200 "$DEV/zself"

# --- rotate_key: the same key, encoded otherwise, is the same key ----------------------
RTOK=$(token_new --profile rotating)
ec_key "$DEV/r.key"
csr_for "$DEV/r.key" rot-1
post_csr "$DEV/rot-1" "$RTOK" "$DEV/rot-1.csr"
expect_status 201 "$DEV/rot-1"
cp "$DEV/rot-1.body" "$DEV/rot-1.pem"
openssl ec -in "$DEV/r.key" -conv_form compressed -out "$DEV/r-compressed.key" 2>/dev/null
csr_for "$DEV/r-compressed.key" rot-1
cmp -s <(key_spki_hex "$DEV/r.key") <(key_spki_hex "$DEV/r-compressed.key") || fail "not the same key"
renew "$DEV/rot-again" "$DEV/rot-1.pem" "$DEV/r.key" "$DEV/rot-1.csr"
expect_error 403 forbidden "$DEV/rot-again" "reuses the current key"
ec_key "$DEV/r2.key"
csr_for "$DEV/r2.key" rot-1
renew "$DEV/rot-new" "$DEV/rot-1.pem" "$DEV/r.key" "$DEV/rot-1.csr"
expect_status 201 "$DEV/rot-new"

# --- an IP address is no DNS name -------------------------------------------------
ITOK=$(token_new --profile by-cn --uses 10)
ec_key "$DEV/ip.key"
before=$(store_state "$ITOK")
csr_for "$DEV/ip.key" 127.0.0.1
post_csr "$DEV/ip-cn" "$ITOK" "$DEV/127.0.0.1.csr"
expect_error 403 forbidden "$DEV/ip-cn" "CN '127.0.0.1' cannot be put into DNS template '{cn}' of profile 'by-cn': \
the name is an IPv4 address (its last label is a number), not a DNS name"
csr_for "$DEV/ip.key" dev-9 -addext "subjectAltName=DNS:10.0.0.9"
post_csr "$DEV/ip-san" "$ITOK" "$DEV/dev-9.csr"
expect_error 400 bad_csr "$DEV/ip-san" "DNS SAN '10.0.0.9' is an IPv4 address"
csr_for "$DEV/ip.key" dev-9 -addext "subjectAltName=DNS:::1"
post_csr "$DEV/ip6-san" "$ITOK" "$DEV/dev-9.csr"
expect_error 400 bad_csr "$DEV/ip6-san" "DNS SAN '::1' is an IPv6 address, not a DNS name"
assert_eq "$(store_state "$ITOK")" "$before" "store after the IP addresses as DNS names"
csr_for "$DEV/ip.key" dev-9 -addext "subjectAltName=IP:10.0.0.9"
post_csr "$DEV/dev-9" "$ITOK" "$DEV/dev-9.csr"
expect_status 201 "$DEV/dev-9"
assert_eq "$(openssl x509 -in "$DEV/dev-9.body" -noout -ext subjectAltName | tail -n 1 | tr -d ' ')" \
        "IPAddress:10.0.0.9,DNS:dev-9" "the SANs openssl reads"

hwidd_stop
echo "ok"
