#!/usr/bin/python3
"""audit-chain.py -- the audit hash chain of docs/OPERATIONS.md, written
again from the document alone (Python's hashlib and sqlite3), so that the
tests prove hwid's chain is exactly the specified one, both ways:

  audit-chain.py check DB     recomputes every hash and link, the anchor
                              and the head; exit 0 and "ok N" if all hold
  audit-chain.py rechain DB   recomputes every hash and link and the head
                              from the anchor (or genesis), as the spec
                              says: hwid audit verify must then accept it
"""
import hashlib
import sqlite3
import struct
import sys

DOMAIN = b"hwid-audit-v1\x00"
ZERO = bytes(32)
FIELDS = ("actor", "action", "target", "outcome", "reason", "token_id")


def field(value):
    if value is None:
        return b"\xff\xff\xff\xff"
    data = value.encode("utf-8")
    return struct.pack(">I", len(data)) + data


def record_hash(prev, row):
    h = hashlib.sha256()
    h.update(DOMAIN)
    h.update(prev)
    h.update(struct.pack(">q", row["at"]))
    for name in FIELDS:
        h.update(field(row[name]))
    return h.digest()


def ends(db):
    got = {r["role"]: r for r in db.execute("SELECT role, id, at, hash FROM audit_chain")}
    return got.get("anchor"), got.get("head")


def rows(db):
    return db.execute("SELECT id, at, actor, action, target, outcome, reason, token_id, prev_hash, hash "
                      "FROM audit ORDER BY id").fetchall()


def check(db):
    anchor, head = ends(db)
    prev = anchor["hash"] if anchor else ZERO
    last = None
    for row in rows(db):
        if row["prev_hash"] != prev:
            sys.exit("record %d: prev_hash is not the previous record's hash" % row["id"])
        if record_hash(prev, row) != row["hash"]:
            sys.exit("record %d: hash does not match its content" % row["id"])
        prev, last = row["hash"], row
    if last is not None and (head is None or head["id"] != last["id"] or head["hash"] != last["hash"]):
        sys.exit("the head is not the newest record")
    print("ok %d" % len(rows(db)))


def rechain(db):
    anchor, _ = ends(db)
    prev = anchor["hash"] if anchor else ZERO
    last = None
    for row in rows(db):
        digest = record_hash(prev, row)
        db.execute("UPDATE audit SET prev_hash = ?, hash = ? WHERE id = ?", (prev, digest, row["id"]))
        prev, last = digest, row
    if last is not None:
        db.execute("INSERT INTO audit_chain (role, id, at, hash) VALUES ('head', ?, ?, ?) "
                   "ON CONFLICT (role) DO UPDATE SET id = excluded.id, at = excluded.at, hash = excluded.hash",
                   (last["id"], last["at"], prev))
    db.commit()
    print("rechained %d" % len(rows(db)))


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("check", "rechain"):
        sys.exit(__doc__)
    db = sqlite3.connect(sys.argv[2])
    db.row_factory = sqlite3.Row
    (check if sys.argv[1] == "check" else rechain)(db)


main()
