"""Building a task's pools: split, structure, sessions, warm-up, probes, fidelity texts.

The steps are plain functions so Dagster assets (speculator_arena.assets.pools) and tests
call the same code. Every file is written atomically (temp file, then rename); the hidden
pool lives under a `hidden/` folder readable by its owner only, and nothing from it is
returned in a manifest except counts and digests.

A build writes into a folder of its own (`pools/.builds/<task>/<build id>/`, seeded with a copy
of the pool served now) and the served path `pools/<task>` is switched to it at the end by
swapping a symbolic link (one `rename`): a build that fails leaves the previous pool whole
and served, and a reader never sees a pool that mixes two builds.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import numpy as np

from speculator_arena import settings
from speculator_arena.atomic import write_atomic
from speculator_arena.pools import diversity, structure
from speculator_arena.pools.model import SourceConversation
from speculator_arena.pools.settings import PoolSettings, operator_key, pool_settings
from speculator_arena.pools.sources import Sources, load_sources
from speculator_arena.pools.tokens import TokenCounter, shared_data_dir, target_tokenizer
from speculator_arena.protocol import TaskProtocol, load_protocol
from speculator_arena.protocol.window import WindowRule
from speculator_arena.warehouse import arena_home

AGENT_APPS = ("mini-swe-agent", "swe-agent", "openhands", "smolagents")
CHAT_APPS = ("tau-bench-airline", "tau-bench-retail")
PUBLIC_SALT = "speculator-arena/pools/v1"


class PoolBuildError(RuntimeError):
    """A pool that cannot be built as asked (missing key, too few sources, a bad operator file)."""


# ---- paths and atomic files ------------------------------------------------------------------
def pool_root(task_id: str, home=None) -> Path:
    """The served pool of a task (a link to its current build)."""
    return arena_home(home) / "pools" / task_id


def builds_dir(task_id: str, home=None) -> Path:
    return arena_home(home) / "pools" / ".builds" / task_id


def begin_build(task_id: str, home=None, build_id: str | None = None) -> Path:
    """A new build folder, seeded with a copy of the served pool (so a build of some assets
    only keeps the others' files); nothing served changes until `switch_build`."""
    served = pool_root(task_id, home)
    staging = builds_dir(task_id, home) / (build_id or f"{time.strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:8]}")
    if staging.exists():
        return staging
    staging.parent.mkdir(parents=True, exist_ok=True)
    if served.is_dir():
        shutil.copytree(served, staging, symlinks=True)
        (staging / ".complete").unlink(missing_ok=True)
    else:
        staging.mkdir()
    return staging


def switch_build(task_id: str, staging: Path, home=None) -> None:
    """Serve `staging`: point `pools/<task>` at it with one atomic rename of a new link, then
    drop the builds older than the one it replaces (a runner that opened that one keeps it) and
    the folders of runs that never reached a switch a day after.
    A pool folder of the old layout (a plain directory) is moved into the builds first."""
    served = pool_root(task_id, home)
    builds = builds_dir(task_id, home)
    previous = served.resolve() if served.is_symlink() else None
    if served.is_dir() and not served.is_symlink():
        previous = builds / f"{time.strftime('%Y%m%dT%H%M%S')}-before-links"
        os.rename(served, previous)
    (staging / ".complete").write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), encoding="utf-8")
    link = served.with_name(f".{served.name}.link-{os.getpid()}")
    link.unlink(missing_ok=True)
    link.symlink_to(os.path.relpath(staging, served.parent), target_is_directory=True)
    os.replace(link, served)
    keep = {staging.resolve()} | ({previous.resolve()} if previous else set())
    for d in builds.iterdir():
        abandoned = time.time() - d.stat().st_mtime > 86400  # a run that never reached the switch
        if d.resolve() not in keep and ((d / ".complete").is_file() or abandoned):
            shutil.rmtree(d, ignore_errors=True)


def discard_build(staging: Path) -> None:
    """Remove a build that failed: the served pool was never touched."""
    if staging.is_dir() and not (staging / ".complete").is_file():
        shutil.rmtree(staging, ignore_errors=True)


def split_dir(task_id: str, split: str, home=None) -> Path:
    root = pool_root(task_id, home)
    return root / "dev" if split == "dev" else root / "hidden" / split


def ensure_hidden(root: Path) -> Path:
    hidden = root / "hidden"
    hidden.mkdir(parents=True, exist_ok=True)
    os.chmod(hidden, 0o700)
    return hidden


def write_jsonl(path: Path, rows: list[dict]) -> None:
    write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


# ---- hashing ---------------------------------------------------------------------------------
def _unit(digest: bytes) -> float:
    return int.from_bytes(digest[:8], "big") / 2**64


def public_u(source_id: str) -> float:
    return _unit(hashlib.sha256(f"{PUBLIC_SALT}|{source_id}".encode()).digest())


def keyed_u(key: bytes, source_id: str) -> float:
    return _unit(hmac.new(key, source_id.encode(), hashlib.sha256).digest())


def key_id(key: bytes) -> str:
    """Names the key a hidden pool was built with, without revealing it."""
    return hmac.new(key, b"speculator-arena key id", hashlib.sha256).hexdigest()[:12]


def _seed(*parts) -> int:
    return int(hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16], 16)


# ---- the build context -----------------------------------------------------------------------
class BuildContext:
    """What every step needs: the task's protocol, the sources, the tokenizer, the settings."""

    def __init__(
        self,
        task_id: str,
        data=None,
        home=None,
        cc_traces=None,
        progress: Callable[[str], None] | None = None,
        root: Path | None = None,
        sources_file=None,
    ):
        self.task_id = task_id
        self.task: TaskProtocol = load_protocol().task(task_id)
        self.settings: PoolSettings = pool_settings(self.task)
        self.data_dir = shared_data_dir(data)
        self.home = arena_home(home)
        self.root = Path(root) if root else pool_root(task_id, self.home)  # a build's own folder while it builds
        self.progress = progress or (lambda msg: None)
        self.cc_traces = cc_traces or settings.get("ARENA_CC_TRACES")
        self.sources_file = sources_file or None
        self._sources: Sources | None = None
        self._counter: TokenCounter | None = None

    @property
    def sources(self) -> Sources:
        if self._sources is None:
            self.progress(f"reading sources from {self.data_dir}")
            self._sources = load_sources(self.data_dir, self.cc_traces, self.sources_file)
        return self._sources

    @property
    def counter(self) -> TokenCounter:
        if self._counter is None:
            self.progress(f"loading the {self.task_id} target tokenizer")
            self._counter = TokenCounter(target_tokenizer(self.task_id, self.data_dir))
        return self._counter

    # window arithmetic (protocol section 4)
    @property
    def window(self) -> int:
        return self.task.task.max_model_len

    def turn_budget(self, max_tokens: int) -> int:
        """Prompt tokens a turn may take so that, with the template overhead and its reply budget,
        it fits the cut-down window (the history after the first message cut to its share)."""
        return int(WindowRule.of(self.task).room_after_cut(max_tokens)) - self.settings.salt_reserve_tokens

    def fits(self, prompt_tokens: int, max_tokens: int) -> bool:
        return prompt_tokens <= self.turn_budget(max_tokens)

    def live_slots(self) -> dict[str, int]:
        return {w: self.task.lanes[w] * self.task.workloads[w].interleave for w in self.task.workloads}

    @property
    def embedding_cache(self) -> Path:
        """MiniLM embeddings by text digest: under the pools folder, or `ARENA_EMBED_CACHE`
        (a file shared by several homes, as the tests share one)."""
        env = settings.get("ARENA_EMBED_CACHE")
        return Path(env) if env else self.home / "pools" / "_cache" / "embeddings.npz"

    def structure(self) -> dict:
        p = self.root / "structure.json"
        if not p.is_file():
            raise PoolBuildError(f"no fitted structure at {p}: materialize pool_structure first")
        return json.loads(p.read_text(encoding="utf-8"))


# ---- step 1: sources manifest ----------------------------------------------------------------
def sources_manifest(ctx: BuildContext) -> dict:
    s = ctx.sources
    return {
        "data_dir": str(ctx.data_dir),
        "declaration": s.declaration,
        "chat_conversations": len(s.chats),
        "agent_trajectories": len(s.agents),
        "cc_traces": len(s.cc_traces),
        "apps": [a.name for a in s.apps],
        "probes": len(s.probes),
        "sources": [asdict(i) for i in s.info],
    }


# ---- step 2: structure -----------------------------------------------------------------------
def fit_and_store_structure(ctx: BuildContext, production_path=None) -> dict:
    s = ctx.sources
    production = structure.load_production(production_path or settings.get("ARENA_PRODUCTION_STATS"))
    ctx.progress("fitting session structure per family")
    order = sorted(s.chats, key=lambda c: public_u(c.source_id))
    doc = structure.fit_structure(
        trajectories=s.trajectories,
        cc_traces=s.cc_traces,
        chat_conversations=[{"messages": c.messages, "set": c.origin} for c in order],
        mooncake=s.mooncake,
        azure_conv=s.azure_conv,
        count_tokens=ctx.counter,
        source_digests={i.name: i.sha256[:16] for i in s.info},
        production=production,
        max_chat=1500,
    )
    doc["task_id"] = ctx.task_id
    doc["tokenizer"] = ctx.task.task.model
    write_atomic(ctx.root / "structure.json", json.dumps(doc, indent=1))
    return doc


# ---- step 3: splits --------------------------------------------------------------------------
def _eligible(c: SourceConversation) -> bool:
    """Agent: a task and at least one tool output. Chat: a user turn, and a recorded reply
    unless the set has none (question sets: the engines reply, closed loop)."""
    users = c.user_turns()
    if c.family == "agent":
        return len(users) >= 2
    return len(users) >= 1 and (c.meta.get("no_replies", False) or any(m["role"] == "assistant" for m in c.messages))


def weighted_order(ctx: BuildContext, ordered: list[SourceConversation]) -> list[SourceConversation]:
    """Apply the declared sets' weights to a split's ordered candidates. In a family where some
    set has a weight, its positions in the list are refilled by weighted round robin over the
    sets (the unweighted sets together take the rest of the weight, in their common order);
    each set keeps its own order. A family without weights keeps the order as it is."""
    weights = ctx.sources.weights
    out = list(ordered)
    for fam in ctx.settings.family_mix:
        items = [c for c in ordered if c.family == fam]
        named = {c.meta.get("set") for c in items}
        given = {n: weights.get(n) for n in named if weights.get(n) is not None}
        if not given:
            continue
        rest = max(0.0, 1.0 - sum(given.values()))
        groups = {n: [c for c in items if c.meta.get("set") == n] for n in given}
        groups[None] = [c for c in items if c.meta.get("set") not in given]
        share = {**given, None: rest}
        merged, taken = [], dict.fromkeys(groups, 0)
        while len(merged) < len(items):
            live = [g for g in groups if taken[g] < len(groups[g]) and share[g] > 0] or [
                g for g in groups if taken[g] < len(groups[g])
            ]
            g = min(live, key=lambda g: (taken[g] + 1) / max(share[g], 1e-9))
            merged.append(groups[g][taken[g]])
            taken[g] += 1
        slots = [i for i, c in enumerate(ordered) if c.family == fam]
        for i, c in zip(slots, merged):
            out[i] = c
    return out


def split_candidates(ctx: BuildContext) -> tuple[list[SourceConversation], list[SourceConversation]]:
    """(public candidates, hidden reserve): a public hash reserves a share of every source for
    the hidden pool, so the public pool never depends on the operators' key and never holds a
    conversation the hidden pool may use; the key then picks, unpredictably, which reserved
    conversations the hidden pool holds."""
    pub, res = [], []
    share = ctx.settings.reserve_share
    for c in ctx.sources.chats + ctx.sources.agents:
        if not _eligible(c):
            continue
        (res if public_u(c.source_id) < share else pub).append(c)
    return pub, res


def timed_targets(ctx: BuildContext, available: dict[str, int]) -> dict[str, int]:
    """Timed sessions per family: enough for every pass of every workload to refill its live
    slots `sessions_per_live_slot` times, in the family mix, limited by the scarcer family."""
    want = ctx.task.passes_per_workload * sum(ctx.live_slots().values()) * ctx.settings.sessions_per_live_slot
    mix = ctx.settings.family_mix
    total = min([want] + [int(available[f] / mix[f]) for f in mix if mix[f] > 0])
    return {f: int(round(total * mix[f])) for f in mix}


# ---- step 4: sessions ------------------------------------------------------------------------
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


def match_structure(convs: list[SourceConversation], sizes_desc: list[int]) -> list[tuple[SourceConversation, int]]:
    """Choose, for each sampled session size (largest first), the conversation that holds it
    most tightly (fewest user turns at least that many), else the longest one left: sessions
    take their depth from the structure and their text from a conversation that can carry it."""
    left = sorted(convs, key=lambda c: len(c.user_turns()))
    out = []
    for n in sizes_desc:
        if not left:
            break
        lens = [len(c.user_turns()) for c in left]
        j = next((i for i, m in enumerate(lens) if m >= n), len(left) - 1)
        c = left.pop(j)
        out.append((c, min(n, lens[j])))
    return out


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
    rng = np.random.default_rng(_seed(ctx.task_id, split, c.source_id, stats))
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


def fidelity_text(ctx: BuildContext, c: SourceConversation, split: str) -> dict | None:
    """A recorded reply after its conversation, cut as the sampled-likelihood check cuts its
    context (its first user message, then the latest messages that fit) and its reply."""
    g = ctx.task.gates.sampled_likelihood
    msgs = c.messages
    idx = [i for i, m in enumerate(msgs) if m["role"] == "assistant" and i > 0]
    if not idx:
        return None
    j = idx[min(1, len(idx) - 1)]
    reply = msgs[j]["content"][: g.reply_chars]
    budget = g.context_tokens - ctx.counter.one(reply)
    first = dict(msgs[0])
    first["content"] = ctx.counter.cut(first["content"], max(budget // 2, 1))
    budget -= ctx.counter.one(first["content"])
    tail: list[dict] = []
    for m in reversed(msgs[1:j]):
        t = ctx.counter.one(m["content"])
        if t > budget:
            break
        tail.insert(0, dict(m))
        budget -= t
    if tail and tail[0]["role"] == "user":  # keep user/assistant alternation after the first message
        tail.pop(0)
    messages = [first] + tail
    if messages[-1]["role"] != "user":
        return None
    return {
        "text_id": f"{split}-fid-{hashlib.sha256(c.source_id.encode()).hexdigest()[:10]}",
        "messages": messages,
        "reply": reply,
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


def _family_interleave(rows: list[dict], mix: dict[str, float]) -> list[dict]:
    """Merge families so that every prefix of the list holds them in the mix (weighted round robin)."""
    by = {f: [r for r in rows if r["family"] == f] for f in mix}
    out: list[dict] = []
    taken = {f: 0 for f in mix}
    while any(taken[f] < len(by[f]) for f in mix):
        f = min((f for f in mix if taken[f] < len(by[f])), key=lambda f: (taken[f] + 1) / max(mix[f], 1e-9))
        out.append(by[f][taken[f]])
        taken[f] += 1
    return out


def _ordered_candidates(ctx: BuildContext, split: str, key: bytes | None):
    """The split's candidate sessions in the order its pool draws them, and the split's folder:
    the public split in the public order, a hidden split in the operators' keyed order."""
    pub, res = split_candidates(ctx)
    if split == "dev":
        return weighted_order(ctx, sorted(pub, key=lambda c: public_u(c.source_id))), ctx.root / "dev"
    if key is None:
        raise PoolBuildError("no hidden pool without the operators' key: set ARENA_POOL_KEY or ARENA_POOL_KEY_FILE")
    return weighted_order(ctx, sorted(res, key=lambda c: keyed_u(key, c.source_id))), ctx.root / "hidden" / split


def build_split(ctx: BuildContext, split: str, *, key: bytes | None = None, paraphrases=None) -> dict:
    """Build one split's timed sessions, warm-up sessions and fidelity texts; return its manifest
    (counts and digests only: safe to show for the hidden split)."""
    t0 = time.time()
    if split != "dev" and key is None:
        raise PoolBuildError("no hidden pool without the operators' key: set ARENA_POOL_KEY or ARENA_POOL_KEY_FILE")
    st = ctx.structure()
    cands, out_dir = _ordered_candidates(ctx, split, key)
    if split != "dev":
        ensure_hidden(ctx.root)
    avail = {f: sum(c.family == f for c in cands) for f in ctx.settings.family_mix}
    targets = timed_targets(ctx, avail)
    apps = AppPrompts(ctx)
    para = paraphrases if split != "dev" else None
    diversity_info = None
    chosen: dict[str, list[SourceConversation]] = {}
    sizes: dict[str, int] = {}
    for fam, k in targets.items():
        pool = [c for c in cands if c.family == fam]
        rng = np.random.default_rng(_seed(ctx.task_id, split, fam, "sizes"))
        stat = st["families"][fam]["turns" if fam == "agent" else "depth"]
        want = sorted((max(1, int(round(x))) for x in structure.sample(stat, rng, k)), reverse=True)
        if split == "dev" and len(pool) > k:
            cand = pool[: ctx.settings.diverse_candidates_factor * k]
            X = diversity.embed([c.user_turns()[0] for c in cand], ctx.embedding_cache, ctx.progress)
            sel = diversity.diverse_select(X, min(2 * k, len(cand)), seed=_seed(ctx.task_id, fam))
            picked = match_structure([cand[i] for i in sel], want)
            if fam == "chat":
                index = {c.source_id: i for i, c in enumerate(cand)}
                diversity_info = diversity.diversity_report(
                    X, [index[c.source_id] for c, _ in picked], seed=_seed(ctx.task_id, "rand")
                )
        else:
            picked = match_structure(pool[: 2 * k], want)
        chosen[fam] = [c for c, _ in picked]
        sizes.update({c.source_id: n for c, n in picked})
    used = {c.source_id for v in chosen.values() for c in v}
    ctx.progress(f"{split}: constructing {sum(len(v) for v in chosen.values())} timed sessions")
    sessions = [
        s
        for fam in chosen
        for c in chosen[fam]
        if (s := make_session(ctx, apps, c, split, st, para, n_turns=sizes[c.source_id]))
    ]
    sessions = _family_interleave(sessions, ctx.settings.family_mix)
    rest = [c for c in cands if c.source_id not in used and c.family == "chat"]
    n_fid = ctx.task.gates.target_fidelity.texts * ctx.settings.fidelity_factor
    fidelity, fid_used = [], []
    for c in rest:
        if len(fidelity) >= n_fid:
            break
        f = fidelity_text(ctx, c, split)
        if f:
            fidelity.append(f)
            fid_used.append(c.source_id)
    write_atomic(out_dir / "used_sources.json", json.dumps(sorted(used | set(fid_used))))
    (out_dir / "warmup.jsonl").unlink(missing_ok=True)  # warm-up depends on these sessions: rebuilt after
    write_jsonl(out_dir / "sessions.jsonl", sessions)
    write_jsonl(out_dir / "fidelity.jsonl", fidelity)
    manifest = {
        "task_id": ctx.task_id,
        "split": split,
        "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "structure_digest": st.get("digest"),
        "sessions": len(sessions),
        "fidelity": len(fidelity),
        "families": {f: sum(s["family"] == f for s in sessions) for f in ctx.settings.family_mix},
        "apps": {a: sum(s["app"] == a for s in sessions) for a in sorted({s["app"] for s in sessions})},
        "turns": sum(len(s["turns"]) for s in sessions),
        "paraphrased_turns": sum(t["paraphrased"] for s in sessions for t in s["turns"]),
        "chat_user_turns": sum(len(s["turns"]) for s in sessions if s["family"] == "chat"),
        "mean_footprint_tokens": float(np.mean([s["footprint_tokens"] for s in sessions]))
        if sessions
        else float("nan"),
        "source_ids_sha256": hashlib.sha256("\n".join(sorted(s["source"] for s in sessions)).encode()).hexdigest(),
        "key_id": key_id(key) if key else None,
        "diversity": diversity_info,
        "seconds": round(time.time() - t0, 1),
    }
    write_atomic(out_dir / "manifest.json", json.dumps(manifest, indent=1))
    if split != "dev":
        for p in out_dir.iterdir():
            os.chmod(p, 0o600)
    return manifest


def build_warmup(ctx: BuildContext, split: str, *, key: bytes | None = None, paraphrases=None) -> dict:
    """Warm-up sessions, apart: from the split's candidates that no timed session or fidelity
    text uses, enough for one wave of every workload's live sessions with headroom."""
    st = ctx.structure()
    cands, out_dir = _ordered_candidates(ctx, split, key)
    used_p = out_dir / "used_sources.json"
    if not used_p.is_file():
        raise PoolBuildError(f"build the {split} timed sessions before its warm-up sessions ({used_p} missing)")
    used = set(json.loads(used_p.read_text(encoding="utf-8")))
    n_warm = int(np.ceil(ctx.settings.warmup_factor * sum(ctx.live_slots().values())))
    apps = AppPrompts(ctx)
    warmup: list[dict] = []
    for c in cands:
        if len(warmup) >= n_warm:
            break
        if c.source_id in used:
            continue
        s = make_session(ctx, apps, c, split, st, paraphrases if split != "dev" else None)
        if s:
            s["session_id"] = s["session_id"].replace(f"-{split}-", f"-{split}-warmup-", 1)
            warmup.append(s)
    write_jsonl(out_dir / "warmup.jsonl", warmup)
    man_p = out_dir / "manifest.json"
    man = json.loads(man_p.read_text(encoding="utf-8"))
    man["warmup"] = len(warmup)
    man["warmup_families"] = {f: sum(s["family"] == f for s in warmup) for f in ctx.settings.family_mix}
    write_atomic(man_p, json.dumps(man, indent=1))
    if split != "dev":
        for p in out_dir.iterdir():
            os.chmod(p, 0o600)
    return {"split": split, "warmup": len(warmup), "families": man["warmup_families"]}


# ---- step 5: greedy probes -------------------------------------------------------------------
def build_probes(ctx: BuildContext) -> dict:
    """Spec-Bench first-turn questions that fit the window, chosen by diverse selection."""
    g = ctx.task.gates.greedy_agreement
    rule = WindowRule.of(ctx.task)
    qs = [q for q in ctx.sources.probes]
    toks = ctx.counter([q["turns"][0] for q in qs])
    fit = [q for q, t in zip(qs, toks) if rule.fits(t, g.max_tokens)]
    X = diversity.embed([q["turns"][0] for q in fit], ctx.embedding_cache, ctx.progress)
    sel = diversity.diverse_select(X, g.prompts, seed=_seed(ctx.task_id, "probes"))
    rep = diversity.diversity_report(X, sel, seed=_seed(ctx.task_id, "probes-rand"))
    rows = [
        {
            "prompt_id": f"spec-bench-{fit[i]['id']}",
            "category": fit[i]["category"],
            "messages": [{"role": "user", "content": fit[i]["turns"][0]}],
        }
        for i in sel
    ]
    write_jsonl(ctx.root / "probes.jsonl", rows)
    man = {
        "probes": len(rows),
        "candidates_fitting_window": len(fit),
        "diversity": rep,
        "categories": sorted({r["category"] for r in rows}),
    }
    write_atomic(ctx.root / "probes_manifest.json", json.dumps(man, indent=1))
    return man


def build_all(task_id: str, data=None, home=None, progress=print, sources_file=None) -> dict:
    """Every step in order without Dagster (the assets call the same steps), into a build
    folder of its own that is served only when every step succeeded and the pool is whole."""
    from speculator_arena.pools.api import Pool, require_sessions

    staging = begin_build(task_id, home)
    try:
        ctx = BuildContext(task_id, data, home, progress=progress, root=staging, sources_file=sources_file)
        out = {"sources": sources_manifest(ctx)}
        write_atomic(ctx.root / "sources.json", json.dumps(out["sources"], indent=1))
        out["structure"] = fit_and_store_structure(ctx)["digest"]
        out["dev"] = build_split(ctx, "dev")
        key = operator_key()
        para = load_paraphrases() if key else {}
        out["test"] = build_split(ctx, "test", key=key, paraphrases=para) if key else None
        out["warmup"] = [build_warmup(ctx, "dev")] + (
            [build_warmup(ctx, "test", key=key, paraphrases=para)] if key else []
        )
        out["probes"] = build_probes(ctx)
        for split in ("dev", "test") if key else ("dev",):
            folder = ctx.root / "dev" if split == "dev" else ctx.root / "hidden" / split
            require_sessions(Pool(task_id, split, folder, ctx.root))
        switch_build(task_id, staging, home)
        return out
    except BaseException:
        discard_build(staging)
        raise
