"""`arena protocol publish`: an operator makes a calibration's candidate the version in force.

The candidate's document becomes `v<N>.yaml` in this ARENA_HOME's published versions directory
(`$ARENA_HOME/protocol/versions`, which `available_versions()` reads after the shipped ones),
with `v<N>.published.json` beside it (who, when, from which candidate, whether the operator
overrode a calibration that does not separate a control) and the evidence copied to
`v<N>.evidence/`. Nothing is overwritten: a version number that exists is refused. Then every
stored evaluation is scored under the new version (its `scores/v<N>` pin and copy); the earlier
versions' scores stay as they were, recomputable under their own numbers.
"""

from __future__ import annotations

import getpass
import json
import os
import shutil
import time
from pathlib import Path

import yaml

from speculator_arena import settings
from speculator_arena.calibration.candidate import (
    UNPUBLISHED,
    candidate_dir,
    load_evidence,
)
from speculator_arena.errors import ArenaError
from speculator_arena.protocol.model import Protocol
from speculator_arena.protocol.version_files import available_versions, published_versions_dir
from speculator_arena.warehouse import Warehouse, generation


class NotSeparatedError(ValueError, ArenaError):
    """The candidate's evidence says a control passes (or an honest run fails); needs --override."""


def operator() -> str:
    return settings.get("ARENA_OPERATOR") or getpass.getuser()


def publish(
    home,
    task_id: str,
    version: int,
    *,
    override: bool = False,
    by: str | None = None,
    rescore: bool = True,
    progress=None,
) -> dict:
    """Publish candidate v`version` of `task_id`; return the publication record."""
    say = progress or (lambda m: None)
    wh = Warehouse(home)
    if published_versions_dir() != published_versions_dir(wh.home):
        raise ValueError(
            f"ARENA_HOME ({published_versions_dir().parent.parent}) is not the home published to "
            f"({wh.home}): the version would not be visible where it is re-scored"
        )
    d = candidate_dir(wh.home, task_id, version)
    evidence = load_evidence(wh.home, task_id, version)
    if evidence["problems"] and not override:
        raise NotSeparatedError(
            f"candidate v{version} of {task_id} does not separate its honest runs from every control: "
            + "; ".join(evidence["problems"])
            + ". Publish it anyway only with --override (recorded)"
        )
    if version in available_versions():
        raise ValueError(
            f"protocol v{version} exists already (versions are immutable); calibrate again to make "
            f"a candidate numbered after v{available_versions()[-1]}"
        )
    doc = yaml.safe_load((d / "candidate.yaml").read_text(encoding="utf-8"))
    if doc.get("published") != UNPUBLISHED or doc.get("version") != version:
        raise ValueError(f"{d / 'candidate.yaml'} is not an unpublished candidate v{version}")
    now = time.gmtime()
    doc["published"] = time.strftime("%Y-%m-%d", now)
    Protocol.model_validate(doc)
    out = published_versions_dir(wh.home)
    out.mkdir(parents=True, exist_ok=True)
    record = {
        "version": version,
        "task_id": task_id,
        "published_by": by or operator(),
        "published_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", now),
        "from_candidate": str(d),
        "base_version": evidence["base_version"],
        "override": bool(override and evidence["problems"]),
        "problems": evidence["problems"],
    }
    ev_dir = out / f"v{version}.evidence"
    if ev_dir.exists():
        shutil.rmtree(ev_dir)
    shutil.copytree(d, ev_dir, ignore=shutil.ignore_patterns("candidate.yaml"))
    (out / f"v{version}.published.json").write_text(json.dumps(record, indent=2), encoding="utf-8")
    tmp = out / f".v{version}.yaml.tmp"
    tmp.write_text(
        f"# Protocol v{version}, published by {record['published_by']} at {record['published_at']} "
        f"from the calibration of {task_id} (evidence in v{version}.evidence/).\n"
        + yaml.safe_dump(doc, sort_keys=False),
        encoding="utf-8",
    )
    os.replace(tmp, out / f"v{version}.yaml")  # the version appears whole or not at all
    generation.bump(wh.home)  # boards asking for the latest version look again (warehouse/generation.py)
    say(f"published protocol v{version} ({task_id}) by {record['published_by']} at {record['published_at']}")
    if rescore:
        from speculator_arena.board import fill
        from speculator_arena.scoring.registry import score_and_record

        scores = score_and_record(wh, version, keep=fill)
        record["rescored_evaluations"] = len(scores.evaluations)
        say(f"re-scored {len(scores.evaluations)} stored evaluations under v{version}")
    return record


def _published_dirs(home=None) -> list[Path]:
    """Where a version's publication record and evidence lie: this ARENA_HOME's published versions,
    then the shipped ones (a version calibrated on the arena's machine and shipped with the code
    carries its record and evidence beside its document), then `ARENA_PROTOCOL_DIR` (a version
    staged by hand with its evidence)."""
    from importlib import resources

    from speculator_arena import settings

    dirs = [published_versions_dir(home), Path(str(resources.files("speculator_arena.protocol") / "versions"))]
    extra = settings.get("ARENA_PROTOCOL_DIR")
    return dirs + ([Path(extra)] if extra else [])


def task_calibrations(version: int, home=None) -> list[tuple[int, dict, Path]]:
    """Per task of `version`, the evidence of the last calibration in force there: (the version it
    was published as, its evidence, its plots folder), for the latest version up to `version`
    whose evidence calibrates that task. A later version that only adds a task keeps showing the
    calibrations it carries over (v6 keeps v5's of local-smollm2)."""
    from speculator_arena.protocol import available_versions, load_protocol

    tasks = set(load_protocol(version).tasks)
    out = []
    for v in sorted((x for x in available_versions() if x <= version), reverse=True):
        found = published_evidence(v, home)
        if found is not None and found[0]["task_id"] in tasks:
            tasks.discard(found[0]["task_id"])
            out.append((v, *found))
    return out


def publication(version: int, home=None) -> dict | None:
    """The publication record of a published or shipped-after-calibration version (None for
    versions written by hand or staged)."""
    for d in _published_dirs(home):
        p = d / f"v{version}.published.json"
        if p.exists():
            return json.loads(p.read_text(encoding="utf-8"))
    return None


def published_evidence(version: int, home=None) -> tuple[dict, Path] | None:
    """The evidence published with a version and the folder of its plots (None when it has none)."""
    for d in _published_dirs(home):
        p = d / f"v{version}.evidence" / "evidence.json"
        if p.exists():
            return json.loads(p.read_text(encoding="utf-8")), p.parent / "plots"
    return None
