"""Engine archives (`.tar.gz`): the one extractor of the arena (the intake's inline engines, the
runner's engine archives), packing a directory (`arena submit`) and finding its `launch.sh`.

Why our own loop instead of `tarfile`'s "data" filter: Debian's Python 3.11.2, which runs here,
has no extraction filters, and where the filter exists it checks names and link targets but
still writes by path, so a check that misjudges one link (a link to `.`, then a link through it)
writes wherever the chain leads. Here no write can pass through a link, by construction:

- every directory on a member's path is opened relative to its parent's descriptor with
  `O_DIRECTORY | O_NOFOLLOW` (created with `mkdir(dir_fd=)` when absent), so a component that
  is a link or a file stops the member;
- a regular file is created with `O_CREAT | O_EXCL | O_NOFOLLOW` in that directory: never over
  an existing name, never through a link; its mode is set on its descriptor;
- a symbolic link is created only as a leaf (`symlink(dir_fd=)`), with a relative target that
  stays inside lexically; a hard link only to a regular file this extraction wrote, found again
  by the same no-follow walk and matched by device and inode, made with
  `link(follow_symlinks=False)`;
- once the tree is out, `check_tree` resolves every link by its real path (chains included) and
  refuses the tree if one leaves it, and refuses hard links that share an inode with a file
  outside it.

Bounds before reading: tarfile reads a pax extended header or a GNU long name in one read of
its declared size, so a 300 KB upload declaring a 300 MiB header costs the reader 300 MiB.
`BoundedTarInfo`, passed as `tarinfo=`, checks the declared size in `_proc_member` (the hook
the standard library documents for subclasses: it is called for every 512-byte header before
any of its data is read) and refuses sparse members (whose maps tarfile reads entry by entry).
Why not a pre-scan of the 512-byte headers: knowing where the next header starts needs the pax
records parsed (a pax `size` overrides the header's), which is a second tar reader. The
decompressed stream as a whole is bounded too (`_BoundedStream`), so what the archive expands
to is refused after at most the bound has been read, never written whole.
"""

from __future__ import annotations

import gzip
import io
import os
import posixpath
import stat
import tarfile
import zlib
from pathlib import Path

from speculator_arena.sealed.refusal import Refused, echo
from speculator_arena.sealed.trees import resolves_inside, walk

# Operational bounds of an extracted engine (not protocol values): the protocol's repository
# limit (repository_engine_max_mib) bounds the bytes; these bound entries, depth and names.
MAX_MEMBERS = 20000
MAX_DEPTH = 64  # path components of one member (an honest engine is a few levels deep)
MAX_PATH_BYTES = 4096  # one member's path or link target (Linux's PATH_MAX)
MAX_NAME_BYTES = 255  # one component (Linux's NAME_MAX)
MAX_HEADER_BYTES = 64 * 1024  # one pax header or GNU long name
MAX_HEADER_CHAIN = 8  # extended headers in a row before a member
HEADER_SLACK = 1536  # per member: its header, an extended header's block, padding
EXTENDED = (
    tarfile.XHDTYPE,
    tarfile.XGLTYPE,
    tarfile.SOLARIS_XHDTYPE,
    tarfile.GNUTYPE_LONGNAME,
    tarfile.GNUTYPE_LONGLINK,
)

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def _bounded_tarinfo() -> type[tarfile.TarInfo]:
    """A TarInfo class of its own per extraction (it counts extended headers in a row)."""

    class BoundedTarInfo(tarfile.TarInfo):
        chain = 0

        def _proc_member(self, tf):
            cls = type(self)
            if self.type in EXTENDED:
                cls.chain += 1
                if self.size > MAX_HEADER_BYTES:
                    raise Refused(
                        f"engine archive: an extended tar header declares {self.size:,} bytes "
                        f"(at most {MAX_HEADER_BYTES:,})"
                    )
                if cls.chain > MAX_HEADER_CHAIN:
                    raise Refused(f"engine archive: more than {MAX_HEADER_CHAIN} extended headers in a row")
            else:
                cls.chain = 0
            if self.type == tarfile.GNUTYPE_SPARSE:
                raise Refused("engine archive: sparse members are refused")
            return super()._proc_member(tf)

        def _proc_gnusparse_10(self, next, pax_headers, tf):
            raise Refused("engine archive: sparse members are refused")

    return BoundedTarInfo


class _BoundedStream(io.RawIOBase):
    """The decompressed tar stream, refused once it passes `limit` bytes."""

    def __init__(self, raw, limit: int | None):
        self.raw, self.limit, self.count = raw, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buf) -> int:
        n = self.raw.readinto(buf)
        self.count += n
        if self.limit is not None and self.count > self.limit:
            raise Refused(f"engine archive: expands to more than {self.limit:,} bytes")
        return n


def components(name: str, what: str = "member") -> list[str]:
    """A member's path as its components: relative, no `..`, bounded; Refused otherwise."""
    if not isinstance(name, str) or "\x00" in name:
        raise Refused(f"engine archive: a {what} name is not text")
    if len(name.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
        raise Refused(f"engine archive: {what} {echo(name)} is longer than {MAX_PATH_BYTES} bytes")
    if name.startswith("/"):
        raise Refused(f"engine archive: {what} {echo(name)} has an absolute path")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise Refused(f"engine archive: {what} {echo(name)} climbs out of the directory ('..')")
    if len(parts) > MAX_DEPTH:
        raise Refused(f"engine archive: {what} {echo(name)} is more than {MAX_DEPTH} levels deep")
    if any(len(p.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES for p in parts):
        raise Refused(f"engine archive: {what} {echo(name)} has a name longer than {MAX_NAME_BYTES} bytes")
    return parts


class _Writer:
    """Creates members under a root descriptor; keeps the descriptors of the last member's
    directories (archives list a directory's members together), never more than MAX_DEPTH."""

    def __init__(self, root_fd: int):
        self.root = root_fd
        self.chain: list[tuple[str, int]] = []
        self.written: dict[tuple[str, ...], tuple[int, int]] = {}  # regular files: (dev, ino)

    def close(self) -> None:
        for _, fd in self.chain:
            os.close(fd)
        self.chain = []

    def directory(self, parts: list[str], create: bool) -> int:
        """The descriptor of the directory `parts`, each component opened without following links."""
        keep = 0
        while keep < min(len(parts), len(self.chain)) and self.chain[keep][0] == parts[keep]:
            keep += 1
        for _, fd in self.chain[keep:]:
            os.close(fd)
        del self.chain[keep:]
        for name in parts[keep:]:
            parent = self.chain[-1][1] if self.chain else self.root
            if create:
                try:
                    os.mkdir(name, 0o755, dir_fd=parent)
                except FileExistsError:
                    pass
            self.chain.append((name, os.open(name, _DIR, dir_fd=parent)))
        return self.chain[-1][1] if self.chain else self.root

    def lookup(self, parts: list[str]) -> tuple[int, str]:
        """(a new descriptor of the directory holding `parts[-1]`, its name), for a link's source."""
        fd = os.dup(self.root)
        try:
            for name in parts[:-1]:
                nxt = os.open(name, _DIR, dir_fd=fd)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        return fd, parts[-1]


def extract_archive(
    fileobj, dest: Path, max_bytes: int | None, max_members: int | None = None, what: str = "engine archive"
) -> dict:
    """Extract a gzip'd tar read from `fileobj` into `dest` (created, must not exist).

    Returns {'files': n, 'bytes': total, 'members': m}; Refused (the caller removes `dest`) when
    a member is unsafe or a bound is passed. `max_bytes` None: no byte bound (operator archives).
    """
    max_members = MAX_MEMBERS if max_members is None else max_members
    dest = Path(dest)
    dest.mkdir()
    stream_limit = None if max_bytes is None else max_bytes + max_members * HEADER_SLACK + (1 << 20)
    total = members = files = 0
    root_fd = os.open(dest, _DIR)
    writer = _Writer(root_fd)
    try:
        with gzip.GzipFile(fileobj=fileobj, mode="rb") as gz:
            stream = io.BufferedReader(_BoundedStream(gz, stream_limit), 1 << 16)
            with tarfile.open(fileobj=stream, mode="r|", tarinfo=_bounded_tarinfo()) as tf:
                for m in tf:
                    members += 1
                    if members > max_members:
                        raise Refused(f"{what}: more than {max_members} members")
                    parts = components(m.name)
                    if not parts:
                        continue
                    if m.isfile() and not m.issparse():
                        total += m.size
                        if max_bytes is not None and total > max_bytes:
                            raise Refused(f"{what}: expands to more than {max_bytes:,} bytes")
                    files += _member(tf, m, parts, writer, what)
    except Refused:
        raise
    except (tarfile.TarError, zlib.error, EOFError, gzip.BadGzipFile) as exc:
        raise Refused(f"{what} is not a readable .tar.gz ({type(exc).__name__}: {echo(str(exc))})") from exc
    except OSError as exc:
        raise Refused(f"{what} cannot be extracted: {exc.strerror or type(exc).__name__}") from exc
    except MemoryError as exc:
        raise Refused(f"{what}: extraction ran out of its memory bound") from exc
    finally:
        writer.close()
        os.close(root_fd)
    return {"files": files, "bytes": total, "members": members}


def _member(tf: tarfile.TarFile, m: tarfile.TarInfo, parts: list[str], writer: _Writer, what: str) -> int:
    """Create one member; the number of regular files it adds (0 or 1)."""
    name = m.name
    try:
        if m.isdir():
            writer.directory(parts, create=True)
            return 0
        parent = writer.directory(parts[:-1], create=True)
    except OSError as exc:
        raise Refused(
            f"{what}: member {echo(name)} passes through a link or a file "
            f"({exc.strerror or type(exc).__name__}); links are never followed"
        ) from exc
    leaf = parts[-1]
    if m.issparse():
        raise Refused(f"{what}: sparse member {echo(name)} is refused")
    if m.isfile():
        try:
            fd = os.open(leaf, _NEW_FILE, 0o600, dir_fd=parent)
        except FileExistsError as exc:
            raise Refused(f"{what}: member {echo(name)} appears twice or replaces another entry") from exc
        except OSError as exc:
            raise Refused(f"{what}: member {echo(name)} cannot be written ({exc.strerror})") from exc
        with os.fdopen(fd, "wb") as fh:
            src = tf.extractfile(m)
            written = 0
            while block := src.read(1 << 20):
                written += len(block)
                fh.write(block)
            if written != m.size:
                raise Refused(f"{what}: member {echo(name)} is truncated")
            os.fchmod(fh.fileno(), 0o755 if m.mode & 0o111 else 0o644)
            st = os.fstat(fh.fileno())
        writer.written[tuple(parts)] = (st.st_dev, st.st_ino)
        return 1
    if m.issym():
        target = m.linkname
        if not target or "\x00" in target or len(target.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES:
            raise Refused(f"{what}: link {echo(name)} has an empty, binary or overlong target")
        resolved = posixpath.normpath(posixpath.join(posixpath.dirname("/".join(parts)), target))
        if target.startswith("/") or resolved == ".." or resolved.startswith("../"):
            raise Refused(f"{what}: link {echo(name)} -> {echo(target)} leaves the directory")
        try:
            os.symlink(target, leaf, dir_fd=parent)
        except FileExistsError as exc:
            raise Refused(f"{what}: link {echo(name)} appears twice or replaces another entry") from exc
        return 0
    if m.islnk():
        src_parts = components(m.linkname, "hard link target")
        known = writer.written.get(tuple(src_parts))
        if known is None:
            raise Refused(f"{what}: hard link {echo(name)} -> {echo(m.linkname)} names no file extracted before it")
        try:
            src_fd, src_leaf = writer.lookup(src_parts)
        except OSError as exc:
            raise Refused(f"{what}: hard link {echo(name)} -> {echo(m.linkname)} passes through a link") from exc
        try:
            st = os.stat(src_leaf, dir_fd=src_fd, follow_symlinks=False)
            if not stat.S_ISREG(st.st_mode) or (st.st_dev, st.st_ino) != known:
                raise Refused(f"{what}: hard link {echo(name)} -> {echo(m.linkname)} is not the file extracted there")
            os.link(src_leaf, leaf, src_dir_fd=src_fd, dst_dir_fd=parent, follow_symlinks=False)
        except FileExistsError as exc:
            raise Refused(f"{what}: hard link {echo(name)} appears twice or replaces another entry") from exc
        except FileNotFoundError as exc:
            raise Refused(f"{what}: hard link {echo(name)} -> {echo(m.linkname)} names no file") from exc
        finally:
            os.close(src_fd)
        writer.written[tuple(parts)] = known
        return 1
    raise Refused(f"{what}: member {echo(name)} is a device, fifo or other special file")


def check_tree(root: Path, max_bytes: int | None = None, what: str = "engine") -> dict:
    """A tree as the store may seal it: regular files, directories and links that stay inside.

    Every link is resolved by its real path (chains through other links included) and must lie
    in `root`, with a relative target; a hard link must not share its inode with a file outside
    the tree; no device, fifo or socket; at most MAX_DEPTH levels and `max_bytes` of regular
    files (counted as the walk goes, so an oversized tree is refused before it is read whole).
    Returns {'files', 'bytes', 'links'}.
    """
    files = links = total = 0
    inodes: dict[tuple[int, int], list[int]] = {}
    try:
        for entry in walk(root):
            if entry.depth > MAX_DEPTH:
                raise Refused(f"{what}: {echo(entry.rel)} is more than {MAX_DEPTH} levels deep")
            mode = entry.st.st_mode
            if stat.S_ISLNK(mode):
                target = os.readlink(root / entry.rel)
                if target.startswith("/") or not resolves_inside(root, entry.rel):
                    raise Refused(f"{what}: link {echo(entry.rel)} -> {echo(target)} leads out of its directory")
                links += 1
            elif stat.S_ISREG(mode):
                files += 1
                total += entry.st.st_size
                if max_bytes is not None and total > max_bytes:
                    raise Refused(f"{what} holds more than {max_bytes / 2**20:.0f} MiB", status=413)
                if entry.st.st_nlink > 1:
                    seen = inodes.setdefault((entry.st.st_dev, entry.st.st_ino), [entry.st.st_nlink, 0])
                    seen[1] += 1
            elif not stat.S_ISDIR(mode):
                raise Refused(f"{what}: {echo(entry.rel)} is a device, fifo or socket")
    except OSError as exc:
        raise Refused(f"{what} cannot be read: {exc.strerror or type(exc).__name__}") from exc
    if any(names < nlink for nlink, names in inodes.values()):
        raise Refused(f"{what}: a hard link shares its file with something outside the directory")
    return {"files": files, "bytes": total, "links": links}


def engine_root(dest: Path) -> Path:
    """The directory holding `launch.sh`: the archive's top, or its one top-level folder."""
    if _regular(dest / "launch.sh"):
        return dest
    entries = list(dest.iterdir())
    if len(entries) == 1 and entries[0].is_dir() and not entries[0].is_symlink() and _regular(entries[0] / "launch.sh"):
        return entries[0]
    raise Refused("engine has no launch.sh at its top (protocol section 2: `launch.sh serve` serves the target)")


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(path.lstat().st_mode)
    except OSError:
        return False


def pack_engine(directory: Path) -> bytes:
    """A directory as the `.tar.gz` bytes an inline engine carries (what `arena submit` sends)."""
    directory = Path(directory)
    if not (directory / "launch.sh").is_file():
        raise ValueError(f"{directory} has no launch.sh at its top")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for path in sorted(directory.rglob("*")):
            if "__pycache__" in path.parts:
                continue
            tf.add(path, arcname=path.relative_to(directory).as_posix(), recursive=False)
    return buf.getvalue()
