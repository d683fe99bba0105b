#!/usr/bin/env python3
"""Creates (or shows) a JetStream stream over the plain NATS protocol, no client library.

    nats_stream.py HOST:PORT create NAME SUBJECT REPLICAS DUP_WINDOW_SECS
    nats_stream.py HOST:PORT info NAME

converge's relay creates its stream with one replica when it is missing; up.sh creates it
first, replicated on every node, so a broker node's loss loses no published event. Prints
the API's JSON answer; exits 1 on an error answer (an existing stream is not an error).
"""
import json
import socket
import sys


def request(addr, subject, payload):
    host, port = addr.rsplit(":", 1)
    s = socket.create_connection((host, int(port)), timeout=10)
    f = s.makefile("rb")
    f.readline()  # INFO
    inbox = "_INBOX.converge_ha_stream"
    body = json.dumps(payload).encode() if payload is not None else b""
    s.sendall(b'CONNECT {"verbose":false,"pedantic":false,"headers":false}\r\n')
    s.sendall(f"SUB {inbox} 1\r\n".encode())
    s.sendall(f"PUB {subject} {inbox} {len(body)}\r\n".encode() + body + b"\r\nPING\r\n")
    while True:
        line = f.readline()
        if not line:
            raise SystemExit("nats_stream: connection closed without an answer")
        if line.startswith(b"PING"):
            s.sendall(b"PONG\r\n")
        elif line.startswith(b"-ERR"):
            raise SystemExit(f"nats_stream: {line.decode().strip()}")
        elif line.startswith(b"MSG"):
            n = int(line.split()[-1])
            data = f.read(n + 2)[:n]
            s.close()
            return json.loads(data)


def main():
    addr, cmd, name = sys.argv[1], sys.argv[2], sys.argv[3]
    if cmd == "info":
        ans = request(addr, f"$JS.API.STREAM.INFO.{name}", None)
    elif cmd == "create":
        subject, replicas, window = sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
        cfg = {
            "name": name,
            "subjects": [subject],
            "retention": "limits",
            "storage": "file",
            "discard": "old",
            "num_replicas": replicas,
            "duplicate_window": window * 1_000_000_000,
        }
        ans = request(addr, f"$JS.API.STREAM.CREATE.{name}", cfg)
        err = ans.get("error")
        if err and err.get("err_code") == 10058:  # stream name already in use
            ans = request(addr, f"$JS.API.STREAM.INFO.{name}", None)
    else:
        raise SystemExit(__doc__)
    print(json.dumps(ans))
    sys.exit(1 if ans.get("error") else 0)


if __name__ == "__main__":
    main()
