"""The workload client against a real local engine process: closed loop, lanes, window rule,
token counting from the text, the [DONE] and max_tokens rules, the grace cut."""

from __future__ import annotations

import asyncio
import time

import pytest
from sse_engine import MALFORMED
from stand_in import MALFORMED_REASONS

from speculator_arena.pools.model import Probe
from speculator_arena.protocol import load_protocol
from speculator_arena.rules.counted import counted_row
from speculator_arena.rules.window import WindowRule
from speculator_arena.runners.lifecycle import EngineRun, free_port
from speculator_arena.runners.probes import ProbeRunner
from speculator_arena.runners.tokens import attribute_chunks, load_tokenizer
from speculator_arena.runners.workload import ClientConfig, record_rows, request_seed, run_lanes
from speculator_arena.warehouse import Warehouse


@pytest.fixture
def engine(engine_factory, tmp_path, request):
    mode = getattr(request, "param", "normal")
    er = EngineRun(
        engine="candidate",
        purpose="timed",
        start_index=1,
        src=engine_factory("e", mode),
        env_vars={"PATH": "/usr/bin:/bin"},
        port=free_port(),
        private_root=tmp_path / "p",
    )
    er.start(readable=[])
    assert er.wait_healthy(20)
    yield er
    er.stop(5)


def _cfg(er, tok, max_model_len=8192, cap=None):
    return ClientConfig(
        base_url=er.base_url,
        served_name="m",
        evaluation_id="ev1",
        engine="candidate",
        sampling={"temperature": 0.7, "top_p": 0.8, "top_k": 20},
        window=WindowRule(max_model_len, 0.05, 128, 0.5),
        think_cap_s=300,
        think_scale=0.01,
        max_tokens_cap=cap,
        tokenizer=tok,
    )


def test_closed_loop_lanes_and_rows(engine, qwen_tokenizer_dir, chat_sessions):
    tok = load_tokenizer(str(qwen_tokenizer_dir))
    cfg = _cfg(engine, tok)
    t0 = time.time()
    recs = asyncio.run(
        run_lanes(
            cfg, chat_sessions[:12], lanes=3, interleave=2, pass_id="team-0", ends_at=t0 + 3.0, grace_ends_at=t0 + 10
        )
    )
    assert len(recs) >= 6
    # No request is sent after the pass ends; one request at a time per lane.
    assert all(r.result.sent_at < t0 + 3.0 for r in recs)
    for lane in range(3):
        mine = sorted((r for r in recs if r.lane == lane), key=lambda r: r.result.sent_at)
        assert all(a.result.ended_at <= b.result.sent_at for a, b in zip(mine, mine[1:]))
        # Static dealing: lane j only ever serves sessions j, j+3, ...
        assert {int(r.session_id[1:]) % 3 for r in mine} == {lane}
    # Closed loop: a session's second turn was sent with its first reply in the history.
    by_key = {(r.session_id, r.turn): r for r in recs}
    second = next(r for r in recs if r.turn == 1)
    first = by_key[(second.session_id, 0)]
    sent = second.messages[: second.n_messages]
    assert sent[-2] == {"role": "assistant", "content": first.result.text}
    assert sent[0]["role"] == "system" and sent[-1]["role"] == "user"
    row, reply = record_rows(
        second, evaluation_id="ev1", engine="candidate", pass_id="team-0", workload="team", pass_index=0, tokenizer=tok
    )
    assert counted_row(row, slack=0, ends_at=t0 + 3.0, grace_ends_at=t0 + 10) and reply["text"] == second.result.text
    assert "".join(second.result.chunk_texts) == reply["text"] and row["chunk_chars"] == [
        len(c) for c in second.result.chunk_texts
    ]
    assert row["output_tokens"] == len(tok(second.result.text, add_special_tokens=False)["input_ids"])
    assert sum(row["chunk_tokens"]) == row["output_tokens"] and len(row["chunk_times"]) == len(row["chunk_tokens"])
    assert row["usage_completion_tokens"] == 999 and row["output_tokens"] < 999  # the engine's claim is not used
    assert row["cached_tokens"] == 4 and row["seed"] == request_seed("ev1", second.session_id, 1)
    assert row["chunk_times"] == sorted(row["chunk_times"]) and row["sent_at"] <= row["first_token_at"]


def test_window_rule_cuts_history(engine, qwen_tokenizer_dir, chat_sessions):
    tok = load_tokenizer(str(qwen_tokenizer_dir))
    cfg = _cfg(engine, tok, max_model_len=200)
    t0 = time.time()
    recs = asyncio.run(
        run_lanes(
            cfg, chat_sessions[:4], lanes=1, interleave=1, pass_id="solo-0", ends_at=t0 + 3.0, grace_ends_at=t0 + 10
        )
    )
    cut = [r for r in recs if r.window_cut]
    assert cut, "a 200-token window must cut some history"
    for r in cut:
        sent = r.messages[: r.n_messages]
        assert sent[0]["role"] == "system" and sent[-1]["role"] == "user"
        assert cfg.window.estimate(r.prompt_tokens) <= 0.5 * 200 or r.n_messages == 2


def _rows(engine, tok, sessions, lanes: int, seconds: float, **kw) -> tuple[float, list[tuple[dict, dict]]]:
    """One pass of `lanes` lanes against the engine: its start and each request's two rows."""
    t0 = time.time()
    pass_id = "solo-0" if lanes == 1 else "team-0"
    recs = asyncio.run(
        run_lanes(_cfg(engine, tok), sessions, lanes, 1, pass_id, ends_at=t0 + seconds, grace_ends_at=t0 + 10, **kw)
    )
    workload = pass_id.split("-")[0]
    return t0, [
        record_rows(
            r, evaluation_id="ev1", engine="candidate", pass_id=pass_id, workload=workload, pass_index=0, tokenizer=tok
        )
        for r in recs
    ]


@pytest.mark.parametrize("engine", ["overlong"], indirect=True)
def test_over_budget_reply_is_not_counted(engine, qwen_tokenizer_dir, chat_sessions):
    tok = load_tokenizer(str(qwen_tokenizer_dir))
    t0, [(row, _)] = _rows(engine, tok, chat_sessions[:1], 1, 0.5, max_requests_per_lane=1)
    assert row["done"] and row["output_tokens"] > row["max_tokens"] + 4
    # the stream was fine; the budget rule rejects it, even with protocol v2's slack of 4 tokens
    assert not counted_row(row, slack=4, ends_at=t0 + 0.5, grace_ends_at=t0 + 10) and row["error"] is None


@pytest.mark.parametrize("engine", [f"malformed={shape}" for shape in MALFORMED], indirect=True)
def test_a_malformed_stream_fails_its_request_with_a_reason(
    engine, request, tmp_path, qwen_tokenizer_dir, chat_sessions
):
    """Each malformed shape of issue 24 (`choices` a number, content not a string, broken JSON,
    bytes not UTF-8, broken chunked framing), streamed by the real stand-in engine after a good
    chunk and before `[DONE]`: every request is the engine's failure with that shape's reason
    (not done, so never counted), its session ends and the lane goes on to the next, the rows are
    stored, and a greedy probe read from the same stream is unanswered with the reason. Nothing
    raises (it made the evaluation void before: "TypeError: 'int' object is not iterable")."""
    shape = request.node.callspec.params["engine"].split("=", 1)[1]
    tok = load_tokenizer(str(qwen_tokenizer_dir))
    t0, rows = _rows(engine, tok, chat_sessions[:4], 2, 5)
    assert len(rows) == 4  # one failed turn per session, and the lanes went on to their next session
    for row, _ in rows:
        assert not row["done"] and row["error"].startswith(MALFORMED_REASONS[shape]), row["error"]
        assert not counted_row(row, slack=4, ends_at=t0 + 5, grace_ends_at=t0 + 10)
    wh = Warehouse(tmp_path / "home")
    wh.write_rows("requests", "ev1", [a for a, _ in rows])
    wh.write_rows("replies", "ev1", [b for _, b in rows])
    assert wh.read_table("requests", "ev1").num_rows == 4
    prompt = Probe(prompt_id="p0", messages=[{"role": "user", "content": "say something"}])
    probes = ProbeRunner("ev1", tok, load_protocol().task("local-smollm2"), say=lambda m: None)
    (greedy,) = probes.greedy("candidate", engine.base_url, [prompt], alive=lambda: True)
    assert not greedy["answered"] and greedy["error"].startswith(MALFORMED_REASONS[shape])
    wh.write_rows("probe_greedy", "ev1", [greedy])


def test_grace_end_cuts_stream(engine_factory, tmp_path, qwen_tokenizer_dir, chat_sessions):
    er = EngineRun(
        engine="candidate",
        purpose="timed",
        start_index=1,
        src=engine_factory("slow", "normal", ENGINE_CHUNK_DELAY="0.5"),
        env_vars={"PATH": "/usr/bin:/bin"},
        port=free_port(),
        private_root=tmp_path / "p",
    )
    er.start(readable=[])
    try:
        assert er.wait_healthy(20)
        tok = load_tokenizer(str(qwen_tokenizer_dir))
        t0 = time.time()
        recs = asyncio.run(
            run_lanes(
                _cfg(er, tok),
                chat_sessions[:1],
                lanes=1,
                interleave=1,
                pass_id="solo-0",
                ends_at=t0 + 0.2,
                grace_ends_at=t0 + 1.2,
            )
        )
        assert len(recs) == 1
        r = recs[0].result
        assert not r.done and "grace" in r.error and r.ended_at < t0 + 2.0
    finally:
        er.stop(5)


def test_chunk_attribution_sums_to_reply_tokens(qwen_tokenizer_dir):
    tok = load_tokenizer(str(qwen_tokenizer_dir))
    chunks = ["Hel", "lo, wor", "ld", "! Speculative", " decoding"]
    n, counts = attribute_chunks(tok, chunks)
    assert n == len(tok("".join(chunks), add_special_tokens=False)["input_ids"]) and sum(counts) == n
    assert counts[0] == 0  # "Hel" completes no token of "Hello"
