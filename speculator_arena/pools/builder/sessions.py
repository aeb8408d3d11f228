"""Step 4 of a build, one session at a time: each app's system prompt and tools, cut once per
task (`AppPrompts`), and one session from one real conversation or trajectory cut to its
sampled structure (`make_session`); the operators' paraphrases of hidden chat questions."""

from __future__ import annotations

import hashlib
import json

import numpy as np

from speculator_arena import settings
from speculator_arena.pools.builder import structure
from speculator_arena.pools.builder.context import BuildContext, PoolBuildError
from speculator_arena.pools.hashing import public_u, seed_of
from speculator_arena.pools.model import SourceConversation

AGENT_APPS = ("mini-swe-agent", "swe-agent", "openhands", "smolagents")
CHAT_APPS = ("tau-bench-airline", "tau-bench-retail")


class AppPrompts:
    """Each app's system prompt and tools, cut once per task to the system share of the budget
    (so every session of an app shares exactly the same prefix)."""

    def __init__(self, ctx: BuildContext):
        self.ctx = ctx
        cap = int(ctx.settings.system_share * ctx.turn_budget(ctx.task.max_tokens_cap or 0))
        self.apps: dict[str, tuple[str, list[dict], int]] = {}
        by_name = {a.name: a for a in ctx.sources.apps}
        traj_system = next((c.meta.get("system") for c in ctx.sources.agents if c.meta.get("system")), "")
        for name in AGENT_APPS + CHAT_APPS:
            app = by_name.get(name)
            if app is None:
                continue
            system = traj_system if name == "mini-swe-agent" and traj_system else app.system_prompt
            # Keep the app's tools in their order while they fit half the system share, skipping
            # the ones that do not (a small window keeps the short schemas, a large one all).
            tools: list[dict] = []
            for tool in app.tools:
                if ctx.counter.one(json.dumps(tools + [tool])) <= cap // 2:
                    tools.append(tool)
            tools_tok = ctx.counter.one(json.dumps(tools)) if tools else 0
            system = ctx.counter.cut(system, cap - tools_tok)
            self.apps[name] = (system, tools, ctx.counter.one(system) + tools_tok)

    def pick(self, c: SourceConversation) -> str:
        names = [n for n in (AGENT_APPS if c.family == "agent" else CHAT_APPS) if n in self.apps]
        return names[int(public_u("app|" + c.source_id) * len(names))]


def make_session(
    ctx: BuildContext,
    apps: AppPrompts,
    c: SourceConversation,
    split: str,
    st: dict,
    paraphrases: dict | None = None,
    n_turns: int | None = None,
) -> dict | None:
    """One session from one real conversation or trajectory, cut to its sampled structure."""
    fam = st["families"][c.family]
    # seeded by the statistics, not the files' digests: the same records however published give the same session
    stats = st.get("statistics_digest") or structure.statistics_digest(st)
    rng = np.random.default_rng(seed_of(ctx.task_id, split, c.source_id, stats))
    users = c.user_turns()
    drawn = int(round(structure.sample(fam["turns" if c.family == "agent" else "depth"], rng)))
    n_turns = max(1, min(n_turns or drawn, len(users)))
    app = apps.pick(c)
    system, tools, sys_tok = apps.apps[app]
    cap = ctx.task.max_tokens_cap
    gap_stat = fam["idle_s"] if c.family == "agent" else fam["think_s"]
    turns: list[dict] = []
    first_tok = 0
    context = sys_tok
    contexts: list[int] = []
    b0 = ctx.turn_budget(cap or 0)
    for i in range(n_turns):
        mt = int(round(structure.sample(fam["reply_tokens"], rng)))
        mt = max(1, min(mt, cap) if cap else mt)
        mt = min(mt, int(ctx.window * ctx.task.window.cut_to_fraction / 4))
        text, para = users[i], False
        if paraphrases and c.family == "chat" and (c.source_id, i) in paraphrases:
            text, para = paraphrases[(c.source_id, i)], True
        budget = ctx.turn_budget(mt) - sys_tok - first_tok
        if i == 0:
            budget = min(budget, int(ctx.settings.first_turn_share * b0))
        if budget < ctx.settings.min_turn_tokens:
            break
        content = ctx.counter.cut(text, budget)
        if not content.strip():
            break
        tok = ctx.counter.one(content)
        if i == 0:
            first_tok = tok
        # The recorded gap, uncapped and unscaled: the runner applies min(t, cap) * c (section 4).
        think = 0.0 if i == 0 else float(max(structure.sample(gap_stat, rng), 0.0))
        turns.append(
            {
                "kind": "user" if (c.family == "chat" or i == 0) else "tool",
                "content": content,
                "max_tokens": mt,
                "think_time_s": round(think, 3),
                "paraphrased": para,
                "tokens": tok,
            }
        )
        context += tok + mt
        contexts.append(min(context, ctx.window))
    if not turns:
        return None
    sid = f"{ctx.task_id}-{split}-{c.family}-{hashlib.sha256(c.source_id.encode()).hexdigest()[:10]}"
    return {
        "session_id": sid,
        "family": c.family,
        "app": app,
        "system_prompt": system,
        "tools": tools,
        "turns": turns,
        "footprint_tokens": int(round(float(np.mean(contexts)))),
        "source": c.source_id,
        "system_tokens": sys_tok,
    }


def load_paraphrases(path=None) -> dict[tuple[str, int], str]:
    """Operators' paraphrases of hidden chat questions: JSONL lines
    `{"source": "sharegpt:<id>", "user_turn": <0-based index>, "text": "..."}`."""
    path = path or settings.get("ARENA_PARAPHRASES")
    if not path:
        return {}
    out: dict[tuple[str, int], str] = {}
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                d = json.loads(line)
                out[(str(d["source"]), int(d["user_turn"]))] = str(d["text"])
            except (json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
                raise PoolBuildError(
                    f"paraphrase file {path} line {lineno}: {exc!r} ({len(out)} lines before it were read)"
                ) from exc
    return out
