"""Property tests (hypothesis) of every reader of engine output: the SSE framing and decoder (bytes
served from a real local socket, and payloads straight into the decoder), `usage`, the Prometheus
text of `/metrics`, the `prompt_logprobs` answer and the non-streamed reply it comes in.

Whatever an engine sends, the reader returns (nothing raises out of it), every request ends
counted or failed with a reason (`done` exactly when `error` is None), what it returns can be
stored (the warehouse's schemas), and one engine's bytes never change how the other engine's
requests end: the candidate's garbage leaves the stock engine's requests counted, and the reverse.

All of them together are kept within a few seconds here (and well within CI's minute): the
example counts are set per test, and no database is written (`database=None`).
"""

from __future__ import annotations

import asyncio
import json
import math
import re
import time

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from script_server import HEAD_CHUNKED, ScriptServer, chunk, chunked_reply, delta

from speculator_arena.rules.counted import counted_row
from speculator_arena.rules.window import WindowRule
from speculator_arena.runners import sse_decode, sse_wire
from speculator_arena.runners.metrics import metric_rows, scrape
from speculator_arena.runners.nonstreamed import post_json
from speculator_arena.runners.probes import parse_prompt_logprobs
from speculator_arena.runners.sse_decode import StreamResult
from speculator_arena.runners.sse_wire import MAX_RESPONSE_BYTES
from speculator_arena.runners.stream import SSEClient, stream_chat
from speculator_arena.runners.tokens import load_tokenizer
from speculator_arena.runners.workload import ClientConfig, RequestRecord, record_rows, run_lanes
from speculator_arena.warehouse.schema import TABLES

FAST = dict(deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

# ---- strategies -----------------------------------------------------------------------------
_text = st.text(max_size=12) | st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=3)
_scalar = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | _text
)
json_values = st.recursive(
    _scalar, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_text, inner, max_size=4), max_leaves=12
)
_counts = st.dictionaries(
    st.sampled_from(["prompt_tokens", "completion_tokens", "prompt_tokens_details", "total_tokens"]),
    json_values
    | st.integers(min_value=0, max_value=2**64)
    | st.fixed_dictionaries({"cached_tokens": json_values | st.integers(0, 100)}),
)
_choice = st.fixed_dictionaries(
    {},
    optional={
        "index": json_values,
        "delta": json_values | st.fixed_dictionaries({}, optional={"content": json_values | _text, "role": _text}),
        "finish_reason": json_values | st.sampled_from(["stop", "length", ""]),
    },
)
# Chunk-shaped events, whose fields take any JSON value some of the time.
events = st.fixed_dictionaries(
    {},
    optional={
        "choices": json_values | st.lists(_choice | json_values, max_size=3),
        "usage": json_values | _counts,
        "error": json_values,
        "id": _text,
    },
)


def _dumps(obj, ascii_only: bool) -> bytes:
    return json.dumps(obj, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")


payloads = (
    st.builds(_dumps, events, st.booleans())
    | st.builds(_dumps, json_values, st.booleans())
    | st.binary(max_size=40)
    | st.sampled_from([b"", b"[DONE]", b"{", b'{"choices": 5}', b'{"choices": [{"delta": {"content": 7}}]}'])
)
_good = delta("ok")


@st.composite
def responses(draw) -> tuple[list[bytes], bool]:
    """A whole response as the pieces a server writes: a head (of any status, framing headers
    true or false), then SSE events (good ones, garbage, [DONE] or not) framed as the head says
    or not, cut anywhere, or just any bytes."""
    if draw(st.integers(0, 9)) == 0:
        return [draw(st.binary(max_size=300))], True
    status = draw(st.sampled_from([b"200 OK", b"200 OK", b"200 OK", b"500 Oops", b"204 No", b"100 Go", b"2x0 ?"]))
    framing = draw(st.sampled_from(["chunked", "length", "close", "bad-length", "both"]))
    body = b"".join(
        draw(
            st.lists(
                st.sampled_from([_good, delta("é€"), b"data: [DONE]\n\n", b": ping\n\n"])
                | st.builds(lambda p: b"data: " + p + b"\n\n", payloads)
                | st.binary(max_size=20),
                max_size=6,
            )
        )
    )
    head = b"HTTP/1.1 " + status + b"\r\nContent-Type: text/event-stream\r\n"
    if framing == "chunked":
        sizes = draw(st.lists(st.integers(1, 64), max_size=4)) or [len(body) or 1]
        framed, pos = b"", 0
        for n in sizes:
            framed += chunk(body[pos : pos + n]) if body[pos : pos + n] else b""
            pos += n
        framed += chunk(body[pos:]) if body[pos:] else b""
        data = head + b"Transfer-Encoding: chunked\r\n\r\n" + framed + draw(st.sampled_from([b"0\r\n\r\n", b"", b"zz"]))
    elif framing == "length":
        data = head + b"Content-Length: %d\r\n\r\n" % len(body) + body
    elif framing == "bad-length":
        data = head + b"Content-Length: " + draw(st.sampled_from([b"-3", b"1e3", b"99999", b""])) + b"\r\n\r\n" + body
    elif framing == "both":
        data = head + b"Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n" + body
    else:
        data = head + b"\r\n" + body
    cut = draw(st.integers(0, len(data)))
    data = data[:cut] if draw(st.booleans()) else data
    splits = sorted(draw(st.lists(st.integers(0, len(data)), max_size=4)))
    pieces = [data[a:b] for a, b in zip([0, *splits], [*splits, len(data)])]
    return [p for p in pieces if p] or [b""], True


# ---- fixtures -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tok(qwen_tokenizer_dir):
    return load_tokenizer(str(qwen_tokenizer_dir))


@pytest.fixture(scope="module")
def server():
    s = ScriptServer()
    yield s
    s.stop()


def _record(res: StreamResult, engine="candidate") -> RequestRecord:
    return RequestRecord(f"{engine}:solo-0:s:0", 0, "s", 0, 1, 16, 5, False, res, [], 0, None)


def _stored(table: str, rows: list[dict]) -> None:
    """The rows fit the warehouse's schema (what Warehouse.write_rows builds before writing)."""
    schema = TABLES[table]
    pa.table({n: [r.get(n) for r in rows] for n in schema.names}, schema=schema)


def _counted_or_failed(row: dict, counted: bool) -> bool:
    """A request counts, or fails with its reason: an `error`, or (a whole stream) the budget
    rule, its output tokens over max_tokens plus the slack."""
    return counted or bool(row["error"]) or (row["done"] and row["output_tokens"] > row["max_tokens"] + 4)


def _ends_with_a_reason(res: StreamResult, tok) -> dict:
    assert res.done == (res.error is None), (res.done, res.error)
    assert res.error is None or (isinstance(res.error, str) and 0 < len(res.error) <= 400)
    assert all(isinstance(c, str) and c for c in res.chunk_texts)
    res.text.encode("utf-8")  # valid Unicode, whatever the escapes said
    assert res.finish_reason is None or isinstance(res.finish_reason, str)
    for v in (res.usage_prompt_tokens, res.usage_completion_tokens, res.cached_tokens):
        assert v is None or (type(v) is int and 0 <= v < 2**63)
    row, reply = record_rows(
        _record(res),
        evaluation_id="e",
        engine="candidate",
        pass_id="solo-0",
        workload="solo",
        pass_index=0,
        tokenizer=tok,
    )
    _stored("requests", [row])
    _stored("replies", [reply])
    counted = counted_row(row, slack=4, ends_at=time.time() + 60, grace_ends_at=time.time() + 60)
    assert _counted_or_failed(row, counted), row
    return row


# ---- the decoder ----------------------------------------------------------------------------
@settings(max_examples=300, **FAST)
@given(st.lists(payloads, max_size=8), st.integers(1, 4))
def test_decoder_takes_any_payloads(tok, lines, slice_size):
    """Any payloads after a `[DONE]` stream: a result, never an exception; a payload the arena
    cannot read fails the request (not done) with its reason; the rows it makes can be stored."""
    res = StreamResult(sent_at=0.0, status_code=200, done=True, lines=[(float(i), p) for i, p in enumerate(lines)])
    old, sse_decode.PARSE_SLICE = sse_decode.PARSE_SLICE, slice_size  # the template path across slices too
    try:
        res.parse()
    finally:
        sse_decode.PARSE_SLICE = old
    _ends_with_a_reason(res, tok)


@settings(max_examples=60, **FAST)
@given(st.lists(st.builds(_dumps, events, st.booleans()), min_size=1, max_size=6))
def test_decoder_reads_well_formed_chunks_whole(tok, lines):
    """Shapes the arena reads are read exactly (the checks refuse nothing well formed): a stream
    of chunk objects with list choices, object deltas, string contents, string finish reasons and
    integer counts is done and keeps every content."""
    good = [(float(i), p) for i, p in enumerate(lines)]
    res = StreamResult(sent_at=0.0, done=True, lines=good).parse()
    expect_ok = True
    for _, p in good:
        obj = json.loads(p)
        ch = obj.get("choices")
        u = obj.get("usage")
        if ("error" in obj and not ch) or (u is not None and not sse_decode._usage_ok(u)):
            expect_ok = False
        elif ch is not None and not (
            isinstance(ch, list)
            and all(
                isinstance(c, dict)
                and (c.get("delta") is None or isinstance(c["delta"], dict))
                and (
                    c.get("delta") is None
                    or c["delta"].get("content") is None
                    or isinstance(c["delta"]["content"], str)
                )
                and (c.get("finish_reason") is None or isinstance(c["finish_reason"], str))
                for c in ch
            )
        ):
            expect_ok = False
    try:
        b"".join(p for _, p in good).decode("utf-8")
        "".join(res.chunk_texts).encode("utf-8")
    except UnicodeError:
        expect_ok = False
    assert res.done == expect_ok, (lines, res.error)
    _ends_with_a_reason(res, tok)


# ---- framing, over a real socket ------------------------------------------------------------
def _dechunked(pieces: list[bytes]) -> bytes:
    """The body of a response whose head says chunked, its framing taken off (RFC 9112 section 7.1,
    read here on its own rather than with the reader under test); what precedes bad framing."""
    head, _, body = b"".join(pieces).partition(b"\r\n\r\n")
    out = b""
    while b"transfer-encoding: chunked" in head.lower():
        size, sep, rest = body.partition(b"\r\n")
        if not sep or not re.fullmatch(rb"[0-9a-fA-F]+", size) or int(size, 16) == 0:
            break
        out, body = out + rest[: int(size, 16)], rest[int(size, 16) + 2 :]
    return out


@settings(max_examples=150, **FAST)
@given(responses())
@example(([HEAD_CHUNKED + chunk(b"data: [") + chunk(b"DONE]\n\n") + b"0\r\n\r\n"], True))  # counted: the marker split
def test_any_response_bytes_end_counted_or_failed(tok, server, response):
    pieces, close = response
    server.play(pieces, close=close)

    async def read():
        async with SSEClient() as client:
            return await stream_chat(client, server.url, {"m": 1}, deadline=time.time() + 5)

    res = asyncio.run(read())
    row = _ends_with_a_reason(res, tok)
    if res.done:  # the marker was sent: whole, or split by the chunk framing (hypothesis found that)
        assert res.status_code == 200 and (b"[DONE]" in b"".join(pieces) or b"[DONE]" in _dechunked(pieces))
    assert row["ended_at"] - row["sent_at"] < 5  # the close ended it; nothing waited for the deadline


def test_a_response_past_the_size_limit_fails_and_the_next_is_read(server, tok, monkeypatch):
    monkeypatch.setattr(sse_wire, "MAX_RESPONSE_BYTES", 4096)
    monkeypatch.setattr(sse_wire, "MAX_EVENTS", 50)
    server.play([HEAD_CHUNKED] + [chunk(delta("x" * 100))] * 60, close=True)  # over the bytes
    server.play([HEAD_CHUNKED + b"".join(chunk(b"data: {}\n\n") for _ in range(60))], close=True)  # over the events
    server.play([HEAD_CHUNKED + chunk(b"data: " + b"y" * 5000)], close=True)  # one endless line
    server.play([chunked_reply(delta("fine"), b"data: [DONE]\n\n")])
    got = [asyncio.run(stream_chat(SSEClient(), server.url, {}, deadline=time.time() + 10)) for _ in range(4)]
    assert "longer than 4096 bytes" in got[0].error and not got[0].done
    assert "more than 50 events" in got[1].error and not got[1].done
    assert "longer than 4096 bytes" in got[2].error and not got[2].done
    assert got[3].done and got[3].text == "fine"
    assert MAX_RESPONSE_BYTES >= 8 * 2**20  # the shipped limit is far above an honest reply


# ---- one engine's bytes never decide the other's requests -----------------------------------
def _cfg(url: str, engine: str, tok) -> ClientConfig:
    return ClientConfig(
        base_url=url.rsplit("/v1/", 1)[0],
        served_name="m",
        evaluation_id="ev",
        engine=engine,
        sampling={"temperature": 0.7, "top_p": 0.8, "top_k": 20},
        window=WindowRule(8192, 0.05, 128, 0.5),
        think_cap_s=0,
        think_scale=0,
        max_tokens_cap=None,
        tokenizer=tok,
    )


def _pass(engine: str, pieces: list[bytes] | None, sessions, tok) -> list[bool]:
    """One short pass of the harness's own lanes against a server that answers every request
    with `pieces` (None: a well-formed reply); whether each request counted."""
    s = ScriptServer()
    for _ in range(2 * len(sessions) * 4):
        s.play(
            pieces or [chunked_reply(delta("fine"), delta(" reply", "stop"), b"data: [DONE]\n\n")], close=bool(pieces)
        )
    try:
        t0 = time.time()
        recs = asyncio.run(
            run_lanes(_cfg(s.url, engine, tok), sessions, 2, 1, "team-0", ends_at=t0 + 20, grace_ends_at=t0 + 25)
        )
    finally:
        s.stop()
    rows = [
        record_rows(
            r, evaluation_id="ev", engine=engine, pass_id="team-0", workload="team", pass_index=0, tokenizer=tok
        )[0]
        for r in recs
    ]
    _stored("requests", rows)
    assert all(r["engine"] == engine and r["request_id"].startswith(engine + ":") for r in rows)
    counted = [counted_row(r, slack=4, ends_at=t0 + 20, grace_ends_at=t0 + 25) for r in rows]
    assert all(_counted_or_failed(r, c) for c, r in zip(counted, rows))
    return counted


@settings(max_examples=40, **FAST)
@given(responses(), st.booleans())
def test_one_engines_bytes_never_decide_the_others_requests(tok, chat_sessions, response, candidate_garbled):
    """The harness's order (the candidate's pass, then the stock engine's, each on its own
    client): whichever of the two serves any bytes, every request of the other counts."""
    sessions = [s for s in chat_sessions if len(s.turns) >= 2][:2]
    garbled, clean = ("candidate", "stock") if candidate_garbled else ("stock", "candidate")
    order = ("candidate", "stock")
    counted = {e: _pass(e, response[0] if e == garbled else None, sessions, tok) for e in order}
    assert counted[clean] and all(counted[clean]), counted
    assert len(counted[clean]) == sum(len(s.turns) for s in sessions)  # its closed loops ran to the end


# ---- /metrics -------------------------------------------------------------------------------
prom_lines = st.lists(
    st.sampled_from(
        [
            "# TYPE x counter",
            "# HELP x h",
            "x_total 3",
            'y{a="b",c="d\\"e"} 1.5 1700000000',
            "z NaN",
            "z +Inf",
            "vllm:spec_decode_num_accepted_tokens_total 12",
            'h_bucket{le="0.1"} 2',
            "# EOF",
        ]
    )
    | st.text(max_size=30),
    max_size=8,
)


@settings(max_examples=300, **FAST)
@given(prom_lines | st.builds(lambda t: [t], st.text(max_size=200)))
def test_metrics_text_of_any_kind_gives_storable_rows_or_none(lines):
    rows = metric_rows(
        "\n".join(lines), evaluation_id="e", pass_id="solo-0", engine="candidate", phase="after", taken_at=1.0
    )
    _stored("metrics", rows)
    assert all(isinstance(r["value"], float) and not math.isnan(r["value"]) for r in rows)


def test_scrape_takes_any_answer(server):
    """Over HTTP: an error status, bytes that are not text, a body past the limit, a broken
    response: no rows and no exception; a good one: its samples."""
    import speculator_arena.runners.metrics as metrics

    base = server.url.rsplit("/v1/", 1)[0]
    good = b"# TYPE a counter\na_total 4\n"
    server.play([b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(good) + good])
    server.play([b"HTTP/1.1 500 x\r\nContent-Length: 2\r\n\r\nno"])
    server.play([b"HTTP/1.1 200 OK\r\nContent-Length: 6\r\n\r\n\xff\xfe{}\x00\n"])
    server.play([b"HTTP/1.1 200 OK\r\n\r\n" + b"a_total 1\n" * (metrics.MAX_METRICS_BYTES // 10 + 10)], close=True)
    server.play([b"HTTP/1.1 200 OK\r\nContent-Length: 99\r\n\r\na_to"], close=True)
    got = [scrape(base, evaluation_id="e", pass_id="p", engine="candidate", phase="after", timeout=5) for _ in range(5)]
    assert [(r["name"], r["value"]) for r in got[0]] == [("a_total", 4.0)]
    assert got[1:] == [[], [], [], []]


# ---- prompt_logprobs ------------------------------------------------------------------------
_info = st.fixed_dictionaries(
    {}, optional={"logprob": json_values | st.floats(-20, 0), "rank": json_values | st.integers(0, 9)}
)
_answers = json_values | st.fixed_dictionaries(
    {
        "prompt_logprobs": st.lists(
            st.none() | st.dictionaries(st.sampled_from(["5", "6", "7"]), _info | json_values), max_size=5
        )
    }
)


@settings(max_examples=400, **FAST)
@given(
    _answers | st.fixed_dictionaries({"choices": st.lists(_answers | json_values, max_size=2)}),
    st.lists(st.sampled_from([5, 6, 7]), max_size=3),
)
def test_prompt_logprobs_of_any_answer_scores_or_is_unanswered(answer, ids):
    try:
        lps, ranks = parse_prompt_logprobs(answer, ids)
    except ValueError:
        return  # the item is unanswered by that engine, with the reason
    assert len(lps) == len(ranks) == len(ids)
    assert all(type(x) is float and math.isfinite(x) for x in lps)
    assert all(type(r) is int and 1 <= r < 2**62 for r in ranks)
    pa.array(lps, pa.float64()), pa.array(ranks, pa.int64())


@settings(max_examples=40, **FAST)
@given(responses())
def test_a_non_streamed_answer_of_any_bytes_is_json_or_an_error(server, response):
    async def go():
        import httpx

        async with httpx.AsyncClient(trust_env=False) as client:
            return await post_json(client, server.url, {"prompt_logprobs": 1}, timeout=5)

    server.play(*response)
    obj, err = asyncio.run(go())
    assert (err is None) or (obj is None and isinstance(err, str) and err)
    if err is None:
        json.dumps(obj)  # a JSON value, for parse_prompt_logprobs to judge
