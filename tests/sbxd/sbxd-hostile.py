#!/usr/bin/env python3
"""sbxd-hostile.py [--addrs K] [--idle] [--keep] [--wait S] URL N [-- CMD ARGS...]:
a slowloris on loopback, bounded. Opens N connections to URL's host and
port, from K source addresses (127.0.0.1 .. 127.0.0.K, so that a
per-address cap is not what stops them), each with half a request head
sent (--idle: nothing sent), checks after --wait seconds (default 0.5)
how many the server still holds open, prints "held H of N" on stderr,
then runs CMD (if any) while they stay open (--keep: a thread opens a
new one for each the server closes, as a real slowloris would, and the
count of those is printed at the end) and exits with its status;
without CMD it exits 0 when all N are held, else 1. Everything is closed
at the end; the whole run is bounded by a 900 s alarm."""
import resource, select, signal, socket, subprocess, sys, threading, time, urllib.parse

args = sys.argv[1:]
addrs, idle, keep, wait = 1, False, False, 0.5
while args and args[0].startswith("--") and args[0] != "--":
    a = args.pop(0)
    if a == "--addrs":
        addrs = int(args.pop(0))
    elif a == "--idle":
        idle = True
    elif a == "--keep":
        keep = True
    elif a == "--wait":
        wait = float(args.pop(0))
    else:
        sys.exit("sbxd-hostile.py: unknown option " + a)
if len(args) < 2:
    sys.exit(__doc__)
url, n, cmd = args[0], int(args[1]), args[3:] if len(args) > 2 and args[2] == "--" else []
u = urllib.parse.urlsplit(url)
signal.alarm(900)

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
if soft < n + 256:
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 256), hard))


def opened(i):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.%d" % (1 + i % addrs), 0))
    s.settimeout(2)
    try:
        s.connect((u.hostname, u.port))
        if not idle:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    except OSError:
        s.close()
        return None
    return s


def alive(s):
    """No EOF and no error yet (readable means the server closed it)."""
    p = select.poll()
    p.register(s, select.POLLIN)
    if not p.poll(0):
        return True
    try:
        s.setblocking(False)
        return bool(s.recv(1, socket.MSG_PEEK))
    except (BlockingIOError, InterruptedError):
        return True
    except OSError:
        return False


socks = [opened(i) for i in range(n)]
time.sleep(wait)
held = sum(1 for s in socks if s is not None and alive(s))
print("held %d of %d" % (held, n), file=sys.stderr, flush=True)
rc = 0 if held == n else 1
done, reopened = threading.Event(), [0]


def keeper():
    while not done.wait(0.2):
        for i, s in enumerate(socks):
            if s is not None and alive(s):
                continue
            if s is not None:
                s.close()
            socks[i] = opened(i)
            reopened[0] += 1


if cmd:
    if keep:
        t = threading.Thread(target=keeper)
        t.start()
    rc = subprocess.call(cmd)
    if keep:
        done.set()
        t.join()
        print("reopened %d" % reopened[0], file=sys.stderr, flush=True)
for s in socks:
    if s is not None:
        s.close()
sys.exit(rc)
