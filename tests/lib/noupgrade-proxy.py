#!/usr/bin/env python3
"""noupgrade-proxy.py - a proxy in front of sbxd's Daytona API that
refuses every WebSocket upgrade (as a proxy on the way may), so that a
client has to do without: an upgrade gets 502 with an empty body, every
other request goes on to sbxd, and the toolboxProxyUrl in its answers
names the proxy, so the toolbox's requests come here too. Each upgrade
refused is logged to LOG as "refused PATH".

usage: noupgrade-proxy.py PORTFILE UPSTREAM LOG
UPSTREAM is http://HOST:PORT.  Binds 127.0.0.1 on a free port and writes
the port to PORTFILE.
"""
import http.client
import os
import http.server
import sys
import threading
import urllib.parse

portfile, upstream, log = sys.argv[1:4]
up = urllib.parse.urlsplit(upstream)
lock = threading.Lock()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def relay(self):
        if "upgrade" in self.headers.get("Connection", "").lower():
            with lock, open(log, "a") as f:
                f.write("refused %s\n" % self.path)
            self.send_response(502)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        hdrs = {k: v for k, v in self.headers.items()
                if k.lower() not in ("host", "connection", "content-length")}
        c = http.client.HTTPConnection(up.hostname, up.port, timeout=120)
        c.request(self.command, self.path, body=body, headers=hdrs)
        r = c.getresponse()
        data = r.read()
        mine = "http://127.0.0.1:%d" % self.server.server_address[1]
        data = data.replace(upstream.encode(), mine.encode())
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
with open(portfile + ".tmp", "w") as f:
    f.write("%d\n" % srv.server_address[1])
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
