#!/usr/bin/env python3
"""token-server.py - the token service of a test registry (Docker's token
auth): GET /token?service=S&scope=repository:NAME:ACTIONS answers
{"token": JWT} signed RS256 with KEY, its certificate CERT in the JWT's x5c
(the registry trusts CERT as its rootcertbundle).  With USER and PASSWORD,
only a request with that Basic authorisation gets a token (401 otherwise);
without, anyone does.  Each request is appended to LOG as one JSON line
(whether it had credentials, the scope), never the password.

usage: token-server.py PORTFILE KEY CERT ISSUER LOG [USER PASSWORD]
Binds 127.0.0.1 on a free port and writes the port to PORTFILE.
"""
import base64
import http.server
import json
import os
import subprocess
import sys
import time
import urllib.parse

portfile, key, cert, issuer, log = sys.argv[1:6]
user, password = (sys.argv[6], sys.argv[7]) if len(sys.argv) > 7 else (None, None)


def b64url(b):
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


with open(cert) as f:
    pem = f.read()
der = base64.b64decode("".join(
    l for l in pem.splitlines() if l and not l.startswith("-----")))


def token(service, scopes, sub):
    now = int(time.time())
    access = []
    for s in scopes:
        parts = s.split(":")
        if len(parts) == 3 and parts[0] == "repository":
            access.append({"type": "repository", "name": parts[1],
                           "actions": parts[2].split(",")})
    head = {"typ": "JWT", "alg": "RS256",
            "x5c": [base64.b64encode(der).decode()]}
    claims = {"iss": issuer, "sub": sub, "aud": service, "exp": now + 300,
              "nbf": now - 10, "iat": now, "jti": os.urandom(8).hex(),
              "access": access}
    signing = (b64url(json.dumps(head).encode()) + "." +
               b64url(json.dumps(claims).encode()))
    sig = subprocess.run(["openssl", "dgst", "-sha256", "-sign", key],
                         input=signing.encode(), capture_output=True,
                         check=True).stdout
    return signing + "." + b64url(sig)


class H(http.server.BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        u = urllib.parse.urlparse(self.path)
        q = urllib.parse.parse_qs(u.query)
        auth = self.headers.get("Authorization", "")
        sub = ""
        ok = user is None
        if auth.startswith("Basic "):
            try:
                got = base64.b64decode(auth[6:]).decode()
            except Exception:
                got = ""
            sub = got.split(":", 1)[0]
            ok = ok or got == "%s:%s" % (user, password)
        with open(log, "a") as f:
            f.write(json.dumps({"path": u.path, "basic": bool(sub),
                                "scope": q.get("scope", []),
                                "service": q.get("service", [""])[0],
                                "granted": ok}) + "\n")
        if u.path != "/token" or not ok:
            self.send_response(401 if u.path == "/token" else 404)
            self.end_headers()
            return
        body = json.dumps({"token": token(q.get("service", [""])[0],
                                          q.get("scope", []), sub)}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
