"""Session structure fitted per family from recorded traces, stored as versioned statistics.

Why empirical quantiles and not a parametric fit: the recorded distributions are heavy-tailed
and multi-modal (agent tool outputs range from a return code to a whole file), and a
lognormal would invent tails the traces do not hold. Each statistic is kept as its quantiles
at 101 evenly spaced probabilities; a session samples by inverse-CDF interpolation. The
statistics are a plain JSON document with a version and the digests of its sources, so a pool
names the exact statistics it was built from, and operators can swap in production
statistics (same schema) without the public ever seeing them.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from speculator_arena.errors import ArenaError

STRUCTURE_VERSION = 1
PROBS = np.linspace(0.0, 1.0, 101)


class StructureFitError(ValueError, ArenaError):
    """A statistic with no values to fit it from. The message names the declared sets it is
    fitted from, which fields they lack in how many of their records, and what to change."""


def _values(values) -> np.ndarray:
    return np.asarray([x for x in values if x is not None and np.isfinite(x)], dtype=float)


def dist(values, *, source: str) -> dict[str, Any]:
    """One statistic: its quantiles at PROBS, count, mean, and where it came from."""
    v = _values(values)
    if v.size == 0:
        raise StructureFitError(f"no values to fit from {source}")
    return {
        "n": int(v.size),
        "mean": float(v.mean()),
        "quantiles": np.quantile(v, PROBS).round(4).tolist(),
        "source": source,
    }


def _fit(stats: dict[str, tuple[list, str]], family: str, explain) -> dict[str, dict]:
    """Every statistic of `stats` ({name: (values, source)}) fitted, or one error naming every
    one without values and, by `explain(names)`, why and what to do."""
    empty = [name for name, (values, _src) in stats.items() if _values(values).size == 0]
    if empty:
        sources = sorted({stats[n][1] for n in empty})
        raise StructureFitError(
            f"the {family} structure cannot be fitted: no values for {', '.join(empty)} "
            f"(from {'; '.join(sources)}). {explain(empty)}"
        )
    return {name: dist(values, source=src) for name, (values, src) in stats.items()}


def _by_set(records: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in records:
        out.setdefault(str(r.get("set") or "?"), []).append(r)
    return out


def missing_agent_values(empty: list[str], trajectories: list[dict], cc_traces: list[dict]) -> str:
    """Why agent statistics have no values: per declared agent set, how many of its records
    hold the fields they are fitted from; and what the operator can do."""
    remedy = (
        "The agent structure is fitted from each assistant call's `usage` (`prompt_tokens`, "
        "`completion_tokens`) and `created` (its time), as mini-swe-agent records them: declare an "
        "agent set whose trajectories hold them (beside yours: `extends: default` keeps the shipped "
        "one), or give AgentX cc-traces (--cc-traces or ARENA_CC_TRACES)."
    )
    if cc_traces:
        n = sum(len(t["requests"]) for t in cc_traces)
        return f"The AgentX cc-traces given hold {len(cc_traces)} traces and {n} requests. {remedy}"
    if not trajectories:
        return f"No agent set is declared (`family: agent`). {remedy}"
    parts = []
    for name, trajs in _by_set(trajectories).items():
        calls = [[m for m in t["messages"] if m["role"] == "assistant" and m.get("usage")] for t in trajs]
        timed = [[m for m in t["messages"] if m["role"] == "assistant" and m.get("created")] for t in trajs]
        n = len(trajs)
        parts.append(
            f"{name!r}: {n} trajectories kept; `usage` on an assistant message in {sum(bool(c) for c in calls)} of {n}, "
            f"on two or more in {sum(len(c) >= 2 for c in calls)} of {n}; `created` on two or more assistant "
            f"messages in {sum(len(c) >= 2 for c in timed)} of {n}"
        )
    return "The declared agent sets: " + "; ".join(parts) + ". " + remedy


def missing_chat_values(empty: list[str], conversations: list[dict], fitted: int) -> str:
    """Why chat statistics have no values: per declared chat set, its conversations, user turns
    and recorded replies; the traces' statistics come from the shared data, not a declaration."""
    traces = [n for n in empty if n in ("reply_tokens", "think_s", "shared_prefix") or n.startswith("mooncake_")]
    out = []
    if len(traces) < len(empty):
        if not conversations:
            out.append("No chat set is declared (`family: chat`), or none kept a conversation.")
        else:
            parts = []
            for name, convs in _by_set(conversations).items():
                n = len(convs)
                users = sum(any(m["role"] == "user" for m in c["messages"]) for c in convs)
                replies = sum(any(m["role"] == "assistant" for m in c["messages"]) for c in convs)
                parts.append(
                    f"{name!r}: {n} conversations kept, with a user turn {users}, with a recorded "
                    f"(assistant) reply {replies}"
                )
            out.append(
                f"The declared chat sets ({fitted} conversations fitted): " + "; ".join(parts) + ". "
                "Reply lengths are fitted from the chat sets' recorded replies, which question sets "
                "(`questions-*`) hold none of: declare a chat set of whole conversations beside them "
                "(`extends: default` keeps the shipped ShareGPT sets)."
            )
    if traces:
        out.append(
            f"{', '.join(traces)} come from the shared data's traces (Azure, Mooncake): check the "
            "files under --data (ARENA_SHARED_DATA)."
        )
    return " ".join(out)


def sample(d: dict, rng: np.random.Generator, size: int | None = None):
    """Inverse-CDF draw from a stored statistic."""
    u = rng.random(size)
    return np.interp(u, PROBS, np.asarray(d["quantiles"], dtype=float))


def quantile(d: dict, q: float) -> float:
    return float(np.interp(q, PROBS, np.asarray(d["quantiles"], dtype=float)))


# ---- agent -------------------------------------------------------------------------------------
AGENT_STATS = ("turns", "turn_tokens", "reply_tokens", "prefix_reuse", "idle_s", "prompt_tokens")


def _agent_stats() -> dict[str, list[float]]:
    """The per-call statistics both agent sources fill, empty."""
    return {k: [] for k in AGENT_STATS}


def agent_from_trajectories(trajs: list[dict]) -> dict[str, list[float]]:
    """Per-call sizes and gaps of mini-swe-agent trajectories (usage and `created` per call)."""
    out = _agent_stats()
    for t in trajs:
        calls = [m for m in t["messages"] if m["role"] == "assistant" and m.get("usage")]
        if not calls:
            continue
        out["turns"].append(len(calls))
        prev_prompt = prev_reply = None
        prev_created = None
        for c in calls:
            p = int(c["usage"].get("prompt_tokens") or 0)
            r = int(c["usage"].get("completion_tokens") or 0)
            out["prompt_tokens"].append(p)
            out["reply_tokens"].append(r)
            if prev_prompt is None:
                out["turn_tokens"].append(p)
            else:
                out["turn_tokens"].append(max(p - prev_prompt - prev_reply, 0))
                if p > 0:
                    out["prefix_reuse"].append(min((prev_prompt + prev_reply) / p, 1.0))
            if prev_created is not None and c.get("created"):
                out["idle_s"].append(max(float(c["created"]) - prev_created, 0.0))
            prev_prompt, prev_reply = p, r
            prev_created = float(c["created"]) if c.get("created") else None
    return out


def agent_from_cc_traces(traces: list[dict]) -> dict[str, list[float]]:
    """The same statistics from AgentX cc-traces (Weka format): `in`, `out`, `think_time`,
    and prefix reuse as the share of a request's blocks seen earlier in its trace."""
    out = _agent_stats()
    for tr in traces:
        reqs = [r for r in tr["requests"] if r["depth"] == 0] or tr["requests"]
        out["turns"].append(len(reqs))
        seen: set = set()
        prev = None
        for r in reqs:
            out["prompt_tokens"].append(r["in"])
            out["reply_tokens"].append(r["out"])
            out["turn_tokens"].append(r["in"] if prev is None else max(r["in"] - prev["in"] - prev["out"], 0))
            if r["hash_ids"] and prev is not None:
                out["prefix_reuse"].append(sum(h in seen for h in r["hash_ids"]) / len(r["hash_ids"]))
            seen.update(r["hash_ids"])
            if prev is not None:
                out["idle_s"].append(max(r["think_time"], 0.0))
            prev = r
    return out


# ---- chat --------------------------------------------------------------------------------------
def mooncake_sessions(records: list[dict]) -> dict[str, list[float]]:
    """Mooncake has no session ids; a request continues the latest earlier request whose block
    hashes are a prefix of its own (at least two blocks beyond a shared first block), which is
    what a multi-turn conversation's growing prompt looks like under prefix-block hashing."""
    trie: dict[tuple[int, int], int] = {}  # (parent node, block hash) -> node; walked in O(blocks)
    latest: dict[int, int] = {}  # node -> latest request through it
    parent: list[int | None] = []
    depth: list[int] = []
    seen: set = set()
    shared: list[float] = []
    think: list[float] = []
    growth: list[float] = []
    for i, r in enumerate(records):
        h = r["hash_ids"]
        node, p, nodes = 0, None, []
        for k, b in enumerate(h):
            nxt = trie.get((node, b))
            if nxt is None:
                break
            node = nxt
            if k >= 1 and k < len(h) - 1 and node in latest:
                p = latest[node]
        node = 0
        for b in h:
            node = trie.setdefault((node, b), len(trie) + 1)
            nodes.append(node)
        parent.append(p)
        depth.append(1 if p is None else depth[p] + 1)
        if p is not None:
            think.append(max((r["timestamp_ms"] - records[p]["timestamp_ms"]) / 1000.0, 0.0))
            growth.append(max(r["input_length"] - records[p]["input_length"] - records[p]["output_length"], 0))
        if h:
            shared.append(sum(x in seen for x in h) / len(h))
        seen.update(h)
        for n in nodes:
            latest[n] = i
    has_child = {p for p in parent if p is not None}
    final_depths = [depth[i] for i in range(len(records)) if i not in has_child]
    return {
        "depth": final_depths,
        "think_s": think,
        "growth_tokens": growth,
        "shared_prefix": shared,
        "reply_tokens": [r["output_length"] for r in records],
        "prompt_tokens": [r["input_length"] for r in records],
    }


def fit_structure(
    *,
    trajectories: list[dict],
    cc_traces: list[dict],
    chat_conversations: list[dict],
    mooncake: list[dict],
    azure_conv: list[dict],
    count_tokens,
    source_digests: dict[str, str],
    production: dict | None = None,
    max_chat: int = 3000,
) -> dict[str, Any]:
    """Fit both families. `count_tokens(list[str]) -> list[int]` is the task's tokenizer.

    Agent sessions follow the agent traces (cc-traces when given, else the mini-swe-agent
    trajectories' own usage and timestamps). Chat sessions take depth and per-turn growth from
    real conversations (in the target's tokens), reply length from Azure's conversation trace,
    and think time and shared prefixes from Mooncake's conversation trace: the public stand-in
    for the production statistics that operators may supply as `production`.
    """
    ag = agent_from_cc_traces(cc_traces) if cc_traces else agent_from_trajectories(trajectories)
    ag_src = "AgentX cc-traces" if cc_traces else "mini-swe-agent trajectories (usage, created)"
    convs = chat_conversations[:max_chat]
    users = [m["content"] for c in convs for m in c["messages"] if m["role"] == "user"]
    replies = [m["content"] for c in convs for m in c["messages"] if m["role"] == "assistant"]
    depth = [sum(m["role"] == "user" for m in c["messages"]) for c in chat_conversations]
    mc = mooncake_sessions(mooncake)
    user_tok = count_tokens(users)
    reply_tok = count_tokens(replies)

    def agent(stats: dict) -> dict:
        return _fit(stats, "agent", lambda empty: missing_agent_values(empty, trajectories, cc_traces))

    def chat(stats: dict) -> dict:
        return _fit(stats, "chat", lambda empty: missing_chat_values(empty, chat_conversations, len(convs)))

    doc: dict[str, Any] = {
        "version": STRUCTURE_VERSION,
        "sources": source_digests,
        "production": False,
        "families": {
            "agent": agent(
                {
                    "turns": (ag["turns"], ag_src),
                    "turn_tokens": (ag["turn_tokens"], ag_src),
                    "reply_tokens": (ag["reply_tokens"], ag_src),
                    "prefix_reuse": (ag["prefix_reuse"], ag_src),
                    "idle_s": (ag["idle_s"], ag_src),
                }
            ),
            "chat": chat(
                {
                    "depth": (depth, "ShareGPT conversations (user turns)"),
                    "turn_tokens": (user_tok, "ShareGPT user turns, target tokenizer"),
                    "reply_tokens": (
                        [r["generated_tokens"] for r in azure_conv],
                        "Azure LLM inference 2023, conversation",
                    ),
                    "think_s": (mc["think_s"], "Mooncake conversation trace (prefix-chained requests)"),
                    "shared_prefix": (mc["shared_prefix"], "Mooncake conversation trace (repeated blocks)"),
                }
            ),
        },
        "reference": {  # source distributions shown beside the fitted ones in the data card
            "chat": chat(
                {
                    "sharegpt_reply_tokens": (reply_tok, "ShareGPT assistant replies, target tokenizer"),
                    "mooncake_depth": (mc["depth"], "Mooncake conversation trace (chains)"),
                    "mooncake_growth_tokens": (mc["growth_tokens"], "Mooncake conversation trace"),
                    "mooncake_reply_tokens": (mc["reply_tokens"], "Mooncake conversation trace"),
                }
            ),
            "agent": agent({"prompt_tokens": (ag["prompt_tokens"], ag_src)}),
        },
    }
    if production:
        doc = apply_production(doc, production)
    doc["statistics_digest"] = statistics_digest(doc)
    doc["digest"] = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]
    return doc


def statistics_digest(doc: dict) -> str:
    """The digest of the fitted statistics alone, which seeds every session's draws. The
    document's `digest` also covers its sources' file digests: the same records published as
    JSON Lines, a JSON array, Parquet or compressed fit the same statistics and, seeded by them,
    give the same sessions."""
    return hashlib.sha256(json.dumps(doc["families"], sort_keys=True).encode()).hexdigest()[:16]


def apply_production(doc: dict, production: dict) -> dict:
    """Operators' production statistics replace the public fit, statistic by statistic.

    The file has the same schema (`families.<family>.<statistic>` with `quantiles` at 101
    probabilities); an unknown family or statistic is an error, not silently ignored.
    """
    fams = production.get("families")
    if not isinstance(fams, dict):
        raise ValueError("production statistics need a `families` object")
    for fam, stats in fams.items():
        if fam not in doc["families"]:
            raise ValueError(f"production statistics name an unknown family {fam!r}")
        for name, d in stats.items():
            if name not in doc["families"][fam]:
                raise ValueError(f"production statistics name an unknown statistic {fam}.{name}")
            q = d.get("quantiles") if isinstance(d, dict) else None
            if not isinstance(q, list) or len(q) != len(PROBS) or any(b < a for a, b in zip(q, q[1:])):
                raise ValueError(f"{fam}.{name}: quantiles must be {len(PROBS)} non-decreasing numbers")
            doc["families"][fam][name] = {
                "n": int(d.get("n", 0)),
                "mean": float(d.get("mean", np.mean(q))),
                "quantiles": [float(x) for x in q],
                "source": "production (operators)",
            }
    doc["production"] = True
    return doc


def load_production(path: str | Path | None) -> dict | None:
    if not path:
        return None
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"production statistics file {p} does not exist")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"production statistics {p}: not JSON ({exc})") from exc
