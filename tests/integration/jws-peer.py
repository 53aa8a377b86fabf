#!/usr/bin/python3
"""jws-peer.py — the independent JOSE side of device-jws.sh: python3-jwcrypto
(Debian) signs and verifies, python3-cryptography reads the certificates.

  jws-peer.py verify TOKEN-FILE CERT-PEM ALG
      verifies the compact JWS with the public key of CERT-PEM (the device's
      certificate) and nothing else from the token; checks that the header's
      alg is ALG, x5c parses, x5c[0] is CERT-PEM, every x5c[i] is signed by
      x5c[i+1]'s key, and x5t#S256 is CERT-PEM's SHA-256 thumbprint; prints the
      payload as base64url.
  jws-peer.py sign KEY-PEM ALG PAYLOAD-FILE CERT-PEM... [--header JSON]
      signs PAYLOAD-FILE's bytes with the private key KEY-PEM (a software key)
      and prints the compact JWS; the protected header holds alg, x5c (the
      certificates in order), x5t#S256 of the first, and the members of
      --header (which replace those; null removes one).
  jws-peer.py forge TOKEN-FILE HEADER-JSON [PAYLOAD-FILE]
      the token with its protected header replaced by the given members
      merged into it (null deletes one) and, if given, its payload replaced;
      the signature is kept: what an attacker can do without the key.
"""
import base64
import datetime
import hashlib
import json
import sys

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding
from jwcrypto import jwk, jws, jwt


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64url(text):
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def load_certs(paths):
    certs = []
    end = b"-----END CERTIFICATE-----"
    for path in paths:
        with open(path, "rb") as f:
            for block in f.read().split(end)[:-1]:
                certs.append(x509.load_pem_x509_certificate(block + end + b"\n"))
    return certs


def check_issued_by(cert, issuer):
    key = issuer.public_key()
    if isinstance(key, ec.EllipticCurvePublicKey):
        key.verify(cert.signature, cert.tbs_certificate_bytes, ec.ECDSA(cert.signature_hash_algorithm))
    else:
        key.verify(cert.signature, cert.tbs_certificate_bytes, padding.PKCS1v15(), cert.signature_hash_algorithm)


def verify(token_file, cert_pem, alg):
    token = open(token_file).read().strip()
    cert = load_certs([cert_pem])[0]
    key = jwk.JWK.from_pem(cert.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    obj = jws.JWS()
    obj.deserialize(token)
    obj.verify(key, alg=alg)          # raises unless the signature holds for this key and alg
    header = json.loads(unb64url(token.split(".")[0]))
    assert header["alg"] == alg, header
    chain = [x509.load_der_x509_certificate(base64.b64decode(c, validate=True)) for c in header["x5c"]]
    der = cert.public_bytes(serialization.Encoding.DER)
    assert chain[0].public_bytes(serialization.Encoding.DER) == der, "x5c[0] is not the device certificate"
    for child, parent in zip(chain, chain[1:]):
        check_issued_by(child, parent)
    assert header["x5t#S256"] == b64url(hashlib.sha256(der).digest()), "x5t#S256"
    assert header["x5t"] == b64url(hashlib.sha1(der).digest()), "x5t"
    print(b64url(obj.payload))


def check_valid_now(cert):
    now = datetime.datetime.utcnow()
    assert cert.not_valid_before <= now <= cert.not_valid_after, "x5c certificate not valid now: %s" % cert.subject


def jwt_check(token_file, ca_pem, audience):
    token = open(token_file).read().strip()
    ca = load_certs([ca_pem])[0]
    header = json.loads(unb64url(token.split(".")[0]))
    chain = [x509.load_der_x509_certificate(base64.b64decode(c, validate=True)) for c in header["x5c"]]
    for child, parent in zip(chain, chain[1:]):
        check_issued_by(child, parent)
    if chain[-1] != ca:
        check_issued_by(chain[-1], ca)
    for c in chain:
        check_valid_now(c)
    der = chain[0].public_bytes(serialization.Encoding.DER)
    assert header["x5t#S256"] == b64url(hashlib.sha256(der).digest()), "x5t#S256"
    assert header["x5t"] == b64url(hashlib.sha1(der).digest()), "x5t"
    key = jwk.JWK.from_pem(chain[0].public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    alg = {"EC": "ES256" if key.get("crv") == "P-256" else "ES384", "RSA": "RS256"}[key["kty"]]
    tok = jwt.JWT(jwt=token, key=key, algs=[alg], check_claims={"aud": audience, "exp": None})
    print(tok.claims)


def sign(key_pem, alg, payload_file, cert_pems, extra):
    key = jwk.JWK.from_pem(open(key_pem, "rb").read())
    chain = load_certs(cert_pems)
    ders = [c.public_bytes(serialization.Encoding.DER) for c in chain]
    header = {"alg": alg, "x5c": [base64.b64encode(d).decode() for d in ders],
              "x5t#S256": b64url(hashlib.sha256(ders[0]).digest())}
    for k, v in extra.items():
        if v is None:
            header.pop(k, None)
        else:
            header[k] = v
    obj = jws.JWS(open(payload_file, "rb").read())
    obj.add_signature(key, None, json.dumps(header))
    print(obj.serialize(compact=True))


def forge(token_file, header_json, payload_file=None):
    h, p, s = open(token_file).read().strip().split(".")
    header = json.loads(unb64url(h))
    for k, v in json.loads(header_json).items():
        if v is None:
            header.pop(k, None)
        else:
            header[k] = v
    if payload_file:
        p = b64url(open(payload_file, "rb").read())
    print(".".join([b64url(json.dumps(header).encode()), p, s]))


def main(argv):
    if argv[1] == "verify":
        verify(argv[2], argv[3], argv[4])
    elif argv[1] == "sign":
        extra = {}
        args = argv[5:]
        if "--header" in args:
            i = args.index("--header")
            extra = json.loads(args[i + 1])
            args = args[:i] + args[i + 2:]
        sign(argv[2], argv[3], argv[4], args, extra)
    elif argv[1] == "jwt":
        jwt_check(argv[2], argv[3], argv[4])
    elif argv[1] == "forge":
        forge(argv[2], argv[3], argv[4] if len(argv) > 4 else None)
    else:
        sys.exit("usage: see the top of " + argv[0])


if __name__ == "__main__":
    main(sys.argv)
