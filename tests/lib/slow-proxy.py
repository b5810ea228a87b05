#!/usr/bin/env python3
"""slow-proxy.py - a proxy in front of a test registry that makes the
parallelism of a pull observable without timing: a GET of blob SLOW is held
until another blob GET is opened after it (or HOLD seconds have passed, so
a client that fetches one blob at a time still ends), and every blob GET is
logged to LOG as "open HEX" when it comes and "done HEX" once answered.
With WATCH, a glob, blob SLOW is held instead until a file matches it
(logged "seen") or HOLD seconds have passed (logged "timeout"): what the
client made while it had none of that blob.

usage: slow-proxy.py PORTFILE UPSTREAM LOG SLOW [HOLD [WATCH]]
UPSTREAM is HOST:PORT (plain HTTP); SLOW a digest (sha256:HEX).  Binds
127.0.0.1 on a free port and writes the port to PORTFILE.
"""
import glob
import http.server
import os
import time
import re
import sys
import threading
import urllib.error
import urllib.request

portfile, upstream, log, slow = sys.argv[1:5]
hold = float(sys.argv[5]) if len(sys.argv) > 5 else 10.0
watch = sys.argv[6] if len(sys.argv) > 6 else None
lock = threading.Lock()
opened = threading.Condition()
opens = 0


def note(line):
    with lock, open(log, "a") as f:
        f.write(line + "\n")


class Proxy(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def do_GET(self):
        m = re.search(r"/blobs/(sha256:[0-9a-f]{64})$", self.path)
        digest = m.group(1) if m else None
        global opens
        if digest:
            note("open " + digest)
            with opened:
                opens += 1
                n = opens
                opened.notify_all()
                if digest == slow and not watch:
                    opened.wait_for(lambda: opens > n, hold)
        if digest == slow and watch:
            end = time.monotonic() + hold
            while not glob.glob(watch) and time.monotonic() < end:
                time.sleep(0.05)
            note("seen" if glob.glob(watch) else "timeout")
        req = urllib.request.Request("http://" + upstream + self.path)
        for h in ("Accept", "Authorization"):
            if self.headers.get(h):
                req.add_header(h, self.headers[h])
        try:
            r = urllib.request.urlopen(req)
            status, body, headers = r.status, r.read(), r.headers
        except urllib.error.HTTPError as e:
            status, body, headers = e.code, e.read(), e.headers
        self.send_response(status)
        for h in ("Content-Type", "Docker-Content-Digest",
                  "WWW-Authenticate"):
            if headers.get(h):
                self.send_header(h, headers[h])
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        if digest:
            note("done " + digest)


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
srv.daemon_threads = True
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
