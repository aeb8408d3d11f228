"""A tiny real engine for lifecycle tests: a stdlib HTTP server speaking the engine contract.

Run as `python3 sse_engine.py` by an engine directory's launch.sh, on $PORT. What it does is
set by ENGINE_MODE (the test writes it into launch.sh):
- normal: answers /health, streams replies made of the last user message's words, serves
  `prompt_logprobs`, /metrics;
- never_healthy: listens but /health answers 503 forever;
- die_after=N: exits hard after N chat requests (an engine that dies mid-pass);
- hog_shm: also writes a file in /dev/shm (that the runner must remove after the stop);
- ignore_term: ignores SIGTERM (the runner must SIGKILL it);
- overlong: replies longer than max_tokens;
- malformed=SHAPE: every chat stream carries one event the arena cannot read, after a good text
  chunk and before `[DONE]`; SHAPE is one of MALFORMED (`choices_number`: `{"choices": 5}`,
  `content_number`: a content that is not a string, `broken_json`, `not_utf8`: bytes that are not
  UTF-8, `broken_chunked`: a chunk-size line that is not hex, then the connection closes), or
  `mixed`: request k gets shape k mod 5; `mixed` also answers `prompt_logprobs` with numbers that
  are not numbers and serves a `/metrics` that is not Prometheus text.
It also records, in its log, whether it could read a path given in PROBE_READ (the arena's
private warehouse must not be readable by the engine's user).

Attacks on the interleaved pairing (modes may be combined, comma-separated):
- idle_spin: at start, a detached daemon (double fork, setsid) spins the CPU forever and tries
  to move itself out of the engine's control groups (it logs `SPIN pid=N`);
- die_at_start: exits (status 3) right after its start-up (with idle_spin: leaving the spinner);
- reach_other: on every chat request, opens connections to every other listening port on
  127.0.0.1 (the other engine's, found in /proc/net/tcp) and sends a request line, kept open;
- touch_other: on every chat request, tries to signal (SIGSTOP) and read (/proc/PID/environ)
  every process of another user whose command line names `speculator_arena` or `sse_engine`, and
  logs `TOUCH pid signal=... environ=...` with what happened.
"""

import json
import os
import signal
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = os.environ.get("ENGINE_MODE", "normal")
MALFORMED = ("choices_number", "content_number", "broken_json", "not_utf8", "broken_chunked")
COUNT = {"chat": 0}
CHUNK_DELAY = float(os.environ.get("ENGINE_CHUNK_DELAY", "0.01"))


def reply_ids(text):
    """The text's token ids under the target's tokenizer ($TOKENIZER/tokenizer.json, through the
    `tokenizers` package when the interpreter has it); none without it."""
    global _TOK
    if _TOK is None:
        try:
            from tokenizers import Tokenizer

            _TOK = Tokenizer.from_file(os.path.join(os.environ.get("TOKENIZER", ""), "tokenizer.json"))
        except Exception:
            _TOK = False
    return _TOK.encode(text, add_special_tokens=False).ids if _TOK else []


_TOK = None


def reply_words(body):
    last = [m for m in body.get("messages", []) if m.get("role") == "user"]
    words = (last[-1]["content"] if last else "hello").split() or ["hello"]
    n = max(1, min(int(body.get("max_tokens", 16)) // 4, 12))
    if "overlong" in MODE:  # ignores max_tokens: the arena must not count such replies
        n = 4 * int(body.get("max_tokens", 16))
    return [(" " if i else "") + words[i % len(words)][:12] for i in range(n)]


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def _send(self, code, obj, ctype="application/json"):
        data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/health":
            self._send(503 if "never_healthy" in MODE else 200, {"ok": "never_healthy" not in MODE})
        elif self.path == "/metrics" and MODE == "malformed=mixed":
            self._send(200, b"\xff\xfe not {prometheus} text\n" + b"x" * 100, "text/plain")
        elif self.path == "/metrics":
            text = (
                f"# TYPE arena_test_requests_total counter\narena_test_requests_total {COUNT['chat']}\n"
                "# TYPE vllm:spec_decode_num_accepted_tokens counter\n"
                f'vllm:spec_decode_num_accepted_tokens_total{{model="m"}} {3 * COUNT["chat"]}\n'
            )
            self._send(200, text.encode(), "text/plain; version=0.0.4")
        else:
            self._send(404, {"error": "not found"})

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        COUNT["chat"] += 1
        if "reach_other" in MODE:
            reach_other()
        if "touch_other" in MODE:
            touch_other()
        if MODE.startswith("die_after=") and COUNT["chat"] > int(MODE.split("=")[1]):
            os._exit(3)
        if body.get("prompt_logprobs") is not None:
            msgs = body["messages"]
            n = sum(len(m["content"].split()) for m in msgs) + 8
            # the scored reply's own tokens last, as a real engine's positions (the arena reads
            # its own token at each of them); filler ids before them
            ids = [100 + i for i in range(n * 4)] + reply_ids(msgs[-1]["content"])
            pl = [None] + [
                {str(t): {"logprob": -0.5 - (i % 3) * 0.1, "rank": 1 + (i % 4 == 0)}, "7": {"logprob": -0.1, "rank": 1}}
                for i, t in enumerate(ids)
            ]
            if MODE == "malformed=mixed":  # numbers that are not numbers, one kind per request
                bad = [{"logprob": "-0.5"}, {"logprob": float("nan")}, {"logprob": -0.5, "rank": 2**70}][
                    COUNT["chat"] % 3
                ]
                pl = [None] + [{str(t): bad} for t in ids]
            self._send(
                200,
                {
                    "id": "x",
                    "object": "chat.completion",
                    "prompt_logprobs": pl,
                    "choices": [
                        {"index": 0, "message": {"role": "assistant", "content": "."}, "finish_reason": "length"}
                    ],
                },
            )
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def emit(obj):
            line = ("data: " + (obj if isinstance(obj, str) else json.dumps(obj)) + "\n\n").encode()
            self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
            self.wfile.flush()

        words = reply_words(body)
        if MODE.startswith("malformed="):
            self._malformed(emit, words, MODE.split("=", 1)[1])
            return
        for w in words:
            time.sleep(CHUNK_DELAY)
            emit({"choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]})
        emit({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        emit(
            {
                "choices": [],
                "usage": {"prompt_tokens": 10, "completion_tokens": 999, "prompt_tokens_details": {"cached_tokens": 4}},
            }
        )
        emit("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _malformed(self, emit, words, shape):
        """A good text chunk, then one event of `shape` the arena cannot read, then the rest."""
        if shape == "mixed":
            shape = MALFORMED[COUNT["chat"] % len(MALFORMED)]
        emit({"choices": [{"index": 0, "delta": {"content": words[0]}, "finish_reason": None}]})
        if shape == "broken_chunked":
            self.wfile.write(b"zz\r\ndata: {}\n\n\r\n")
            self.wfile.flush()
            self.close_connection = True
            return
        bad = {
            "choices_number": b'{"choices": 5}',
            "content_number": b'{"choices": [{"index": 0, "delta": {"content": 7}, "finish_reason": null}]}',
            "broken_json": b'{"choices": [{"index": 0, "delta": {"content": "x"',
            "not_utf8": b'{"choices": [{"index": 0, "delta": {"content": "\xff\xfe"}, "finish_reason": null}]}',
        }[shape]
        line = b"data: " + bad + b"\n\n"
        self.wfile.write(f"{len(line):x}\r\n".encode() + line + b"\r\n")
        for w in words[1:]:
            emit({"choices": [{"index": 0, "delta": {"content": w}, "finish_reason": None}]})
        emit({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        emit("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


HELD = []  # connections reach_other keeps open


def reach_other():
    own = int(os.environ["PORT"])
    for line in open("/proc/net/tcp").read().splitlines()[1:]:
        f = line.split()
        port = int(f[1].rsplit(":", 1)[1], 16)
        if f[3] == "0A" and f[1].startswith("0100007F") and port != own:
            import socket

            try:
                c = socket.create_connection(("127.0.0.1", port), timeout=1)
                c.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n{")
                HELD.append(c)
            except OSError:
                pass


def touch_other():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{pid}").st_uid == os.getuid():
                continue
            cmd = open(f"/proc/{pid}/cmdline", "rb").read()
        except OSError:
            continue
        if b"speculator_arena" not in cmd and b"sse_engine" not in cmd:
            continue
        try:
            os.kill(int(pid), signal.SIGSTOP)
            sig = "sent"
        except OSError as exc:
            sig = exc.__class__.__name__
        try:
            open(f"/proc/{pid}/environ", "rb").read()
            env = "read"
        except OSError as exc:
            env = exc.__class__.__name__
        print(f"TOUCH {pid} signal={sig} environ={env}", flush=True)


def idle_spin():
    if os.fork():
        return
    os.setsid()
    if os.fork():
        os._exit(0)
    print(f"SPIN pid={os.getpid()}", flush=True)
    for ctl in ("freezer", "cpuacct"):
        try:
            with open(f"/sys/fs/cgroup/{ctl}/cgroup.procs", "w") as fh:
                fh.write(str(os.getpid()))
            print(f"SPIN escaped {ctl}", flush=True)
        except OSError as exc:
            print(f"SPIN stays in {ctl} ({exc.__class__.__name__})", flush=True)
    while True:
        pass


def main():
    probe = os.environ.get("PROBE_READ")
    if probe:
        try:
            os.listdir(probe)
            print(f"PROBE_READ {probe}: readable", flush=True)
        except OSError as exc:
            print(f"PROBE_READ {probe}: denied ({exc.__class__.__name__})", flush=True)
    print(
        f"uid={os.getuid()} TARGET={os.environ.get('TARGET')} MAX_NUM_SEQS={os.environ.get('MAX_NUM_SEQS')} "
        f"GPU_MEMORY_UTILIZATION={os.environ.get('GPU_MEMORY_UTILIZATION')} "
        f"THP_MEM_ALLOC_ENABLE={os.environ.get('THP_MEM_ALLOC_ENABLE')}",
        flush=True,
    )
    if "offload" in MODE:
        print("INFO: cpu_offload_gb=8 (weights offloaded to CPU)", flush=True)
    if "hog_shm" in MODE:
        with open(f"/dev/shm/arena-test-{os.getpid()}", "wb") as fh:
            fh.write(b"x" * 1024)
    if "ignore_term" in MODE:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if "idle_spin" in MODE:
        idle_spin()
    if "die_at_start" in MODE:
        time.sleep(0.5)
        os._exit(3)
    srv = ThreadingHTTPServer(("127.0.0.1", int(os.environ["PORT"])), H)
    srv.daemon_threads = True
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
