#!/usr/bin/python3
"""cmp-forge.py — CMP messages (RFC 4210/9483) as a hostile client would
make them, where `openssl cmp` cannot: a request with a fresh
transactionID re-protected with a MAC of any parameters (one-way function,
MAC algorithm, iteration count, salt), a broken proof of possession, a BER
encoding; a certConf, pollReq or error message in a transaction of someone
else's; and a reader of the answers.  Standard library only: DER is read and written here, the
PasswordBasedMac (RFC 4210 §5.1.3.1) computed with hashlib and hmac.

    cmp-forge.py forge IN OUT [--tid] [--kid ID] [--secret FILE]
                 [--owf NAME] [--mac NAME] [--iter N] [--salt-len N]
                 [--pbm-param HEX] [--unprotected] [--break-popo]
                 [--ber indefinite|long]
        IN (a request `openssl cmp -reqout` saved) changed as asked:
        --tid a fresh transactionID and senderNonce; --kid the senderKID;
        --secret: protected again with a PasswordBasedMac of that shared
        secret (the file's first line) and the parameters given (defaults:
        sha256, hmacWithSHA256, 500 iterations, 16 bytes of salt), or with
        --pbm-param as the parameters' DER as they are (the MAC made with
        the defaults); --unprotected drops the protection; --break-popo
        flips a bit of the first request's POPO signature; --ber encodes
        the outer SEQUENCE with an indefinite length, or a length in more
        bytes than it needs.

    cmp-forge.py follow IP OUT [--kind certConf|pollReq|error] [--reject]
                 [--kid ID --secret FILE]
        the next message of the transaction of the answer IP (its
        transactionID; recipNonce = its senderNonce): a certConf for its
        certificate, accepting it or (--reject) rejecting it, a pollReq, or
        an error message; MAC-protected with the secret (else unprotected).

    cmp-forge.py show IN
        one line about an answer: body=ip implicit_confirm=yes|no
        status=2 failinfo=badAlg,... text=...
"""
import argparse
import hashlib
import hmac
import os
import sys

OIDS = {
    "pbm": "1.2.840.113533.7.66.13",
    "implicitConfirm": "1.3.6.1.5.5.7.4.13",
    "sha1": "1.3.14.3.2.26", "md5": "1.2.840.113549.2.5",
    "sha256": "2.16.840.1.101.3.4.2.1", "sha384": "2.16.840.1.101.3.4.2.2", "sha512": "2.16.840.1.101.3.4.2.3",
    "sha3-256": "2.16.840.1.101.3.4.2.8", "sha3-512": "2.16.840.1.101.3.4.2.10",
    "hmac-md5": "1.3.6.1.5.5.8.1.1", "hmac-sha1": "1.3.6.1.5.5.8.1.2",
    "hmacWithSHA256": "1.2.840.113549.2.9", "hmacWithSHA384": "1.2.840.113549.2.10",
    "hmacWithSHA512": "1.2.840.113549.2.11",
}
HASH_OF = {"sha1": "sha1", "md5": "md5", "sha256": "sha256", "sha384": "sha384", "sha512": "sha512",
           "sha3-256": "sha3_256", "sha3-512": "sha3_512", "hmac-md5": "md5", "hmac-sha1": "sha1",
           "hmacWithSHA256": "sha256", "hmacWithSHA384": "sha384", "hmacWithSHA512": "sha512"}
# A certificate's signature algorithm -> the hash of its certHash (RFC 4210 §5.3.18).
CERT_HASH = {"1.2.840.10045.4.3.2": "sha256", "1.2.840.10045.4.3.3": "sha384", "1.2.840.10045.4.3.4": "sha512",
             "1.2.840.113549.1.1.11": "sha256", "1.2.840.113549.1.1.12": "sha384",
             "1.2.840.113549.1.1.13": "sha512"}
BODIES = {0: "ir", 1: "ip", 2: "cr", 3: "cp", 4: "p10cr", 7: "kur", 8: "kup", 11: "rr", 12: "rp", 19: "pkiconf",
          21: "genm", 22: "genp", 23: "error", 24: "certConf", 25: "pollReq", 26: "pollRep"}
FAILINFO = ["badAlg", "badMessageCheck", "badRequest", "badTime", "badCertId", "badDataFormat", "wrongAuthority",
            "incorrectData", "missingTimeStamp", "badPOP", "certRevoked", "certConfirmed", "wrongIntegrity",
            "badRecipientNonce", "timeNotAvailable", "unacceptedPolicy", "unacceptedExtension",
            "addInfoNotAvailable", "badSenderNonce", "badCertTemplate", "signerNotTrusted", "transactionIdInUse",
            "unsupportedVersion", "notAuthorized", "systemUnavail", "systemFailure", "duplicateCertReq"]


# ---- DER ----

def read_tlv(data, i=0):
    """(tag, content, end) of the TLV at i (definite lengths only)."""
    tag, n = data[i], data[i + 1]
    i += 2
    if n & 0x80:
        k = n & 0x7F
        n = int.from_bytes(data[i:i + k], "big")
        i += k
    return tag, data[i:i + n], i + n


def children(content):
    out, i = [], 0
    while i < len(content):
        tag, value, end = read_tlv(content, i)
        out.append((tag, value))
        i = end
    return out


def length(n):
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def tlv(tag, content):
    return bytes([tag]) + length(len(content)) + content


def seq(*items):
    return tlv(0x30, b"".join(items))


def integer(n):
    return tlv(0x02, n.to_bytes(max(1, (n.bit_length() + 8) // 8), "big"))


def octets(b):
    return tlv(0x04, b)


def oid(dotted):
    parts = [int(p) for p in dotted.split(".")]
    out = bytes([40 * parts[0] + parts[1]])
    for p in parts[2:]:
        enc = [p & 0x7F]
        p >>= 7
        while p:
            enc.append(0x80 | (p & 0x7F))
            p >>= 7
        out += bytes(reversed(enc))
    return tlv(0x06, out)


def oid_text(content):
    first = content[0]
    parts, v = [first // 40, first % 40], 0
    for b in content[1:]:
        v = (v << 7) | (b & 0x7F)
        if not b & 0x80:
            parts.append(v)
            v = 0
    return ".".join(map(str, parts))


def algorithm(name, params=b""):
    return seq(oid(OIDS.get(name, name)), params)


# ---- PasswordBasedMac ----

def pbm(secret, salt, owf, mac, iterations, data):
    key = hashlib.new(HASH_OF[owf], secret + salt).digest()
    for _ in range(iterations - 1):
        key = hashlib.new(HASH_OF[owf], key).digest()
    return hmac.new(key, data, HASH_OF[mac]).digest()


def pbm_param(owf, mac, iterations, salt):
    return seq(octets(salt), algorithm(owf), integer(iterations), algorithm(mac))


# ---- PKIMessage ----

class Message:
    def __init__(self, der):
        tag, content, _ = read_tlv(der)
        parts = children(content)
        self.header = dict()  # tag -> content, in the order tags sort
        self.plain = []       # pvno, sender, recipient
        for t, v in children(parts[0][1]):
            if len(self.plain) == 3:
                self.header[t] = v
            else:
                self.plain.append((t, v))
        self.body = tlv(parts[1][0], parts[1][1])
        self.rest = {t: v for t, v in parts[2:]}  # 0xA0 protection, 0xA1 extraCerts

    def header_der(self):
        return seq(*[tlv(t, v) for t, v in self.plain], *[tlv(t, self.header[t]) for t in sorted(self.header)])

    def protect(self, secret, owf, mac, iterations, salt_len, raw_param=None):
        salt = os.urandom(salt_len)
        param = bytes.fromhex(raw_param) if raw_param is not None else pbm_param(owf, mac, iterations, salt)
        if raw_param is not None:
            owf, mac, iterations = "sha256", "hmacWithSHA256", 500
        self.header[0xA1] = algorithm("pbm", param)
        tag = pbm(secret, salt, owf, mac, iterations, seq(self.header_der(), self.body))
        self.rest[0xA0] = tlv(0x03, b"\x00" + tag)

    def der(self):
        return seq(self.header_der(), self.body, *[tlv(t, self.rest[t]) for t in sorted(self.rest)])


def break_popo(body):
    """The body (ir/cr/kur) with a bit of its first POPO signature flipped."""
    tag, reqs, _ = read_tlv(body)
    msgs = children(read_tlv(reqs)[1])               # CertReqMessages
    items = children(msgs[0][1])                      # certReq, popo [1] POPOSigningKey, ...
    popo = children(items[1][1])                      # [poposkInput], algorithmIdentifier, signature
    sig = bytearray(popo[-1][1])
    sig[-1] ^= 0x01
    popo[-1] = (popo[-1][0], bytes(sig))
    items[1] = (items[1][0], b"".join(tlv(t, v) for t, v in popo))
    msgs[0] = (msgs[0][0], b"".join(tlv(t, v) for t, v in items))
    return tlv(tag, seq(*[tlv(t, v) for t, v in msgs]))


def ber(der, how):
    tag, content, _ = read_tlv(der)
    if how == "indefinite":
        return bytes([tag, 0x80]) + content + b"\x00\x00"
    n = len(content)
    return bytes([tag, 0x84]) + n.to_bytes(4, "big") + content


def forge(a):
    m = Message(open(a.input, "rb").read())
    if a.tid:
        m.header[0xA4] = octets(os.urandom(16))
        m.header[0xA5] = octets(os.urandom(16))
    if a.kid:
        m.header[0xA2] = octets(a.kid.encode())
    if a.break_popo:
        m.body = break_popo(m.body)
    if a.unprotected:
        m.header.pop(0xA1, None)
        m.rest.pop(0xA0, None)
    elif a.secret:
        secret = open(a.secret, "rb").read().split(b"\n")[0]
        m.protect(secret, a.owf, a.mac, a.iter, a.salt_len, a.pbm_param)
    der = m.der()
    open(a.output, "wb").write(ber(der, a.ber) if a.ber else der)


def inner(body):
    """The content of the value a body's [n] EXPLICIT tag wraps."""
    return read_tlv(read_tlv(body)[1])[1]


def first_response(body):
    """The first CertResponse (its parts) of an ip/cp/kup body."""
    return children(children(children(inner(body))[-1][1])[0][1])


def first_cert(body):
    ckp = children(first_response(body)[2][1])        # certifiedKeyPair: certOrEncCert, ...
    cert = children(ckp[0][1])[0]                     # [0] certificate
    return tlv(cert[0], cert[1])


def follow(a):
    """A message of the transaction the answer IP is in: a certConf for its
    certificate, a pollReq, or an error message."""
    ip = Message(open(a.input, "rb").read())
    if a.kind == "certConf":
        cert = first_cert(ip.body)
        sig_alg = oid_text(children(children(read_tlv(cert)[1])[1][1])[0][1])
        status = [octets(hashlib.new(CERT_HASH[sig_alg], cert).digest()), integer(0)]
        if a.reject:
            status.append(seq(integer(2), tlv(0x03, b"\x06\x00\x40")))  # rejection, failInfo badPOP
        body = tlv(0xB8, seq(seq(*status)))
    elif a.kind == "pollReq":
        body = tlv(0xB9, seq(seq(integer(0))))
    else:  # error: rejection, failInfo badRequest
        body = tlv(0xB7, seq(seq(integer(2), tlv(0x03, b"\x05\x20"))))
    m = Message(seq(seq(integer(2), *[tlv(t, v) for t, v in reversed(ip.plain[1:])]), body))
    m.header = {0xA4: ip.header[0xA4], 0xA5: octets(os.urandom(16)), 0xA6: ip.header[0xA5]}
    if a.kid:
        m.header[0xA2] = octets(a.kid.encode())
    if a.secret:
        m.protect(open(a.secret, "rb").read().split(b"\n")[0], "sha256", "hmacWithSHA256", 500, 16)
    open(a.output, "wb").write(m.der())


def status_info(si):
    parts = children(si)
    status = int.from_bytes(parts[0][1], "big")
    text, bits = "", []
    for t, v in parts[1:]:
        if t == 0x30:
            text = " ".join(s.decode("utf-8", "replace") for _, s in children(v))
        elif t == 0x03:
            value = int.from_bytes(v[1:], "big") if len(v) > 1 else 0
            nbits = 8 * (len(v) - 1)
            bits = [FAILINFO[i] for i in range(min(nbits, len(FAILINFO))) if value >> (nbits - 1 - i) & 1]
    return status, bits, text


def show(a):
    m = Message(open(a.input, "rb").read())
    kind = BODIES.get(m.body[0] & 0x1F, str(m.body[0] & 0x1F))
    si = None
    if kind in ("ip", "cp", "kup"):
        si = first_response(m.body)[1][1]
    elif kind == "error":
        si = children(inner(m.body))[0][1]
    elif kind == "rp":
        si = children(children(inner(m.body))[0][1])[0][1]
    implicit = "no"
    for _, itav in children(read_tlv(m.header[0xA8])[1]) if 0xA8 in m.header else []:
        if oid_text(children(itav)[0][1]) == OIDS["implicitConfirm"]:
            implicit = "yes"
    line = f"body={kind} implicit_confirm={implicit}"
    if si is not None:
        status, bits, text = status_info(si)
        line += f" status={status} failinfo={','.join(bits) or '-'} text={text}"
    print(line)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("forge")
    f.add_argument("input")
    f.add_argument("output")
    f.add_argument("--tid", action="store_true")
    f.add_argument("--kid")
    f.add_argument("--secret")
    f.add_argument("--owf", default="sha256")
    f.add_argument("--mac", default="hmacWithSHA256")
    f.add_argument("--iter", type=int, default=500)
    f.add_argument("--salt-len", type=int, default=16)
    f.add_argument("--pbm-param")
    f.add_argument("--unprotected", action="store_true")
    f.add_argument("--break-popo", action="store_true")
    f.add_argument("--ber", choices=["indefinite", "long"])
    c = sub.add_parser("follow")
    c.add_argument("input")
    c.add_argument("output")
    c.add_argument("--kind", choices=["certConf", "pollReq", "error"], default="certConf")
    c.add_argument("--kid")
    c.add_argument("--secret")
    c.add_argument("--reject", action="store_true")
    s = sub.add_parser("show")
    s.add_argument("input")
    a = p.parse_args()
    {"forge": forge, "follow": follow, "show": show}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
