#!/bin/bash
# Regenerates the seed corpus of fuzz-csr (tests/fuzz/corpus/csr) with the
# openssl CLI: valid requests of every key type hwid accepts and of some it
# refuses, and edge cases of names, extensions and encodings.  Each seed is
# one mode byte (see fuzz-csr.c: 0 as sent, 4 re-signed with P-256) and the
# request.  Run from anywhere; rewrites the directory.
set -euo pipefail
out=$(cd "$(dirname "$0")" && pwd)/corpus/csr
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rm -rf "$out" && mkdir -p "$out"

key() { # NAME ALG [pkeyopts...]
        local n=$1 a=$2
        shift 2
        openssl genpkey -algorithm "$a" "$@" -out "$tmp/$n.key" 2>/dev/null
}
# seed NAME KEY SUBJECT [req options...] — DER, as sent and re-signable.
seed() {
        local n=$1 k=$2 s=$3
        shift 3
        openssl req -new -key "$tmp/$k.key" -subj "$s" -outform DER -out "$tmp/$n.der" "$@" 2>/dev/null
        { printf '\000'; cat "$tmp/$n.der"; } >"$out/$n"
        { printf '\004'; cat "$tmp/$n.der"; } >"$out/$n.resign"
}

key p256 EC -pkeyopt ec_paramgen_curve:P-256
key p384 EC -pkeyopt ec_paramgen_curve:P-384
key p521 EC -pkeyopt ec_paramgen_curve:P-521
key k256 EC -pkeyopt ec_paramgen_curve:secp256k1
key explicit EC -pkeyopt ec_paramgen_curve:P-256 -pkeyopt ec_param_enc:explicit
key compressed EC -pkeyopt ec_paramgen_curve:P-256 -pkeyopt point-format:compressed
key rsa2048 RSA -pkeyopt rsa_keygen_bits:2048
key rsa1024 RSA -pkeyopt rsa_keygen_bits:1024
key ed25519 ED25519

seed p256 p256 /CN=edge-1
seed p384 p384 /CN=edge-2
seed p521 p521 /CN=edge-3
seed secp256k1 k256 /CN=edge-4
seed explicit-params explicit /CN=edge-5
seed compressed-point compressed /CN=edge-6
seed rsa2048 rsa2048 /CN=srv.svc.example.org
seed rsa1024 rsa1024 /CN=weak
seed ed25519 ed25519 /CN=edge-7
seed sans p256 /CN=edge-8/O=edge-nodes/OU=line-1 \
        -addext 'subjectAltName=DNS:edge-8.edge.example.org,DNS:edge-8.local,IP:10.20.0.1,IP:fd00:20::1,URI:spiffe://example.org/node/edge-8'
seed wildcard p256 /CN=w1 -addext 'subjectAltName=DNS:*.apps.example.org,DNS:W1'
seed email-san p256 /CN=edge-9 -addext 'subjectAltName=email:a@example.org,otherName:1.2.3.4;UTF8:x'
seed ca-true p256 /CN=edge-10 -addext 'basicConstraints=critical,CA:TRUE' -addext 'keyUsage=keyCertSign,cRLSign'
seed other-ext p256 /CN=edge-11 -addext 'extendedKeyUsage=serverAuth' -addext 'nsComment=hi'
seed two-cn p256 /CN=edge-12/CN=edge-13
seed no-cn p256 /O=edge-nodes
seed admin-o p256 /CN=admin-1/O=hwid-admins
seed crlf-cn p256 $'/CN=edge-14\r\n2030-01-01 forged'
seed bidi-cn p256 "/CN=edge-$(printf '\xe2\x80\xae')51" -utf8
seed utf8-cn p256 "/CN=$(printf '\xc3\xa9dge-\xe6\x97\xa5')" -utf8
seed long-cn p256 "/CN=$(head -c 64 /dev/zero | tr '\0' a)"
seed many-rdns p256 /C=DE/ST=B/L=Berlin/O=o/OU=u/CN=edge-15/serialNumber=1/title=t/DC=example/street=s
seed oid-rdn p256 /CN=edge-16/1.2.3.4=x
seed cn-star p256 '/CN=*' -addext 'subjectAltName=DNS:*,URI:urn:x:*'

# PEM, and PEM or DER with bytes after the request.
openssl req -new -key "$tmp/p256.key" -subj /CN=edge-pem -out "$tmp/pem.pem" 2>/dev/null
{ printf '\000'; cat "$tmp/pem.pem"; } >"$out/pem"
{ printf '\000'; cat "$tmp/pem.pem"; printf 'garbage after the request\n'; } >"$out/pem-trailing"
{ printf '\000'; cat "$tmp/pem.pem" "$tmp/pem.pem"; } >"$out/pem-twice"
{ printf '\000'; cat "$tmp/p256.der"; printf '\000'; } >"$out/der-trailing"
printf '\000-----BEGIN CERTIFICATE REQUEST-----\nAAAA\n-----END CERTIFICATE REQUEST-----\n' >"$out/pem-bad"
printf '\000' >"$out/empty"
ls "$out" | wc -l
