# Opens N Server-Sent Events streams to navigatord's HTTP API, one session each (or all on the
# session named by $ONE), waits until every one has its snapshot, holds them HOLD seconds, closes.
#   python3 scripts/open-streams.py HOST PORT N [HOLD]
import asyncio, sys, os, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
hold = float(sys.argv[4]) if len(sys.argv) > 4 else 30
got = 0
async def one(i):
    global got
    r, w = await asyncio.open_connection(host, port)
    name = os.environ.get("ONE") or f"idle-{i}"
    w.write(f"GET /v1/sessions/{name}/stream HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    await w.drain()
    buf = b""
    while b"event: snapshot" not in buf:
        chunk = await r.read(65536)
        if not chunk: raise RuntimeError("closed")
        buf += chunk
    got += 1
    await asyncio.sleep(hold)
    w.close()
async def main():
    t = time.time()
    tasks = [asyncio.create_task(one(i)) for i in range(n)]
    while got < n:
        await asyncio.sleep(1)
        print(f"{got} streams have their snapshot after {time.time()-t:.1f} s", flush=True)
        if any(t.done() and t.exception() for t in tasks):
            print("a stream failed:", [t.exception() for t in tasks if t.done() and t.exception()][:3]); break
    print("ALL", flush=True)
    await asyncio.gather(*tasks, return_exceptions=True)
asyncio.run(main())
