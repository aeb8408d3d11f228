"""The data folder the pools read: where it is, what it must hold, and how to fill it.

The files are declared as data (`data_manifest.yaml`: path, size, sha256, license, upstream);
`fetch` materialises them into a folder, from a local mirror or, for files declared on the
Hugging Face hub, through `huggingface_hub`, and installs a file only once its sha256 is the
declared one (written under a temporary name, checked, then renamed). `data_dir` resolves the
folder a build reads, and `require_data` turns a missing folder or missing files into one error
that names them and both ways to get them.

Why a manifest instead of a folder by convention: without it nothing said where the demo's files
come from, and a truncated or replaced file was read as it was.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from speculator_arena import settings
from speculator_arena.errors import ArenaError

MANIFEST = Path(__file__).with_name("data_manifest.yaml")
UNKNOWN = "unknown (mirror only)"
KINDS = ("github", "pypi", "hub", "mirror")
_UPSTREAM_KEYS = {"kind", "url", "revision", "package", "version", "in", "repo_id", "repo_type", "documented_in"}
_FILE_KEYS = {"path", "size", "sha256", "license", "upstream", "upstream_path", "note"}
REPO = Path(__file__).resolve().parents[3]  # the checkout (for an editable install)


class DataMissing(FileNotFoundError, ArenaError):
    """The data folder, or files the manifest declares in it, are not there."""


@dataclass(frozen=True)
class Upstream:
    name: str
    kind: str
    url: str = ""
    revision: str = ""
    package: str = ""
    version: str = ""
    within: str = ""
    repo_id: str = ""
    repo_type: str = "dataset"
    documented_in: str = ""

    def describe(self) -> str:
        if self.kind == "github":
            return f"{self.url} @ {self.revision}"
        if self.kind == "pypi":
            return f"PyPI {self.package} {self.version}" + (f" ({self.within})" if self.within else "")
        if self.kind == "hub":
            return f"Hugging Face {self.repo_type} {self.repo_id} @ {self.revision}"
        return "written for the mirror (no upstream)"


@dataclass(frozen=True)
class DataFile:
    path: str
    size: int
    sha256: str
    license: str
    upstream: Upstream
    upstream_path: str = ""
    note: str = ""

    @property
    def derived(self) -> bool:
        return self.note.startswith("derived")

    def why_not_from_hub(self) -> str | None:
        """None when the hub serves this file; else why only a mirror does."""
        u = self.upstream
        if u.kind != "hub":
            return f"its upstream is {u.describe()}, not the Hugging Face hub: the mirror is the only source"
        if not u.revision or u.revision.startswith("unknown"):
            return f"{u.describe()}: the revision is unknown, so the mirror is the only source"
        if self.derived:
            return f"{self.note}: the mirror is the only source"
        if not self.upstream_path:
            return f"{u.describe()}: no path in the repository is declared, so the mirror is the only source"
        return None


def load_manifest(path: str | os.PathLike | None = None) -> list[DataFile]:
    """The manifest's files (the package's `data_manifest.yaml`, or the file given); an unknown
    key, kind or upstream is an error naming it."""
    p = Path(path) if path else MANIFEST
    doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    ups: dict[str, Upstream] = {}
    for name, u in (doc.get("upstreams") or {}).items():
        bad = set(u) - _UPSTREAM_KEYS
        if bad or u.get("kind") not in KINDS:
            raise ValueError(f"{p}: upstream {name!r}: unknown key(s) {sorted(bad)} or kind {u.get('kind')!r}")
        ups[name] = Upstream(
            name,
            u["kind"],
            u.get("url", ""),
            str(u.get("revision", "")),
            u.get("package", ""),
            str(u.get("version", "")),
            u.get("in", ""),
            u.get("repo_id", ""),
            u.get("repo_type", "dataset"),
            u.get("documented_in", ""),
        )
    files = []
    for f in doc.get("files") or []:
        bad = set(f) - _FILE_KEYS
        if bad:
            raise ValueError(f"{p}: file {f.get('path')!r}: unknown key(s) {sorted(bad)}")
        if f.get("upstream") not in ups:
            raise ValueError(f"{p}: file {f.get('path')!r}: unknown upstream {f.get('upstream')!r}")
        rel = str(f["path"])
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise ValueError(f"{p}: file {rel!r}: a path inside the data folder is expected")
        files.append(
            DataFile(
                rel,
                int(f["size"]),
                str(f["sha256"]).lower(),
                str(f.get("license", "")),
                ups[f["upstream"]],
                f.get("upstream_path", ""),
                f.get("note", ""),
            )
        )
    return files


def select(files: list[DataFile], only: Iterable[str] | None) -> list[DataFile]:
    """The files whose path matches one of the patterns (fnmatch; a folder `traces/` matches what
    is under it); all when none is given."""
    pats = [p for p in (only or []) if p]
    if not pats:
        return files
    chosen = [
        f for f in files if any(fnmatch.fnmatch(f.path, p) or f.path.startswith(p.rstrip("/") + "/") for p in pats)
    ]
    if not chosen:
        raise ValueError(f"no file of the manifest matches {pats}")
    return chosen


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 22), b""):
            h.update(chunk)
    return h.hexdigest()


# ---- where the data folder is -------------------------------------------------------------------
def fetched_dir(home: str | os.PathLike | None = None) -> Path:
    """The folder `arena data fetch` fills by default when ARENA_SHARED_DATA is not set."""
    return settings.arena_home(home) / "data"


def mirror_candidates() -> list[Path]:
    """`../shared/data` from the current directory, then beside the repository."""
    out = []
    for p in (Path("../shared/data"), REPO.parent / "shared" / "data"):
        p = p.resolve()
        if p not in out:
            out.append(p)
    return out


def default_mirror() -> Path | None:
    """The mirror `arena data fetch` copies from unless told: ARENA_SHARED_DATA, else the first
    `../shared/data` that exists."""
    explicit = settings.raw("ARENA_SHARED_DATA")
    if explicit:
        return Path(explicit).expanduser().resolve()
    return next((p for p in mirror_candidates() if p.is_dir()), None)


def missing(folder: Path, files: list[DataFile] | None = None) -> list[DataFile]:
    """The manifest's files not present in `folder` (presence only; `fetch` checks the sums)."""
    files = load_manifest() if files is None else files
    return [f for f in files if not (folder / f.path).is_file()]


def data_dir(data: str | os.PathLike | None = None, home: str | os.PathLike | None = None) -> Path:
    """The data folder a build reads, in this order: the folder given (--data), else
    ARENA_SHARED_DATA; else `../shared/data` (from the current directory, then beside the
    repository); else the fetched folder `$ARENA_HOME/data`. Of the last ones, the first that
    holds every manifest file wins, else the first that exists. None at all: `DataMissing`."""
    explicit = data or settings.raw("ARENA_SHARED_DATA")
    if explicit:
        p = Path(explicit).expanduser()
        if not p.is_dir():
            origin = "--data" if data else "ARENA_SHARED_DATA"
            raise DataMissing(_missing_message(f"the data folder {p} ({origin}) does not exist", load_manifest()))
        return p.resolve()
    found = [p for p in [*mirror_candidates(), fetched_dir(home)] if p.is_dir()]
    files = load_manifest()
    for p in found:
        if not missing(p, files):
            return p
    if found:
        return found[0]
    tried = ", ".join(str(p) for p in [*mirror_candidates(), fetched_dir(home)])
    raise DataMissing(_missing_message(f"no data folder found (looked at {tried})", files))


def require_data(data: str | os.PathLike | None = None, home: str | os.PathLike | None = None) -> Path:
    """The data folder, holding every manifest file; else one `DataMissing` naming the missing
    files and how to get them."""
    folder = data_dir(data, home)
    gone = missing(folder)
    if gone:
        raise DataMissing(_missing_message(f"the data folder {folder} lacks {len(gone)} file(s)", gone))
    return folder


def _missing_message(what: str, gone: list[DataFile], shown: int = 6) -> str:
    gone = sorted(gone, key=lambda f: -f.size)  # the data files first, then READMEs and licenses
    names = ", ".join(f.path for f in gone[:shown]) + (f" and {len(gone) - shown} more" if len(gone) > shown else "")
    return (
        f"{what}; the pools need {names} (the manifest speculator_arena/pools/ingest/data_manifest.yaml lists "
        "every file). Get them with `arena data fetch` (it copies them from a mirror, or downloads the files "
        "declared on the Hugging Face hub when the hub is reachable), or from a mirror of the data folder: "
        "`arena data fetch --mirror DIR`, or ARENA_SHARED_DATA=DIR (docs/getting-started.md, "
        '"Where the demo\'s data comes from")'
    )


# ---- fetching ------------------------------------------------------------------------------------
@dataclass
class FetchResult:
    dest: Path
    installed: list[str] = field(default_factory=list)
    present: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # path -> why

    @property
    def ok(self) -> bool:
        return not self.failed


def _install(f: DataFile, dest: Path, write: Callable[[Path], None]) -> str | None:
    """Writes the file to a temporary name beside its place (`write(tmp)`), checks its sha256 and
    renames it into place; None when installed, else why not (the temporary file is removed)."""
    target = dest / f.path
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        write(tmp)
        actual = sha256_of(tmp)
        if actual != f.sha256:
            return f"checksum mismatch: sha256 expected {f.sha256}, actual {actual} ({tmp.stat().st_size} bytes)"
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
        return None
    finally:
        tmp.unlink(missing_ok=True)


def _from_hub(f: DataFile, tmp: Path, staging: Path) -> None:
    from huggingface_hub import hf_hub_download

    u = f.upstream
    got = hf_hub_download(
        u.repo_id, f.upstream_path, repo_type=u.repo_type, revision=u.revision, local_dir=str(staging)
    )
    shutil.move(got, tmp)


def fetch(
    dest: str | os.PathLike,
    mirror: str | os.PathLike | None = None,
    files: list[DataFile] | None = None,
    progress: Callable[[str], None] = lambda msg: None,
) -> FetchResult:
    """Every file into `dest`: kept when already there with its sha256; else copied from the
    mirror, else downloaded from the hub where the manifest declares it there; installed only
    when its sha256 is the declared one. A file that cannot be had is named with why in
    `failed`; the others are fetched all the same."""
    dest = Path(dest).expanduser().resolve()
    mirror_dir = Path(mirror).expanduser().resolve() if mirror else None
    in_place = mirror_dir is not None and mirror_dir == dest
    if in_place:
        mirror_dir = None  # the folder is its own mirror: its files are checked where they are
    files = load_manifest() if files is None else files
    res = FetchResult(dest)
    dest.mkdir(parents=True, exist_ok=True)
    staged: list[Path] = []  # the hub downloads' folder, made at the first download

    def staging() -> Path:
        if not staged:
            staged.append(Path(tempfile.mkdtemp(prefix=".arena-fetch-", dir=dest)))
        return staged[0]

    try:
        for i, f in enumerate(files, 1):
            tag = f"[data {i}/{len(files)}] {f.path} ({f.size / 1e6:.2f} MB)"
            target = dest / f.path
            if target.is_file():
                actual = sha256_of(target)
                if actual == f.sha256:
                    res.present.append(f.path)
                    progress(f"{tag}: already there, sha256 ok")
                    continue
                progress(f"{tag}: present with sha256 {actual}, expected {f.sha256}: fetching it again")
            reasons = []
            src = mirror_dir / f.path if mirror_dir is not None else None
            if src is not None and src.is_file():
                why = _install(f, dest, lambda tmp, src=src: shutil.copyfile(src, tmp))
                if why is None:
                    res.installed.append(f.path)
                    progress(f"{tag}: copied from the mirror {mirror_dir}, sha256 ok")
                    continue
                reasons.append(f"mirror copy {src}: {why}")
            elif mirror_dir is not None:
                reasons.append(f"not in the mirror {mirror_dir}")
            elif in_place:
                reasons.append("the destination is the mirror itself (give another one with --mirror DIR)")
            else:
                reasons.append("no mirror (--mirror DIR, ARENA_SHARED_DATA or ../shared/data)")
            hub_no = f.why_not_from_hub()
            if hub_no is None:
                progress(f"{tag}: downloading {f.upstream_path} from {f.upstream.describe()}")
                try:
                    why = _install(f, dest, lambda tmp, f=f: _from_hub(f, tmp, staging()))
                except Exception as exc:  # the hub unreachable, the file or revision not there
                    why = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                if why is None:
                    res.installed.append(f.path)
                    progress(f"{tag}: downloaded from {f.upstream.describe()}, sha256 ok")
                    continue
                reasons.append(f"hub download: {why}")
            else:
                reasons.append(hub_no)
            res.failed[f.path] = "; ".join(reasons)
            progress(f"{tag}: NOT INSTALLED: {res.failed[f.path]}")
    finally:
        for d in staged:
            shutil.rmtree(d, ignore_errors=True)
    return res
