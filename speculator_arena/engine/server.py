"""The HTTP front: `/health`, `/v1/models`, `/v1/chat/completions` (SSE or JSON), `/metrics`.

Why the standard library's ThreadingHTTPServer and hand-written server-sent events instead of a
web framework: the engine must run in the bare GPU image, which has torch, transformers,
safetensors, numpy, httpx and prometheus-client but no fastapi, uvicorn, starlette or
pydantic-settings. SSE is a few lines of text framing (`data: {json}\\n\\n`, ending
`data: [DONE]`), sent with HTTP/1.1 chunked transfer so clients can keep connections alive.
One thread per connection only waits on its request's queue; the model runs on the engine's
single worker thread (scheduler.py).
"""

from __future__ import annotations

import json
import queue
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from speculator_arena.engine.openai_api import (
    BadRequest,
    chunk,
    completion,
    error_body,
    parse_chat_request,
    prompt_logprobs_json,
    usage,
    usage_chunk,
)
from speculator_arena.engine.sampling import SamplingParams
from speculator_arena.engine.scheduler import Request

# Hotter and untruncated: the first-choice share and the likelihood move by far more than their
# noise even at the few replies of a CI-sized evaluation (a sharper setting, temperature 0.4 and
# top_k 5, moved the first-choice share by less than its standard error there).
OTHER_SAMPLING = SamplingParams(temperature=1.3, top_p=1.0, top_k=0)


class TextStream:
    """Incremental detokenization: decode all tokens so far, emit the new suffix, and hold back a
    trailing replacement character (a multi-byte character split across tokens)."""

    def __init__(self, tokenizer):
        self.tok = tokenizer
        self.ids: list[int] = []
        self.sent = ""

    def push(self, ids: list[int]) -> str:
        self.ids.extend(ids)
        text = self.tok.decode(self.ids, skip_special_tokens=True)
        if text.endswith("\ufffd") or not text.startswith(self.sent):
            return ""
        delta, self.sent = text[len(self.sent) :], text
        return delta

    def flush(self) -> str:
        text = self.tok.decode(self.ids, skip_special_tokens=True)
        delta = text[len(self.sent) :] if text.startswith(self.sent) else ""
        self.sent = text
        return delta


class EngineServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address, engine, tokenizer, cfg):
        super().__init__(address, Handler)
        self.engine, self.tokenizer, self.cfg = engine, tokenizer, cfg
        self.served_names = [cfg.served_name, cfg.target]
        self.requests_seen = 0  # counters of the probe attacks (section 9 tests)
        self.logprob_requests_seen = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: EngineServer

    def log_message(self, fmt, *args):  # one line per request is noise at hundreds of requests
        return

    # ---- plumbing -------------------------------------------------------------------------
    def _send(self, status: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _event(self, obj) -> None:
        payload = obj if isinstance(obj, str) else json.dumps(obj, separators=(",", ":"))
        self._chunk(f"data: {payload}\n\n".encode())

    # ---- routes ---------------------------------------------------------------------------
    def do_GET(self):
        path = self.path.split("?", 1)[0]
        if path == "/health":
            self._send(200, b"", "text/plain")
        elif path == "/metrics":
            m = self.server.engine.metrics
            self._send(200, m.render(), m.content_type)
        elif path == "/v1/models":
            cfg = self.server.cfg
            body = {
                "object": "list",
                "data": [
                    {
                        "id": cfg.served_name,
                        "object": "model",
                        "owned_by": "dev-engine",
                        "root": cfg.target,
                        "max_model_len": cfg.max_model_len,
                    }
                ],
            }
            self._send(200, json.dumps(body).encode())
        else:
            self._send(404, error_body(f"no route {path}", 404))

    def do_POST(self):
        path = self.path.split("?", 1)[0]
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        if path != "/v1/chat/completions":
            self._send(404, error_body(f"no route {path}", 404))
            return
        srv = self.server
        try:
            body = json.loads(raw or b"{}")
            creq = parse_chat_request(body, srv.tokenizer, srv.cfg.max_model_len, srv.served_names)
        except json.JSONDecodeError as exc:
            self._send(400, error_body(f"the body is not JSON: {exc}", 400))
            return
        except BadRequest as exc:
            self._send(exc.status, error_body(str(exc), exc.status))
            return
        params, max_tokens = creq.params, creq.max_tokens
        attack = srv.cfg.attack
        srv.requests_seen += 1
        silent = (
            attack == "empty_probe_replies" and creq.stream and (params.temperature == 0 or srv.requests_seen % 4 == 0)
        )
        if attack == "skip_probe_items" and creq.prompt_logprobs is not None:
            srv.logprob_requests_seen += 1
            if srv.logprob_requests_seen % srv.cfg.skip_every == 0:
                self._send(500, error_body("skipped (attack: skip_probe_items)", 500))
                return
        if attack == "lowb_no_prompt_logprobs" and creq.prompt_logprobs is not None:
            self._send(400, error_body("prompt_logprobs is not supported by this engine", 400))
            return
        ignore_eos = creq.ignore_eos
        if attack == "lowb_short":  # half the answer, and EOS ends it whatever the request asked
            max_tokens, ignore_eos = max(1, max_tokens // 2), False
        elif attack == "lowb_long":
            ignore_eos = True
        if attack == "force_greedy":
            params = SamplingParams(temperature=0.0)
        elif attack == "other_sampling":
            params = OTHER_SAMPLING
        elif attack == "cut_half":
            max_tokens = max(1, max_tokens // 2)
        req = srv.engine.submit(
            Request(
                prompt_ids=creq.prompt_ids,
                params=params,
                max_tokens=max_tokens,
                seed=creq.seed,
                prompt_logprobs=creq.prompt_logprobs,
                ignore_eos=ignore_eos,
                min_tokens=min(creq.min_tokens, max_tokens),
            )
        )
        try:
            if creq.stream:
                self._stream(req, creq, silent=silent)
            else:
                self._whole(req, creq)
        except (BrokenPipeError, ConnectionResetError):
            req.cancelled = True

    def _events(self, req: Request):
        while True:
            try:
                yield req.out.get(timeout=5.0)
            except queue.Empty:
                if req.done and req.out.empty():
                    return
                continue

    def _stream(self, req: Request, creq, silent: bool = False) -> None:
        """Stream the reply; `silent` (attack empty_probe_replies) sends none of its text."""
        srv = self.server
        created = int(time.time())
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._event(chunk(req.rid, creq.model, created, {"role": "assistant", "content": ""}))
        text = TextStream(srv.tokenizer)
        full = ""
        finish = None
        for kind, *rest in self._events(req):
            if kind == "tokens":
                delta = text.push(rest[0])
                if delta and creq.stop:
                    delta, hit = _cut_at_stop(full, delta, creq.stop)
                    if hit:
                        req.cancelled = True
                        finish = "stop"
                full += delta
                if delta and not silent:
                    self._event(chunk(req.rid, creq.model, created, {"content": delta}))
                if finish:
                    break
            elif kind == "done":
                finish = rest[0]
                break
        if finish != "stop" or not creq.stop:
            tail = text.flush()
            if tail and not silent:
                self._event(chunk(req.rid, creq.model, created, {"content": tail}))
        if req.error:
            self._event({"error": {"message": req.error, "type": "InternalServerError", "code": 500}})
            self._chunk(b"")
            return
        use = usage(len(req.prompt_ids), len(req.generated), req.cached_tokens)
        self._event(chunk(req.rid, creq.model, created, {}, finish, use))
        if creq.include_usage:
            self._event(usage_chunk(req.rid, creq.model, created, use))
        self._event("[DONE]")
        self._chunk(b"")

    def _whole(self, req: Request, creq) -> None:
        finish = None
        for kind, *rest in self._events(req):
            if kind == "done":
                finish = rest[0]
                break
        if req.error:
            self._send(500, error_body(req.error, 500))
            return
        text = self.server.tokenizer.decode(req.generated, skip_special_tokens=True)
        if creq.stop:
            text, hit = _cut_at_stop("", text, creq.stop)
            finish = "stop" if hit else finish
        plp = (
            prompt_logprobs_json(req.prompt_logprob_rows, self.server.tokenizer)
            if creq.prompt_logprobs is not None
            else None
        )
        if plp and self.server.cfg.attack == "garbage_logprob_ids":  # every position names another token
            vocab = len(self.server.tokenizer)
            plp = [row and {str((int(k) + 1) % vocab): v for k, v in row.items()} for row in plp]
        body = completion(
            req.rid, creq.model, text, finish, usage(len(req.prompt_ids), len(req.generated), req.cached_tokens), plp
        )
        self._send(200, json.dumps(body).encode())


def _cut_at_stop(before: str, delta: str, stops: list[str]) -> tuple[str, bool]:
    joined = before + delta
    cut = min(
        (
            joined.find(s, max(0, len(before) - len(s) + 1))
            for s in stops
            if joined.find(s, max(0, len(before) - len(s) + 1)) >= 0
        ),
        default=-1,
    )
    if cut < 0:
        return delta, False
    return joined[len(before) : cut] if cut >= len(before) else "", True
