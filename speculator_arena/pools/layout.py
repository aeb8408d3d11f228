"""Where a task's pools lie on disk, the one place the pool folder rule is spelled, and how
their JSON Lines files are written and read.

Why one module: the builder, the runner's reader (`api.py`), the checks, the data card, the
Dagster assets, the CLI and the Kubernetes backend all find the same folders, and a rule
spelled in each of them drifts. Everything here is a path or a file; nothing builds:

```
$ARENA_HOME/pools/<task> -> .builds/<task>/<build>   the served pool (`pool_root`)
$ARENA_HOME/pools/.builds/<task>/<build>/            one build's folder (`builds_dir`)
  dev/  hidden/<split>/  data_card/                  `split_folder`, `hidden_dir`, `data_card_dir`
$ARENA_HOME/pools/_cache/embeddings.npz              `embedding_cache`
```
"""

from __future__ import annotations

import json
import os
from pathlib import Path, PurePosixPath

from speculator_arena.atomic import write_atomic
from speculator_arena.protocol import target_task
from speculator_arena.settings import arena_home

PUBLIC_SPLIT = "dev"
HIDDEN = "hidden"  # the folder of the hidden splits, readable by its owner only


def pools_dir(home=None) -> Path:
    """The pools folder of an arena home (or of a folder laid out like one: the artifacts volume)."""
    return arena_home(home) / "pools"


def pool_root(task_id: str, home=None) -> Path:
    """The served pool of a task (a link to its current build): its target task's (protocol
    `target_task`), whose sessions it serves."""
    return pools_dir(home) / target_task(task_id)


def builds_dir(task_id: str, home=None) -> Path:
    return pools_dir(home) / ".builds" / target_task(task_id)


def split_path(split: str) -> PurePosixPath:
    """A split's folder relative to a pool's root: `dev`, or `hidden/<split>` for a hidden split."""
    return PurePosixPath(PUBLIC_SPLIT) if split == PUBLIC_SPLIT else PurePosixPath(HIDDEN, split)


def split_folder(root: Path, split: str) -> Path:
    """A split's folder under a pool's root: the served pool's, or a build's own while it builds."""
    return root / split_path(split)


def hidden_dir(root: Path) -> Path:
    return root / HIDDEN


def ensure_hidden(root: Path) -> Path:
    hidden = hidden_dir(root)
    hidden.mkdir(parents=True, exist_ok=True)
    os.chmod(hidden, 0o700)
    return hidden


def private_files(folder: Path) -> None:
    """A hidden split's files, readable by their owner only."""
    for p in folder.iterdir():
        os.chmod(p, 0o600)


def data_card_dir(root: Path) -> Path:
    return root / "data_card"


def embedding_cache(home=None) -> Path:
    """The default MiniLM embedding cache of an arena home (`ARENA_EMBED_CACHE` overrides it)."""
    return pools_dir(home) / "_cache" / "embeddings.npz"


def write_jsonl(path: Path, rows: list[dict]) -> None:
    write_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def read_jsonl(path: Path) -> list[dict]:
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]
