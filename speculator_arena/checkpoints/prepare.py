"""`prepare_checkpoint(task_id)`: build a task's sealed target directory once, reuse it after.

Layout: `$ARENA_HOME/checkpoints/<task_id>/` holds the checkpoint and its `manifest.json`
(sha256 and size of every file). The directory is built in a sibling temporary folder and
renamed into place, under a lock file, so concurrent callers (several helpers, parallel tests)
never see half a checkpoint and the conversion runs once.

Why a cache outside ARENA_HOME too: tests give every test its own ARENA_HOME, and converting the
GGUF takes ~15 s and writes ~0.5 GB. The first build is also kept in `$ARENA_CHECKPOINT_CACHE`
(default `~/.cache/speculator_arena/checkpoints`), and a new home copies (or hard-links) it from
there after checking its manifest, which takes about a second.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from speculator_arena import settings
from speculator_arena.checkpoints.layout import WEIGHTS_LAYOUT, layout_problems
from speculator_arena.checkpoints.seal import read_manifest, seal, unseal, verify_manifest, write_manifest
from speculator_arena.errors import ArenaError

LOCAL_TASK = "local-smollm2"
# LowBArena tasks (protocol/lowb_versions/) whose target is a speculator task's sealed target: the
# same model from the same source, so one sealed directory (and one digest) serves both arenas.
LOWB_TARGETS = {"lowb-smollm2": LOCAL_TASK}


class CheckpointError(RuntimeError, ArenaError):
    """A checkpoint could not be prepared; whatever was already sealed is left as it was."""


def _home(home) -> Path:
    return settings.arena_home(home)


def _cache_root() -> Path | None:
    value = settings.raw("ARENA_CHECKPOINT_CACHE")
    if value == "":
        return None
    return Path(value or Path.home() / ".cache" / "speculator_arena" / "checkpoints").resolve()


def checkpoint_dir(task_id: str, home=None) -> Path:
    """Where a task's sealed target lies: its target task's (protocol `target_task`)."""
    from speculator_arena.protocol import target_task

    return _home(home) / "checkpoints" / target_task(LOWB_TARGETS.get(task_id, task_id))


def _log(msg: str) -> None:
    print(f"[checkpoints] {msg}", file=sys.stderr, flush=True)


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _whole(directory: Path, task_id: str) -> bool:
    """A finished directory of the current layout: the local target converted before the tied
    embedding was stored under its input name (layout.py) is stale and is rebuilt."""
    if not directory.is_dir() or verify_manifest(directory):
        return False
    return task_id != LOCAL_TASK or (read_manifest(directory) or {}).get("weights_layout") == WEIGHTS_LAYOUT


def _task_source(task_id: str):
    from speculator_arena.protocol import load_protocol

    proto = load_protocol()
    if task_id not in proto.tasks:
        raise KeyError(f"no task {task_id!r} in protocol v{proto.version}; tasks: {sorted(proto.tasks)}")
    task = proto.tasks[task_id]
    return task, list(proto.submission.speculator_allowed_files)


def _build(task_id: str, dest: Path) -> dict:
    task, allowed = _task_source(task_id)
    if task_id == LOCAL_TASK:
        from speculator_arena.checkpoints.local import convert_gguf

        meta = convert_gguf(dest, progress=_log)
    else:
        from speculator_arena.checkpoints.hub import fetch_snapshot

        meta = fetch_snapshot(task.model, task.revision, dest, allowed, progress=_log)
    return {"task_id": task_id, "model": task.model, "revision": task.revision, **meta}


def _copy_tree(src: Path, dest: Path) -> None:
    dest.mkdir(parents=True)
    for path in src.rglob("*"):
        target = dest / path.relative_to(src)
        if path.is_dir():
            target.mkdir(exist_ok=True)
            continue
        try:
            os.link(path, target)  # same filesystem: no copy (both trees are read-only anyway)
        except OSError:
            shutil.copy2(path, target)


def _materialize(task_id: str, final: Path, cache: Path | None) -> None:
    """Build `final` from the cache when it holds a whole copy, else from the source."""
    tmp = final.parent / f".{final.name}.tmp-{os.getpid()}"
    if tmp.exists():
        unseal(tmp)
        shutil.rmtree(tmp)
    try:
        if cache is not None and cache != final and _whole(cache, task_id):
            _log(f"copying {task_id} from the checkpoint cache {cache}")
            _copy_tree(cache, tmp)
        else:
            tmp.mkdir(parents=True)
            meta = _build(task_id, tmp)
            problems = layout_problems(tmp)
            if problems:  # refused before it is sealed: an engine loading by name would serve it wrong
                raise CheckpointError(
                    f"{task_id}: the checkpoint's weights are not stored as engines read them: " + "; ".join(problems)
                )
            _log("hashing files into manifest.json")
            write_manifest(tmp, {**meta, "prepared_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
        seal(tmp)
    except BaseException:
        if tmp.exists():  # a failed build leaves nothing behind
            unseal(tmp)
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    if final.exists():  # torn or stale: replace it whole
        unseal(final)
        shutil.rmtree(final)
    os.rename(tmp, final)


def prepare_checkpoint(task_id: str, home=None) -> Path:
    """The sealed target directory of `task_id`, built on the first call (idempotent).

    Raises KeyError for an unknown task, FileNotFoundError when the small model's package is
    missing, and `hub.HubUnavailable` (a RuntimeError) when a public task's hub is unreachable.
    """
    from speculator_arena.protocol import target_task

    task_id = LOWB_TARGETS.get(task_id, task_id)
    _task_source(task_id)  # unknown task: fail before creating any folder
    task_id = target_task(task_id)  # a task serving another's target prepares that one
    final = checkpoint_dir(task_id, home)
    if _whole(final, task_id):
        return final
    cache_root = _cache_root()
    cache = cache_root / task_id if cache_root is not None else None
    with _locked(final.parent / f".{task_id}.lock"):
        if _whole(final, task_id):
            return final
        if cache is not None and not _whole(cache, task_id):
            try:
                with _locked(cache.parent / f".{task_id}.lock"):
                    if not _whole(cache, task_id):
                        _materialize(task_id, cache, None)
            except OSError as exc:  # an unwritable cache only costs time
                _log(f"checkpoint cache {cache} not usable ({exc}); building in place")
                cache = None
        try:
            _materialize(task_id, final, cache)
        except CheckpointError:
            raise
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"could not prepare {task_id} in {final}: {exc}") from exc
    if read_manifest(final) is None:
        raise CheckpointError(f"{final} has no manifest after preparation")
    return final
