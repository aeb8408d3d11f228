"""Where a LowBArena task's items lie: `$ARENA_HOME/pools/<task>/items`, a link to its current
build, with the public split in `dev/` and the hidden one under the root-only `hidden/`
(pools/layout.py spells that rule; this module only names the items' root and its files).

Why a link to a build folder: a build that fails, or a reader during a build, never sees half a
pool; the switch is one atomic rename of the link, as the session pools switch theirs.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from speculator_arena.pools.layout import data_card_dir, pools_dir, split_folder

ITEMS = "items.jsonl"
KL_PROMPTS = "kl_prompts.jsonl"
MATERIAL = "workload_material.jsonl"  # public text the workloads' prompts are cut from
CARD = "card.json"


def items_root(task_id: str, home=None) -> Path:
    return pools_dir(home) / task_id / "items"


def builds_root(task_id: str, home=None) -> Path:
    return pools_dir(home) / task_id / ".items-builds"


def split_file(root: Path, split: str, name: str) -> Path:
    return split_folder(root, split) / name


def card_file(root: Path) -> Path:
    return data_card_dir(root) / CARD


def switch(task_id: str, build: Path, home=None) -> None:
    """Point the items' root at `build` (atomic), then drop the builds no longer served."""
    root = items_root(task_id, home)
    tmp = root.with_name(f".items-link-{os.getpid()}")
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    tmp.symlink_to(os.path.relpath(build, root.parent))
    if root.exists() and not root.is_symlink():
        raise FileExistsError(f"{root} is not a link to a build; move it away")
    os.replace(tmp, root)
    for old in builds_root(task_id, home).iterdir():
        if old.resolve() != build.resolve():
            shutil.rmtree(old, ignore_errors=True)
