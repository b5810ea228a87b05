#!/usr/bin/env python3
# rtt-proxy.py LPORT DPORT MS: a TCP proxy on 127.0.0.1:LPORT in front of
# 127.0.0.1:DPORT that holds each chunk MS/2 ms each way: a round trip of
# MS ms (a latency, not a bandwidth limit), as a remote API has. Prints
# "ready" once it listens. For the benchmarks' --rtt (e2b-exec,
# daytona-exec); loopback only.
import asyncio, sys
lport, dport, d = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]) / 2000
async def pipe(r, w):
    loop, q = asyncio.get_running_loop(), asyncio.Queue()
    async def writer():
        try:
            while (item := await q.get())[1]:
                await asyncio.sleep(max(0.0, item[0] - loop.time()))
                w.write(item[1])
                await w.drain()
        except OSError:
            pass
        w.close()
    t = asyncio.create_task(writer())
    try:
        while (b := await r.read(65536)):
            q.put_nowait((loop.time() + d, b))
    except OSError:
        pass
    q.put_nowait((0, b''))
    await t
async def handle(cr, cw):
    try:
        sr, sw = await asyncio.open_connection('127.0.0.1', dport)
    except OSError:
        cw.close()
        return
    await asyncio.gather(pipe(cr, sw), pipe(sr, cw))
async def main():
    s = await asyncio.start_server(handle, '127.0.0.1', lport)
    print('ready', flush=True)
    await s.serve_forever()
asyncio.run(main())
