#!/usr/bin/env python3
"""Reads every message of a JetStream stream and checks it against converge's outbox.

    stream_check.py HOST:PORT STREAM EVENTS_TSV PUBLICATIONS_TSV [OUT_DIR]

EVENTS_TSV: `psql -At -F '<TAB>'` of `SELECT id, seq, aggregatetype, aggregateid FROM events`;
PUBLICATIONS_TSV: of `SELECT event_id, coalesce(stream_seq, 0), refused IS NOT NULL FROM
event_publications`. Issue 40: "each event in the stream once (by Nats-Msg-Id), per payment in
commit order". converge's relay (server/src/worker/relay.rs) publishes each outbox event with
header `Nats-Msg-Id` = the event id, in outbox order (`events.seq`, which per aggregate is
commit order: an aggregate's transitions are serialised), and records the PubAck's stream
sequence in `event_publications`. Checks, each a count on the last line:

  duplicates    messages whose Nats-Msg-Id an earlier message already had
  out_of_order  per aggregate (aggregatetype, aggregateid), adjacent messages whose outbox seq
                goes down in stream order
  missing       events the database records as published (a stream sequence) that no message
                carries
  unknown       messages whose Nats-Msg-Id is no event in the database, or with none
  seq_mismatch  events whose recorded stream sequence is not the sequence of their message
  body_mismatch messages whose body's `id`/`seq` disagree with the header / the database

Reads over the plain NATS protocol with `$JS.API.STREAM.MSG.GET` (answers carry the headers
base64-encoded), so it needs no client library: the same as nats_stream.py. Exits 1 when any
count but `messages` is non-zero (or the stream cannot be read). Writes the offending ids to
OUT_DIR/stream_*.txt when OUT_DIR is given.
"""
import base64
import json
import os
import socket
import sys


class Nats:
    def __init__(self, addr):
        host, port = addr.rsplit(":", 1)
        self.s = socket.create_connection((host, int(port)), timeout=30)
        self.f = self.s.makefile("rb")
        self.f.readline()  # INFO
        self.s.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":false}\r\n')
        self.s.sendall(b"SUB _INBOX.converge_ha_check.* 1\r\n")

    def requests(self, reqs):
        """Sends every (subject, payload) at once; returns the answers in order."""
        out = b"".join(
            f"PUB {subj} _INBOX.converge_ha_check.{i} {len(body)}\r\n".encode() + body + b"\r\n"
            for i, (subj, body) in enumerate(reqs)
        )
        self.s.sendall(out + b"PING\r\n")
        answers = {}
        while len(answers) < len(reqs):
            line = self.f.readline()
            if not line:
                raise SystemExit("stream_check: connection closed")
            if line.startswith(b"PING"):
                self.s.sendall(b"PONG\r\n")
            elif line.startswith(b"-ERR"):
                raise SystemExit(f"stream_check: {line.decode().strip()}")
            elif line.startswith(b"MSG"):
                parts = line.split()
                n = int(parts[-1])
                data = self.f.read(n + 2)[:n]
                answers[int(parts[1].rsplit(b".", 1)[1])] = json.loads(data)
        return [answers[i] for i in range(len(reqs))]


def msg_id(hdrs_b64):
    if not hdrs_b64:
        return None
    for line in base64.b64decode(hdrs_b64).decode("utf-8", "replace").split("\r\n")[1:]:
        k, sep, v = line.partition(":")
        if sep and k.strip().lower() == "nats-msg-id":
            return v.strip()
    return None


def main():
    if len(sys.argv) < 5:
        raise SystemExit(__doc__)
    addr, stream, events_tsv, pubs_tsv = sys.argv[1:5]
    out_dir = sys.argv[5] if len(sys.argv) > 5 else None

    events = {}  # id -> (seq, aggregate)
    with open(events_tsv) as f:
        for line in f:
            if line.strip():
                eid, seq, atype, aid = line.rstrip("\n").split("\t")
                events[eid] = (int(seq), f"{atype}/{aid}")
    recorded = {}  # event id -> stream seq (published, not refused)
    with open(pubs_tsv) as f:
        for line in f:
            if line.strip():
                eid, sseq, refused = line.rstrip("\n").split("\t")
                if refused != "t" and int(sseq) > 0:
                    recorded[eid] = int(sseq)

    nats = Nats(addr)
    info = nats.requests([(f"$JS.API.STREAM.INFO.{stream}", b"")])[0]
    if info.get("error"):
        raise SystemExit(f"stream_check: {stream}: {info['error']}")
    first, last = info["state"]["first_seq"], info["state"]["last_seq"]
    msgs = []  # (stream seq, msg id, body)
    chunk = 500
    for lo in range(first, last + 1, chunk):
        seqs = list(range(lo, min(lo + chunk, last + 1)))
        reqs = [(f"$JS.API.STREAM.MSG.GET.{stream}", json.dumps({"seq": s}).encode()) for s in seqs]
        for s, ans in zip(seqs, nats.requests(reqs)):
            if ans.get("error"):
                if ans["error"].get("err_code") == 10037:  # no message (deleted)
                    continue
                raise SystemExit(f"stream_check: seq {s}: {ans['error']}")
            m = ans["message"]
            body = json.loads(base64.b64decode(m.get("data") or "") or b"null")
            msgs.append((m["seq"], msg_id(m.get("hdrs")), body))

    seen = {}
    dups, unknown, body_bad, order_bad, seq_bad = [], [], [], [], []
    last_of = {}  # aggregate -> (outbox seq, msg id) of its latest message so far
    for sseq, mid, body in msgs:
        if mid is None or mid not in events:
            unknown.append(f"{sseq}\t{mid}")
            continue
        if mid in seen:
            dups.append(f"{mid}\tstream seqs {seen[mid]} and {sseq}")
            continue
        seen[mid] = sseq
        oseq, agg = events[mid]
        if not isinstance(body, dict) or body.get("id") != mid or body.get("seq") != oseq:
            body_bad.append(f"{sseq}\t{mid}")
        prev = last_of.get(agg)
        if prev is not None and oseq < prev[0]:
            order_bad.append(f"{agg}\t{prev[1]} (outbox seq {prev[0]}) before {mid} (outbox seq {oseq})")
        if prev is None or oseq > prev[0]:
            last_of[agg] = (oseq, mid)
        if mid in recorded and recorded[mid] != sseq:
            seq_bad.append(f"{mid}\trecorded {recorded[mid]}, in the stream at {sseq}")
    missing = sorted(e for e in recorded if e not in seen)

    if out_dir:
        for name, rows in (("duplicates", dups), ("out_of_order", order_bad), ("missing", missing),
                           ("unknown", unknown), ("seq_mismatch", seq_bad), ("body_mismatch", body_bad)):
            with open(os.path.join(out_dir, f"stream_{name}.txt"), "w") as f:
                f.writelines(r + "\n" for r in rows)
    for name, rows in (("duplicate", dups), ("out of order", order_bad), ("missing", missing)):
        for r in rows[:5]:
            print(f"stream_check: {name}: {r}", file=sys.stderr)
    print(f"messages={len(msgs)} aggregates={len(last_of)} events_published={len(recorded)} "
          f"duplicates={len(dups)} out_of_order={len(order_bad)} missing={len(missing)} "
          f"unknown={len(unknown)} seq_mismatch={len(seq_bad)} body_mismatch={len(body_bad)}")
    sys.exit(1 if dups or order_bad or missing or unknown or seq_bad or body_bad else 0)


if __name__ == "__main__":
    main()
