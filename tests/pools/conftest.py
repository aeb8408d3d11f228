"""One real build of the local-smollm2 pools (Dagster, in-process) shared by the pool tests.

Why session-scoped: a build reads the 125 MB ShareGPT file, fits structure and embeds texts
(about a minute on two cores); every test then reads the same built pools.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

KEY = "test-operator-key-7f3a"


@pytest.fixture(scope="session")
def built_local(tmp_path_factory, shared_data):
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    home = tmp_path_factory.mktemp("pools_home")
    para_path = home.parent / "paraphrases.jsonl"
    saved = {k: os.environ.get(k) for k in ("ARENA_HOME", "ARENA_POOL_KEY", "ARENA_PARAPHRASES", "ARENA_SHARED_DATA",
                                            "ARENA_EMBED_CACHE")}
    os.environ.update({"ARENA_HOME": str(home), "ARENA_POOL_KEY": KEY, "ARENA_PARAPHRASES": str(para_path),
                       "ARENA_SHARED_DATA": str(shared_data),
                       # one embedding cache for every build of the session (the qwen3-8b test reuses it)
                       "ARENA_EMBED_CACHE": str(home.parent / "embeddings.npz")})
    try:
        from speculator_arena.pools.build import BuildContext, keyed_u, split_candidates

        # The operators' paraphrase file: rewrite the first question of the hidden reserve's
        # chat conversations that the key ranks first (the ones the hidden pool will take).
        ctx = BuildContext("local-smollm2", shared_data, home)
        _, reserve = split_candidates(ctx)
        chats = sorted((c for c in reserve if c.family == "chat"), key=lambda c: keyed_u(KEY.encode(), c.source_id))[:200]
        lines = [{"source": c.source_id, "user_turn": 0,
                  "text": f"Paraphrased by the operators (#{i}): in other words, {c.user_turns()[0][:60]}"} for i, c in enumerate(chats)]
        para_path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
        from speculator_arena.pools.commands import build_with_dagster

        result = build_with_dagster("local-smollm2", data=str(shared_data), home=str(home))
        yield {"embed_cache": Path(os.environ["ARENA_EMBED_CACHE"]), "home": Path(home), "result": result,
               "paraphrases": lines, "root": Path(home) / "pools" / "local-smollm2"}
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
