#!/usr/bin/python3
"""A connection flood for the transport tests (Python's standard library
only: a peer independent of hwid).  Holds connections open to a server on
127.0.0.1 and opens them again as the server closes them, until told to
stop.

  flood.py PORT STATUS GROUP...
    GROUP  KIND:SOURCE:COUNT
      KIND idle       a TCP connection that sends nothing
      KIND handshake  a TLS handshake begun and never finished: the first
                      3 bytes of a TLS record, then nothing
      KIND tls        a TLS handshake finished (the server's certificate
                      not checked), then nothing: a keep-alive connection
      KIND stall      a TLS handshake finished, a request line and the
                      start of a header sent, then nothing
      KIND trickle    the same, then one more byte of that header every
                      second: a request that never ends
      SOURCE  the local address to connect from (127.0.0.2, ...)
      COUNT   how many to hold

  --rate N   new connections per second at most, all groups together
             (default 500: a flood a loaded test machine sustains)
  --for S    stop after S seconds (default 120); also stops on SIGTERM

Every second it writes STATUS (replaced atomically): one line per group,
"KIND SOURCE open N opened N closed N", where open counts connections
established and not yet closed by the server.  It raises its own limit of
open files to the hard limit first.
"""
import argparse
import errno
import os
import resource
import selectors
import signal
import socket
import ssl
import time

TLS_PREFIX = b"\x16\x03\x01"  # a handshake record's type and version: its length never follows
REQUEST_START = b"GET /flood HTTP/1.1\r\nHost: x\r\nX-Trickle: "
TLS_KINDS = ("tls", "stall", "trickle")
TLS_CONTEXT = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
TLS_CONTEXT.check_hostname = False
TLS_CONTEXT.verify_mode = ssl.CERT_NONE


class Group:
    def __init__(self, spec):
        kind, source, count = spec.split(":")
        if kind not in ("idle", "handshake") + TLS_KINDS:
            raise SystemExit(f"flood.py: unknown kind {kind}")
        self.kind, self.source, self.count = kind, source, int(count)
        self.open = self.opened = self.closed = 0
        self.pending = 0  # connects in progress
        self.wanted = self.count
        self.socks = set()  # open ones

    def line(self):
        return f"{self.kind} {self.source} open {self.open} opened {self.opened} closed {self.closed}\n"


class Flood:
    def __init__(self, port, status, groups, rate):
        self.port, self.status, self.groups, self.rate = port, status, groups, rate
        self.sel = selectors.DefaultSelector()
        self.tokens = float(rate)
        self.last = time.monotonic()
        self.stop = False

    def refill(self):
        now = time.monotonic()
        self.tokens = min(float(self.rate), self.tokens + (now - self.last) * self.rate)
        self.last = now

    def connect(self, g):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        try:
            s.bind((g.source, 0))
            s.connect_ex(("127.0.0.1", self.port))
        except OSError:
            s.close()
            return False
        g.pending += 1
        self.sel.register(s, selectors.EVENT_WRITE, (g, "connecting"))
        return True

    def on_event(self, key, mask):
        g, state = key.data
        if state == "connecting":
            self.on_connected(key.fileobj, g)
        elif state == "tls":
            self.tls_step(key.fileobj, g)
        else:
            self.on_readable(key.fileobj, g)

    def on_connected(self, s, g):
        err = s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
        if err:
            self.close(s, g, was_open=False)
            return
        if g.kind == "handshake":
            try:
                s.send(TLS_PREFIX)
            except OSError:
                pass
        if g.kind in TLS_KINDS:
            # Still pending until its handshake is over (non-blocking: the
            # other groups go on meanwhile).
            self.sel.unregister(s)
            t = TLS_CONTEXT.wrap_socket(s, do_handshake_on_connect=False)
            self.sel.register(t, selectors.EVENT_READ | selectors.EVENT_WRITE, (g, "tls"))
            self.tls_step(t, g)
            return
        self.now_open(s, g)

    def tls_step(self, t, g):
        try:
            t.do_handshake()
        except ssl.SSLWantReadError:
            self.sel.modify(t, selectors.EVENT_READ, (g, "tls"))
            return
        except ssl.SSLWantWriteError:
            self.sel.modify(t, selectors.EVENT_WRITE, (g, "tls"))
            return
        except OSError:
            self.close(t, g, was_open=False)
            return
        self.now_open(t, g)

    def now_open(self, s, g):
        g.pending -= 1
        g.open += 1
        g.opened += 1
        g.socks.add(s)
        self.sel.modify(s, selectors.EVENT_READ, (g, "open"))
        if g.kind in ("stall", "trickle"):
            self.send(s, REQUEST_START)

    @staticmethod
    def send(s, data):
        try:
            s.send(data)
        except (ssl.SSLWantWriteError, ssl.SSLWantReadError, OSError):
            pass  # a close shows up as readable

    def close(self, s, g, was_open):
        self.sel.unregister(s)
        g.socks.discard(s)
        s.close()
        if was_open:
            g.open -= 1
        else:
            g.pending -= 1
        g.closed += 1

    def on_readable(self, s, g):
        """The server wrote or closed: whatever it sent is dropped; a close
        ends it."""
        try:
            data = s.recv(4096)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            data = None
        except OSError as e:
            data = b"" if e.errno != errno.EAGAIN else None
        if data == b"":
            self.close(s, g, was_open=True)

    def top_up(self):
        """New connections, the rate shared max-min fairly among the groups
        that lack any: the group lacking least first, each given what it
        lacks or an equal part of what is left, whichever is smaller.  A
        small group is made whole within seconds, before the largest one's
        churn fills the server's accept queue (a connect stuck there counts
        as pending for minutes), and the largest has all the rest."""
        self.refill()
        lacking = sorted((g.count - g.open - g.pending, i) for i, g in enumerate(self.groups))
        lacking = [(lack, self.groups[i]) for lack, i in lacking if lack > 0]
        budget = int(self.tokens)
        for n, (lack, g) in enumerate(lacking):
            give = min(lack, max(1, budget // (len(lacking) - n)))
            for _ in range(give):
                if self.tokens < 1 or not self.connect(g):
                    break
                self.tokens -= 1
                budget -= 1

    def write_status(self):
        tmp = self.status + ".tmp"
        with open(tmp, "w") as f:
            f.writelines(g.line() for g in self.groups)
        os.replace(tmp, self.status)

    def run(self, seconds):
        end = time.monotonic() + seconds
        next_status = 0.0
        while not self.stop and time.monotonic() < end:
            self.top_up()
            for key, mask in self.sel.select(timeout=0.02):
                self.on_event(key, mask)
            if time.monotonic() >= next_status:
                self.write_status()
                for g in self.groups:
                    for s in list(g.socks) if g.kind == "trickle" else ():
                        self.send(s, b"t")
                next_status = time.monotonic() + 1.0
        self.write_status()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("port", type=int)
    ap.add_argument("status")
    ap.add_argument("groups", nargs="+")
    ap.add_argument("--rate", type=int, default=500)
    ap.add_argument("--for", dest="seconds", type=float, default=120.0)
    a = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    flood = Flood(a.port, a.status, [Group(g) for g in a.groups], a.rate)

    def on_term(*_):
        flood.stop = True

    signal.signal(signal.SIGTERM, on_term)
    flood.run(a.seconds)


if __name__ == "__main__":
    main()
