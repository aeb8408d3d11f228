"""One test per refusal of the issue: each answers a clear JSON error with its status code, and
leaves nothing stored (no submission row, nothing sealed, nothing in staging) and no quota used."""

from __future__ import annotations

import base64
import os
import stat
import subprocess
import tarfile

import pytest

from speculator_arena.protocol import load_protocol

from .conftest import LAUNCH, TASK, file_member, stage_protocol, submission, tar_gz


def test_missing_token(front):
    r = front.client.post("/api/submissions", json=submission())
    front.assert_refused(r, 401, "missing bearer token")


def test_bad_token(front):
    front.assert_refused(
        front.post(submission(), token="sa_0123456789abcdef_" + "A" * 43), 401, "invalid or revoked token"
    )
    front.assert_refused(front.post(submission(), token="not-a-token"), 401, "invalid or revoked token")


def test_revoked_token(front):
    from speculator_arena.frontdoor.accounts import revoke
    from speculator_arena.frontdoor.state import connect

    assert revoke(connect(front.home), "alice") == 1
    r = front.post(submission())
    assert r.status_code == 401 and "invalid or revoked token" in r.json()["error"]
    assert front.stored() == {"submissions": 0, "sealed": [], "staging": []}  # (its quota is unreadable now)


def test_malformed_json(front):
    front.assert_refused(front.post(content=b'{"task_id": "local-smollm2", '), 400, "malformed JSON")
    front.assert_refused(front.post(content=b'["a list"]'), 400, "must be a JSON object")


def test_missing_and_extra_fields(front):
    doc = submission()
    del doc["solution"]
    front.assert_refused(front.post(doc), 422, "solution")
    front.assert_refused(front.post(submission(surprise=1)), 422, "surprise")


def test_unknown_task(front):
    front.assert_refused(front.post(submission(task_id="gpt-17")), 422, "unknown task 'gpt-17'")


def test_unknown_kind(front):
    front.assert_refused(
        front.post(submission(solution={"method": "x", "kind": "magic"})), 422, "unknown solution.kind 'magic'"
    )


def test_two_engine_sources(front):
    doc = submission()
    doc["engine"]["repository"] = "https://example.org/e.git"
    doc["engine"]["commit"] = "a" * 40
    front.assert_refused(front.post(doc), 422, "exactly one engine source")


def test_oversize_inline_engine(front):
    limit = load_protocol().submission.inline_engine_max_chars
    doc = submission()
    doc["engine"]["inline"] = "A" * (limit + 4)
    front.assert_refused(front.post(doc), 413, f"over the limit of {limit:,}")


def test_inline_engine_not_base64(front):
    doc = submission()
    doc["engine"]["inline"] = "this is not base64!"
    front.assert_refused(front.post(doc), 400, "not base64")


def test_inline_engine_not_a_tar_gz(front):
    doc = submission()
    doc["engine"]["inline"] = base64.b64encode(b"plain bytes, not gzip").decode()
    front.assert_refused(front.post(doc), 400, "not a readable .tar.gz")


def test_tar_with_dotdot(front):
    front.assert_refused(
        front.post(submission(tar_gz([LAUNCH, file_member("../evil.sh", b"x")]))), 400, "climbs out of the directory"
    )
    assert not (front.home.parent / "evil.sh").exists()


def test_tar_with_absolute_path(front):
    front.assert_refused(
        front.post(submission(tar_gz([LAUNCH, file_member("/tmp/evil-abs.sh", b"x")]))), 400, "absolute path"
    )


def test_tar_with_escaping_symlink(front):
    link = tarfile.TarInfo("out")
    link.type, link.linkname = tarfile.SYMTYPE, "../../etc"
    front.assert_refused(front.post(submission(tar_gz([LAUNCH, (link, None)]))), 400, "leaves the directory")
    absolute = tarfile.TarInfo("abs")
    absolute.type, absolute.linkname = tarfile.SYMTYPE, "/etc/passwd"
    front.assert_refused(front.post(submission(tar_gz([LAUNCH, (absolute, None)]))), 400, "leaves the directory")


def test_tar_escaping_through_a_chain_of_links(front):
    """Each link lexically inside, but `here/..` through a link to `.` leads out: caught on the real path."""
    here, up = tarfile.TarInfo("here"), tarfile.TarInfo("up")
    here.type, here.linkname = tarfile.SYMTYPE, "."
    up.type, up.linkname = tarfile.SYMTYPE, "here/.."
    front.assert_refused(
        front.post(submission(tar_gz([LAUNCH, (here, None), (up, None), file_member("up/escaped.txt", b"x")]))),
        400,
        "link",
    )


def test_tar_with_device_file(front):
    dev = tarfile.TarInfo("null")
    dev.type, dev.devmajor, dev.devminor = tarfile.CHRTYPE, 1, 3
    front.assert_refused(front.post(submission(tar_gz([LAUNCH, (dev, None)]))), 400, "device")
    fifo = tarfile.TarInfo("pipe")
    fifo.type = tarfile.FIFOTYPE
    front.assert_refused(front.post(submission(tar_gz([LAUNCH, (fifo, None)]))), 400, "device, fifo")


def test_decompression_bomb(front):
    """A few hundred KiB of gzip that would expand past the engine's bound: refused while reading."""
    limit = load_protocol().submission.repository_engine_max_mib * 2**20
    import gzip
    import io

    info = tarfile.TarInfo("zeros.bin")
    info.size = limit + 2**20
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tf:
        LAUNCH[0].size = len(LAUNCH[1])
        tf.addfile(LAUNCH[0], io.BytesIO(LAUNCH[1]))

        class Zeros(io.RawIOBase):
            left = info.size

            def readable(self):
                return True

            def readinto(self, b):
                n = min(len(b), self.left)
                b[:n] = bytes(n)
                self.left -= n
                return n

        tf.addfile(info, io.BufferedReader(Zeros()))
    bomb = gzip.compress(raw.getvalue(), compresslevel=9)
    assert len(base64.b64encode(bomb)) < load_protocol().submission.inline_engine_max_chars
    front.assert_refused(front.post(submission(bomb)), 400, "expands to more than")


def test_too_many_members(front, monkeypatch):
    from speculator_arena.sealed import archive

    monkeypatch.setattr(archive, "MAX_MEMBERS", 5)  # the bound itself, not its size, is under test
    members = [LAUNCH] + [file_member(f"f{i}", b"") for i in range(10)]
    front.assert_refused(front.post(submission(tar_gz(members))), 400, "more than 5 members")


def test_no_launch_sh(front):
    front.assert_refused(
        front.post(submission(tar_gz([file_member("serve.sh", b"#!/bin/bash\n")]))), 400, "no launch.sh"
    )


def test_commit_not_40_hex(front):
    doc = submission()
    doc["engine"] = {"repository": "https://example.org/engine.git", "commit": "main"}
    front.assert_refused(front.post(doc), 400, "40 lowercase hex characters")
    doc["engine"]["commit"] = "A" * 40
    front.assert_refused(front.post(doc), 400, "40 lowercase hex characters")
    doc = submission(speculator={"uri": "org/spec", "revision": "abc123"})
    front.assert_refused(front.post(doc), 400, "speculator.revision must be an exact commit")


def test_engine_repository_over_its_size(front, public_dir, tmp_path, monkeypatch):
    """Fetched out of the request (201 `fetching`), then refused by the fetch worker: no quota used."""
    repo = _git_repo(public_dir / "big", {"launch.sh": b"#!/bin/bash\n", "blob.bin": os.urandom(3 * 2**20)})
    stage_protocol(tmp_path / "protocol", monkeypatch, repository_engine_max_mib=2)  # 3 MiB against 2 MiB
    doc = submission()
    doc["engine"] = {"repository": f"file://{repo}", "commit": _head(repo)}
    front.assert_fetch_refused(front.post(doc), 413, "holds more than 2 MiB")


def test_engine_repository_scheme(front, public_dir, monkeypatch):
    monkeypatch.delenv("ARENA_ENGINE_REPO_SCHEMES")
    repo = _git_repo(public_dir / "e", {"launch.sh": b"#!/bin/bash\n"})
    doc = submission()
    doc["engine"] = {"repository": f"file://{repo}", "commit": _head(repo)}
    front.assert_refused(front.post(doc), 400, "must be a https URL")


def test_engine_repository_at_a_commit_is_accepted_and_sealed(front, public_dir):
    repo = _git_repo(public_dir / "e", {"launch.sh": b"#!/bin/bash\necho serve\n", "lib/x.py": b"print(1)\n"})
    doc = submission()
    doc["engine"] = {"repository": f"file://{repo}", "commit": _head(repo)}
    r = front.post(doc)
    assert r.status_code == 201 and r.json()["status"] == "fetching", r.text
    settled = front.settle(r)
    assert settled["status"] == "queued", (settled["refusal"], settled["refusal_status"])
    from speculator_arena.sealed.store import store_dir, verify_sealed

    tree = store_dir(front.home) / settled["engine_digest"] / "tree"
    assert sorted(p.relative_to(tree).as_posix() for p in tree.rglob("*") if p.is_file()) == ["launch.sh", "lib/x.py"]
    assert verify_sealed(tree, front.home) == settled["engine_digest"]
    assert not os.access(tree / "launch.sh", os.W_OK) or os.geteuid() == 0
    assert not stat.S_IMODE((tree / "launch.sh").stat().st_mode) & 0o222
    assert front.quota()["used"] == 1


def _git_repo(path, files: dict[str, bytes]):
    path.mkdir(parents=True)
    for name, data in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
    env = dict(
        os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t"
    )
    for cmd in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "engine"]):
        subprocess.run(cmd, cwd=path, env=env, check=True)
    subprocess.run(["git", "config", "uploadpack.allowAnySHA1InWant", "true"], cwd=path, check=True)
    return path


def _head(repo) -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True, check=True
    ).stdout.strip()


@pytest.mark.parametrize("task", [TASK])
def test_a_good_inline_engine_is_accepted(front, task):
    r = front.post(submission())
    assert r.status_code == 201, r.text
    assert r.json()["status"] == "queued"
    stored = front.stored()
    assert stored["submissions"] == 1 and stored["sealed"] == [r.json()["engine_digest"]] and stored["staging"] == []
    assert front.quota()["used"] == 1


def test_no_submission_while_the_worker_cannot_run_engines_unprivileged(front):
    """The queue's worker records its privilege preflight (runners/privileges.py); while its last
    verdict is a refusal the API accepts nothing (503, the reason said, nothing stored), and once
    a worker can run engines again it accepts."""
    from speculator_arena.runners.privileges import record_verdict

    record_verdict(front.home, "engines must run as the unprivileged user arena-engine, which cannot reach /x")
    front.assert_refused(front.post(submission()), 503, "cannot run submissions now: engines must run as")
    record_verdict(front.home, None)
    assert front.post(submission()).status_code == 201
