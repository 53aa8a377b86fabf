#!/usr/bin/python3
"""OCSP requests openssl does not make, for ocsp.sh (Python's standard
library only: a peer independent of hwid).  Both start from a request
openssl made (`openssl ocsp -reqout FILE -no_nonce` with one certID).

  ocsp-peer.py many TEMPLATE COUNT OUT
      writes OUT: the template's one certID COUNT times in one request.

  ocsp-peer.py flood TEMPLATE URL SOURCE COUNT [AFTER.der...]
      POSTs COUNT requests to URL (http://HOST:PORT/ocsp) from the local
      address SOURCE over one keep-alive connection, each the template with
      its serial (16 bytes, as `-serial 0x7E7E...7E` makes it) replaced by
      random bytes: certificates this CA never issued.  Prints "signed N
      trylater N other N": successful answers, unsigned tryLater ones, and
      anything else.  Then, at once on the same connection, POSTs each
      AFTER.der and writes its answer to AFTER.der.answer: what the
      address is answered the moment its budget is spent.
"""
import http.client
import os
import sys
import urllib.parse

TRYLATER = bytes.fromhex("3003" "0a0103")  # OCSPResponse { responseStatus tryLater(3) }
MARK = bytes.fromhex("0210") + b"\x7e" * 16  # INTEGER, 16 bytes of 0x7E


def der_len(n):
    if n < 0x80:
        return bytes([n])
    b = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(b)]) + b


def tlv(tag, content):
    return bytes([tag]) + der_len(len(content)) + content


def read_tlv(data, at):
    """(tag, content start, end) of the TLV at data[at]."""
    tag, n = data[at], data[at + 1]
    at += 2
    if n & 0x80:
        k = n & 0x7F
        n = int.from_bytes(data[at:at + k], "big")
        at += k
    return tag, at, at + n


def many(template, count, out):
    _, body, _ = read_tlv(template, 0)         # OCSPRequest
    _, tbs, _ = read_tlv(template, body)       # tbsRequest
    _, lst, end = read_tlv(template, tbs)      # requestList
    one = template[lst:end]
    request = tlv(0x30, tlv(0x30, tlv(0x30, one * count)))
    with open(out, "wb") as f:
        f.write(request)


def flood(template, url, source, count, after):
    at = template.index(MARK) + 2
    u = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(u.hostname, u.port, timeout=30, source_address=(source, 0))
    seen = {"signed": 0, "trylater": 0, "other": 0}
    for _ in range(count):
        serial = bytes([1 + os.urandom(1)[0] % 0x7E]) + os.urandom(15)
        req = template[:at] + serial + template[at + 16:]
        conn.request("POST", u.path, body=req, headers={"Content-Type": "application/ocsp-request"})
        resp = conn.getresponse()
        body = resp.read()
        if resp.status == 200 and body == TRYLATER:
            seen["trylater"] += 1
        elif resp.status == 200 and body[:2] == b"\x30\x82" and body[4:7] == bytes.fromhex("0a0100"):
            seen["signed"] += 1
        else:
            seen["other"] += 1
    for path in after:
        with open(path, "rb") as f:
            conn.request("POST", u.path, body=f.read(), headers={"Content-Type": "application/ocsp-request"})
        with open(path + ".answer", "wb") as f:
            f.write(conn.getresponse().read())
    print("signed %d trylater %d other %d" % (seen["signed"], seen["trylater"], seen["other"]))


def main():
    with open(sys.argv[2], "rb") as f:
        template = f.read()
    if sys.argv[1] == "many":
        many(template, int(sys.argv[3]), sys.argv[4])
    elif sys.argv[1] == "flood":
        flood(template, sys.argv[3], sys.argv[4], int(sys.argv[5]), sys.argv[6:])
    else:
        sys.exit("usage: ocsp-peer.py many|flood ...")


if __name__ == "__main__":
    main()
