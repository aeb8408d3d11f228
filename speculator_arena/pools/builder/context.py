"""What every step of a build needs: the task's protocol, the sources, the tokenizer, the
settings and the window arithmetic, loaded once per build (`BuildContext`), and the error a
build that cannot be made as asked raises."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from speculator_arena import settings
from speculator_arena.errors import ArenaError
from speculator_arena.pools import layout
from speculator_arena.pools.builder.tokens import TokenCounter, shared_data_dir, target_tokenizer
from speculator_arena.pools.ingest.sources import Sources, load_sources
from speculator_arena.pools.settings import PoolSettings, pool_settings
from speculator_arena.protocol import TaskProtocol, load_protocol
from speculator_arena.rules.slots import live_slots
from speculator_arena.rules.window import WindowRule
from speculator_arena.warehouse import arena_home


class PoolBuildError(RuntimeError, ArenaError):
    """A pool that cannot be built as asked (missing key, too few sources, a bad operator file)."""


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
        self.data_dir = shared_data_dir(data, home)
        self.home = arena_home(home)
        self.root = Path(root) if root else layout.pool_root(task_id, self.home)  # a build's own folder while it builds
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
        return live_slots(self.task)

    @property
    def embedding_cache(self) -> Path:
        """MiniLM embeddings by text digest: under the pools folder, or `ARENA_EMBED_CACHE`
        (a file shared by several homes, as the tests share one)."""
        env = settings.get("ARENA_EMBED_CACHE")
        return Path(env) if env else layout.embedding_cache(self.home)

    def structure(self) -> dict:
        p = self.root / "structure.json"
        if not p.is_file():
            raise PoolBuildError(f"no fitted structure at {p}: materialize pool_structure first")
        return json.loads(p.read_text(encoding="utf-8"))
