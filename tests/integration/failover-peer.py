#!/usr/bin/env python3
"""failover-peer.py — what stands where a client may fail over to, for the
*-failover.sh tests; records on LOG what reached it.

  failover-peer.py listen PORT LOG
      accepts connections and closes them; one line "connection" each.
  failover-peer.py hangup PORT LOG CERT KEY
      TLS with CERT/KEY; reads a request, records its request line and
      closes without answering (a server that took a request and died).
  failover-peer.py answer PORT LOG CERT KEY STATUS
      the same, but answers STATUS with an empty body first (a gateway's
      502 or 504 after it handed the request on, a 503).
  failover-peer.py tokens PORT LOG CERT KEY N
      the same, but answers its first request with N made-up tokens (as
      POST /v1/admin/tokens does) and every later one with a 403.
"""
import json
import socket
import ssl
import sys


def serve(port, handle):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(16)
    while True:
        c, _ = s.accept()
        try:
            handle(c)
        except (ssl.SSLError, OSError):
            pass
        finally:
            c.close()


def record(log, line):
    with open(log, "a") as f:
        f.write(line + "\n")


def token_answer(n, first):
    """N tokens "t00001.secret-1" ..., or a 403 after the first answer."""
    if first:
        body = json.dumps({"tokens": [{"id": "t%05d" % i, "token": "t%05d.secret-%d" % (i, i)}
                                      for i in range(n)]}).encode()
        head = b"HTTP/1.1 200 OK"
    else:
        body = json.dumps({"error": "forbidden", "message": "no more tokens today"}).encode()
        head = b"HTTP/1.1 403 Forbidden"
    return head + b"\r\nContent-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" \
        % len(body) + body


def main():
    mode, port, log = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode == "listen":
        serve(port, lambda c: record(log, "connection"))
    elif mode in ("hangup", "answer", "tokens"):
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(sys.argv[4], sys.argv[5])
        arg = int(sys.argv[6]) if mode != "hangup" else 0
        answered = []

        def take(c):
            t = ctx.wrap_socket(c, server_side=True)
            record(log, t.recv(65536).split(b"\r\n")[0].decode())
            if mode == "answer":
                t.sendall(b"HTTP/1.1 %d Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n" % arg)
            elif mode == "tokens":
                t.sendall(token_answer(arg, not answered))
                answered.append(1)
            t.close()
        serve(port, take)
    else:
        sys.exit("usage: failover-peer.py listen|hangup|answer|tokens PORT LOG [CERT KEY [STATUS|N]]")


main()
