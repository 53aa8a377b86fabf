#!/usr/bin/env python3
"""tpm-cut.py — stands between a client and a real swtpm and cuts the TPM
away at one chosen command, for device-tpm-cut.sh.

  tpm-cut.py PORT TPM_PORT CC N ACTION PIDFILE LOG

Forwards 127.0.0.1:PORT to swtpm's command port TPM_PORT and PORT+1 to its
control port TPM_PORT+1 (a swtpm: TCTI uses both).  On the command channel
it reads each TPM command's header (tag, size, command code) and, at the
Nth command whose code is CC (hex), before forwarding it:
  kill  SIGKILLs the swtpm whose pid is in PIDFILE (a power cut in the
        middle of the client's work), closes the client's connection and
        stops listening: the TPM's ports are closed as a dead swtpm's are;
  drop  closes the client's connection, the swtpm left running with
        whatever the client had loaded (a connection lost, not the TPM).
Every command is recorded on LOG ("0x0000015d" a line), and "cut" when it
acts; after a drop, later connections are forwarded without a cut.
"""
import os
import signal
import socket
import struct
import sys
import threading


def pipe(src, dst):
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            dst.sendall(b)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b


class Cutter:
    def __init__(self, cc, n, action, pidfile, log):
        self.cc, self.left, self.action = cc, n, action
        self.pidfile, self.log = pidfile, log
        self.lock = threading.Lock()
        self.listeners = []

    def record(self, line):
        with self.lock, open(self.log, "a") as f:
            f.write(line + "\n")

    def cut_now(self, cc):
        """Whether this command is the one to cut at."""
        with self.lock:
            if cc != self.cc or self.left <= 0:
                return False
            self.left -= 1
            return self.left == 0

    def cut(self, client, tpm):
        socks = [client, tpm]
        if self.action == "kill":
            with open(self.pidfile) as f:
                os.kill(int(f.read().strip()), signal.SIGKILL)
            socks += self.listeners
        self.record("cut")
        for s in socks:
            # shutdown() first: a thread blocked in recv() on it holds it open.
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            s.close()

    def commands(self, client, tpm):
        """Client to TPM, one command at a time."""
        try:
            while True:
                head = recv_exact(client, 10)
                _, size, cc = struct.unpack(">HII", head)
                body = recv_exact(client, size - 10) if size > 10 else b""
                self.record("0x%08x" % cc)
                if self.cut_now(cc):
                    self.cut(client, tpm)
                    return
                tpm.sendall(head + body)
        except (EOFError, OSError, struct.error):
            pass
        for s in (client, tpm):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


def serve(port, tpm_port, handle):
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", port))
    ls.listen(8)

    def loop():
        while True:
            try:
                c, _ = ls.accept()
            except OSError:
                return  # no longer listening
            try:
                t = socket.create_connection(("127.0.0.1", tpm_port))
            except OSError:
                c.close()  # the TPM is down: so is its port
                continue
            threading.Thread(target=pipe, args=(t, c), daemon=True).start()
            threading.Thread(target=handle, args=(c, t), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    return ls


def main():
    port, tpm_port, cc, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3], 16), int(sys.argv[4])
    cutter = Cutter(cc, n, sys.argv[5], sys.argv[6], sys.argv[7])
    cutter.listeners = [serve(port, tpm_port, cutter.commands), serve(port + 1, tpm_port + 1, pipe)]
    threading.Event().wait()


if __name__ == "__main__":
    main()
