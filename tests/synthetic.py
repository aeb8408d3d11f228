"""Synthetic evaluations: every raw table of a complete paired evaluation, with known answers.

Why: the scorer, the board and the benchmark need warehouses whose right answers are known
without a GPU run. The candidate replays the stock engine's timeline compressed by the
workload's speedup (same sessions, turns and reply lengths), so the pass ratio of every pass
is exactly that speedup (up to float rounding) and SpecScore is their geometric mean; the
probes of both engines are identical unless an `attack` moves the candidate's. Each attack
breaks exactly one rule, so a test knows which gate must fail.

Scale: `"protocol"` uses the task's lanes and pass seconds from the protocol (three workloads,
three passes, both engines, 64/512/64 probes); `"small"` uses at most 3 lanes and 10-second
passes for fast tests. To keep 1,000 protocol-scale evaluations writable on 2 cores, chunks are
coarse (`chunk_tokens` tokens per chunk, default 16), memory is sampled every 5 s rather than
0.5 s (or just under the protocol's largest allowed gap, where it has one), host contention is one
row per pass, probe replies are 16 tokens long and reply texts are short placeholders. Nothing of that
changes a formula, only the row counts (docs/benchmarks/scoring.md).
"""

from __future__ import annotations

import json
from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.model import WORKLOADS
from speculator_arena.warehouse.schema import TABLES
from speculator_arena.warehouse.store import Warehouse

ATTACKS = (
    None,
    "likelihood",  # candidate's sampled replies less likely under the target
    "first_choice",  # candidate leaves the target's first choice more often
    "greedy",  # candidate's greedy replies diverge early
    "fidelity",  # candidate's prompt_logprobs differ (a quantized target)
    "length",  # candidate's replies 25% longer
    "memory",  # candidate's device memory over the budget
    "failures",  # candidate fails many requests on one pass (team-0)
    "partial",  # stock's last busy pass missing, evaluation still running
    "void",  # the runner voided the evaluation
    "stock_unanswered",  # the stock engine leaves > 10% of a probe check unanswered: void
    "candidate_unanswered",  # the candidate leaves > 10% of the greedy check unanswered
    "died",  # the candidate died: SpecScore 0
    "offload",  # offload in the candidate's start-up log: SpecScore 0
    "contended",  # another process used most of a core during the candidate's team-0: void
)

SPEC_COUNTERS = (
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
)
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos_total"
POSITION_SHARES = (0.7, 0.5, 0.3)  # accepted at draft position p per draft: a prefix, summing to 1.5
FAMILIES = {"agent": "mini-swe-agent", "chat": "tau-bench-airline"}  # a session's family (by lane parity) and app
DEVICE_TOTAL = 183_000_000_000
GIB = 1 << 30


def _list_array(values: list[np.ndarray], dtype) -> pa.Array:
    lengths = np.fromiter((len(v) for v in values), dtype=np.int64, count=len(values))
    offsets = np.zeros(len(values) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.concatenate(values) if values else np.array([], dtype=dtype)
    return pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), pa.array(flat.astype(dtype)))


def _table(name: str, cols: dict) -> pa.Table:
    schema = TABLES[name]
    n = len(next(iter(cols.values())))
    arrays = []
    for field in schema:
        v = cols.get(field.name)
        if v is None:
            arrays.append(pa.nulls(n, field.type))
        elif isinstance(v, (pa.Array, pa.ChunkedArray)):
            arrays.append(v.cast(field.type))
        else:
            arrays.append(pa.array(v, field.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def _timeline(rng, lanes: int, pass_seconds: float, grace: float, chunk: int, small: bool):
    """Stock engine's requests of one pass, as offsets from the pass start (seconds)."""
    rows = []
    for lane in range(lanes):
        t = 0.05 * lane
        k = 0
        while t < pass_seconds:
            tokens = int(rng.integers(8, 40 if small else 400))
            ttft = float(rng.uniform(0.05, 0.4))
            tps = float(rng.uniform(20.0, 60.0))
            dur = ttft + tokens / tps
            dur = min(dur, 0.8 * grace)
            rows.append((lane, f"L{lane}-s{k // 3}", k % 3, t, ttft, dur, tokens))
            t += dur + float(rng.uniform(0.0, 0.05))
            k += 1
    return rows


def write_synthetic_evaluation(
    warehouse: Warehouse,
    evaluation_id: str,
    *,
    task_id: str = "local-smollm2",
    split: str = "dev",
    account_id: str = "acct-synthetic",
    label: str = "synthetic",
    is_reference: bool = False,
    speedups: dict[str, float] | None = None,
    seed: int = 0,
    scale: str = "small",
    attack: str | None = None,
    memory: bool | None = None,
    created_at: float | None = None,
    protocol_version: int | None = None,
    chunk_tokens: int = 16,
    probe_tokens: int = 16,
    per_position: bool = False,
) -> dict:
    """Write every raw table of one evaluation; return what scoring must find (`expected`).

    `memory=None` samples device memory on public (GPU) tasks and records "unavailable" on the
    local CPU task, as the runner does. `per_position` adds the candidate's accepted tokens per
    draft position (POSITION_SHARES of its drafts at positions 0, 1, 2) beside its totals.
    Sessions of even lanes are agent sessions, of odd lanes chat sessions (FAMILIES).
    """
    if attack not in ATTACKS:
        raise ValueError(f"unknown attack {attack!r}; choose one of {ATTACKS}")
    if scale not in ("protocol", "small"):
        raise ValueError(f"scale must be 'protocol' or 'small', got {scale!r}")
    speedups = dict(speedups or {"solo": 1.6, "team": 1.4, "busy": 1.2})
    proto = load_protocol(protocol_version)
    tp = proto.task(task_id)
    small = scale == "small"
    rng = np.random.default_rng(seed)
    if memory is None:
        memory = tp.task.public
    created = float(created_at if created_at is not None else 1.8e9 + seed)
    g = tp.gates
    n_greedy = 6 if small else g.greedy_agreement.prompts
    n_scored = 24 if small else g.sampled_likelihood.replies
    n_fid = 6 if small else g.target_fidelity.texts
    grace = tp.grace_seconds
    gpu_util = proto.engine_environment.gpu_memory_utilization

    max_gap = g.memory.max_sample_gap_seconds
    mem_step = min(5.0, 0.9 * max_gap) if max_gap else 5.0
    host = []
    sessions = []
    passes, req_cols, replies, metrics, mem = (
        [],
        {
            k: []
            for k in (
                "pass_id",
                "engine",
                "workload",
                "pass_index",
                "request_id",
                "lane",
                "session_id",
                "turn",
                "seed",
                "sent_at",
                "first_token_at",
                "last_token_at",
                "ended_at",
                "prompt_tokens",
                "usage_prompt_tokens",
                "cached_tokens",
                "output_tokens",
                "usage_completion_tokens",
                "max_tokens",
                "done",
                "finish_reason",
                "error",
                "window_cut",
            )
        },
        [],
        [],
        [],
    )
    chunk_times, chunk_toks = [], []
    expected = {"passes": {}, "r": {}, "acceptance_length": None}
    base = {"candidate": created + 100.0, "stock": created + 5000.0}
    acc_state = {"drafts": 0.0, "draft_tokens": 0.0, "accepted": 0.0}
    for workload in WORKLOADS:
        lanes = min(tp.lanes[workload], 3) if small else tp.lanes[workload]
        pass_seconds = 10.0 if small else tp.workloads[workload].pass_seconds
        for pi in range(tp.passes_per_workload):
            pass_id = f"{workload}-{pi}"
            timeline = _timeline(rng, lanes, pass_seconds, grace, chunk_tokens, small)
            for engine in ("candidate", "stock"):
                if attack == "partial" and engine == "stock" and pass_id == f"busy-{tp.passes_per_workload - 1}":
                    continue
                s = speedups[workload] if engine == "candidate" else 1.0
                t0 = base[engine]
                base[engine] += pass_seconds + grace + 30.0
                passes.append(
                    dict(
                        pass_id=pass_id,
                        engine=engine,
                        workload=workload,
                        pass_index=pi,
                        lanes=lanes,
                        interleave=tp.workloads[workload].interleave,
                        started_at=t0,
                        ends_at=t0 + pass_seconds,
                        grace_ends_at=t0 + pass_seconds + grace,
                        finished_at=t0 + pass_seconds + 1.0,
                        status="complete",
                        error=None,
                        memory_status="sampled" if memory else "unavailable",
                        memory_note=None if memory else "no NVIDIA device (synthetic)",
                        device_total_bytes=DEVICE_TOTAL if memory else None,
                        gpu_memory_utilization=gpu_util,
                    )
                )
                n_fail = 0
                if attack == "failures" and engine == "candidate" and pass_id == "team-0":
                    n_fail = max(
                        tp.failure_rule.min_excess + 1,
                        int(np.ceil(tp.failure_rule.share_of_requests * len(timeline))) + 1,
                    )
                for i, (lane, sess, turn, off, ttft, dur, tokens) in enumerate(timeline):
                    if attack == "length" and engine == "candidate":
                        tokens = int(round(tokens * 1.25))
                    sent = t0 + off / s
                    first = t0 + (off + ttft) / s
                    last = t0 + (off + dur) / s
                    nch = max(1, -(-tokens // chunk_tokens))
                    ct = np.linspace(first, last, nch)
                    tk = np.full(nch, chunk_tokens, dtype=np.int64)
                    tk[-1] = tokens - chunk_tokens * (nch - 1)
                    failed = i < n_fail
                    rid = f"{engine}-{pass_id}-{i}"
                    prompt = 200 + 50 * turn
                    cached = 0 if turn == 0 else prompt - 60
                    for k, v in (
                        ("pass_id", pass_id),
                        ("engine", engine),
                        ("workload", workload),
                        ("pass_index", pi),
                        ("request_id", rid),
                        ("lane", lane),
                        ("session_id", f"{pass_id}-{sess}"),
                        ("turn", turn),
                        ("seed", seed * 100000 + i),
                        ("sent_at", sent),
                        ("first_token_at", first),
                        ("last_token_at", last),
                        ("ended_at", last + 0.001),
                        ("prompt_tokens", prompt),
                        ("usage_prompt_tokens", prompt),
                        ("cached_tokens", cached),
                        ("output_tokens", tokens),
                        ("usage_completion_tokens", tokens),
                        ("max_tokens", 400 if not small else 48),
                        ("done", not failed),
                        ("finish_reason", None if failed else "stop"),
                        ("error", "broken stream" if failed else None),
                        ("window_cut", False),
                    ):
                        req_cols[k].append(v)
                    chunk_times.append(ct)
                    chunk_toks.append(tk)
                    replies.append((rid, engine, f"synthetic reply {i}"))
                # Engine counters around the pass: cumulative, candidate only (stock has no speculation).
                if engine == "candidate":
                    total = sum(t[6] for t in timeline)
                    drafts = total / 2.5
                    before = dict(acc_state)
                    acc_state["drafts"] += drafts
                    acc_state["draft_tokens"] += 3 * drafts
                    acc_state["accepted"] += 1.5 * drafts
                    for phase, st, at in (("before", before, t0 - 0.5), ("after", acc_state, t0 + pass_seconds + 2)):
                        for name, key in zip(SPEC_COUNTERS, ("drafts", "draft_tokens", "accepted")):
                            metrics.append(
                                (pass_id, engine, phase, at, name, json.dumps({"model_name": "target"}), st[key])
                            )
                        for pos, share in enumerate(POSITION_SHARES if per_position else ()):
                            labels = json.dumps({"model_name": "target", "position": str(pos)})
                            metrics.append((pass_id, engine, phase, at, PER_POSITION, labels, share * st["drafts"]))
                for sess in sorted({t[1] for t in timeline}):
                    family = "agent" if int(sess[1 : sess.index("-")]) % 2 == 0 else "chat"
                    sessions.append((pass_id, engine, f"{pass_id}-{sess}", family, FAMILIES[family]))
                finished = t0 + pass_seconds + 1.0
                busy = sum(t[5] for t in timeline) / s / (finished - t0)  # the runner's own work, in cores
                foreign = 0.8 if (attack == "contended" and engine == "candidate" and pass_id == "team-0") else 0.02
                host.append(
                    (
                        pass_id,
                        engine,
                        t0,
                        finished,
                        (busy + foreign) * (finished - t0),
                        busy * (finished - t0),
                        foreign * (finished - t0),
                        0.0,
                        2.0 * (finished - t0),
                        2,
                        0 if memory else None,
                        0 if memory else None,
                    )
                )
                if memory:
                    times = np.append(np.arange(t0, finished, mem_step), finished)
                    frac = 0.97 if (attack == "memory" and engine == "candidate") else 0.88
                    used = (frac * DEVICE_TOTAL - rng.uniform(0, 0.5 * GIB, len(times))).astype(np.int64)
                    for ts, u in zip(times, used):
                        mem.append((pass_id, engine, float(ts), int(u), DEVICE_TOTAL, int(u) - 600_000_000))
            expected["passes"][pass_id] = speedups[workload]
        expected["r"][workload] = speedups[workload]
    expected["acceptance_length"] = 2.5
    expected["specscore"] = float(np.prod([speedups[w] for w in WORKLOADS]) ** (1 / 3))

    status, void_reason, failure_reason = "measured", None, None
    if attack == "partial":
        status = "running"
    elif attack == "void":
        status, void_reason = "void", "device did not come back idle (synthetic)"
    elif attack == "died":
        failure_reason = "candidate engine died during busy-1 (synthetic)"

    warehouse.write_rows(
        "evaluations",
        evaluation_id,
        [
            dict(
                evaluation_id=evaluation_id,
                task_id=task_id,
                split=split,
                protocol_version=proto.version,
                submission_id=f"sub-{evaluation_id}",
                account_id=account_id,
                is_reference=is_reference,
                label=label,
                solution_kind="none" if is_reference else "other",
                status=status,
                void_reason=void_reason,
                failure_reason=failure_reason,
                created_at=created,
                updated_at=created + 9000.0,
                provenance=json.dumps({"synthetic": True, "seed": seed, "scale": scale, "attack": attack}),
            )
        ],
        part="status",
        replace=True,
    )
    warehouse.write_rows("passes", evaluation_id, passes)
    req_cols["chunk_times"] = _list_array(chunk_times, np.float64)
    req_cols["chunk_tokens"] = _list_array(chunk_toks, np.int64)
    req_cols["evaluation_id"] = [evaluation_id] * len(req_cols["request_id"])
    warehouse.write_rows("requests", evaluation_id, _table("requests", req_cols))
    warehouse.write_rows(
        "replies",
        evaluation_id,
        _table(
            "replies",
            dict(
                evaluation_id=[evaluation_id] * len(replies),
                request_id=[r[0] for r in replies],
                engine=[r[1] for r in replies],
                text=[r[2] for r in replies],
            ),
        ),
    )
    if metrics:
        warehouse.write_rows(
            "metrics",
            evaluation_id,
            _table(
                "metrics",
                dict(
                    evaluation_id=[evaluation_id] * len(metrics),
                    **{
                        k: [m[i] for m in metrics]
                        for i, k in enumerate(("pass_id", "engine", "phase", "taken_at", "name", "labels", "value"))
                    },
                ),
            ),
        )
    warehouse.write_rows(
        "sessions",
        evaluation_id,
        [dict(zip(("pass_id", "engine", "session_id", "family", "app"), row)) for row in sessions],
    )
    if proto.contention is not None:
        cols = (
            "pass_id",
            "engine",
            "started_at",
            "ended_at",
            "cpu_seconds",
            "own_cpu_seconds",
            "foreign_cpu_seconds",
            "steal_seconds",
            "total_cpu_seconds",
            "cpus",
            "foreign_gpu_processes",
            "foreign_gpu_bytes",
        )
        warehouse.write_rows(
            "contention",
            evaluation_id,
            _table(
                "contention",
                dict(
                    evaluation_id=[evaluation_id] * len(host), **{k: [h[i] for h in host] for i, k in enumerate(cols)}
                ),
            ),
        )
    if mem:
        warehouse.write_rows(
            "memory",
            evaluation_id,
            _table(
                "memory",
                dict(
                    evaluation_id=[evaluation_id] * len(mem),
                    **{
                        k: [m[i] for m in mem]
                        for i, k in enumerate(
                            ("pass_id", "engine", "sampled_at", "used_bytes", "total_bytes", "engine_bytes")
                        )
                    },
                ),
            ),
        )
    _write_probes(warehouse, evaluation_id, rng, attack, n_greedy, n_scored, n_fid, probe_tokens, req_cols)
    starts = []
    for j, engine in enumerate(("candidate", "stock")):
        for purpose in ("timed", "probe"):
            died = attack == "died" and engine == "candidate" and purpose == "timed"
            off = attack == "offload" and engine == "candidate"
            starts.append(
                dict(
                    engine=engine,
                    purpose=purpose,
                    start_index=len(starts),
                    started_at=created + j,
                    healthy_at=created + j + 30,
                    stopped_at=created + j + 4000,
                    exit_code=0 if not died else 1,
                    stop_signal="exited" if died else "SIGTERM",
                    run_as_user="engine",
                    unprivileged=True,
                    offload_detected=off,
                    offload_evidence="KV blocks in host memory" if off else None,
                    died=died,
                    device_idle_seconds=3.0,
                    device_idle_ok=True if memory else None,
                    log_text="synthetic",
                )
            )
    warehouse.write_rows("engine_starts", evaluation_id, starts)
    return expected


def _write_probes(wh, eid, rng, attack, n_greedy, n_scored, n_fid, ntok, req_cols):
    rows_g = {k: [] for k in ("engine", "prompt_id", "prompt_index", "token_ids", "text", "answered", "error")}
    base_tokens = [rng.integers(0, 49152, ntok * 4) for _ in range(n_greedy)]
    for engine in ("candidate", "stock"):
        for i, toks in enumerate(base_tokens):
            toks = toks.copy()
            if attack == "greedy" and engine == "candidate":
                cut = len(toks) // 5
                toks[cut:] = (toks[cut:] + 1) % 49152
            # the candidate leaves just over the 10% answering limit unanswered (1 of 6, 8 of 64), so
            # that its greedy agreement (an unanswered prompt counts 0) stays above a calibrated
            # floor (v5: 0.76) and the answering gate alone fails
            unanswered = (attack == "candidate_unanswered" and engine == "candidate" and i < max(1, n_greedy // 8)) or (
                attack == "stock_unanswered" and engine == "stock" and i < max(2, n_greedy // 4)
            )
            for k, v in (
                ("engine", engine),
                ("prompt_id", f"g{i}"),
                ("prompt_index", i),
                ("token_ids", [] if unanswered else toks.tolist()),
                ("text", "synthetic"),
                ("answered", not unanswered),
                ("error", "timeout" if unanswered else None),
            ):
                rows_g[k].append(v)
    wh.write_rows(
        "probe_greedy", eid, _table("probe_greedy", dict(evaluation_id=[eid] * len(rows_g["engine"]), **rows_g))
    )

    lps = [rng.normal(-0.5, 0.4, ntok).clip(max=0.0) for _ in range(n_scored)]
    ranks = [np.where(rng.random(ntok) < 0.86, 1, rng.integers(2, 6, ntok)) for _ in range(n_scored)]
    s_lp, s_rank, s_eng, s_idx = [], [], [], []
    for engine in ("candidate", "stock"):
        for i in range(n_scored):
            lp, rk = lps[i].copy(), ranks[i].copy()
            if engine == "candidate" and attack == "likelihood":
                lp = lp - 0.2
            if engine == "candidate" and attack == "first_choice":
                flip = (rk == 1) & (rng.random(ntok) < 0.3)
                rk = np.where(flip, 2, rk)
            s_lp.append(lp)
            s_rank.append(rk)
            s_eng.append(engine)
            s_idx.append(i)
    n = len(s_eng)
    wh.write_rows(
        "probe_scored",
        eid,
        _table(
            "probe_scored",
            dict(
                evaluation_id=[eid] * n,
                reply_engine=s_eng,
                scorer_engine=["stock"] * n,
                request_id=[f"{e}-sample-{i}" for e, i in zip(s_eng, s_idx)],
                sample_index=s_idx,
                token_logprobs=_list_array(s_lp, np.float64),
                token_ranks=_list_array(s_rank, np.int64),
                answered=[True] * n,
                error=[None] * n,
            ),
        ),
    )

    f_ids = [rng.integers(0, 49152, ntok * 4) for _ in range(n_fid)]
    f_lp = [rng.normal(-1.0, 0.8, ntok * 4).clip(max=0.0) for _ in range(n_fid)]
    ids, lp_lists, eng, tid = [], [], [], []
    for engine in ("candidate", "stock"):
        for i in range(n_fid):
            lp = f_lp[i] + (0.01 if (attack == "fidelity" and engine == "candidate") else 0.0)
            ids.append(f_ids[i])
            lp_lists.append(lp)
            eng.append(engine)
            tid.append(f"f{i}")
    n = len(eng)
    wh.write_rows(
        "probe_fidelity",
        eid,
        _table(
            "probe_fidelity",
            dict(
                evaluation_id=[eid] * n,
                engine=eng,
                text_id=tid,
                token_ids=_list_array(ids, np.int64),
                token_logprobs=_list_array(lp_lists, np.float64),
                answered=[True] * n,
                error=[None] * n,
            ),
        ),
    )


def write_synthetic_warehouse(
    warehouse: Warehouse,
    n_evaluations: int,
    *,
    task_ids: Iterable[str] = ("qwen3-8b",),
    scale: str = "protocol",
    accounts: int = 20,
    seed: int = 0,
    progress: bool = True,
) -> list[str]:
    """Write `n_evaluations` complete evaluations (varied speedups, dev and test) for benchmarks."""
    import sys
    import time

    task_ids = list(task_ids)
    rng = np.random.default_rng(seed)
    ids = []
    t_start = time.monotonic()
    for i in range(n_evaluations):
        eid = f"syn-{seed}-{i:05d}"
        sp = {w: float(np.round(rng.uniform(0.8, 2.2), 3)) for w in WORKLOADS}
        write_synthetic_evaluation(
            warehouse,
            eid,
            task_id=task_ids[i % len(task_ids)],
            split="dev" if i % 4 else "test",
            account_id=f"acct-{i % accounts:03d}",
            label=f"synthetic-{i % accounts:03d}",
            speedups=sp,
            seed=seed * 1_000_003 + i,
            scale=scale,
            created_at=1.8e9 + 10_000.0 * i,
        )
        ids.append(eid)
        if progress and (i + 1) % max(1, n_evaluations // 20) == 0:
            el = time.monotonic() - t_start
            print(f"  synthetic: {i + 1}/{n_evaluations} evaluations written ({el:.0f} s)", file=sys.stderr, flush=True)
    return ids


def busy_window(intervals, lanes, chunks=()):
    """Reference implementation of the busy window (SCORING.md), a plain event sweep: what the
    scorer's numpy kernel is checked against, in the tests and the scoring benchmark's plain loop.

    `intervals`: (start, end) per request, closed. `chunks`: (time, tokens) of counted requests.
    Returns (window seconds, tokens whose chunk arrived inside the window).
    """
    events = (
        [(s, 0, 1, 0) for s, _ in intervals] + [(e, 2, -1, 0) for _, e in intervals] + [(t, 1, 0, k) for t, k in chunks]
    )
    events.sort(key=lambda e: (e[0], e[1]))
    in_flight = 0
    seconds = 0.0
    tokens = 0
    for i, (t, _, delta, k) in enumerate(events):
        in_flight += delta
        if in_flight >= lanes:
            if delta == 0:
                tokens += k
            if i + 1 < len(events):
                seconds += events[i + 1][0] - t
    return seconds, tokens
