#!/usr/bin/env python3
"""sbxd-load.py URL KEYFILE CLIENTS COMMANDS - a bounded load on sbxd:
each client creates a sandbox, runs COMMANDS commands through the
process service (checking each one's output and exit code), and kills
it. Prints one line per failure and "ok N" at the end; exits 1 on any
failure."""
import http.client, json, struct, sys, threading, urllib.parse

url, keyfile, nclients, ncmds = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
key = open(keyfile).read().strip()
u = urllib.parse.urlsplit(url)
errors, done = [], []
lock = threading.Lock()


def frames(data):
    out, i = [], 0
    while i + 5 <= len(data):
        flags, n = data[i], struct.unpack(">I", data[i + 1:i + 5])[0]
        out.append((flags, json.loads(data[i + 5:i + 5 + n])))
        i += 5 + n
    return out


def client(n):
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    try:
        c.request("POST", "/sandboxes", json.dumps({"templateID": "base", "timeout": 300}),
                  {"X-API-Key": key, "Content-Type": "application/json"})
        r = c.getresponse()
        body = r.read()
        if r.status != 201:
            raise Exception("create: %d %s" % (r.status, body[:200]))
        sid = json.loads(body)["sandboxID"]
        hdr = {"E2b-Sandbox-Id": sid, "E2b-Sandbox-Port": "49983",
               "Content-Type": "application/connect+json"}
        for i in range(ncmds):
            req = json.dumps({"process": {"cmd": "/bin/sh", "args": ["-c", "echo %d-%d; exit %d" % (n, i, i % 3)]}}).encode()
            c.request("POST", "/process.Process/Start", bytes([0]) + struct.pack(">I", len(req)) + req, hdr)
            r = c.getresponse()
            fr = frames(r.read())
            out = b"".join(__import__("base64").b64decode(f[1]["event"]["data"]["stdout"])
                           for f in fr if "data" in f[1].get("event", {}) and "stdout" in f[1]["event"]["data"])
            end = [f[1]["event"]["end"] for f in fr if "end" in f[1].get("event", {})]
            if r.status != 200 or out != b"%d-%d\n" % (n, i) or not end or end[0].get("exitCode", 0) != i % 3 or fr[-1] != (2, {}):
                raise Exception("command %d: %d %r %r" % (i, r.status, out, fr[-2:]))
        c.request("DELETE", "/sandboxes/" + sid, headers={"X-API-Key": key})
        r = c.getresponse()
        r.read()
        if r.status != 204:
            raise Exception("kill: %d" % r.status)
        with lock:
            done.append(n)
    except Exception as e:
        with lock:
            errors.append("client %d: %s" % (n, e))
    finally:
        c.close()


ts = [threading.Thread(target=client, args=(n,)) for n in range(nclients)]
for t in ts:
    t.start()
for t in ts:
    t.join()
for e in errors:
    print(e)
print("ok %d" % len(done))
sys.exit(1 if errors else 0)
