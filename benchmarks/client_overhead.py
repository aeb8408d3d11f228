"""Is the arena's workload client ever the bottleneck? Its CPU per streamed chunk and its timestamp
lag, against the clients the field measures LLM serving with, in the same run on the same server.

A stdlib SSE server (a separate process, so its CPU is not the clients') streams `--chunks`
chat-completion chunks per request, one every `--interval-ms`, to `--lanes` concurrent streams
(HTTP/1.1 chunked, one event per chunk, shaped like vLLM's: a role chunk, text chunks, a finish
chunk, a usage chunk, then `data: [DONE]`); every text chunk's text carries the server's
`time.time()` taken just before it is written ("` tok7@1764588000.123456`"), so lag = client
stamp - server stamp (one clock, one machine), read after the client's CPU time is taken. Each client runs alone in this process while it is
measured, and the rounds alternate the clients' order.

- arena: `speculator_arena.runners.stream.stream_chat` with the SSEClient a pass uses
  (`workload.make_client`: keep-alive connections, lanes as tasks), including the payload
  decoding it does after each stream (`StreamResult.parse_yielding`).
- vllm: an aiohttp client shaped like `vllm bench serve`'s chat request function
  (vllm-project/vllm, vllm/benchmarks/lib/endpoint_request_func.py,
  `async_request_openai_chat_completions` with its `StreamedResponseHandler`; the session of
  vllm/benchmarks/serve.py: `TCPConnector(limit=concurrency, limit_per_host=concurrency,
  ttl_dns_cache=300, keepalive_timeout=60, enable_cleanup_closed=True, force_close=False)`,
  `ClientSession(trust_env=True, timeout=6 h)`): `async for chunk_bytes in
  response.content.iter_any()`, strip, incremental UTF-8 decode, split on blank lines (a
  trailing `data:` message is taken when it already parses as JSON), skip `:` comments,
  `removeprefix("data: ")`, `json.loads` per event, `time.perf_counter()` per event (mapped to
  the epoch once, for the lag only).
- guidellm: an httpx client shaped like GuideLLM's OpenAI HTTP backend (vllm-project/guidellm,
  src/guidellm/backends/openai/http.py `_resolve_streaming` and `_aiter_lines`;
  request_handlers.py `ChatCompletionsRequestHandler.add_streaming_line`): one
  `httpx.AsyncClient` with unlimited limits and a 5 s keep-alive expiry, `client.stream(...)`,
  `raise_for_status()`, `aiter_lines()`, blank lines skipped, `time.time()` per line,
  `"data: [DONE]"` ends the stream, else strip, `data:` prefix, `json.loads`,
  `choices[0].delta.content`, usage. Two differences, both in its favour or neutral: HTTP/2 off
  (GuideLLM turns it on, but httpx speaks HTTP/1.1 to an http:// server anyway) and the stdlib
  json (GuideLLM takes orjson when installed).

Client CPU per chunk is this process's CPU time over the client's whole run (connections,
requests, reading, decoding) divided by the content chunks it read.

    python benchmarks/client_overhead.py --lanes 40 --chunks 200 --interval-ms 10 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import codecs
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

CLIENTS = ("arena", "vllm", "guidellm")
PEERS = ("vllm", "guidellm")


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
            head = (
                '{"id":"chatcmpl-%d","object":"chat.completion.chunk","created":%d,"model":"m","choices":[{"index":0,'
                % (threading.get_ident(), time.time())
            )

            def send(delta: str, finish: str = "null") -> None:
                line = (
                    "data: " + head + '"delta":{%s},"logprobs":null,"finish_reason":%s}]}\n\n' % (delta, finish)
                ).encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(line), line))
                self.wfile.flush()

            send('"role":"assistant","content":""')
            nxt = time.time()
            for i in range(chunks):
                nxt += interval
                delay = nxt - time.time()
                if delay > 0:
                    time.sleep(delay)
                send('"content":" tok%d@%.6f"' % (i, time.time()))  # the server's stamp, taken as it writes
            send('"content":""', '"length"')
            usage = (
                'data: {"id":"chatcmpl-%d","object":"chat.completion.chunk","created":1,"model":"m","choices":[],'
                '"usage":{"prompt_tokens":9,"total_tokens":%d,"completion_tokens":%d}}\n\n' % (1, 9 + chunks, chunks)
            )
            end = usage.encode() + b"data: [DONE]\n\n"
            self.wfile.write(b"%x\r\n%s\r\n0\r\n\r\n" % (len(end), end))
            self.wfile.flush()

    class Server(ThreadingHTTPServer):
        request_queue_size = 256  # every lane connects at once
        daemon_threads = True

    srv = Server(("127.0.0.1", port), H)
    srv.serve_forever()


# ---- clients: each returns [(client stamp, chunk text)] per content chunk; the server's stamp
# is read from the text after the client's CPU time is taken -------------------------------
BODY = {
    "model": "m",
    "messages": [{"role": "user", "content": "hi"}],
    "stream": True,
    "stream_options": {"include_usage": True},
    "max_tokens": 256,
}


async def arena_client(url: str, lanes: int) -> list[tuple[float, str]]:
    from speculator_arena.runners.stream import SSEClient, stream_chat

    client = SSEClient(max_idle=lanes + 4, connect_timeout=30.0)  # what workload.make_client(lanes) builds
    try:
        results = await asyncio.gather(
            *(stream_chat(client, url, BODY, deadline=time.time() + 600) for _ in range(lanes))
        )
    finally:
        await client.aclose()
    out = []
    for r in results:
        assert r.done and r.error is None and r.finish_reason == "length" and r.usage_completion_tokens, r.error
        out.extend(zip(r.chunk_times, r.chunk_texts))
    return out


class StreamedResponseHandler:
    """vLLM's (vllm/benchmarks/lib/endpoint_request_func.py), same steps."""

    def __init__(self):
        self.buffer = ""
        self._decoder = codecs.getincrementaldecoder("utf-8")()

    def add_chunk(self, chunk_bytes: bytes) -> list[str]:
        self.buffer += self._decoder.decode(chunk_bytes)
        messages = []
        while "\n\n" in self.buffer:
            message, self.buffer = self.buffer.split("\n\n", 1)
            message = message.strip()
            if message:
                messages.append(message)
        if self.buffer.startswith("data: "):
            message_content = self.buffer.removeprefix("data: ").strip()
            if message_content == "[DONE]":
                messages.append(self.buffer.strip())
                self.buffer = ""
            elif message_content:
                try:
                    json.loads(message_content)
                    messages.append(self.buffer.strip())
                    self.buffer = ""
                except json.JSONDecodeError:
                    pass
        return messages


async def vllm_client(url: str, lanes: int) -> list[tuple[float, str]]:
    import aiohttp

    connector = aiohttp.TCPConnector(
        limit=lanes,
        limit_per_host=lanes,
        ttl_dns_cache=300,
        use_dns_cache=True,
        keepalive_timeout=60,
        enable_cleanup_closed=True,
        force_close=False,
        ssl=False,
    )
    session = aiohttp.ClientSession(
        connector=connector, trust_env=True, timeout=aiohttp.ClientTimeout(total=6 * 60 * 60)
    )
    to_epoch = time.time() - time.perf_counter()

    async def one() -> list[tuple[float, str]]:
        stamps = []
        itl: list[float] = []
        generated_text = ""
        st = time.perf_counter()
        most_recent_timestamp = st
        first_chunk_received = False
        async with session.post(url=url, json=BODY, headers={"Content-Type": "application/json"}) as response:
            assert response.status == 200, response.reason
            handler = StreamedResponseHandler()
            async for chunk_bytes in response.content.iter_any():
                chunk_bytes = chunk_bytes.strip()
                if not chunk_bytes:
                    continue
                for message in handler.add_chunk(chunk_bytes):
                    if message.startswith(":"):
                        continue
                    chunk = message.removeprefix("data: ")
                    if chunk != "[DONE]":
                        timestamp = time.perf_counter()
                        data = json.loads(chunk)
                        if choices := data.get("choices"):
                            content = choices[0]["delta"].get("content")
                            if not first_chunk_received:
                                first_chunk_received = True
                            else:
                                itl.append(timestamp - most_recent_timestamp)
                            generated_text += content or ""
                            most_recent_timestamp = timestamp
                            if content:
                                stamps.append((timestamp + to_epoch, content))
        assert first_chunk_received
        return stamps

    try:
        results = await asyncio.gather(*(one() for _ in range(lanes)))
    finally:
        await session.close()
    return [s for r in results for s in r]


class ChatLineHandler:
    """GuideLLM's ChatCompletionsRequestHandler.add_streaming_line for text deltas, same steps."""

    def __init__(self):
        self.streaming_texts: list[str] = []
        self.streaming_usage = None
        self.streaming_response_id = None

    def extract_line_data(self, line: str):
        if line == "data: [DONE]":
            return None
        if not line or not (line := line.strip()) or not line.startswith("data:"):
            return {}
        return json.loads(line[len("data:") :].strip())

    def add_streaming_line(self, line: str) -> int | None:
        if not (data := self.extract_line_data(line)):
            return None if data is None else 0
        if "id" in data and self.streaming_response_id is None:
            self.streaming_response_id = data["id"]
        updated = False
        choices, usage = data.get("choices", []), data.get("usage", {})
        choice = choices[0] if choices else {}
        delta = choice.get("delta", {}) if choices else {}
        if content := delta.get("content"):
            self.streaming_texts.append(content)
            updated = True
        for _ in delta.get("tool_calls", []):
            updated = True
        if usage:
            self.streaming_usage = usage
        return 1 if updated else 0


async def guidellm_client(url: str, lanes: int) -> list[tuple[float, str]]:
    import httpx

    client = httpx.AsyncClient(
        http2=False,
        timeout=httpx.Timeout(5.0, read=None, connect=5.0),
        follow_redirects=True,
        verify=False,
        limits=httpx.Limits(max_connections=None, max_keepalive_connections=None, keepalive_expiry=5.0),
    )

    async def one() -> list[tuple[float, str]]:
        stamps = []
        timings = {
            "first_request_iteration": None,
            "last_request_iteration": None,
            "request_iterations": 0,
            "first_token_iteration": None,
            "last_token_iteration": None,
            "token_iterations": 0,
        }
        handler = ChatLineHandler()
        timings["request_start"] = time.time()
        async with client.stream(method="POST", url=url, params=None, headers=None, json=BODY) as stream:
            stream.raise_for_status()
            end_reached = False
            async for chunk in stream.aiter_lines():
                if not chunk.strip():
                    continue
                stream.raise_for_status()
                iter_time = time.time()
                if timings["first_request_iteration"] is None:
                    timings["first_request_iteration"] = iter_time
                timings["last_request_iteration"] = iter_time
                timings["request_iterations"] += 1
                iterations = handler.add_streaming_line(chunk)
                if iterations is None or iterations <= 0 or end_reached:
                    end_reached = end_reached or iterations is None
                    if end_reached:
                        break
                    continue
                if timings["first_token_iteration"] is None:
                    timings["first_token_iteration"] = iter_time
                    timings["token_iterations"] = 0
                timings["last_token_iteration"] = iter_time
                timings["token_iterations"] += iterations
                stamps.append((iter_time, handler.streaming_texts[-1]))
        timings["request_end"] = time.time()
        assert end_reached
        return stamps

    try:
        results = await asyncio.gather(*(one() for _ in range(lanes)))
    finally:
        await client.aclose()
    return [s for r in results for s in r]


RUNNERS = {"arena": arena_client, "vllm": vllm_client, "guidellm": guidellm_client}


def measure(kind: str, url: str, lanes: int) -> dict:
    c0, w0 = time.process_time(), time.time()
    stamps = asyncio.run(RUNNERS[kind](url, lanes))
    cpu, wall = time.process_time() - c0, time.time() - w0
    lags_ms = sorted((mine - float(text.rpartition("@")[2])) * 1000 for mine, text in stamps)
    return {
        "client": kind,
        "chunks": len(lags_ms),
        "wall_s": wall,
        "cpu_s": cpu,
        "cpu_us_per_chunk": cpu / len(lags_ms) * 1e6,
        "lag_ms_p50": statistics.median(lags_ms),
        "lag_ms_p99": lags_ms[int(0.99 * (len(lags_ms) - 1))],
        "lag_ms_max": lags_ms[-1],
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def versions() -> str:
    out = [f"python {platform.python_version()}"]
    for name in ("aiohttp", "httpx"):
        try:
            out.append(f"{name} {__import__(name).__version__}")
        except ImportError:
            out.append(f"{name} missing")
    return ", ".join(out)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lanes", type=int, default=40)
    p.add_argument("--chunks", type=int, default=200)
    p.add_argument("--interval-ms", type=float, default=10.0)
    p.add_argument("--rounds", type=int, default=3, help="rounds of every client, in alternating order")
    p.add_argument("--clients", default=",".join(CLIENTS), help="which of " + ",".join(CLIENTS))
    p.add_argument("--serve", type=int, default=None, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.serve:
        serve(a.serve, a.chunks, a.interval_ms / 1000)
        return 0
    clients = [c for c in a.clients.split(",") if c]
    if unknown := set(clients) - set(CLIENTS):
        p.error(f"unknown clients {sorted(unknown)}")
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    srv = subprocess.Popen(
        [
            sys.executable,
            os.path.abspath(__file__),
            "--serve",
            str(port),
            "--chunks",
            str(a.chunks),
            "--interval-ms",
            str(a.interval_ms),
        ]
    )
    try:
        for _ in range(200):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.05)
        print(
            f"# {a.lanes} lanes x {a.chunks} chunks, one per {a.interval_ms} ms per lane "
            f"({a.lanes * 1000 / a.interval_ms:.0f} chunks/s); {a.rounds} rounds; {os.cpu_count()} CPUs; "
            f"{platform.machine()}; {versions()}; load {os.getloadavg()[0]:.2f}"
        )
        for kind in clients:  # warm-up: imports, first connections
            measure(kind, url, 1)
        rows = []
        for rnd in range(a.rounds):
            order = clients if rnd % 2 == 0 else clients[::-1]
            for kind in order:
                rows.append(measure(kind, url, a.lanes))
        print(
            f"{'client':9} {'chunks':>7} {'cpu us/chunk':>13} {'lag p50 ms':>11} {'lag p99 ms':>11} {'lag max ms':>11}"
        )
        for r in rows:
            print(
                f"{r['client']:9} {r['chunks']:7d} {r['cpu_us_per_chunk']:13.1f} {r['lag_ms_p50']:11.3f} "
                f"{r['lag_ms_p99']:11.3f} {r['lag_ms_max']:11.3f}"
            )
        metrics = ("cpu_us_per_chunk", "lag_ms_p50", "lag_ms_p99")
        agg = {k: {m: statistics.median(r[m] for r in rows if r["client"] == k) for m in metrics} for k in clients}
        print("# medians over rounds")
        print(
            f"{'':17} "
            + " ".join(f"{k:>9}" for k in clients)
            + "".join(f" {'arena/' + k:>15}" for k in PEERS if "arena" in clients and k in clients)
        )
        for m in metrics:
            line = f"{m:17} " + " ".join(f"{agg[k][m]:9.3f}" for k in clients)
            if "arena" in clients:
                line += "".join(f" {agg['arena'][m] / agg[k][m]:15.2f}" for k in PEERS if k in clients)
            print(line)
        if "arena" in clients:
            arena = agg["arena"]
            if "vllm" in clients:
                ratio = arena["cpu_us_per_chunk"] / agg["vllm"]["cpu_us_per_chunk"]
                print(
                    f"# target: arena CPU per chunk <= 0.5 x the vllm (aiohttp) client's: {ratio:.2f} -> "
                    f"{'met' if ratio <= 0.5 else 'NOT met'}"
                )
            print(
                f"# target: arena lag p99 <= 0.5 ms at {a.lanes} streams: {arena['lag_ms_p99']:.3f} ms -> "
                f"{'met' if arena['lag_ms_p99'] <= 0.5 else 'NOT met'}"
            )
            print(
                f"# arena CPU at this rate: {arena['cpu_us_per_chunk'] * a.lanes / (a.interval_ms * 1000):.1%} of one core"
            )
    finally:
        srv.terminate()
        srv.wait(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
