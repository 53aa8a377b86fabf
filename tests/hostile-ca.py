#!/usr/bin/python3
"""hostile-ca.py — a small CA server that speaks hwidd's device API but adds
what a hostile server (or a man in the middle of the first connection)
would: extra certificates in its answers.  It stands in for hwidd where
hwidd cannot misbehave, in tests/integration/device-chain.sh.

    hostile-ca.py --port P --tls-cert PEM --tls-key KEY --ca-cert PEM
                  --ca-key KEY --dir DIR

Its CA (--ca-cert/--ca-key, made with the openssl CLI by the test) signs
every CSR it gets.  What it answers is read from DIR at each request, so
the test can change it between requests:

    DIR/ca-answer      the body of GET /ca
    DIR/leaf-prefix    PEM put BEFORE the issued certificate (optional)
    DIR/leaf-extra     PEM put AFTER the issued certificate (optional)
    DIR/refusal        if present: "STATUS" on its first line, then a JSON
                       body, the answer to every mutual-TLS request
    DIR/identity       if present: the body of GET /v1/identities/NAME
    DIR/issuer.pem,    if both are present: the CA (certificate, PEM key)
    DIR/issuer.key     that signs instead of --ca-cert/--ca-key, as a
                       server that rolled over to it would (or one that
                       pretends to: tests/integration/ca-rollover-forged.sh)

    GET  /ca                   DIR/ca-answer
    POST /csr                  201: prefix + certificate + extra
    GET  /v1/identities/NAME   200 {"rotate_key": false, "renew_after": 0}
                               (or DIR/identity)
    POST /v1/renew             201: prefix + certificate + extra (mutual
                               TLS: the client certificate must verify)

Prints "listening" once ready, then one line per request: METHOD PATH.
Listens on 127.0.0.1 only.  Debian's python3-cryptography does the X.509.
"""
import argparse
import datetime
import http.server
import json
import os
import ssl
import sys

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.x509.oid import ExtendedKeyUsageOID


def read(path, default=b""):
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return default


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the device asks twice per connection

    def log_message(self, fmt, *args):
        pass

    def answer(self, status, body, ctype):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def issue(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        csr = x509.load_pem_x509_csr(body)
        if not csr.is_signature_valid:
            return self.answer(400, b'{"error":"bad_csr","message":"CSR signature does not verify"}',
                               "application/json")
        ca_cert, ca_key = self.issuer()
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder()
                .subject_name(csr.subject)
                .issuer_name(ca_cert.subject)
                .public_key(csr.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=1))
                .not_valid_after(now + datetime.timedelta(hours=1))
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                               critical=False)
                .sign(ca_key, hashes.SHA256()))
        d = self.server.dir
        pem = cert.public_bytes(serialization.Encoding.PEM)
        self.answer(201, read(os.path.join(d, "leaf-prefix")) + pem + read(os.path.join(d, "leaf-extra")),
                    "application/pem-certificate-chain")

    def issuer(self):
        d = self.server.dir
        cert, key = read(os.path.join(d, "issuer.pem"), None), read(os.path.join(d, "issuer.key"), None)
        if cert is None or key is None:
            return self.server.ca
        return x509.load_pem_x509_certificate(cert), serialization.load_pem_private_key(key, password=None)

    def refused(self):
        text = read(os.path.join(self.server.dir, "refusal"), None)
        if text is None:
            return False
        status, _, body = text.partition(b"\n")
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.answer(int(status), body, "application/json")
        return True

    def do_GET(self):
        print(f"GET {self.path}", flush=True)
        if self.path.startswith("/v1/") and self.refused():
            return
        if self.path == "/ca":
            return self.answer(200, read(os.path.join(self.server.dir, "ca-answer")), "application/x-pem-file")
        if self.path.startswith("/v1/identities/"):
            custom = os.path.join(self.server.dir, "identity")
            body = read(custom) if os.path.exists(custom) else \
                json.dumps({"rotate_key": False, "renew_after": 0}).encode()
            return self.answer(200, body, "application/json")
        self.answer(404, b'{"error":"not_found","message":"no such path"}', "application/json")

    def do_POST(self):
        print(f"POST {self.path}", flush=True)
        if self.path.startswith("/v1/") and self.refused():
            return
        if self.path == "/csr":
            return self.issue()
        if self.path == "/v1/renew" and self.connection.getpeercert():
            return self.issue()
        self.answer(401, b'{"error":"unauthenticated","message":"renewal needs a client certificate"}',
                    "application/json")


def main():
    p = argparse.ArgumentParser()
    for opt in ("--port", "--tls-cert", "--tls-key", "--ca-cert", "--ca-key", "--dir"):
        p.add_argument(opt, required=True)
    a = p.parse_args()
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.tls_cert, a.tls_key)
    ctx.verify_mode = ssl.CERT_OPTIONAL
    ctx.load_verify_locations(a.ca_cert)
    ctx.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN  # the CA is an intermediate
    srv = http.server.HTTPServer(("127.0.0.1", int(a.port)), Handler)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(a.ca_cert, "rb") as f:
        ca_cert = x509.load_pem_x509_certificate(f.read())
    with open(a.ca_key, "rb") as f:
        ca_key = serialization.load_pem_private_key(f.read(), password=None)
    srv.ca = (ca_cert, ca_key)
    srv.dir = a.dir
    print("listening", flush=True)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
