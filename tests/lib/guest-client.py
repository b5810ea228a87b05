#!/usr/bin/env python3
"""guest-client.py SOCKET FRAME...: the host's side of a qemu guest's port
(lib/qemu/guest.h) for the tests: connects to QEMU's chardev socket (for
up to a minute while QEMU starts), sends each FRAME (ping, poweroff, or a
number: an unknown type) and prints each answer as one JSON line:
{"type": N, "data": "..."}. Answers are awaited for TIMEOUT seconds
(GUEST_TIMEOUT, default 120: a boot under TCG is slow)."""
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
    for f in sys.argv[2:]:
        t = TYPES.get(f) or int(f)
        s.sendall(struct.pack("<II", 0, t))
        if t == 3:
            continue
        try:
            n, rt = struct.unpack("<II", recv_exact(s, 8))
            data = recv_exact(s, n).decode("utf-8", "replace")
        except (socket.timeout, EOFError) as e:
            print("guest-client: no answer to %s: %s" % (f, e), file=sys.stderr)
            return 1
        print(json.dumps({"type": rt, "data": data}), flush=True)
    return 0


sys.exit(main())
