"""networld-server.py CONF - the servers of the network tests' outside world
(tests/lib/networld.bash runs it inside the world's network namespace).

CONF is a JSON file:
  {"names": {"a.test": "198.18.1.1", ...},   served and resolved
   "dns": "198.18.0.2",                      the DNS server's address (port 53)
   "http": 80, "https": 443, "hello": 22, "udp": 9999,
   "udp6": "2001:db8:5b8:10::2",             a UDP echo there too (optional)
   "cert": PEM, "key": PEM,                  the leaf for every name
   "log": FILE,                              one line per connection/query
   "ready": FIFO}                            "ready" once everything listens

On every name's address:
  - HTTP and HTTPS: every request is answered 200 with a JSON body naming
    the server and echoing the request: method, path, Host, every header,
    the TLS SNI, the peer. GET /bytes/N answers N bytes of "x" instead.
  - hello: a plain TCP server that speaks first ("hello from NAME\n"), as
    SSH does, and hangs up.
  - UDP: an echo server.
On the DNS address: A records for the names (NOERROR without answers for
other types of a known name), NXDOMAIN for anything else.

The log lines: "tcp ADDR PORT PEER" per accepted TCP connection, "udp ADDR
PORT PEER" per datagram, "dns NAME QTYPE PEER" per query.
"""
import json
import socket
import socketserver
import ssl
import struct
import sys
import threading
from http.server import BaseHTTPRequestHandler

conf = json.load(open(sys.argv[1]))
names = {k.lower(): v for k, v in conf["names"].items()}
by_addr = {}
for n, a in names.items():
    by_addr.setdefault(a, n)
log_lock = threading.Lock()
log_file = open(conf["log"], "a", buffering=1)


def log(*words):
    with log_lock:
        log_file.write(" ".join(str(w) for w in words) + "\n")


tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
tls.load_cert_chain(conf["cert"], conf["key"])


def remember_sni(sock, name, ctx):
    sock.sbx_sni = name


tls.sni_callback = remember_sni


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.0"

    def setup(self):
        self.request.settimeout(10)
        addr, port = self.request.getsockname()[:2]
        log("tcp", addr, port, self.client_address[0])
        self.sni = None
        if self.server.tls:
            self.request = tls.wrap_socket(self.request, server_side=True)
            self.sni = getattr(self.request, "sbx_sni", None)
        super().setup()

    def answer(self):
        addr, port = self.request.getsockname()[:2]
        if self.path.startswith("/bytes/") and self.path[7:].isdigit():
            body = b"x" * int(self.path[7:])
            ctype = "application/octet-stream"
        else:
            n = int(self.headers.get("Content-Length") or 0)
            got = self.rfile.read(n) if n > 0 else b""
            headers = {}
            for k, v in self.headers.items():
                k = k.lower()
                headers[k] = headers[k] + ", " + v if k in headers else v
            body = json.dumps({
                "server": by_addr.get(addr, addr), "addr": addr, "port": port,
                "tls": self.server.tls, "sni": self.sni,
                "method": self.command, "path": self.path,
                "host": self.headers.get("Host"), "headers": headers,
                "body_bytes": len(got), "peer": self.client_address[0],
            }).encode() + b"\n"
            ctype = "application/json"
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = answer

    def log_message(self, *args):
        pass


class HTTPServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128

    def __init__(self, addr, use_tls):
        self.tls = use_tls
        super().__init__(addr, Handler)

    def handle_error(self, request, client_address):
        pass  # a client that hangs up or fails TLS is not our business


class Hello(socketserver.BaseRequestHandler):
    def handle(self):
        addr, port = self.request.getsockname()[:2]
        log("tcp", addr, port, self.client_address[0])
        self.request.sendall(("hello from %s\n" % by_addr.get(addr, addr)).encode())


class HelloServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass


def udp_echo(sock):
    while True:
        data, peer = sock.recvfrom(65535)
        addr, port = sock.getsockname()[:2]
        log("udp", addr, port, peer[0])
        sock.sendto(data, peer)


def dns_answer(data):
    qid, flags, qdcount = struct.unpack(">HHH", data[:6])
    if qdcount != 1:
        return None, None, None
    i, labels = 12, []
    while data[i] != 0:
        n = data[i]
        labels.append(data[i + 1:i + 1 + n].decode("ascii", "replace"))
        i += 1 + n
    i += 1
    qtype, qclass = struct.unpack(">HH", data[i:i + 4])
    question = data[12:i + 4]
    name = ".".join(labels).lower()
    answers = b""
    rcode = 0
    if name not in names:
        rcode = 3
    elif qtype in (1, 255) and qclass == 1:
        answers = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + \
            socket.inet_aton(names[name])
    reply = struct.pack(">HHHHHH", qid, 0x8400 | (flags & 0x0100) | rcode, 1,
                        1 if answers else 0, 0, 0) + question + answers
    return reply, name, qtype


def dns_serve(sock):
    while True:
        data, peer = sock.recvfrom(4096)
        try:
            reply, name, qtype = dns_answer(data)
        except (IndexError, struct.error):
            continue
        if reply is None:
            continue
        log("dns", name, qtype, peer[0])
        sock.sendto(reply, peer)


def thread(target, *args):
    threading.Thread(target=target, args=args, daemon=True).start()


for addr in sorted(set(names.values())):
    thread(HTTPServer((addr, conf["http"]), False).serve_forever)
    thread(HTTPServer((addr, conf["https"]), True).serve_forever)
    thread(HelloServer((addr, conf["hello"]), Hello).serve_forever)
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind((addr, conf["udp"]))
    thread(udp_echo, u)
if conf.get("udp6"):
    u = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM)
    u.bind((conf["udp6"], conf["udp"]))
    thread(udp_echo, u)
d = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
d.bind((conf["dns"], 53))
thread(dns_serve, d)

with open(conf["ready"], "w") as f:
    f.write("ready\n")
threading.Event().wait()
