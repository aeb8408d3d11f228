"""The intake's child (`python -m speculator_arena.frontdoor.worker`, started by `sandbox.py`):
it takes one job from stdin, stages what the submission names in its own working directory
(an inline archive extracted from stdin as it arrives, a repository fetched, a hub speculator or
LowBArena artifact downloaded, an already copied workspace one), checks and seals each tree, and
prints one JSON line: `{"ok": true, ...}` or `{"ok": false, "status": code, "error": reason}`.

Its limits (address space, file size, open files, CPU time) are set before it reads a byte of
the submission, and are hard limits, so nothing it runs can raise them again. It works only in
relative paths under its working directory: `engine-sealed/`, `speculator-sealed/` and
`artifact-sealed/`, each a sealed `tree/` beside its `manifest.json`, are what the parent stores.
"""

from __future__ import annotations

import json
import resource
import signal
import sys
from pathlib import Path

from speculator_arena.sealed.archive import check_tree, engine_root, extract_archive
from speculator_arena.sealed.plugins import check_plugin_dir
from speculator_arena.sealed.refusal import Refused
from speculator_arena.sealed.store import TREE, seal_in_place

MAX_JOB_BYTES = 64 * 1024
ENGINE, SPECULATOR, ARTIFACT = Path("engine-sealed"), Path("speculator-sealed"), Path("artifact-sealed")


def apply_limits(limits: dict) -> None:
    """Hard limits: the child can lower them, never raise them again."""
    for what, value in (
        (resource.RLIMIT_AS, limits["address_space"]),
        (resource.RLIMIT_FSIZE, limits["file_size"]),
        (resource.RLIMIT_NOFILE, limits["open_files"]),
        (resource.RLIMIT_CORE, 0),
    ):
        resource.setrlimit(what, (value, value))
    cpu = int(limits["cpu_s"])
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 5))  # SIGXCPU, then SIGKILL
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write over the bound fails (EFBIG), is refused


def stage_engine(spec: dict, stdin) -> dict:
    raw = Path("engine-raw")
    if "inline" in spec:
        extract_archive(stdin, raw, spec["max_bytes"], spec.get("max_members"))
    else:
        from speculator_arena.frontdoor.sources import fetch_engine_repository
        from speculator_arena.sealed.archive import MAX_DEPTH, MAX_MEMBERS

        r = spec["repository"]
        fetch_engine_repository(
            r["url"],
            r["commit"],
            raw,
            spec["max_bytes"],
            schemes=tuple(r["schemes"]),
            allow=list(r["allow"]),
            deadline_s=float(r["deadline_s"]),
            max_entries=MAX_MEMBERS,
            max_depth=MAX_DEPTH,
        )
    root = engine_root(raw)
    ENGINE.mkdir()
    root.rename(ENGINE / TREE)
    stats = check_tree(ENGINE / TREE, spec["max_bytes"], "engine")
    check_plugin_dir(ENGINE / TREE)
    return stats


def stage_speculator(spec: dict) -> dict:
    tree = SPECULATOR / TREE
    if "hub" in spec:
        from speculator_arena.frontdoor.sources import fetch_speculator_hub, hub_target_bytes

        h = spec["hub"]
        max_bytes = h.get("max_bytes")
        if max_bytes is None:
            max_bytes = int(h["share"] * hub_target_bytes(h["target_model"], h["target_revision"], h["allowed"]))
        SPECULATOR.mkdir()
        fetch_speculator_hub(h["repo"], h["revision"], tree, max_bytes, h["allowed"])
    else:
        max_bytes = spec["staged"]["max_bytes"]
    stats = check_tree(tree, max_bytes, "speculator")
    if next(tree.rglob("*.safetensors"), None) is None:
        raise Refused("speculator has no *.safetensors weights", status=422)
    return stats


def stage_artifact(spec: dict) -> dict:
    """A LowBArena artifact: downloaded from the hub (or already copied from a workspace), then
    checked whole (`artifacts.check_artifact`: no link, no pickle, headers readable)."""
    from speculator_arena.frontdoor import artifacts

    tree = ARTIFACT / TREE
    if "hub" in spec:
        h = spec["hub"]
        bound = h.get("max_bytes")
        if bound is None:
            bound = artifacts.hub_max_bytes(h["target_model"], h["target_revision"])
        ARTIFACT.mkdir()
        artifacts.fetch_hub(h["repo"], h["revision"], tree, bound)
    else:
        bound = spec["staged"]["max_bytes"]
    return artifacts.check_artifact(tree, bound)


def run(job: dict, stdin) -> dict:
    out: dict = {}
    if job.get("engine"):
        out["engine"] = stage_engine(job["engine"], stdin)
        seal_in_place(ENGINE, {"kind": "engine", "source": job["engine_source"], "intake_user": job["user"]})
    if job.get("speculator"):
        out["speculator"] = stage_speculator(job["speculator"])
        seal_in_place(
            SPECULATOR, {"kind": "speculator", "source": job["speculator_source"], "intake_user": job["user"]}
        )
    if job.get("artifact"):
        out["artifact"] = stage_artifact(job["artifact"])
        seal_in_place(ARTIFACT, {"kind": "artifact", "source": job["artifact_source"], "intake_user": job["user"]})
    return out


def main() -> int:
    stdin = sys.stdin.buffer
    job = json.loads(stdin.readline(MAX_JOB_BYTES))
    apply_limits(job["limits"])
    try:
        out = {"ok": True, **run(job, stdin)}
    except Refused as exc:
        out = {"ok": False, "status": exc.status, "error": exc.reason}
    except MemoryError:
        out = {"ok": False, "status": 413, "error": "the submission needs more memory than the intake allows"}
    except RecursionError:
        out = {"ok": False, "status": 400, "error": "the submission is nested deeper than the intake reads"}
    sys.stdout.write(json.dumps(out) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
