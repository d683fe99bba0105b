#!/usr/bin/env python3
"""Verify a converge NDJSON audit export without converge.

    python3 scripts/verify_audit_export.py EXPORT.ndjson [PUBLIC_KEY.pem]

1. The chain (standard library only): records run 1, 2, 3, ... without a gap, each
   prev_hash is the previous record's hash, and each hash is SHA-256 over the canonical JSON
   (keys sorted, no whitespace, UTF-8) of the record's fields and prev_hash.
2. The checkpoints (the lines {"checkpoint": {...}}): each one's seq is present with exactly
   its head_hash, so a cut or rebuilt export fails.
3. The signature of the latest checkpoint, an Ed25519 signature over the text
   "converge audit checkpoint v1\\nseq N\\nhead HASH\\nat MS\\n": with Python's
   `cryptography` when it is installed and a public key is given; otherwise the script writes
   checkpoint.msg and checkpoint.sig next to the export and prints the openssl command.

Exits 0 when everything checked holds, 1 naming the first record that does not.
"""

import base64
import hashlib
import json
import os
import sys

GENESIS = "0" * 64


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def record_hash(r):
    body = {
        "seq": r["seq"], "at": r["at"], "actor": r["actor"], "roles": r["roles"],
        "action": r["action"], "target": r["target"], "reason": r["reason"],
        "before": r["before_state"], "after": r["after_state"], "meta": r["request_meta"],
        "prev_hash": r["prev_hash"],
    }
    return hashlib.sha256(canonical(body).encode("utf-8")).hexdigest()


def message(c):
    return f"converge audit checkpoint v1\nseq {c['seq']}\nhead {c['head_hash']}\nat {c['at']}\n"


def fail(why):
    print(f"FAIL: {why}")
    sys.exit(1)


def main(path, public_key=None):
    seq, prev, hashes, checkpoints = 0, GENESIS, {0: GENESIS}, []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            r = json.loads(line)
            if "checkpoint" in r:
                checkpoints.append(r["checkpoint"])
                continue
            if r["seq"] != seq + 1:
                fail(f"record {seq + 1} is missing")
            if r["prev_hash"] != prev or record_hash(r) != r["hash"]:
                fail(f"record {r['seq']} does not chain (edited)")
            seq, prev = r["seq"], r["hash"]
            hashes[seq] = prev
    if not checkpoints:
        fail("no signed checkpoint: nothing proves the export is whole")
    for c in sorted(checkpoints, key=lambda c: c["seq"]):
        if c["seq"] > seq:
            fail(f"record {seq + 1} is missing (a checkpoint covers {c['seq']} records)")
        if hashes[c["seq"]] != c["head_hash"]:
            fail(f"record {c['seq']} differs from its signed checkpoint (rebuilt)")
    latest = max(checkpoints, key=lambda c: (c["seq"], c["at"]))
    print(f"chain intact: {seq} records; checkpoint seq {latest['seq']} matches")
    sig = base64.b64decode(latest["signature"])
    try:
        from cryptography.hazmat.primitives.serialization import load_pem_public_key
        from cryptography.exceptions import InvalidSignature
    except ImportError:
        load_pem_public_key = None
    if public_key and load_pem_public_key:
        with open(public_key, "rb") as k:
            key = load_pem_public_key(k.read())
        try:
            key.verify(sig, message(latest).encode("utf-8"))
        except InvalidSignature:
            fail(f"checkpoint seq {latest['seq']}: signature does not verify with {public_key}")
        print(f"signature verified with {public_key}")
        return
    base = os.path.splitext(path)[0]
    with open(base + ".checkpoint.msg", "w", encoding="utf-8", newline="") as m:
        m.write(message(latest))
    with open(base + ".checkpoint.sig", "wb") as s:
        s.write(sig)
    print("check the signature with:")
    print(f"  openssl pkeyutl -verify -pubin -inkey PUBLIC_KEY.pem -rawin "
          f"-in {base}.checkpoint.msg -sigfile {base}.checkpoint.sig")


if __name__ == "__main__":
    if len(sys.argv) not in (2, 3):
        print(__doc__)
        sys.exit(2)
    main(*sys.argv[1:])
