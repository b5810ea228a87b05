#!/usr/bin/env python3
"""guest-client.py SOCKET FRAME...: the host's side of a qemu guest's port
(lib/qemu/guest.h) for the tests: connects to QEMU's chardev socket (for
up to a minute while QEMU starts), sends each FRAME (ping, poweroff, a
number: an unknown type, or exec:JSON-ARRAY, a command) and prints each
answer as one JSON line: {"type": N, "data": "..."}, for an exec
{"out": "...", "err": "...", "status": WAIT-STATUS} and, when it did not
start, "start": [STAGE, ERRNO]. Answers are awaited
for GUEST_TIMEOUT seconds (default 120: a boot under TCG is slow)."""
import json
import os
import socket
import struct
import sys
import time

TYPES = {"ping": 1, "poweroff": 3}
WANTS_ANSWER = {1}


def recv_exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError("the port closed")
        b += c
    return b


def main():
    if len(sys.argv) < 3:
        print("usage: guest-client.py SOCKET FRAME...", file=sys.stderr)
        return 2
    s = socket.socket(socket.AF_UNIX)
    end = time.time() + 60
    while True:
        try:
            s.connect(sys.argv[1])
            break
        except OSError:
            if time.time() > end:
                print("guest-client: no socket " + sys.argv[1], file=sys.stderr)
                return 1
            time.sleep(0.01)
    s.settimeout(float(os.environ.get("GUEST_TIMEOUT", "120")))
    for n_, f in enumerate(sys.argv[2:]):
        try:
            if f.startswith("exec:"):
                print(json.dumps(run(s, n_ + 1, json.loads(f[5:]))), flush=True)
                continue
            t = TYPES.get(f) or int(f)
            s.sendall(struct.pack("<II", 0, t))
            if t == 3:
                continue
            rt, data = frame(s)
        except (socket.timeout, EOFError) as e:
            print("guest-client: no answer to %s: %s" % (f, e), file=sys.stderr)
            return 1
        print(json.dumps({"type": rt, "data": data.decode("utf-8", "replace")}),
              flush=True)
    return 0


def frame(s):
    n, t = struct.unpack("<II", recv_exact(s, 8))
    return t, recv_exact(s, n)


def run(s, cid, argv):
    body = struct.pack("<II", cid, 0) + b"\0" + struct.pack("<II", 0, len(argv))
    body += b"".join(a.encode() + b"\0" for a in argv)
    s.sendall(struct.pack("<II", len(body), 5) + body)
    got = {1: b"", 2: b""}
    while True:
        t, d = frame(s)
        if t == 4:
            return {"error": d.decode()}
        i, v = struct.unpack("<II", d[:8])
        if t == 6:
            got[v] += d[8:]
        elif t == 7:
            r = {"id": i, "out": got[1].decode("utf-8", "replace"),
                 "err": got[2].decode("utf-8", "replace"), "status": v}
            if len(d) >= 16:
                r["start"] = list(struct.unpack("<II", d[8:16]))
            return r


sys.exit(main())
