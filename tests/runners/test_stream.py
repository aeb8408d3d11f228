"""The arena's SSE client (runners/stream.py) against a real local TCP server that writes exactly
the bytes a test scripts: framing split anywhere, keep-alive reuse, every wire failure it must
record (connect refused, HTTP status with body, broken and malformed streams, the deadline)."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
import pytest
from script_server import DONE, HEAD_CHUNKED, USAGE, ScriptServer, chunk, chunked_reply, delta, event

from speculator_arena.runners.stream import SSEClient, stream_chat

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


@pytest.fixture
def server():
    s = ScriptServer()
    yield s
    s.stop()


def run(coro):
    return asyncio.run(coro)


async def _two(url, deadline=None):
    async with SSEClient() as client:
        a = await stream_chat(client, url, BODY, deadline=deadline)
        b = await stream_chat(client, url, BODY, deadline=deadline)
    return a, b


def test_stream_records_chunks_usage_and_reuses_the_connection(server):
    reply = chunked_reply(delta("Hel"), delta("lo"), delta(" world", "stop"), USAGE, DONE)
    server.play([reply])
    server.play([reply])
    a, b = run(_two(server.url))
    for r in (a, b):
        assert r.done and r.error is None and r.status_code == 200
        assert r.chunk_texts == ["Hel", "lo", " world"] and r.text == "Hello world"
        assert r.finish_reason == "stop" and r.usage_completion_tokens == 3 and r.cached_tokens == 2
        assert r.sent_at <= r.chunk_times[0] <= r.chunk_times[-1] <= r.ended_at
        assert len(r.lines) == 4  # three deltas and the usage event; [DONE] is not a payload
    assert server.connections == 1  # keep-alive: the second request reused the first connection
    sent = server.requests[0]
    assert sent.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") and b"Accept-Encoding" not in sent
    assert json.loads(sent.split(b"\r\n\r\n", 1)[1]) == BODY


@pytest.mark.parametrize("size", [1, 2, 3, 5, 7, 11])
def test_framing_split_anywhere_reads_the_same(server, size):
    """Every split of head, chunk-size lines, payloads, CRLFs and `[DONE]` across reads gives
    the same chunks; a line is stamped no earlier than the write that completed it."""
    reply = chunked_reply(delta("a"), delta("é€"), delta("c", "length"), USAGE, DONE)
    server.play([(reply[i : i + size], 0.0005) for i in range(0, len(reply), size)])
    r = run(stream_chat(SSEClient(), server.url, BODY, deadline=time.time() + 30))
    assert r.done and r.error is None and r.chunk_texts == ["a", "é€", "c"] and r.finish_reason == "length"
    written = server.written[0]
    ends, pos = [], len(HEAD_CHUNKED)  # the offset in `reply` of each delta line's newline
    for _ in range(3):
        ends.append(reply.index(b"\n\n", pos))
        pos = ends[-1] + 2
    for t, end in zip(r.chunk_times, ends):
        k = end // size  # the piece that completed the line was sent after piece k-1 and a pause
        assert k == 0 or t >= written[k - 1]


def test_events_in_one_read_share_its_stamp_and_stay_separate(server):
    server.play([HEAD_CHUNKED + chunk(delta("x") + delta("y")) + chunk(delta("z")), (chunk(DONE) + b"0\r\n\r\n", 0.05)])
    r = run(stream_chat(SSEClient(), server.url, BODY, deadline=None))
    assert r.done and r.chunk_texts == ["x", "y", "z"]
    assert r.chunk_times[0] == r.chunk_times[1] == r.chunk_times[2]
    assert r.ended_at - r.chunk_times[2] >= 0.04  # [DONE] came 50 ms later and ended the request


def test_content_length_and_until_close_bodies(server):
    sse = delta("p") + delta("q") + DONE
    server.play([b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(sse) + sse])
    server.play([b"HTTP/1.0 200 OK\r\n\r\n" + sse], close=True)
    a, b = run(_two(server.url))
    assert a.done and b.done and a.chunk_texts == b.chunk_texts == ["p", "q"] and a.error is b.error is None


def test_http_error_keeps_status_and_body_and_the_connection(server):
    err = b'{"error": "prompt too long: 9000 > 8192"}'
    server.play([b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n" % len(err) + err])
    server.play([chunked_reply(delta("ok"), DONE)])
    a, b = run(_two(server.url))
    assert a.status_code == 400 and not a.done and a.error == f"HTTP 400: {err.decode()}"
    assert b.done and b.text == "ok" and server.connections == 1
    server.play([HEAD_CHUNKED.replace(b"200 OK", b"503 Service Unavailable") + chunk(b"x" * 500) + b"0\r\n\r\n"])
    c = run(stream_chat(SSEClient(), server.url, BODY, deadline=None))
    assert c.error == "HTTP 503: " + "x" * 300 and c.status_code == 503


def test_connect_refused_is_recorded():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there
    r = run(stream_chat(SSEClient(), f"http://127.0.0.1:{port}/v1/chat/completions", BODY, deadline=time.time() + 10))
    assert not r.done and r.error.startswith("ConnectError: ") and r.status_code is None and r.chunk_texts == []
    bad = run(stream_chat(SSEClient(), "ftp://127.0.0.1/x", BODY, deadline=None))
    assert bad.error.startswith("ConnectError: unsupported URL")


def test_broken_stream_keeps_what_came(server):
    server.play([HEAD_CHUNKED + chunk(delta("half")) + b'40\r\ndata: {"cho'], close=True)
    r = run(stream_chat(SSEClient(), server.url, BODY, deadline=None))
    assert not r.done and r.chunk_texts == ["half"]
    assert r.error == (
        "RemoteProtocolError: peer closed connection without sending complete message body (incomplete chunked read)"
    )
    server.play([], close=True)
    r = run(stream_chat(SSEClient(), server.url, BODY, deadline=None))
    assert r.error == "RemoteProtocolError: server disconnected without sending a response"


def test_response_end_without_done(server):
    server.play([chunked_reply(delta("a"), USAGE)])
    r = run(stream_chat(SSEClient(), server.url, BODY, deadline=None))
    assert not r.done and r.error == "stream ended without [DONE]" and r.text == "a" and r.usage is not None


def test_malformed_framing_and_payloads(server):
    server.play([HEAD_CHUNKED + b"zz\r\n" + delta("a")], close=True)
    r = run(stream_chat(SSEClient(), server.url, BODY, deadline=None))
    assert not r.done and r.error.startswith("RemoteProtocolError: malformed response")
    # An unreadable event fails the request (not done: never counted) even when [DONE] follows;
    # the readable chunks are kept, the first reason is the error.
    server.play([chunked_reply(delta("a"), event(b'{"choices": [}'), event(b"\xff\xfe{}"), delta("b"), DONE)])
    r = run(stream_chat(SSEClient(), server.url, BODY, deadline=None))
    assert not r.done and r.chunk_texts == ["a", "b"]
    assert r.error.startswith("malformed SSE payload: b'{\"choices\": [}'")
    server.play([chunked_reply(delta("a"), event({"error": {"message": "oom"}}), DONE)])
    r = run(stream_chat(SSEClient(), server.url, BODY, deadline=None))
    assert not r.done and r.error.startswith("engine error in stream: {'message': 'oom'}")


def test_deadline_cuts_the_stream(server):
    server.play([HEAD_CHUNKED + chunk(delta("a")), (chunk(delta("late")), 2.0)])
    t0 = time.time()
    r = run(stream_chat(SSEClient(), server.url, BODY, deadline=t0 + 0.3))
    assert not r.done and r.error == "cut at the end of the grace period" and r.chunk_texts == ["a"]
    assert r.ended_at < t0 + 1.0
    past = run(stream_chat(SSEClient(), server.url, BODY, deadline=time.time() - 1))
    assert past.error == "cut at the end of the grace period" and past.status_code is None


def test_an_httpx_client_still_works(server):
    """The greedy probes hand stream_chat their httpx.AsyncClient: it reads the same way."""
    server.play([chunked_reply(delta("probe"), DONE)])

    async def go():
        async with httpx.AsyncClient() as client:
            return await stream_chat(client, server.url, BODY, deadline=time.time() + 10)

    r = run(go())
    assert r.done and r.text == "probe" and r.error is None


def _reference(lines):
    """The decoding without the template fast path: json.loads per payload, the shapes checked
    (an event of another shape is unreadable: it sets the error and adds nothing)."""
    times, texts, finish, usage, error = [], [], None, None, None
    for t, payload in lines:
        try:
            payload.decode("utf-8")
        except UnicodeDecodeError:
            error = error or f"SSE payload is not UTF-8: {payload[:120]!r}"
            continue
        try:
            obj = json.loads(payload)
        except ValueError:
            error = error or f"malformed SSE payload: {payload[:120]!r}"
            continue
        if "error" in obj and not obj.get("choices"):
            error = error or f"engine error in stream: {str(obj['error'])[:200]}"
            continue
        usage = obj.get("usage") or usage
        for choice in obj.get("choices") or []:
            content = (choice.get("delta") or {}).get("content")
            if content is not None and not isinstance(content, str):
                error = error or f"SSE payload's content is not a string: {payload[:120]!r}"
                break
            if content:
                times.append(t)
                texts.append(content)
            finish = choice.get("finish_reason") or finish
    try:
        "".join(texts).encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates (json.loads takes them): U+FFFD in their place
        texts = ["".join("\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in x) for x in texts]
        error = error or "reply text is not valid Unicode (a lone surrogate)"
    return times, texts, finish, usage, error


def test_decoding_matches_json_loads_on_every_payload():
    """Text chunks that share a template are read with one string scan; whatever differs in
    the least (escapes, a duplicate key, a second token, another suffix, bad bytes) must give
    exactly what json.loads gives."""
    head = '{"id":"chatcmpl-7","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    tail = ',"logprobs":null,"finish_reason":null}]}'
    payloads = [head + '"delta":{"role":"assistant","content":""}' + tail]
    payloads += [
        head + '"delta":{"content":%s}' % json.dumps(w) + tail
        for w in ["Hel", "lo", ' "q"', "\\", "é\n", "😀", "", "\u2063x"]
    ]
    payloads += [
        head + '"delta":{"content":"a\\u00e9\\ud83d\\ude00"}' + tail,  # escapes a template never saw
        head + '"delta":{"content":"a","content":"dup"}' + tail,  # duplicate key: the last wins
        head + '"delta":{"content":"x"},"logprobs":{"content":[]},"finish_reason":null}]}',  # another suffix
        head + '"delta":{"content":"bad\\x"}' + tail,  # invalid escape
        head + '"delta":{"content":"ctl\x01"}' + tail,  # raw control character
        head + '"delta":{"content":"lone \udcff"}' + tail,  # surrogate bytes: json.loads takes them, not UTF-8
        head + '"delta":{"content":"esc \\udcff"}' + tail,  # an escaped lone surrogate: valid JSON, not Unicode
        head + '"delta":{"content":"two" "tokens"}' + tail,
        head + '"delta":{"content":7}' + tail,
        head + '"delta":{"content":"end"},"logprobs":null,"finish_reason":"stop"}]}',
        '{"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":9}}',
        head + '"delta":{"content":"after"}' + tail,
    ]
    raw = [p.encode("utf-8", "surrogatepass") for p in payloads]
    raw.insert(7, b'{"choices":[{"delta":{"content":"\xff"}}]}')  # not UTF-8
    lines = [(float(i), p) for i, p in enumerate(raw)]
    expected = _reference(lines)
    assert len(expected[1]) > 10 and expected[2] == "stop" and expected[3] and expected[4]
    from speculator_arena.runners import sse_decode

    for size in (64, 3, 1):  # slices of every size: the template carries over from one to the next
        res = sse_decode.StreamResult(sent_at=0.0, lines=list(lines))
        old, sse_decode.PARSE_SLICE = sse_decode.PARSE_SLICE, size
        try:
            res.parse()
        finally:
            sse_decode.PARSE_SLICE = old
        assert (res.chunk_times, res.chunk_texts, res.finish_reason, res.usage, res.error) == expected
        assert res._tpl is not None  # a template was learnt
    plain = sse_decode.StreamResult(sent_at=0.0, lines=lines[1:8])
    plain.parse()
    assert plain._tpl is not None and plain._tpl_hit and plain._tpl_tries == 0  # and it was used
    assert plain.chunk_texts == _reference(lines[1:8])[1]
    assert res._tpl is not None  # the fast path was taken
