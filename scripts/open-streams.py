# Opens N Server-Sent Events streams to navigatord's HTTP API, one session each (or all on the
# session named by $ONE), waits until every one has its snapshot, holds them HOLD seconds, closes.
# MODE=ws opens WebSocket streams instead; MODE=keepalive opens plain HTTP/1.1 connections that
# make one request (GET /healthz) and stay open idle (the per-connection part without a stream).
#   python3 scripts/open-streams.py HOST PORT N [HOLD]
import asyncio, base64, sys, os, time
host, port, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
hold = float(sys.argv[4]) if len(sys.argv) > 4 else 30
mode = os.environ.get("MODE", "sse")
got = 0
async def one(i):
    global got
    r, w = await asyncio.open_connection(host, port)
    name = os.environ.get("ONE") or f"idle-{i}"
    if mode == "connect":  # no request at all: only the connection
        got += 1
        await asyncio.sleep(hold)
        w.close()
        return
    if mode == "keepalive":
        w.write(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        marker = b"\r\n\r\n"
    elif mode == "ws":
        key = base64.b64encode(os.urandom(16)).decode()
        w.write((f"GET /v1/sessions/{name}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                 f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n").encode())
        marker = b'"snapshot"'
    else:
        w.write(f"GET /v1/sessions/{name}/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        marker = b"event: snapshot"
    await w.drain()
    buf = b""
    while marker not in buf:
        chunk = await r.read(65536)
        if not chunk: raise RuntimeError("closed")
        buf += chunk
    got += 1
    end = time.time() + hold
    while time.time() < end:  # reads what comes (heartbeats; WebSocket pings are not answered)
        try:
            if not await asyncio.wait_for(r.read(65536), timeout=max(0.1, end - time.time())): break
        except asyncio.TimeoutError:
            break
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
