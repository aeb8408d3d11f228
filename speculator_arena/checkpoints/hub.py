"""Public targets (and speculators) from the Hugging Face hub, at a pinned revision.

Only `*.json` and `*.safetensors` files are fetched (protocol section 2: Python files are never
fetched); a speculator may hold at most a share of the target's bytes. `select_files` and
`check_size` are pure so that the rules are tested offline; `fetch_snapshot` is the real path
through `huggingface_hub.snapshot_download` with the same allow patterns.
"""

from __future__ import annotations

import fnmatch
from pathlib import Path

from speculator_arena.errors import ArenaError


class HubUnavailable(RuntimeError, ArenaError):
    """The hub could not be reached or refused the repository; nothing was written."""


def select_files(names: list[str], allowed: list[str]) -> list[str]:
    """The files a checkpoint may take: basenames matching an allowed pattern, never a path that
    climbs out of the directory."""
    keep = []
    for name in names:
        if name.startswith("/") or ".." in Path(name).parts:
            continue
        if any(fnmatch.fnmatchcase(Path(name).name, pat) for pat in allowed):
            keep.append(name)
    return sorted(keep)


def check_size(sizes: dict[str, int], max_bytes: int | None, what: str) -> int:
    """Total bytes of the selected files; ValueError when over `max_bytes` (None: no limit)."""
    total = sum(sizes.values())
    if max_bytes is not None and total > max_bytes:
        raise ValueError(f"{what} holds {total:,} bytes in allowed files, over its limit of {max_bytes:,}")
    return total


def remote_files(repo_id: str, revision: str) -> dict[str, int]:
    """File name -> size at `revision`, from the hub's metadata (no download)."""
    try:
        from huggingface_hub import HfApi

        info = HfApi().model_info(repo_id, revision=revision, files_metadata=True)
    except Exception as exc:  # the hub client raises many types; one clear error for the caller
        raise HubUnavailable(
            f"cannot read {repo_id}@{revision} from the Hugging Face hub ({type(exc).__name__}: {exc}); "
            f"the hub must be reachable to prepare this task, or place a prepared directory under "
            f"$ARENA_HOME/checkpoints/"
        ) from exc
    return {s.rfilename: int(s.size or 0) for s in (info.siblings or [])}


def fetch_snapshot(
    repo_id: str, revision: str, dest: Path, allowed: list[str], max_bytes: int | None = None, progress=print
) -> dict:
    """Download the allowed files of `repo_id@revision` into `dest` after checking their size."""
    sizes = remote_files(repo_id, revision)
    chosen = select_files(list(sizes), allowed)
    if not any(n.endswith(".safetensors") for n in chosen):
        raise ValueError(f"{repo_id}@{revision} has no *.safetensors weights among {sorted(sizes)[:20]}")
    total = check_size({n: sizes[n] for n in chosen}, max_bytes, f"{repo_id}@{revision}")
    progress(f"downloading {len(chosen)} files ({total / 2**30:.2f} GiB) of {repo_id}@{revision}")
    try:
        from huggingface_hub import snapshot_download

        snapshot_download(repo_id, revision=revision, allow_patterns=allowed, local_dir=str(dest))
    except Exception as exc:
        raise HubUnavailable(f"download of {repo_id}@{revision} failed ({type(exc).__name__}: {exc})") from exc
    for stray in [p for p in dest.rglob("*") if p.is_file()]:
        rel = stray.relative_to(dest).as_posix()
        if rel not in chosen:  # the client's own bookkeeping (.cache/huggingface) is not the checkpoint
            stray.unlink()
    for d in sorted((p for p in dest.rglob("*") if p.is_dir()), key=lambda p: len(p.parts), reverse=True):
        if not any(d.iterdir()):
            d.rmdir()
    return {"source": f"hf:{repo_id}@{revision}", "files_selected": len(chosen)}
