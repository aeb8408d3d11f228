"""Hostile submissions, each one of the classes that got through before issue 18, against the real
front door (the app in-process, or `arena api` under uvicorn where the server itself is under
test), its real intake children, real tar files, real git repositories and real TCP servers.

Every test takes a snapshot of the whole ARENA_HOME tree and of the folder around it (with a
canary file, mode 0600, that the attacks aim at) before the attack and compares it after:
nothing written outside, nothing stored (no row, no sealed copy, nothing left in staging), no
quota used. Where the intake runs its children as `arena-intake` (the tests run as root), the
extractor is also run directly as root, so that the structural defence is shown to hold by
itself, not only because the child's user could not write there.
"""

from __future__ import annotations

import base64
import gzip
import io
import json
import os
import pwd
import select
import socket
import stat
import subprocess
import sys
import tarfile
import threading
import time
import zlib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from speculator_arena.sealed.refusal import Refused
from speculator_arena.sealed.trees import walk

from .conftest import LAUNCH, TASK, file_member, submission, tar_gz
from .test_refusals import _git_repo, _head
from .test_server import ApiServer

VOLATILE = {"frontdoor/state.db", "frontdoor/state.db-wal", "frontdoor/state.db-shm"}
UPS = 5  # engine-raw -> intake-* -> staging -> frontdoor -> arena_home -> the folder around it


# ---- what an attack could have changed -----------------------------------------------------
def _listing(root: Path, skip: Path | None = None) -> dict:
    out = {}
    for e in walk(root):
        if skip is not None and (root / e.rel == skip or skip in (root / e.rel).parents):
            continue
        kind = stat.S_IFMT(e.st.st_mode)
        if e.rel in VOLATILE:  # the database and its journal come and go; its rows are counted instead
            continue
        if stat.S_ISDIR(e.st.st_mode):
            out[e.rel] = (kind, stat.S_IMODE(e.st.st_mode))
        else:
            out[e.rel] = (kind, stat.S_IMODE(e.st.st_mode), e.st.st_size, e.st.st_nlink, e.st.st_mtime_ns)
    return out


class Guard:
    """The home, the folder around it and the canary, as they were."""

    def __init__(self, home: Path, around: Path):
        self.home, self.around = home, around
        self.canary = around / "canary.txt"
        if not self.canary.exists():
            self.canary.write_text("the hidden pool\n")
            os.chmod(self.canary, 0o600)
        self.before = self._snapshot()
        self.before_rows = self.rows()

    def _snapshot(self) -> dict:
        st = self.canary.lstat()
        return {
            "home": _listing(self.home),
            "around": _listing(self.around, skip=self.home),
            "canary": (self.canary.read_bytes(), stat.S_IMODE(st.st_mode), st.st_nlink, st.st_mtime_ns, st.st_uid),
        }

    def rows(self) -> int:
        from speculator_arena.frontdoor.state import connect

        con = connect(self.home)
        try:
            return con.execute("SELECT count(*) FROM submissions").fetchone()[0]
        finally:
            con.close()

    def unchanged(self, rows: int | None = None) -> None:
        """As before the attack; `rows`: the submissions expected now (default: as many as before)."""
        after = self._snapshot()
        assert after["canary"] == self.before["canary"], "the canary outside ARENA_HOME changed"
        assert after["around"] == self.before["around"], _diff(self.before["around"], after["around"])
        assert after["home"] == self.before["home"], _diff(self.before["home"], after["home"])
        assert self.rows() == (self.before_rows if rows is None else rows)


def _diff(a: dict, b: dict) -> str:
    return f"added {sorted(set(b) - set(a))[:5]}, removed {sorted(set(a) - set(b))[:5]}, changed " + str(
        sorted(k for k in set(a) & set(b) if a[k] != b[k])[:5]
    )


@pytest.fixture
def guard(front, public_dir):
    return Guard(front.home, public_dir)


def _refused(front, guard, response, status: int, words: str, used: int = 0) -> dict:
    """Refused with `status` and `words`; nothing changed, the quota's use still `used`."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert words in error, error
    assert len(error) <= 700 and str(front.home) not in error, error  # short, no server paths
    guard.unchanged()
    assert front.quota()["used"] == used
    return response.json()


# ---- archives ------------------------------------------------------------------------------
def _link(name: str, target: str, hard: bool = False):
    info = tarfile.TarInfo(name)
    info.type, info.linkname = (tarfile.LNKTYPE if hard else tarfile.SYMTYPE), target
    return info, None


def _climb(levels: int) -> list:
    """`l0 -> .`, then `l<i> -> l<i-1>/..`: each lexically inside, together `levels` folders up."""
    return [_link("l0", ".")] + [_link(f"l{i}", f"l{i - 1}/..") for i in range(1, levels + 1)]


def _extract_as_root(data: bytes, dest: Path) -> Refused:
    """The extractor itself, as the test's user (root here): it must refuse, not rely on a user."""
    from speculator_arena.sealed.archive import check_tree, extract_archive

    with pytest.raises(Refused) as caught:
        extract_archive(io.BytesIO(data), dest, max_bytes=2**20)
        check_tree(dest)
    return caught.value


def test_link_chain_write_through_a_refused_archive(front, guard, public_dir, tmp_path):
    """The chain reaches the folder around ARENA_HOME; a file written through it, and one over the
    canary, with its mode set; the archive has no launch.sh (it was refused for that, after the write)."""
    evil = tar_gz(
        [*_climb(UPS), file_member(f"l{UPS}/escaped.txt", b"out", 0o777), file_member(f"l{UPS}/canary.txt", b"gone")]
    )
    _refused(front, guard, front.post(submission(evil)), 400, "passes through a link")
    assert not (public_dir / "escaped.txt").exists()
    # deeper (to /), and with a launch.sh: the same
    deep = tar_gz([LAUNCH, *_climb(40), file_member("l40/tmp/escaped-root.txt", b"out")])
    _refused(front, guard, front.post(submission(deep)), 400, "passes through a link")
    assert not Path("/tmp/escaped-root.txt").exists()
    # the extractor alone, as root, writes nothing through the chain either
    err = _extract_as_root(evil, tmp_path / "x")
    assert "passes through a link" in err.reason
    guard.unchanged()


def test_link_chain_alone_is_refused_once_out(front, guard):
    """No write through it, only the links: an accepted archive may not keep a link that leaves."""
    _refused(front, guard, front.post(submission(tar_gz([LAUNCH, *_climb(UPS)]))), 400, "leads out of its directory")


def test_hard_links_through_links(front, guard, public_dir, tmp_path):
    """A hard link whose target passes through a link (to the canary outside), or climbs, or names
    a file not extracted: refused; the canary keeps its mode (0600) and its one name."""
    for target in (f"l{UPS}/canary.txt", "l0/launch.sh", "../canary.txt", "nothing-here"):
        evil = tar_gz([LAUNCH, *_climb(UPS), _link("stolen", target, hard=True)])
        r = front.post(submission(evil))
        assert r.status_code == 400 and "hard link" in r.json()["error"], (target, r.text)
        guard.unchanged()
    err = _extract_as_root(
        tar_gz([LAUNCH, *_climb(UPS), _link("stolen", f"l{UPS}/canary.txt", hard=True)]), tmp_path / "x"
    )
    assert "hard link" in err.reason
    assert front.quota()["used"] == 0
    guard.unchanged()


def test_an_honest_hard_link_is_kept(front, public_dir):
    """Not over-blocking: a hard link to a file extracted before it is sealed with both names."""
    from speculator_arena.sealed.store import store_dir, verify_sealed

    r = front.post(
        submission(tar_gz([LAUNCH, file_member("lib/a.py", b"x = 1\n"), _link("lib/b.py", "lib/a.py", True)]))
    )
    assert r.status_code == 201, r.text
    tree = store_dir(front.home) / r.json()["engine_digest"] / "tree"
    assert (tree / "lib" / "b.py").read_bytes() == b"x = 1\n" and (tree / "lib" / "b.py").stat().st_nlink == 2
    assert verify_sealed(tree, front.home) == r.json()["engine_digest"]


def _sdist(folder: Path, marker: Path) -> Path:
    """An sdist whose build runs code: its setup.py writes `marker`."""
    setup = f"open({str(marker)!r}, 'w').write('built as ' + __import__('getpass').getuser())\n"
    setup += "from setuptools import setup\nsetup(name='evil', version='0.1')\n"
    path = folder / "evil-0.1.tar.gz"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for name, text in (
            ("evil-0.1/setup.py", setup),
            ("evil-0.1/PKG-INFO", "Metadata-Version: 2.1\nName: evil\nVersion: 0.1\n"),
        ):
            info = tarfile.TarInfo(name)
            info.size = len(text.encode())
            tf.addfile(info, io.BytesIO(text.encode()))
    path.write_bytes(buf.getvalue())
    return path


def _wheel_needing_evil(folder: Path) -> Path:
    """A real (hand-made) wheel that declares a dependency on `evil`."""
    import zipfile

    path = folder / "good-0.1-py3-none-any.whl"
    files = {
        "good/__init__.py": "VALUE = 1\n",
        "good-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: good\nVersion: 0.1\nRequires-Dist: evil\n",
        "good-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files["good-0.1.dist-info/RECORD"] = "".join(f"{n},,\n" for n in files) + "good-0.1.dist-info/RECORD,,\n"
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path


def test_plugin_sdist_is_refused_at_intake_and_never_built(front, guard, public_dir, tmp_path):
    from speculator_arena.sealed.plugins import PluginInstallError, install_plugins

    marker = public_dir / "sdist-ran"
    engine = tmp_path / "engine"
    (engine / "plugin").mkdir(parents=True)
    (engine / "launch.sh").write_bytes(LAUNCH[1])
    _wheel_needing_evil(engine / "plugin")
    _sdist(engine / "plugin", marker)
    from speculator_arena.sealed.archive import pack_engine

    _refused(front, guard, front.post(submission(pack_engine(engine))), 422, "may hold only wheels")
    # the runner's install refuses it too (an engine directory an operator gave), before pip runs
    with pytest.raises(PluginInstallError, match="only wheels"):
        install_plugins(engine, tmp_path / "ws")
    assert not marker.exists()
    # control: pip without the arena's rules does build it, as the engine's start once did as root
    # (no cache: pip would otherwise install the wheel it built from the sdist the last time)
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-index", "--no-build-isolation", "--no-cache-dir", "--find-links",
         str(engine / "plugin"), "--target", str(tmp_path / "site"), "-q", str(engine / "plugin" / "good-0.1-py3-none-any.whl")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert marker.exists(), r.stderr[-500:]
    marker.unlink()


# ---- repositories --------------------------------------------------------------------------
def _repo_with_links(public_dir: Path, links: dict[str, str]) -> Path:
    repo = _git_repo(public_dir / "linked", {"launch.sh": b"#!/bin/bash\n"})
    for name, target in links.items():
        os.symlink(target, repo / name)
    env = dict(
        os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t"
    )
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "links"], cwd=repo, env=env, check=True)
    return repo


@pytest.mark.parametrize(
    "links",
    [
        {"passwd": "/etc/passwd"},  # absolute
        {"zero": "../" * 12 + "dev/zero"},  # climbs: hashing it would read forever
        {"a": ".", "b": "a/..", "c": "b/canary.txt"},  # each inside, together out
    ],
    ids=["absolute", "climbing", "chain"],
)
def test_repository_links_out_of_the_tree(front, public_dir, links):
    repo = _repo_with_links(public_dir, links)
    guard = Guard(front.home, public_dir)
    doc = submission()
    doc["engine"] = {"repository": f"file://{repo}", "commit": _head(repo)}
    t0 = time.time()
    front.assert_fetch_refused(front.post(doc), 400, "leads out of its directory")
    assert time.time() - t0 < 30
    guard.unchanged(rows=1)  # the refused row, and nothing else


def test_repository_size_is_bounded_before_checkout(front, public_dir, tmp_path, monkeypatch):
    """50 MiB of zeros pack into a few KiB: the tree's size is read from git's objects and
    refused before anything is checked out (the pack bound itself: test_engine_repository_over_its_size)."""
    from .conftest import stage_protocol

    repo = _git_repo(public_dir / "zeros", {"launch.sh": b"#!/bin/bash\n", "zeros.bin": bytes(50 * 2**20)})
    stage_protocol(tmp_path / "protocol", monkeypatch, repository_engine_max_mib=2)
    doc = submission()
    doc["engine"] = {"repository": f"file://{repo}", "commit": _head(repo)}
    front.assert_fetch_refused(front.post(doc), 413, "holds more than 2 MiB")


@pytest.mark.parametrize(
    "url,words",
    [
        ("https://user:secret@example.org/e.git", "credentials"),
        ("https://token@example.org/e.git", "credentials"),
        ("ftp://example.org/e.git", "must be a https"),
    ],
)
def test_repository_urls_refused_in_the_request(front, guard, url, words):
    doc = submission()
    doc["engine"] = {"repository": url, "commit": "a" * 40}
    _refused(front, guard, front.post(doc), 400, words)


@pytest.mark.parametrize(
    "host", ["127.0.0.1", "localhost", "169.254.169.254", "10.1.2.3", "[::1]", "[::ffff:127.0.0.1]", "100.64.0.1"]
)
def test_internal_hosts_are_refused_before_any_connection(front, host):
    """Loopback, link-local (metadata), private, shared and mapped addresses: no connection made.
    An address literal is refused in the request (nothing stored); a name, once resolved by the
    fetch worker (the more forms of literals: test_repository_urls.py)."""
    with Stall() as stall:
        doc = submission()
        port = stall.port if host in ("127.0.0.1", "localhost") else 443
        doc["engine"] = {"repository": f"https://{host}:{port}/engine.git", "commit": "a" * 40}
        if host == "localhost":
            front.assert_fetch_refused(front.post(doc), 400, "the arena fetches from public hosts only")
        else:
            front.assert_refused(front.post(doc), 400, "the arena fetches from public hosts only")
        assert stall.accepted == 0


class Stall:
    """A TCP server that accepts and never answers; it counts connections open at once."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(128)
        self.port = self.sock.getsockname()[1]
        self.accepted = self.most_open = 0
        self._open: list[socket.socket] = []
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop = True
        self._thread.join(5)
        for c in self._open:
            c.close()
        self.sock.close()

    def _serve(self):
        while not self._stop:
            ready, _, _ = select.select([self.sock, *self._open], [], [], 0.05)
            for s in ready:
                if s is self.sock:
                    conn, _ = self.sock.accept()
                    self._open.append(conn)
                    self.accepted += 1
                elif not s.recv(65536):  # the client gave up
                    self._open.remove(s)
                    s.close()
            self.most_open = max(self.most_open, len(self._open))


# ---- the server itself ----------------------------------------------------------------------
STALL_ENV = {
    "ARENA_FETCH_ALLOW": "127.0.0.1",
    "ARENA_FETCH_DEADLINE": "2",
    "ARENA_FETCH_WORKERS": "16",
    "ARENA_FETCHES_PER_ACCOUNT": "10",
    "ARENA_REGISTER_PER_HOUR": "3",
    "ARENA_REGISTER_MAX": "8",
}


@pytest.fixture(scope="module")
def server():
    """One `arena api` for the server's own tests (it starts in seconds: once per module), in a
    home of its own; each test takes its own snapshot (`server.guard()`)."""
    import tempfile

    from speculator_arena.frontdoor.accounts import invite
    from speculator_arena.frontdoor.state import connect
    from speculator_arena.sealed.trees import remove_tree

    around = Path(tempfile.mkdtemp(prefix="arena-fd-"))
    os.chmod(around, 0o755)
    home = around / "arena_home"
    con = connect(home)
    tokens = [invite(con, name)[1] for name in ("mallory", "trudy")]
    racer = invite(con, "racer", "study_agent")[1]
    con.close()
    s = ApiServer(home, env=STALL_ENV)
    s.home, s.tokens, s.racer = home, tokens, racer
    s.guard = lambda: Guard(home, around)
    yield s
    s.stop()
    remove_tree(around)


def _post(url: str, token: str, doc: dict, timeout: float = 60) -> httpx.Response:
    return httpx.post(f"{url}/api/submissions", json=doc, headers={"Authorization": f"Bearer {token}"}, timeout=timeout)


def _quota(server, token: str) -> int:
    r = httpx.get(f"{server.url}/api/quota", params={"task": TASK}, headers={"Authorization": f"Bearer {token}"})
    return r.json()["used"]


def _rss_peak_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


def _header_bomb(declared: int, kind: bytes) -> bytes:
    """A gzip'd tar whose first header (pax or GNU long name) declares `declared` bytes of data,
    all zeros: about a thousandth of that once compressed (gzip members in a row, one per MiB)."""
    info = tarfile.TarInfo("././@PaxHeader" if kind == tarfile.XHDTYPE else "././@LongLink")
    info.type, info.size = kind, declared
    mib = gzip.compress(bytes(1 << 20))
    return gzip.compress(info.tobuf(format=tarfile.USTAR_FORMAT)) + mib * (declared >> 20)


def test_header_bomb_leaves_the_api_memory_alone(server):
    """300 KB declaring a 300 MiB header (pax, then GNU long name): refused from the header; the
    API's peak RSS moves by less than the request itself (the reading happens in the child, which
    refuses before it reads)."""
    token = server.tokens[1]
    warm = _post(server.url, token, submission())  # every import done, the memory's peak set
    assert warm.status_code == 201, warm.text
    guard = server.guard()
    rows = guard.rows()
    before = _rss_peak_kib(server.proc.pid)
    for kind in (tarfile.XHDTYPE, tarfile.GNUTYPE_LONGNAME):
        bomb = _header_bomb(300 * 2**20, kind)
        assert len(bomb) < 400_000
        r = _post(server.url, token, submission(bomb))
        assert r.status_code == 400 and "extended tar header declares 314,572,800 bytes" in r.json()["error"], r.text
    grown = _rss_peak_kib(server.proc.pid) - before
    assert grown < 32 * 1024, f"the API's peak memory grew by {grown} KiB"
    guard.unchanged(rows=rows)


def test_stalled_fetches_never_hold_the_api(server):
    """40 submissions naming a host that accepts and never answers: every one answered at once
    (20 accepted as `fetching`, the others over the quota), `GET /api/protocol` within a second all the
    while, at most ARENA_FETCHES_PER_ACCOUNT connections at once, and every fetch refused at its
    deadline with its quota refunded."""
    guard = server.guard()
    rows = guard.rows()
    with Stall() as stall:
        doc = submission()
        doc["engine"] = {"repository": f"https://127.0.0.1:{stall.port}/engine.git", "commit": "b" * 40}
        token = server.tokens[0]
        t0 = time.time()
        with ThreadPoolExecutor(10) as pool:
            answers = list(pool.map(lambda _: _post(server.url, token, doc, timeout=30), range(40)))
        assert time.time() - t0 < 20
        codes = [r.status_code for r in answers]
        assert set(codes) <= {201, 429}, [r.text for r in answers if r.status_code not in (201, 429)]
        assert codes.count(201) >= 20  # the quota (more only where a refused fetch refunded its slot first)
        assert all(r.json()["status"] == "fetching" for r in answers if r.status_code == 201)
        ids = [r.json()["submission_id"] for r in answers if r.status_code == 201]
        waits = []
        deadline = time.time() + 90
        while True:
            t = time.time()
            assert httpx.get(f"{server.url}/api/protocol", timeout=5).status_code == 200
            waits.append(time.time() - t)
            states = [
                httpx.get(f"{server.url}/api/submissions/{sid}", headers={"Authorization": f"Bearer {token}"}).json()
                for sid in ids
            ]
            if all(s["status"] != "fetching" for s in states) or time.time() > deadline:
                break
            time.sleep(0.3)
        assert max(waits) < 1.0, waits
        assert all(s["status"] == "refused" and "deadline" in s["refusal"] for s in states), states[:2]
        assert 1 <= stall.most_open <= int(STALL_ENV["ARENA_FETCHES_PER_ACCOUNT"]), stall.most_open
    assert _quota(server, token) == 0
    guard.unchanged(rows=rows + codes.count(201))  # the refused rows, and nothing else


def _raw(port: int, chunks, read_timeout: float = 5.0) -> tuple[bytes, int]:
    """Send a request piece by piece until the server answers; (its answer, bytes sent)."""
    with socket.create_connection(("127.0.0.1", port)) as s:
        s.setblocking(False)
        sent = 0
        for chunk in chunks:
            if select.select([s], [], [], 0)[0]:
                break  # answered (or closed) before reading it all
            try:
                select.select([], [s], [], 1.0)
                sent += s.send(chunk)
            except (BlockingIOError, BrokenPipeError, ConnectionResetError):
                break
        s.setblocking(True)
        s.settimeout(read_timeout)
        try:
            return s.recv(65536), sent
        except (ConnectionResetError, TimeoutError):
            return b"", sent


def _pieces(data: bytes, size: int = 65536):
    return (data[i : i + size] for i in range(0, len(data), size))


def test_oversized_bodies_and_heads(server):
    guard = server.guard()
    rows = guard.rows()
    port = server.port
    t0 = time.time()
    answer, _ = _raw(port, [b"POST /register HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n"])
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    answer, _ = _raw(port, [b"POST /api/submissions HTTP/1.1\r\nHost: x\r\nContent-Length: 104857600\r\n\r\n"])
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]  # before authentication, before reading
    chunk = b"10000\r\n" + b"x" * 0x10000 + b"\r\n"
    head = b"POST /register HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    answer, sent = _raw(port, [head, *(chunk for _ in range(1600))])  # 100 MiB, never length-declared
    assert answer.startswith(b"HTTP/1.1 413") and sent < 16 * 2**20, (answer[:100], sent)
    big_head = b"GET /api/protocol HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * (50 * 2**20) + b"\r\n\r\n"
    answer, sent = _raw(port, _pieces(big_head))
    assert answer[:12] in (b"HTTP/1.1 400", b"HTTP/1.1 431") and sent < 16 * 2**20, (answer[:200], sent)
    assert time.time() - t0 < 20
    assert httpx.get(f"{server.url}/api/protocol", timeout=5).status_code == 200  # still serving
    guard.unchanged(rows=rows)


def test_registration_flood_is_rated_and_capped(server):
    from speculator_arena.frontdoor.accounts import set_registration
    from speculator_arena.frontdoor.state import connect

    set_registration(connect(server.home), True)

    def reg(i, client=None):
        headers = {"X-Forwarded-For": client} if client else {}
        return httpx.post(f"{server.url}/register", json={"name": f"bot-{i}"}, headers=headers, timeout=30)

    with ThreadPoolExecutor(10) as pool:
        codes = sorted(r.status_code for r in pool.map(reg, range(60)))
    per_hour, cap = int(STALL_ENV["ARENA_REGISTER_PER_HOUR"]), int(STALL_ENV["ARENA_REGISTER_MAX"])
    assert codes == [201] * per_hour + [429] * (60 - per_hour), codes
    answers = [reg(100 + i, f"10.9.0.{i}") for i in range(12)]  # other addresses: the cap holds
    assert [r.status_code for r in answers] == [201] * (cap - per_hour) + [403] * (12 - cap + per_hour)
    assert "registration is full" in answers[-1].json()["error"]
    con = connect(server.home)
    assert con.execute("SELECT count(*) FROM registrations").fetchone()[0] == cap
    set_registration(con, False)


def test_race_losers_leave_no_sealed_copy(server):
    """A study agent's one `test` slot, six different engines at once: one accepted, and the store
    holds its engine alone (the losers sealed theirs in their sandboxes, never in the store)."""
    guard = server.guard()
    sealed = server.home / "sealed"
    sealed_before = {p.name for p in sealed.iterdir()} if sealed.is_dir() else set()
    docs = [submission(tar_gz([LAUNCH, file_member("n", f"race {i}".encode())]), split="test") for i in range(6)]
    barrier = threading.Barrier(6)

    def fire(doc):
        barrier.wait()
        return _post(server.url, server.racer, doc)

    with ThreadPoolExecutor(6) as pool:
        answers = list(pool.map(fire, docs))
    assert sorted(r.status_code for r in answers) == [201] + [429] * 5, [r.text for r in answers]
    digest = next(r.json()["engine_digest"] for r in answers if r.status_code == 201)
    assert {p.name for p in sealed.iterdir()} - sealed_before == {digest}
    assert list((server.home / "frontdoor" / "staging").iterdir()) == []
    assert guard.rows() == guard.before_rows + 1


# ---- deep trees and the API's start ---------------------------------------------------------
def test_deep_tree_and_the_api_restarts(arena_home, public_dir, front, guard):
    """A 1,300-level archive and a 1,000-level path are refused (400, not 500); a 1,300-level tree
    left in staging (read-only folders in it) cannot stop `arena api` from starting: it is removed."""
    deep = tar_gz([LAUNCH, file_member("d/" * 1300 + "f", b"x")])
    _refused(front, guard, front.post(submission(deep)), 400, "levels deep")
    long_path = tar_gz([LAUNCH, file_member("/".join(["p"] * 1000), b"x")])
    _refused(front, guard, front.post(submission(long_path)), 400, "levels deep")
    leftover = arena_home / "frontdoor" / "staging" / "intake-999999999-left"
    leftover.mkdir()
    fd = os.open(leftover, os.O_RDONLY)
    for _ in range(1300):
        os.mkdir("d", dir_fd=fd)
        nxt = os.open("d", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = nxt
    os.close(os.open("f", os.O_CREAT | os.O_WRONLY, 0o444, dir_fd=fd))
    os.fchmod(fd, 0o555)
    os.close(fd)
    server = ApiServer(arena_home)  # raises if it does not answer within 60 s
    try:
        assert httpx.get(f"{server.url}/api/protocol").status_code == 200
        assert not leftover.exists()
    finally:
        server.stop()


# ---- bounded input -------------------------------------------------------------------------
def test_bounded_json_and_text(front, guard):
    deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    _refused(front, guard, front.post(content=deep), 400, "nested")
    doc = json.dumps(submission()).replace('"test"', '"\\ud800"').encode()  # a lone surrogate
    _refused(front, guard, front.post(content=doc), 400, "lone surrogates")
    doc = json.dumps(submission()).replace('"test"', '"a\\u0000b"').encode()
    _refused(front, guard, front.post(content=doc), 400, "control characters")
    _refused(
        front, guard, front.post(submission(solution={"method": "m" * 10_000, "kind": "ngram"})), 422, "at most 200"
    )
    _refused(front, guard, front.post(submission(task_id="t" * 1_000_000)), 422, "at most 64 characters")
    doc = submission()
    doc["engine"] = {"repository": "https://example.org/e.git", "commit": "a" * 40 + "\n"}
    _refused(front, guard, front.post(doc), 400, "control characters")
    from speculator_arena.frontdoor.accounts import invite
    from speculator_arena.frontdoor.sources import exact_commit
    from speculator_arena.frontdoor.state import connect

    with pytest.raises(Refused, match="40 lowercase hex"):  # `^...$` took a trailing newline
        exact_commit("a" * 40 + "\n", "engine.commit")
    with pytest.raises(Refused, match="account name"):
        invite(connect(front.home), "alice-2\n")
    r = front.client.get(
        "/api/quota", params={"task": TASK, "split": "hidden"}, headers={"Authorization": f"Bearer {front.token}"}
    )
    assert r.status_code == 422 and "split" in r.json()["error"], r.text
    r = front.client.get("/api/protocol", headers={"X-Pad": "a" * 40_000})
    assert r.status_code == 431, r.text  # the app's own bound on heads (behind any server)
    guard.unchanged()


def test_long_member_names_are_cut_in_errors(front, guard):
    """A 60 KB member name (a GNU long name) and a 3 MB one (over the header bound): short errors."""
    name = "n" * 60_000
    r = front.post(submission(tar_gz([LAUNCH, file_member(name, b"x")])))
    _refused(front, guard, r, 400, "longer than 4096 bytes")
    assert r.json()["error"].count("n") < 300
    big = tar_gz([LAUNCH, file_member("m" * 3_000_000, b"x")])
    assert len(base64.b64encode(big)) < 100_000
    _refused(front, guard, front.post(submission(big)), 400, "extended tar header declares")


# ---- least privilege -----------------------------------------------------------------------
def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0


def test_a_child_killed_mid_extraction_leaves_nothing(front, guard, public_dir):
    """SIGKILL to the intake's child while it writes a 190 MiB member: the submission is refused
    (503), and nothing is left: no row, no sealed copy, no sandbox."""
    from speculator_arena.frontdoor.accounts import Account
    from speculator_arena.frontdoor.intake import submit
    from speculator_arena.frontdoor.state import connect
    from speculator_arena.warehouse import Warehouse

    info = tarfile.TarInfo("zeros.bin")
    info.size = 190 * 2**20
    z = zlib.compressobj(9, zlib.DEFLATED, 31)
    launch = LAUNCH[0]
    launch.size = len(LAUNCH[1])
    parts = [z.compress(launch.tobuf() + LAUNCH[1].ljust(512, b"\0") + info.tobuf())]
    block = bytes(1 << 20)
    parts += [z.compress(block) for _ in range(190)] + [z.compress(bytes(1024)), z.flush()]
    body = json.dumps(submission(b"".join(parts))).encode()
    pids: list[int] = []
    outcome: dict = {}

    def run():
        con = connect(front.home)
        try:
            submit(
                con, Warehouse(front.home), Account(front.account_id, "alice", "participant"), body, started=pids.append
            )
        except Refused as exc:
            outcome["refused"] = exc
        finally:
            con.close()

    t = threading.Thread(target=run)
    t.start()
    staging = front.home / "frontdoor" / "staging"
    deadline = time.time() + 60
    grown: list = []
    while time.time() < deadline:  # kill it once the member is being written
        grown = [p for p in staging.glob("intake-*/engine-raw/zeros.bin") if _size(p) > 0]
        if pids and grown:
            os.kill(pids[0], 9)
            break
        time.sleep(0.002)
    t.join(60)
    assert pids and grown, "the child never started writing"
    assert outcome["refused"].status == 503 and "signal 9" in outcome["refused"].reason
    guard.unchanged()
    assert front.quota()["used"] == 0


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_run_as_operators_are_told_the_api_is_not_root(public_dir, tmp_path):
    """`arena api` as a user of its own owning `frontdoor/` and `sealed/` (docs/operators/accounts-and-api.md): its
    process is not root, it takes an inline engine (sealed, owned by it) and refuses a hostile one."""
    from speculator_arena.frontdoor.accounts import invite
    from speculator_arena.frontdoor.sandbox import system_user
    from speculator_arena.frontdoor.state import connect

    pw = system_user("arena-api")
    try:
        probe = subprocess.run(
            [sys.executable, "-c", "import speculator_arena.frontdoor.api"],
            cwd=str(Path(__file__).resolve().parents[2]),
            user=pw.pw_uid,
            group=pw.pw_gid,
            extra_groups=[],
            capture_output=True,
            text=True,
        )
        why = probe.stderr.strip()[-200:] if probe.returncode != 0 else None
    except PermissionError as exc:  # the interpreter itself is out of its reach
        why = str(exc)
    if why is not None:  # a checkout or interpreter under a private folder (/root, mktemp -d)
        pytest.skip(f"arena-api cannot import the arena here: {why}")
    home = public_dir / "home"
    for sub in ("frontdoor", "sealed"):
        (home / sub).mkdir(parents=True)
        os.chown(home / sub, pw.pw_uid, pw.pw_gid)
    con = connect(home)  # as root, made before: given to the API's user as operators would
    _, token = invite(con, "alice")
    con.close()
    for p in (home / "frontdoor").iterdir():
        os.chown(p, pw.pw_uid, pw.pw_gid)
    server = ApiServer(home, user="arena-api")
    guard = Guard(home, public_dir)
    try:
        status = Path(f"/proc/{server.proc.pid}/status").read_text()
        uids = next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1:]
        assert uids and all(int(u) == pw.pw_uid for u in uids), uids
        r = _post(server.url, token, submission(tar_gz([LAUNCH, *_climb(UPS), file_member(f"l{UPS}/x", b"x")])))
        assert r.status_code == 400 and "passes through a link" in r.json()["error"], r.text
        guard.unchanged()
        r = _post(server.url, token, submission())
        assert r.status_code == 201, r.text + server.log_text()[-2000:]
        entry = home / "sealed" / r.json()["engine_digest"]
        assert entry.stat().st_uid == pw.pw_uid and (entry / "tree" / "launch.sh").stat().st_uid == pw.pw_uid
        manifest = json.loads((entry / "manifest.json").read_text())
        assert manifest["intake_user"] == "arena-api"  # not root: its children run as itself
    finally:
        server.stop()


@pytest.mark.skipif(os.geteuid() != 0, reason="switching users needs root")
def test_children_of_a_root_api_run_as_the_intake_user(front):
    """The sealed manifest records the user the intake's child ran as: `arena-intake` wherever that
    user can run the worker (here), the API's own user otherwise (said, never hidden)."""
    from speculator_arena.frontdoor.sandbox import INTAKE_USER, intake_user
    from speculator_arena.frontdoor.state import staging_dir

    r = front.post(submission())
    assert r.status_code == 201, r.text
    manifest = json.loads((front.home / "sealed" / r.json()["engine_digest"] / "manifest.json").read_text())
    dropped = intake_user(str(staging_dir(front.home)))
    assert manifest["intake_user"] == (INTAKE_USER if dropped else pwd.getpwuid(os.geteuid()).pw_name)
    if dropped is None:
        pytest.skip(f"{INTAKE_USER} cannot run the worker from this checkout (recorded as such)")
    assert dropped[0] == pwd.getpwnam(INTAKE_USER).pw_uid != 0


def test_workspace_links_are_neither_followed_nor_copied(front, public_dir, monkeypatch):
    """A workspace speculator whose participant planted links (a file to /etc/passwd, a folder to
    /etc) and a hard-linked file: the links are skipped, never read; the hard link is refused."""
    from speculator_arena.checkpoints import checkpoint_dir
    from speculator_arena.sealed.store import store_dir

    target = checkpoint_dir(TASK, front.home)  # a prepared target (its manifest is what intake reads)
    target.mkdir(parents=True)
    (target / "manifest.json").write_text(json.dumps({"files": {}, "total_bytes": 10_000}))
    ws = public_dir / "workspace"
    (ws / "run1").mkdir(parents=True)
    (ws / "run1" / "model.safetensors").write_bytes(b"w" * 100)
    os.symlink("/etc/passwd", ws / "run1" / "config.json")
    os.symlink("/etc", ws / "run1" / "etc")
    monkeypatch.setenv("ARENA_WORKSPACES", str(ws))
    guard = Guard(front.home, public_dir)
    r = front.post(submission(speculator={"uri": f"workspace:{ws / 'run1'}", "revision": ""}))
    assert r.status_code == 201 and r.json()["status"] == "queued", r.text
    tree = store_dir(front.home) / r.json()["speculator_digest"] / "tree"
    assert [p.name for p in walk_names(tree)] == ["model.safetensors"]
    os.link(ws / "run1" / "model.safetensors", ws / "run1" / "copy.safetensors")
    guard = Guard(front.home, public_dir)
    r = front.post(submission(speculator={"uri": f"workspace:{ws / 'run1'}"}))
    _refused(front, guard, r, 400, "hard-linked", used=1)


def walk_names(root: Path) -> list[Path]:
    return sorted(root / e.rel for e in walk(root))
