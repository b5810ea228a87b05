# socks5-server.py - a SOCKS5 proxy for the tests (RFC 1928 CONNECT, RFC 1929
# user/password): socks5-server.py ADDR PORTFILE LOG [CREDFILE]
# Listens on ADDR on a free port, written to PORTFILE once it listens; its
# connections out leave from ADDR too (unless it is loopback), so a server
# sees ADDR as the peer.
# CREDFILE, when given, holds "user\npassword\n" (never argv): then only
# user/password is accepted, else only no authentication.  One line per
# event in LOG: "connect ADDR PORT", "auth ok USER", "auth refused USER",
# "refused-method".
import os, socket, struct, sys, threading

bind, portfile, log = sys.argv[1], sys.argv[2], sys.argv[3]
cred = open(sys.argv[4]).read().split("\n")[:2] if len(sys.argv) > 4 else None
lock = threading.Lock()

def note(line):
    with lock, open(log, "a") as f:
        f.write(line + "\n")

def exact(s, n):
    b = b""
    while len(b) < n:
        c = s.recv(n - len(b))
        if not c:
            raise EOFError
        b += c
    return b

def pipe(a, b):
    try:
        while True:
            d = a.recv(65536)
            if not d:
                break
            b.sendall(d)
        b.shutdown(socket.SHUT_WR)
    except OSError:
        pass

def serve(c):
    try:
        ver, n = exact(c, 2)
        methods = exact(c, n)
        want = 2 if cred else 0
        if ver != 5 or want not in methods:
            note("refused-method")
            c.sendall(b"\x05\xff")
            return
        c.sendall(bytes([5, want]))
        if cred:
            exact(c, 1)
            user = exact(c, exact(c, 1)[0]).decode()
            pw = exact(c, exact(c, 1)[0]).decode()
            ok = [user, pw] == cred
            note("auth %s %s" % ("ok" if ok else "refused", user))
            c.sendall(b"\x01" + (b"\x00" if ok else b"\x01"))
            if not ok:
                return
        ver, cmd, _, atyp = exact(c, 4)
        if atyp == 1:
            addr = socket.inet_ntop(socket.AF_INET, exact(c, 4))
        elif atyp == 4:
            addr = socket.inet_ntop(socket.AF_INET6, exact(c, 16))
        else:
            addr = exact(c, exact(c, 1)[0]).decode()
        port = struct.unpack(">H", exact(c, 2))[0]
        note("connect %s %d" % (addr, port))
        try:
            src = None if bind.startswith("127.") else (bind, 0)
            u = socket.create_connection((addr, port), timeout=5,
                                         source_address=src)
        except OSError:
            c.sendall(b"\x05\x05\x00\x01" + bytes(6))
            return
        u.settimeout(None)
        c.sendall(b"\x05\x00\x00\x01" + socket.inet_aton("127.0.0.1") + b"\x00\x00")
        t = threading.Thread(target=pipe, args=(u, c), daemon=True)
        t.start()
        pipe(c, u)
        t.join()
        u.close()
    except (EOFError, OSError):
        pass
    finally:
        c.close()

ls = socket.socket()
ls.bind((bind, 0))
ls.listen(64)
with open(portfile + ".tmp", "w") as f:
    f.write("%d\n" % ls.getsockname()[1])
os.rename(portfile + ".tmp", portfile)
while True:
    c, _ = ls.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
