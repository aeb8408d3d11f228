"""Fetching what a submission names: an engine repository at a commit (git), a speculator (or a
LowBArena quantized checkpoint, `artifacts.py`) from the Hugging Face hub at a commit
(`checkpoints.hub`, the client the targets use) or from an operator-approved workspace directory.

The two network fetches run in the intake's child (`worker.py`), never in the API's request
threads. A repository is fetched under git's low-speed limit and the worker's deadline, from
an address checked to be public and pinned (`urls.py`), without redirects, over the allowed
protocols only, its pack kept whole (`fetch.unpackLimit=1`) so that the child's file-size
limit bounds it while it arrives, and its tree's size, depth and entry count read from git's
objects (`ls-tree`) before anything is checked out. Everything lands in the child's sandbox;
the caller seals it or removes it.
"""

from __future__ import annotations

import fnmatch
import os
import re
import shutil
import stat
import subprocess
import time
from pathlib import Path

from speculator_arena.frontdoor.urls import curl_resolve, parse_repository_url, public_addresses
from speculator_arena.sealed.refusal import Refused, echo

COMMIT_RE = re.compile(r"[0-9a-f]{40}")
HF_REPO_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,95}/[A-Za-z0-9][A-Za-z0-9_.-]{0,95}")
LOW_SPEED_BYTES_PER_S = 1000  # git gives up on a transfer slower than this ...
LOW_SPEED_SECONDS = 30  # ... for this long


def exact_commit(value: str, what: str) -> str:
    if not isinstance(value, str) or not COMMIT_RE.fullmatch(value):
        raise Refused(f"{what} must be an exact commit: 40 lowercase hex characters, not {echo(value)}")
    return value


def hub_repository(value: str, what: str = "speculator") -> str:
    if not isinstance(value, str) or not HF_REPO_RE.fullmatch(value):
        raise Refused(f"{what}.uri must be a Hugging Face repository `owner/name`, not {echo(value)}")
    return value


def _git_env(global_config: str = "/dev/null") -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": "/nonexistent",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_CONFIG_GLOBAL": global_config,
        "GIT_LFS_SKIP_SMUDGE": "1",
        "GIT_PROTOCOL_FROM_USER": "0",
        "GIT_ASKPASS": "/bin/false",
        "SSH_ASKPASS": "/bin/false",
    }


def fetch_engine_repository(
    url: str,
    commit: str,
    dest: Path,
    max_bytes: int,
    *,
    schemes: tuple[str, ...],
    allow: list[str],
    deadline_s: float,
    max_entries: int,
    max_depth: int,
) -> None:
    """`git fetch` exactly `commit` of `url` into `dest` (no history, no .git kept)."""
    exact_commit(commit, "engine.commit")
    repo = parse_repository_url(url, schemes)
    config = [
        "protocol.allow=never",
        f"protocol.{repo.scheme}.allow=always",
        "http.followRedirects=false",
        f"http.lowSpeedLimit={LOW_SPEED_BYTES_PER_S}",
        f"http.lowSpeedTime={LOW_SPEED_SECONDS}",
        "fetch.unpackLimit=1",
        "transfer.unpackLimit=1",
        "core.symlinks=true",
        "core.hooksPath=/dev/null",
        "submodule.recurse=false",
    ]
    if repo.scheme in ("http", "https"):
        config.append(f"http.curloptResolve={curl_resolve(repo, public_addresses(repo, allow))}")
    elif repo.host is not None:
        public_addresses(repo, allow)  # ssh and git: checked, not pinned (their clients resolve again)
    git = ["git", *(a for c in config for a in ("-c", c))]
    dest.mkdir(parents=True)
    global_config = "/dev/null"
    if repo.scheme == "file":  # an operator's mirror (or a test's repository), owned by another user:
        # git's local transport drops `-c` settings, and reads `safe.directory` from global config only
        global_config = str((dest.parent / "gitconfig").absolute())
        Path(global_config).write_text("[safe]\n\tdirectory = *\n")
    deadline = time.monotonic() + deadline_s
    what = f"engine repository {echo(url)}@{commit[:12]}"
    _git(["git", "init", "-q"], dest, deadline, what, max_bytes, global_config)
    fetch = [*git, "fetch", "-q", "--depth", "1", "--no-tags", "--no-recurse-submodules", repo.url, commit]
    _git(fetch, dest, deadline, what, max_bytes, global_config)
    _check_listing(dest, deadline, what, max_bytes, max_entries, max_depth)
    _git([*git, "checkout", "-q", "FETCH_HEAD"], dest, deadline, what, max_bytes, global_config)
    shutil.rmtree(dest / ".git")


def _git(cmd: list[str], cwd: Path, deadline: float, what: str, max_bytes: int, global_config: str) -> str:
    left = deadline - time.monotonic()
    if left <= 0:
        raise Refused(f"{what}: the fetch passed its deadline", status=422)
    try:
        r = subprocess.run(cmd, cwd=cwd, env=_git_env(global_config), capture_output=True, text=True, timeout=left)
    except subprocess.TimeoutExpired as exc:
        raise Refused(f"{what}: the fetch passed its deadline", status=422) from exc
    if r.returncode != 0:
        err = r.stderr.strip()
        if "File too large" in err or _file_size_reached(cwd):
            raise Refused(f"{what} holds more than {max_bytes / 2**20:.0f} MiB (refused while it arrived)", status=413)
        raise Refused(f"{what} cannot be fetched: {err[-300:]}", status=422)
    return r.stdout


def _file_size_reached(repo: Path) -> bool:
    """Whether git stopped because a file it wrote (the pack) reached this process's file-size limit."""
    import resource

    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit == resource.RLIM_INFINITY:
        return False
    pack = repo / ".git" / "objects" / "pack"
    return pack.is_dir() and any(p.lstat().st_size >= limit - 65536 for p in pack.iterdir())


def _check_listing(repo: Path, deadline: float, what: str, max_bytes: int, max_entries: int, max_depth: int) -> None:
    """The commit's tree from git's objects, before checkout: bytes, entries, depth, special files."""
    proc = subprocess.Popen(
        ["git", "ls-tree", "-r", "-l", "-z", "--full-tree", "FETCH_HEAD"],
        cwd=repo,
        env=_git_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    total = entries = 0
    rest = b""
    try:
        while block := proc.stdout.read(1 << 16):
            if time.monotonic() > deadline:
                raise Refused(f"{what}: the fetch passed its deadline", status=422)
            *records, rest = (rest + block).split(b"\0")
            for record in records:
                meta, _, path = record.partition(b"\t")
                _mode, kind, _sha, size = meta.split()
                entries += 1
                if entries > max_entries:
                    raise Refused(f"{what} has more than {max_entries} entries", status=413)
                if path.count(b"/") + 1 > max_depth:
                    raise Refused(f"{what}: {echo(path.decode('utf-8', 'replace'))} is over {max_depth} levels deep")
                if kind == b"commit":
                    raise Refused(
                        f"{what} has a submodule ({echo(path.decode('utf-8', 'replace'))}); submodules are not fetched"
                    )
                total += int(size) if size != b"-" else 0
                if total > max_bytes:
                    raise Refused(f"{what} holds more than {max_bytes / 2**20:.0f} MiB", status=413)
    finally:
        proc.kill()
        proc.wait()


def fetch_speculator_hub(
    repo_id: str, revision: str, dest: Path, max_bytes: int, allowed: list[str], what: str = "speculator"
) -> None:
    """Only the allowed files (`*.json`, `*.safetensors`; never Python) of repo@commit; `what`
    names the field in a refusal (a LowBArena `artifact` is fetched the same way)."""
    from speculator_arena.checkpoints.hub import HubUnavailable, fetch_snapshot

    hub_repository(repo_id, what)
    exact_commit(revision, f"{what}.revision")
    dest.mkdir(parents=True)
    try:
        fetch_snapshot(repo_id, revision, dest, allowed, max_bytes=max_bytes, progress=lambda *_: None)
    except HubUnavailable as exc:
        raise Refused(f"{what} {repo_id}@{revision}: {exc}", status=422) from exc
    except ValueError as exc:
        raise Refused(f"{what} {exc}", status=413 if "over its limit" in str(exc) else 422) from exc


def hub_target_bytes(model: str, revision: str, allowed: list[str]) -> int:
    """The target's bytes in allowed files, from the hub's listing (when it is not prepared here)."""
    from speculator_arena.checkpoints.hub import HubUnavailable, remote_files, select_files

    try:
        sizes = remote_files(model, revision)
    except HubUnavailable as exc:
        raise Refused(f"the target is not prepared here and the hub cannot list it: {exc}", status=503) from exc
    return sum(sizes[n] for n in select_files(list(sizes), allowed))


def local_target_bytes(task_id: str, home=None) -> int | None:
    """The target checkpoint's bytes from its sealed manifest when it is prepared here, else None."""
    from speculator_arena.checkpoints import checkpoint_dir, read_manifest

    manifest = read_manifest(checkpoint_dir(task_id, home))
    return int(manifest["total_bytes"]) if manifest and manifest.get("total_bytes") else None


def workspace_path(uri: str, roots: list[Path], what: str = "speculator") -> tuple[Path, list[str]]:
    """(the approved workspace, the path under it) of a `workspace:/path` speculator (or artifact)."""
    path = Path(os.path.abspath(uri.removeprefix("workspace:")))
    for root in roots:
        if path == root or root in path.parents:
            rel = path.relative_to(root).parts
            if ".." in rel:
                break
            return root, list(rel)
    raise Refused(f"{what} directory {echo(uri)} is not inside an operator-approved workspace")


def copy_speculator_workspace(uri: str, roots: list[Path], dest: Path, max_bytes: int, allowed: list[str]) -> None:
    """A `workspace:/path` speculator: its allowed regular files (links skipped), see `copy_workspace`."""
    copy_workspace(uri, roots, dest, max_bytes, allowed)


def copy_workspace(
    uri: str,
    roots: list[Path],
    dest: Path,
    max_bytes: int,
    allowed: list[str],
    *,
    what: str = "speculator",
    refuse=None,
) -> None:
    """`workspace:/path` inside an approved workspace: its allowed regular files copied, at most
    `max_bytes`, with at least one `*.safetensors`. `refuse(rel, stat)`: a reason to refuse the
    whole directory for one of its entries (a LowBArena artifact refuses links and pickles rather
    than skipping them), or None.

    Participants write their workspaces while the arena reads them, so nothing is read by path:
    the folder is reached from the approved root, and every file opened, by directory
    descriptors that never follow a link (a folder swapped for a link midway stops the copy);
    links are neither followed nor copied, and hard-linked files (another name elsewhere) are refused.
    """
    from speculator_arena.sealed.archive import MAX_DEPTH, MAX_MEMBERS
    from speculator_arena.sealed.trees import DIR_FLAGS, walk_at

    root, rel = workspace_path(uri, roots, what)
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # the operator's own path
        for part in rel:
            nxt = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
    except OSError as exc:
        raise Refused(f"{what} directory {echo(uri)} does not exist or passes through a link") from exc
    dest.mkdir(parents=True)
    total = weights = 0
    try:
        for n, (entry, dir_fd, name) in enumerate(walk_at(fd)):
            if n > MAX_MEMBERS or entry.depth > MAX_DEPTH:
                raise Refused(f"{what} directory {echo(uri)} is over {MAX_MEMBERS} entries or {MAX_DEPTH} levels")
            why = refuse(entry.rel, entry.st) if refuse else None
            if why:
                raise Refused(why, status=422)
            if not stat.S_ISREG(entry.st.st_mode) or not any(fnmatch.fnmatchcase(name, p) for p in allowed):
                continue
            if entry.st.st_nlink > 1:
                raise Refused(f"{what} file {echo(entry.rel)} is hard-linked elsewhere; copy it, do not link it")
            total += entry.st.st_size
            if total > max_bytes:
                raise Refused(f"{what} directory {echo(uri)} is over its limit of {max_bytes:,} bytes", status=413)
            weights += name.endswith(".safetensors")
            (dest / entry.rel).parent.mkdir(parents=True, exist_ok=True)
            _copy_no_follow(dir_fd, name, dest / entry.rel, entry.st.st_size, what)
    except OSError as exc:
        raise Refused(f"{what} directory {echo(uri)} cannot be read: {exc.strerror}") from exc
    finally:
        os.close(fd)
    if not weights:
        raise Refused(f"{what} directory {echo(uri)} has no *.safetensors weights", status=422)


def _copy_no_follow(dir_fd: int, name: str, dst: Path, size: int, what: str) -> None:
    src = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    with os.fdopen(src, "rb") as fin, open(dst, "xb") as fout:
        st = os.fstat(fin.fileno())
        if not stat.S_ISREG(st.st_mode) or st.st_nlink > 1:
            raise Refused(f"{what} file {echo(name)} changed while it was read")
        left = size
        while left > 0 and (block := fin.read(min(1 << 22, left))):
            fout.write(block)
            left -= len(block)
