"""Is the arena's workload client ever the bottleneck? Its overhead per streamed chunk and its
timestamp lag, against a plain minimal client, in the same run.

A stdlib SSE server (a separate process, so its CPU is not the client's) streams `--chunks`
chunks per request at a fixed interval to `--lanes` concurrent streams; every chunk carries the
server's `time.time()` taken just before it is written. Each client stamps `time.time()` as it
reads each `data:` line, so lag = client stamp - server stamp (one clock, one machine).

- arena: speculator_arena.runners.stream.stream_chat (one httpx.AsyncClient, lanes as tasks),
  then the same post-processing it does after every request (JSON parse of the kept lines).
- plain: asyncio streams on a raw socket; it stamps each line and keeps it, nothing else.

Client CPU per chunk is the client's process CPU time over the chunks it read.

    python benchmarks/client_overhead.py --lanes 8 --chunks 400 --interval-ms 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


# ---- server (runs in its own process) ------------------------------------------------------
def serve(port: int, chunks: int, interval: float) -> None:
    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            nxt = time.time()
            for i in range(chunks):
                nxt += interval
                delay = nxt - time.time()
                if delay > 0:
                    time.sleep(delay)
                line = ('data: {"choices":[{"index":0,"delta":{"content":" tok%d"},"finish_reason":null}],"t":%.6f}\n\n'
                        % (i, time.time())).encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()
            end = b"data: [DONE]\n\n"
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(end), end))
            self.wfile.flush()

    class Server(ThreadingHTTPServer):
        request_queue_size = 256  # every lane connects at once
        daemon_threads = True

    srv = Server(("127.0.0.1", port), H)
    srv.serve_forever()


# ---- clients ------------------------------------------------------------------------------
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


async def arena_client(port: int, lanes: int) -> list[float]:
    from speculator_arena.runners.stream import stream_chat
    from speculator_arena.runners.workload import make_client

    client = make_client(lanes)
    try:
        results = await asyncio.gather(*(stream_chat(client, f"http://127.0.0.1:{port}/v1/chat/completions", BODY,
                                                     deadline=time.time() + 600) for _ in range(lanes)))
    finally:
        await client.aclose()
    lags = []
    for r in results:
        assert r.done, r.error
        for t, payload in r.lines:
            lags.append(t - json.loads(payload)["t"])
    return lags


async def plain_client(port: int, lanes: int) -> list[float]:
    body = json.dumps(BODY).encode()
    req = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    async def one() -> list[tuple[float, bytes]]:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(req)
        await writer.drain()
        got = []
        clock = time.time
        while True:
            line = await reader.readline()
            if not line:
                break
            if line.startswith(b"data: "):
                t = clock()
                if line.startswith(b"data: [DONE]"):
                    break
                got.append((t, line))
        writer.close()
        return got

    results = await asyncio.gather(*(one() for _ in range(lanes)))
    lags = []
    for got in results:
        for t, line in got:
            lags.append(t - json.loads(line[6:])["t"])
    return lags


def measure(kind: str, port: int, lanes: int) -> dict:
    fn = arena_client if kind == "arena" else plain_client
    c0, w0 = time.process_time(), time.time()
    lags = asyncio.run(fn(port, lanes))
    cpu, wall = time.process_time() - c0, time.time() - w0
    lags_ms = sorted(x * 1000 for x in lags)
    return {"client": kind, "chunks": len(lags), "wall_s": wall, "cpu_s": cpu,
            "cpu_us_per_chunk": cpu / len(lags) * 1e6,
            "lag_ms_p50": statistics.median(lags_ms), "lag_ms_p99": lags_ms[int(0.99 * (len(lags_ms) - 1))],
            "lag_ms_max": lags_ms[-1]}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lanes", type=int, default=8)
    p.add_argument("--chunks", type=int, default=400)
    p.add_argument("--interval-ms", type=float, default=5.0)
    p.add_argument("--rounds", type=int, default=3, help="alternating rounds of each client")
    p.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.serve:
        serve(a.serve, a.chunks, a.interval_ms / 1000)
        return 0
    port = free_port()
    srv = subprocess.Popen([sys.executable, __file__, "--serve", str(port), "--chunks", str(a.chunks),
                            "--interval-ms", str(a.interval_ms)])
    try:
        import httpx

        for _ in range(100):
            try:
                httpx.get(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        print(f"# {a.lanes} lanes x {a.chunks} chunks at {a.interval_ms} ms, {a.rounds} rounds each; "
              f"{os.cpu_count()} CPUs; python {sys.version.split()[0]}")
        rows = []
        measure("plain", port, 1)  # warm both paths (imports, connection setup)
        measure("arena", port, 1)
        for _ in range(a.rounds):
            for kind in ("plain", "arena"):
                rows.append(measure(kind, port, a.lanes))
        print(f"{'client':6} {'chunks':>7} {'cpu us/chunk':>13} {'lag p50 ms':>11} {'lag p99 ms':>11} {'lag max ms':>11}")
        for r in rows:
            print(f"{r['client']:6} {r['chunks']:7d} {r['cpu_us_per_chunk']:13.1f} {r['lag_ms_p50']:11.3f} "
                  f"{r['lag_ms_p99']:11.3f} {r['lag_ms_max']:11.3f}")
        agg = {k: {m: statistics.median(r[m] for r in rows if r["client"] == k)
                   for m in ("cpu_us_per_chunk", "lag_ms_p50", "lag_ms_p99")} for k in ("plain", "arena")}
        print("# medians over rounds; ratio = arena / plain")
        for m in ("cpu_us_per_chunk", "lag_ms_p50", "lag_ms_p99"):
            print(f"{m:17} plain {agg['plain'][m]:9.3f}  arena {agg['arena'][m]:9.3f}  "
                  f"ratio {agg['arena'][m] / agg['plain'][m]:6.2f}")
        interval_us = a.interval_ms * 1000
        print(f"# arena CPU per chunk is {agg['arena']['cpu_us_per_chunk'] / interval_us * a.lanes:.1%} of one core "
              f"at this rate ({a.lanes} lanes, one chunk per lane every {a.interval_ms} ms)")
    finally:
        srv.terminate()
        srv.wait(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
