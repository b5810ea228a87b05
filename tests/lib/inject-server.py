"""inject-server.py DIR ADDR_D ADDR_E - servers for tests/network-inject.bats,
run in the tests' world (networld.bash) beside its own server:

  - on ADDR_D (d.test): HTTP/1.1 with keep-alive on 8080, and HTTPS with the
    world's leaf (DIR/leaf.pem, DIR/leaf.key) on 8443. Every request is
    answered 200 with a JSON body: the method, the path, every header, the
    body's length and sha256 (a chunked body decoded), whether it came
    chunked, and how many requests its connection has carried so far;
  - on ADDR_E (e.test) 8443: HTTPS with DIR/untrusted.pem, a certificate that
    no CA signed.

Writes DIR/inject-ready once everything listens.
"""
import hashlib
import json
import os
import socketserver
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler

d, addr_d, addr_e = sys.argv[1], sys.argv[2], sys.argv[3]


def context(cert, key):
    c = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    c.load_cert_chain(cert, key)
    return c


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def setup(self):
        self.request.settimeout(10)
        if self.server.tls:
            self.request = self.server.tls.wrap_socket(self.request,
                                                       server_side=True)
        self.count = 0
        super().setup()

    def body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            got = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return got, True
                got += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return (self.rfile.read(n) if n > 0 else b""), False

    def answer(self):
        self.count += 1
        got, chunked = self.body()
        headers = {}
        for k, v in self.headers.items():
            k = k.lower()
            headers[k] = headers[k] + ", " + v if k in headers else v
        body = json.dumps({
            "method": self.command, "path": self.path, "headers": headers,
            "body_bytes": len(got), "body_sha256": hashlib.sha256(got).hexdigest(),
            "chunked": chunked, "request": self.count,
        }).encode() + b"\n"
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = answer

    def log_message(self, *args):
        pass


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, tls):
        self.tls = tls
        super().__init__(addr, Handler)

    def handle_error(self, request, client_address):
        pass


servers = [
    Server((addr_d, 8080), None),
    Server((addr_d, 8443), context(d + "/leaf.pem", d + "/leaf.key")),
    Server((addr_e, 8443), context(d + "/untrusted.pem", d + "/untrusted.key")),
]
for s in servers:
    threading.Thread(target=s.serve_forever, daemon=True).start()
with open(d + "/inject-ready.tmp", "w") as f:
    f.write("ready\n")
os.rename(d + "/inject-ready.tmp", d + "/inject-ready")
threading.Event().wait()
