"""Fetching what a submission names: an engine repository at a commit (git), a speculator from
the Hugging Face hub at a commit (`checkpoints.hub`, the client the targets use) or from an
operator-approved workspace directory. Everything lands in a staging directory; the caller seals
it or removes it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from speculator_arena import settings
from speculator_arena.frontdoor.errors import Refused

COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
HF_REPO_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*$")
GIT_TIMEOUT_S = 600


def exact_commit(value: str, what: str) -> str:
    if not COMMIT_RE.match(value or ""):
        raise Refused(f"{what} must be an exact commit: 40 lowercase hex characters, not {value!r}")
    return value


def _repo_schemes() -> tuple[str, ...]:
    """URL schemes an engine repository may use; operators may add some (tests add `file`)."""
    extra = settings.listed("ARENA_ENGINE_REPO_SCHEMES", ",")
    return ("https", *extra)


def _tree_bytes(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file() and not p.is_symlink())


def fetch_engine_repository(url: str, commit: str, dest: Path, max_bytes: int) -> None:
    """`git fetch` exactly `commit` of `url` into `dest` (no history, no .git kept)."""
    exact_commit(commit, "engine.commit")
    scheme = url.split("://", 1)[0] if "://" in url else ""
    if scheme not in _repo_schemes():
        raise Refused(f"engine.repository must be a {' or '.join(_repo_schemes())} URL, not {url!r}")
    dest.mkdir(parents=True)
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "GIT_TERMINAL_PROMPT": "0",
        "HOME": str(dest.parent),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_LFS_SKIP_SMUDGE": "1",
    }
    steps = [
        ["git", "init", "-q"],
        ["git", "fetch", "-q", "--depth", "1", "--no-tags", url, commit],
        ["git", "-c", "core.symlinks=true", "checkout", "-q", "FETCH_HEAD"],
    ]
    for cmd in steps:
        try:
            r = subprocess.run(cmd, cwd=dest, env=env, capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
        except subprocess.TimeoutExpired as exc:
            raise Refused(f"engine repository {url}@{commit}: `{' '.join(cmd[:2])}` timed out") from exc
        if r.returncode != 0:
            raise Refused(f"engine repository {url}@{commit} cannot be fetched: {r.stderr.strip()[-300:]}")
        if _tree_bytes(dest) > max_bytes:
            raise Refused(f"engine repository {url}@{commit} holds more than {max_bytes / 2**20:.0f} MiB")
    shutil.rmtree(dest / ".git")


def target_bytes(task_id: str, home=None) -> int:
    """The target checkpoint's bytes: its sealed manifest when prepared here, else the hub's listing."""
    from speculator_arena.checkpoints import checkpoint_dir, read_manifest
    from speculator_arena.checkpoints.hub import HubUnavailable, remote_files, select_files
    from speculator_arena.protocol import load_protocol

    manifest = read_manifest(checkpoint_dir(task_id, home))
    if manifest and manifest.get("total_bytes"):
        return int(manifest["total_bytes"])
    proto = load_protocol()
    task = proto.tasks[task_id]
    try:
        sizes = remote_files(task.model, task.revision)
    except HubUnavailable as exc:
        raise Refused(
            f"the target of {task_id} is not prepared here and the hub cannot list it: {exc}", status=503
        ) from exc
    return sum(sizes[n] for n in select_files(list(sizes), proto.submission.speculator_allowed_files))


def fetch_speculator_hub(repo_id: str, revision: str, dest: Path, max_bytes: int) -> None:
    """Only the protocol's allowed files (`*.json`, `*.safetensors`; never Python) of repo@commit."""
    from speculator_arena.checkpoints.hub import HubUnavailable, fetch_snapshot
    from speculator_arena.protocol import load_protocol

    if not HF_REPO_RE.match(repo_id or ""):
        raise Refused(f"speculator.uri must be a Hugging Face repository `owner/name`, not {repo_id!r}")
    exact_commit(revision, "speculator.revision")
    dest.mkdir(parents=True)
    try:
        fetch_snapshot(
            repo_id,
            revision,
            dest,
            list(load_protocol().submission.speculator_allowed_files),
            max_bytes=max_bytes,
            progress=lambda *_: None,
        )
    except HubUnavailable as exc:
        raise Refused(f"speculator {repo_id}@{revision}: {exc}", status=422) from exc
    except ValueError as exc:
        raise Refused(f"speculator {exc}", status=413 if "over its limit" in str(exc) else 422) from exc
    if _tree_bytes(dest) > max_bytes:  # what arrived, not only what the listing said
        raise Refused(f"speculator {repo_id}@{revision} is over its limit of {max_bytes:,} bytes", status=413)


def workspace_roots() -> list[Path]:
    """Operator-approved workspaces (`ARENA_WORKSPACES`, colon-separated directories)."""
    return [Path(p).resolve() for p in settings.listed("ARENA_WORKSPACES", ":")]


def copy_speculator_workspace(uri: str, dest: Path, max_bytes: int, allowed: list[str]) -> None:
    """`workspace:/path` inside an approved workspace: its allowed files copied (links not followed)."""
    from speculator_arena.checkpoints.hub import select_files

    path = Path(uri.removeprefix("workspace:")).resolve()
    roots = workspace_roots()
    if not any(path == r or r in path.parents for r in roots):
        raise Refused(f"speculator directory {uri!r} is not inside an operator-approved workspace")
    if not path.is_dir():
        raise Refused(f"speculator directory {uri!r} does not exist")
    names = [p.relative_to(path).as_posix() for p in path.rglob("*") if p.is_file() and not p.is_symlink()]
    chosen = select_files(names, allowed)
    if sum((path / n).stat().st_size for n in chosen) > max_bytes:
        raise Refused(f"speculator directory {uri!r} is over its limit of {max_bytes:,} bytes", status=413)
    dest.mkdir(parents=True)
    for n in chosen:
        (dest / n).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path / n, dest / n)
