"""The demo's data from declared upstreams (issue 53): the manifest (pools/ingest/data_manifest.yaml)
names every file the shipped pools read with its sha256, `arena data fetch` materialises them from
a mirror or the Hugging Face hub and installs only files whose sha256 is the declared one, and
without data `arena demo` / `arena pools build` stop with one error naming the files and how to
get them.

Everything is real: the files of ../shared/data, the `arena` command in a subprocess, and the real
`huggingface_hub` client against the hub-shaped server on 127.0.0.1 (tests/frontdoor/hub_server.py).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from speculator_arena.pools.ingest import data_fetch

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "frontdoor"))  # hub_server

SMALL = ["traces/AzureLLMInferenceTrace_code.csv", "probes/LICENSE-Apache-2.0_Spec-Bench.txt"]
REV = "4f1c0a9e3b2d5c6e7f8091a2b3c4d5e6f7a8b9c0"


def _arena(*args: str, env: dict | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k not in ("ARENA_SHARED_DATA", "ARENA_DEBUG")}
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "speculator_arena.cli", *args],
        cwd=cwd,
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def test_the_manifest_holds_every_file_the_shipped_pools_read_with_its_checksum(shared_data):
    """Every manifest file of ../shared/data has the declared size and sha256, and every file
    the shipped declaration, the apps' reader, the probes and the Qwen3 tokenizer read is in it."""
    from speculator_arena.pools.ingest.source_sets import load_declarations, load_traces

    files = data_fetch.load_manifest()
    by_path = {f.path: f for f in files}
    assert len(by_path) == len(files)
    wrong = []
    for f in files:
        p = shared_data / f.path
        if not p.is_file() or p.stat().st_size != f.size or data_fetch.sha256_of(p) != f.sha256:
            wrong.append(f.path)
    assert wrong == []
    read = {d.path for d in load_declarations(None) if d.path} | {t.path for t in load_traces(None)}
    read |= {"probes/spec_bench_question.jsonl", "tokenizers/qwen3/tokenizer.json"}
    read |= {
        "apps/" + p
        for p in (
            "mini-swe-agent/src/minisweagent/config/default.yaml",
            "swe-agent/config/default.yaml",
            "openhands/openhands/agenthub/codeact_agent/prompts/system_prompt.j2",
            "smolagents/src/smolagents/prompts/toolcalling_agent.yaml",
            "tau-bench/tau_bench/envs/airline/wiki.md",
        )
    }
    assert sorted(read - set(by_path)) == []
    on_disk = {p.relative_to(shared_data).as_posix() for p in shared_data.rglob("*") if p.is_file()}
    assert sorted(on_disk - set(by_path) - {"README.md"}) == []
    # every upstream is what the folder's README says, or said unknown: the mirror is then the only source
    for f in files:
        u = f.upstream
        assert u.kind in ("github", "pypi", "mirror"), f.path
        assert f.why_not_from_hub() is not None
        if u.kind == "github":
            assert u.url.startswith("https://github.com/") and u.revision, f.path
            if not u.revision.startswith("unknown"):
                assert u.revision[:8] in (shared_data / u.documented_in).read_text(encoding="utf-8"), f.path
    assert by_path["probes/spec_bench_question.jsonl"].upstream.revision == "unknown (mirror only)"


def test_a_fetch_copies_the_whole_manifest_from_the_mirror_and_the_pools_read_it(tmp_path, monkeypatch, shared_data):
    """Every file copied and checked; the fetched folder is where a build reads when neither
    --data, ARENA_SHARED_DATA nor ../shared/data is there; a second fetch keeps what is there."""
    dest = tmp_path / "home" / "data"
    lines: list[str] = []
    res = data_fetch.fetch(dest, shared_data, progress=lines.append)
    assert res.ok and len(res.installed) == len(data_fetch.load_manifest()) and res.present == []
    assert any("agent/trajectories_200.jsonl" in ln and "sha256 ok" in ln for ln in lines)
    assert [p.name for p in dest.rglob("*") if p.name.startswith(".")] == []  # no temporary file left
    again = data_fetch.fetch(dest, shared_data)
    assert again.ok and again.installed == [] and len(again.present) == len(res.installed)

    monkeypatch.delenv("ARENA_SHARED_DATA", raising=False)
    monkeypatch.chdir(tmp_path)  # no ../shared/data from here
    monkeypatch.setattr(data_fetch, "REPO", tmp_path / "elsewhere" / "repo")  # nor beside "the repository"
    assert data_fetch.data_dir(home=tmp_path / "home") == dest.resolve()
    assert data_fetch.require_data(home=tmp_path / "home") == dest.resolve()
    monkeypatch.setenv("ARENA_SHARED_DATA", str(shared_data))  # explicit wins
    assert data_fetch.data_dir(home=tmp_path / "home") == shared_data.resolve()
    assert data_fetch.data_dir(dest, home=tmp_path / "nowhere") == dest.resolve()  # --data before all


def test_arena_data_fetch_from_a_mirror_prints_progress_and_checks_every_file(tmp_path, shared_data):
    dest = tmp_path / "data"
    args = ["data", "fetch", "--dest", str(dest), "--mirror", str(shared_data)]
    r = _arena(*args, *(a for p in SMALL for a in ("--only", p)))
    assert r.returncode == 0, r.stderr
    for p in SMALL:
        assert f"{p} (" in r.stderr and "copied from the mirror" in r.stderr
        assert (dest / p).read_bytes() == (shared_data / p).read_bytes()
    assert "2 installed, 0 already there, 0 not installed" in r.stdout


def test_a_corrupted_mirror_file_is_refused_by_name_and_checksum_and_not_installed(tmp_path, shared_data):
    mirror, dest = tmp_path / "mirror", tmp_path / "data"
    for p in SMALL:
        (mirror / p).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shared_data / p, mirror / p)
    bad = mirror / SMALL[0]
    body = bytearray(bad.read_bytes())
    body[100] ^= 1  # one bit flipped
    bad.write_bytes(bytes(body))
    r = _arena("data", "fetch", "--dest", str(dest), "--mirror", str(mirror), "--only", "traces/*code.csv")
    assert r.returncode == 1
    expected = {f.path: f for f in data_fetch.load_manifest()}[SMALL[0]].sha256
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("[data] NOT INSTALLED"))
    assert SMALL[0] in line and f"expected {expected}" in line and f"actual {_sha(bytes(body))}" in line
    assert not (dest / SMALL[0]).exists()
    assert list((dest / "traces").iterdir()) == []  # nor half of it under a temporary name
    # the good file of the same mirror is installed all the same
    res = data_fetch.fetch(dest, mirror, data_fetch.select(data_fetch.load_manifest(), SMALL))
    assert list(res.failed) == [SMALL[0]] and res.installed == [SMALL[1]]


def test_files_declared_on_the_hub_are_downloaded_and_checked(tmp_path):
    """Through the real huggingface_hub client against the hub-shaped server (HF_ENDPOINT): a
    file is downloaded at its revision and installed; one whose bytes differ from the declared
    sum is refused; one of unknown revision is never asked for: the mirror is its only source."""
    from hub_server import HubServer

    good, served_bad = b"question,answer\n1,2\n", b"tampered\n"
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "upstreams": {
                    "hub": {"kind": "hub", "repo_id": "arena-test/demo-data", "repo_type": "dataset", "revision": REV},
                    "old": {"kind": "hub", "repo_id": "arena-test/demo-data", "revision": "unknown (mirror only)"},
                },
                "files": [
                    {"path": "p/good.csv", "size": len(good), "sha256": _sha(good), "license": "MIT", "upstream": "hub"}
                    | {"upstream_path": "data/good.csv"},
                    {"path": "p/bad.csv", "size": 3, "sha256": _sha(b"ok\n"), "license": "MIT", "upstream": "hub"}
                    | {"upstream_path": "data/bad.csv"},
                    {"path": "p/old.csv", "size": 3, "sha256": _sha(b"ok\n"), "license": "MIT", "upstream": "old"}
                    | {"upstream_path": "data/old.csv"},
                ],
            }
        )
    )
    dest = tmp_path / "data"
    with HubServer() as hub:
        hub.add("datasets/arena-test/demo-data", REV, {"data/good.csv": good, "data/bad.csv": served_bad})
        env = {
            "HF_ENDPOINT": hub.url,
            "HF_HUB_OFFLINE": "0",
            "HF_HUB_DISABLE_TELEMETRY": "1",
            "HF_HOME": str(tmp_path / "hf_home"),
        }
        r = _arena(
            "data", "fetch", "--dest", str(dest), "--mirror", str(tmp_path / "empty-mirror"), "--manifest", str(manifest),
            env=env,
        )  # fmt: skip
        assert r.returncode == 2 and "--mirror" in r.stderr  # a named mirror must exist
        r = _arena("data", "fetch", "--dest", str(dest), "--manifest", str(manifest), cwd=tmp_path, env=env)
    assert r.returncode == 1, r.stderr
    assert (dest / "p/good.csv").read_bytes() == good
    assert f"downloaded from Hugging Face dataset arena-test/demo-data @ {REV}, sha256 ok" in r.stderr
    failed = {ln.split()[3].rstrip(":"): ln for ln in r.stdout.splitlines() if "NOT INSTALLED" in ln}
    assert sorted(failed) == ["p/bad.csv", "p/old.csv"]
    assert f"expected {_sha(b'ok' + bytes([10]))}" in failed["p/bad.csv"]
    assert f"actual {_sha(served_bad)}" in failed["p/bad.csv"]
    assert "the mirror is the only source" in failed["p/old.csv"]
    assert not (dest / "p/bad.csv").exists() and not (dest / "p/old.csv").exists()
    assert [q for q in hub.requests if "old.csv" in q] == []
    assert any(q.endswith(f"/datasets/arena-test/demo-data/resolve/{REV}/data/good.csv") for q in hub.requests)
    assert sorted(p.name for p in dest.iterdir()) == ["p"]  # the download's staging folder is gone


@pytest.mark.parametrize("command", [["demo"], ["pools", "build", "--task", "local-smollm2"]])
def test_without_data_the_demo_and_the_pools_build_stop_with_one_clear_error(tmp_path, command):
    """ARENA_SHARED_DATA names an empty folder (so ../shared/data beside this clone is not used):
    one line names the missing files and both ways to get them; nothing is built."""
    empty = tmp_path / "no-data"
    empty.mkdir()
    home = tmp_path / "home"
    # (no engine starts: the demo's privilege preflight passes from any clone as the runner's user)
    r = _arena(*command, "--home", str(home), env={"ARENA_SHARED_DATA": str(empty), "ARENA_NO_PRIVILEGE_DROP": "1"})
    assert r.returncode == 2, r.stdout + r.stderr
    errors = [ln for ln in r.stderr.splitlines() if "error:" in ln]
    assert len(errors) == 1 and "Traceback" not in r.stderr
    err = errors[0]
    assert f"the data folder {empty} lacks" in err
    assert "agent/trajectories_200.jsonl" in err and "chat/sharegpt_multiturn_500.jsonl" in err
    assert "`arena data fetch`" in err and "--mirror DIR" in err and "ARENA_SHARED_DATA=DIR" in err
    assert not (home / "pools").exists()
