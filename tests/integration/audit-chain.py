#!/usr/bin/python3
"""audit-chain.py -- the audit hash chain of docs/OPERATIONS.md, written
again from the document alone (Python's hashlib and sqlite3), so that the
tests prove hwid's chain is exactly the specified one, both ways:

  audit-chain.py check DB [CA.pem]
                              recomputes every hash and link, the anchor
                              and the head; with the CA certificate, also
                              every signed checkpoint, that the newest one
                              of the head is reached by the chain, that
                              the anchor is the newest pruning's, that
                              every checkpoint noted in the chain is still
                              stored and that some checkpoint signs the
                              records (unless all are younger than 65 s:
                              the default audit.checkpoint_interval and a
                              few seconds); exit 0 and "ok N" if all hold
  audit-chain.py rechain DB   recomputes every hash and link and the head
                              from the anchor (or genesis), as the spec
                              says: hwid audit verify must then accept it
"""
import hashlib
import re
import sqlite3
import struct
import sys
import time

DOMAIN = b"hwid-audit-v1\x00"
CHECKPOINT_DOMAIN = b"hwid-audit-checkpoint-v1\x00"
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


def checkpoint_message(cp):
    return (CHECKPOINT_DOMAIN + cp["kind"].encode() + struct.pack(">qq", cp["id"], cp["record_at"]) +
            cp["hash"] + struct.pack(">q", cp["at"]))


def signed(key, cp):
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, padding
    try:
        if isinstance(key, ec.EllipticCurvePublicKey):
            key.verify(cp["sig"], checkpoint_message(cp), ec.ECDSA(hashes.SHA256()))
        else:
            key.verify(cp["sig"], checkpoint_message(cp), padding.PKCS1v15(), hashes.SHA256())
        return True
    except InvalidSignature:
        return False


def newest_checkpoints(db, ca_pem):
    """Every signature checked; the newest checkpoint of each kind, and the
    records the head's signed."""
    from cryptography import x509
    with open(ca_pem, "rb") as f:
        key = x509.load_pem_x509_certificate(f.read()).public_key()
    newest = {}
    signed_ids = set()
    for cp in db.execute("SELECT kind, id, record_at, hash, at, sig FROM audit_checkpoints ORDER BY at, seq"):
        if not signed(key, cp):
            sys.exit("the checkpoint of record %d does not verify with the CA key" % cp["id"])
        newest[cp["kind"]] = cp
        if cp["kind"] == "H":
            signed_ids.add(cp["id"])
    return newest.get("H"), newest.get("P"), signed_ids


def check_notes(anchor, records, signed_ids):
    """hwidd notes each checkpoint of the head in the chain (actor hwidd,
    action audit.checkpoint, target "record ID"): it must still be stored,
    unless its record was pruned."""
    for row in records:
        if row["actor"] != "hwidd" or row["action"] != "audit.checkpoint":
            continue
        m = re.fullmatch(r"record ([1-9][0-9]*)", row["target"] or "")
        if m is None or int(m.group(1)) >= row["id"]:
            sys.exit("record %d notes a checkpoint of no earlier record" % row["id"])
        noted = int(m.group(1))
        if (anchor is None or noted > anchor["id"]) and noted not in signed_ids:
            sys.exit("the checkpoint of record %d noted by record %d was deleted" % (noted, row["id"]))


def check_checkpoints(db, ca_pem, anchor, records):
    by_id = {row["id"]: row for row in records}
    head_cp, prune_cp, signed_ids = newest_checkpoints(db, ca_pem)
    check_notes(anchor, records, signed_ids)
    if records and (head_cp is None or (anchor is not None and head_cp["id"] <= anchor["id"])) and \
            time.time() - records[0]["at"] > 65:
        sys.exit("no signed checkpoint covers the records: they were deleted")
    if anchor is not None and (prune_cp is None or (prune_cp["id"], prune_cp["record_at"], prune_cp["hash"]) !=
                               (anchor["id"], anchor["at"], anchor["hash"])):
        sys.exit("the anchor (record %d) is not the one a signed pruning left" % anchor["id"])
    if anchor is None and prune_cp is not None:
        sys.exit("the anchor is missing, though records were pruned")
    if head_cp is not None and (anchor is None or head_cp["id"] > anchor["id"]):
        row = by_id.get(head_cp["id"])
        if row is None or row["hash"] != head_cp["hash"] or row["at"] != head_cp["record_at"]:
            sys.exit("record %d, signed by a checkpoint, is not in the log as signed" % head_cp["id"])


def check(db, ca_pem=None):
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
    if ca_pem:
        check_checkpoints(db, ca_pem, anchor, rows(db))
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
    if len(sys.argv) not in (3, 4) or sys.argv[1] not in ("check", "rechain") or \
            (sys.argv[1] == "rechain" and len(sys.argv) != 3):
        sys.exit(__doc__)
    db = sqlite3.connect(sys.argv[2])
    db.row_factory = sqlite3.Row
    if sys.argv[1] == "check":
        check(db, *sys.argv[3:])
    else:
        rechain(db)


main()
