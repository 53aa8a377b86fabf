#!/usr/bin/python3
"""A slow TLS client for tests/integration/http-abuse.sh (Python's ssl
module: a peer independent of hwid).  Reports, on one line, when and how the
connection ended, measured from the TCP connect:

  http-slow-client.py PORT CAFILE MODE INTERVAL COUNT [SOURCE]
    MODE headers  sends a request's header block one byte per INTERVAL
                  seconds (COUNT bytes of one header, never finished)
    MODE body     sends the headers at once, then a body of COUNT bytes, one
                  byte per INTERVAL seconds (a request that does complete)
    MODE read     asks for /large and reads 16 KiB per INTERVAL seconds,
                  COUNT times at most (prints "reading" once the answer
                  has begun)

  SOURCE: the local address to connect from (default: the kernel's choice).

  prints "closed S" (the server closed the connection after S seconds),
  "answered CODE S" (a whole response came back), or "open S" (still open
  when it gave up).
"""
import select
import socket
import ssl
import sys
import time


def connect(port, cafile, source):
    ctx = ssl.create_default_context(cafile=cafile)
    raw = socket.create_connection(("127.0.0.1", port), source_address=(source, 0) if source else None)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def closed_now(conn, wait):
    """True if the server ended the connection within wait seconds."""
    readable, _, _ = select.select([conn], [], [], wait)
    if not readable:
        return False
    conn.setblocking(False)
    try:
        return conn.recv(65536) == b""
    except ssl.SSLWantReadError:
        return False  # a record with no data in it: a TLS 1.3 session ticket
    except (ssl.SSLError, OSError):
        return True
    finally:
        conn.setblocking(True)


def drip(conn, data, interval, start):
    for i in range(len(data)):
        try:
            conn.sendall(data[i:i + 1])
        except (ssl.SSLError, OSError):
            return "closed %.1f" % (time.monotonic() - start)
        # (After the last byte, what is readable is the answer.)
        if i + 1 < len(data) and closed_now(conn, interval):
            return "closed %.1f" % (time.monotonic() - start)
    return None


def read_answer(conn, start, limit):
    got = b""
    while time.monotonic() - start < limit:
        try:
            part = conn.recv(65536)
        except (ssl.SSLError, OSError):
            break
        if not part:
            break
        got += part
        head, sep, body = got.partition(b"\r\n\r\n")
        if sep:
            length = [int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:")]
            if length and len(body) >= length[0]:
                return "answered %s %.1f" % (head.split(b" ")[1].decode(), time.monotonic() - start)
    return "closed %.1f" % (time.monotonic() - start)


def slow_read(conn, interval, count, start):
    conn.sendall(b"GET /large HTTP/1.1\r\nHost: x\r\n\r\n")
    total = 0
    for _ in range(count):
        try:
            part = conn.recv(16384)
        except (ssl.SSLError, OSError):
            part = b""
        if not part:
            return "closed %.1f" % (time.monotonic() - start)
        if total == 0:
            print("reading", flush=True)  # the answer has begun: the test may go on
        total += len(part)
        time.sleep(interval)
    return "open %.1f" % (time.monotonic() - start)


def main():
    port, cafile, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    interval, count = float(sys.argv[4]), int(sys.argv[5])
    source = sys.argv[6] if len(sys.argv) > 6 else None
    start = time.monotonic()
    conn = connect(port, cafile, source)
    if mode == "headers":
        out = drip(conn, b"GET /drip HTTP/1.1\r\nHost: x\r\nX-Drip: " + b"d" * count, interval, start)
        print(out or "open %.1f" % (time.monotonic() - start))
    elif mode == "body":
        conn.sendall(b"POST /drip HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % count)
        out = drip(conn, b"b" * count, interval, start)
        print(out or read_answer(conn, start, 30))
    else:
        print(slow_read(conn, interval, count, start))


main()
