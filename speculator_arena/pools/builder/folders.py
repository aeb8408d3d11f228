"""A build's own folder and its lifecycle: begin (a copy of the served pool), switch (serve it
with one atomic rename of a link), discard (a build that failed).

Why a folder per build: the served path `pools/<task>` is switched to a build only at the end,
so a build that fails leaves the previous pool whole and served, and a reader never sees a pool
that mixes two builds (docs/pools.md, "Layout and rebuilds"). Where the folders are is
`pools/layout.py`'s rule.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from pathlib import Path

from speculator_arena.pools.layout import builds_dir, pool_root


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
