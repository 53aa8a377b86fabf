#!/usr/bin/python3
"""A client that sends oversized header blocks, one connection at a time,
for tests/integration/http-fairness.sh (Python's ssl module: a peer
independent of hwid).

  http-oversize.py PORT CAFILE SOURCE SIZE STATUS

Connects from SOURCE to 127.0.0.1:PORT again and again until SIGTERM; on
each connection sends a request whose one header is SIZE bytes long, reads
until the server closes, and counts what came back.  Every half second it
writes STATUS (replaced atomically):

  tries N answered N json N statuses CODE,CODE,...

answered: connections that got an HTTP answer; json: of those, answers
with a JSON body; statuses: the status codes seen, sorted, once each.
"""
import os
import signal
import socket
import ssl
import sys
import time


def one(ctx, port, source, size):
    """The status line and body of the answer, or None for none."""
    raw = socket.create_connection(("127.0.0.1", port), source_address=(source, 0), timeout=20)
    got = b""
    try:
        s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        try:
            s.sendall(b"GET /big HTTP/1.1\r\nHost: x\r\nX-Big: " + b"h" * size + b"\r\n\r\n")
        except OSError:
            pass  # the server answered and closed before taking it all
        while True:
            part = s.recv(65536)
            if not part:
                break
            got += part
    except OSError:
        pass
    finally:
        raw.close()
    return got if got.startswith(b"HTTP/1.") else None


def main():
    port, cafile, source, size, status = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
    ctx = ssl.create_default_context(cafile=cafile)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    tries = answered = json = 0
    codes = set()
    last = 0.0
    while not stop:
        answer = one(ctx, port, source, size)
        tries += 1
        if answer:
            answered += 1
            codes.add(answer.split(b" ")[1].decode())
            json += b"\r\nContent-Type: application/json\r\n" in answer
        if time.monotonic() - last >= 0.5 or stop:
            with open(status + ".tmp", "w") as f:
                f.write("tries %d answered %d json %d statuses %s\n" %
                        (tries, answered, json, ",".join(sorted(codes)) or "-"))
            os.replace(status + ".tmp", status)
            last = time.monotonic()


main()
