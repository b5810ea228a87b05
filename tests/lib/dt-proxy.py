#!/usr/bin/env python3
"""dt-proxy.py - a proxy in front of sbxd's Daytona API, as one on the way to
Daytona's cloud may be:

  refuse            refuses every WebSocket upgrade (502, an empty body),
                    so that a client has to do without;
  tls CERT KEY      serves HTTPS (CERT, KEY: PEM files) and passes
                    upgrades through, so that a client's TLS WebSocket
                    meets sbxd's;
  slow MS           refuses upgrades as refuse does, and holds every
                    other request MS ms before it goes on: a far
                    server, whose calls take long.

Every other request goes on to sbxd, and the toolboxProxyUrl in its
answers names the proxy, so the toolbox's requests come here too. Each
upgrade is logged to LOG as "refused PATH" or "upgraded PATH".

usage: dt-proxy.py PORTFILE UPSTREAM LOG refuse|tls CERT KEY|slow MS
UPSTREAM is http://HOST:PORT.  Binds 127.0.0.1 on a free port and writes
the port to PORTFILE.
"""
import http.client
import http.server
import os
import select
import socket
import ssl
import sys
import threading
import time
import urllib.parse

portfile, upstream, log, mode = sys.argv[1:5]
up = urllib.parse.urlsplit(upstream)
lock = threading.Lock()


def note(line):
    with lock, open(log, "a") as f:
        f.write(line + "\n")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    rbufsize = 0  # nothing of an upgraded stream stays in a buffer

    def log_message(self, *args):
        pass

    def mine(self):
        return "%s://127.0.0.1:%d" % ("https" if mode == "tls" else "http",
                                       self.server.server_address[1])

    def pipe(self):
        """The upgrade goes on to sbxd, and then bytes both ways."""
        note("upgraded %s" % self.path)
        u = socket.create_connection((up.hostname, up.port))
        head = "%s %s HTTP/1.1\r\n" % (self.command, self.path)
        for k, v in self.headers.items():
            head += "%s: %s\r\n" % (k, v)
        u.sendall((head + "\r\n").encode())
        c = self.connection
        while True:
            ready = [c] if getattr(c, "pending", lambda: 0)() else \
                select.select([c, u], [], [], 5)[0]
            for s in ready:
                data = s.recv(65536)
                if not data:
                    u.close()
                    return
                (u if s is c else c).sendall(data)

    def relay(self):
        if "upgrade" in self.headers.get("Connection", "").lower():
            if mode == "tls":
                self.close_connection = True
                return self.pipe()
            note("refused %s" % self.path)
            self.send_response(502)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        if mode == "slow":
            time.sleep(int(sys.argv[5]) / 1000)
        hdrs = {k: v for k, v in self.headers.items()
                if k.lower() not in ("host", "connection", "content-length")}
        c = http.client.HTTPConnection(up.hostname, up.port, timeout=120)
        c.request(self.command, self.path, body=body, headers=hdrs)
        r = c.getresponse()
        data = r.read().replace(upstream.encode(), self.mine().encode())
        self.send_response(r.status)
        for k, v in r.getheaders():
            if k.lower() not in ("content-length", "transfer-encoding",
                                 "connection"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        c.close()

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = relay


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
srv.daemon_threads = True
if mode == "tls":
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[5], sys.argv[6])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
with open(portfile + ".tmp", "w") as f:
    f.write("%d\n" % srv.server_address[1])
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
