"""Intake: a submission (protocol section 2) checked whole before anything is stored.

Order, so that a refusal stores nothing and uses no quota:
1. the JSON against section 2 (task, split, `solution.kind`, exactly one engine source, exact
   commits), and the account's quota (a cheap early refusal);
2. the engine extracted or fetched, and the speculator fetched, into a private staging
   directory (refusals remove it);
3. both sealed into the content-addressed store (`seal.py`; identical bytes share one copy; a
   copy no row names is inert and is removed once old by `remove_unreferenced_seals`);
4. in one `BEGIN IMMEDIATE` transaction: the quota counted again and the submission row
   inserted. Only a committed row is an accepted submission; the queue reads nothing else.
A server killed at any step leaves either no row or a whole one; staging leftovers and old
unnamed sealed copies are removed when the API starts.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import shutil
import tempfile
import time
import uuid
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from speculator_arena.frontdoor import quotas
from speculator_arena.frontdoor.accounts import Account
from speculator_arena.frontdoor.archive import engine_root, extract_engine
from speculator_arena.frontdoor.errors import QuotaExhausted, Refused
from speculator_arena.frontdoor.seal import TREE, seal_tree, staging_dir
from speculator_arena.frontdoor.sources import (
    copy_speculator_workspace,
    exact_commit,
    fetch_engine_repository,
    fetch_speculator_hub,
    target_bytes,
)
from speculator_arena.frontdoor.state import sql, transaction
from speculator_arena.protocol import load_protocol


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SpeculatorSource(_Strict):
    uri: str = ""
    revision: str = ""


class EngineSource(_Strict):
    inline: str | None = None
    repository: str | None = None
    commit: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> EngineSource:
        if bool(self.inline) == bool(self.repository):
            raise ValueError("give exactly one engine source: `inline` (base64 .tar.gz) or `repository` + `commit`")
        if self.repository and not self.commit:
            raise ValueError("engine.repository needs engine.commit (an exact 40-hex commit)")
        return self


class Solution(_Strict):
    method: str = ""
    kind: str


class SubmissionRequest(_Strict):
    task_id: str
    split: Literal["dev", "test"]
    speculator: SpeculatorSource | None = None
    engine: EngineSource
    solution: Solution


def parse(body: bytes) -> SubmissionRequest:
    """The request body as a section-2 submission, or a Refused naming what is wrong."""
    proto = load_protocol()
    try:
        doc = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise Refused(f"malformed JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise Refused("the submission must be a JSON object (protocol section 2)")
    inline = (doc.get("engine") or {}).get("inline") if isinstance(doc.get("engine"), dict) else None
    if isinstance(inline, str) and len(inline) > proto.submission.inline_engine_max_chars:
        raise Refused(
            f"inline engine is {len(inline):,} characters, over the limit of "
            f"{proto.submission.inline_engine_max_chars:,}",
            status=413,
        )
    try:
        req = SubmissionRequest.model_validate(doc)
    except ValidationError as exc:
        errs = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'body'}: {e['msg']}" for e in exc.errors()[:5])
        raise Refused(f"the submission does not follow protocol section 2: {errs}", status=422) from exc
    if req.task_id not in proto.tasks:
        raise Refused(f"unknown task {req.task_id!r}; tasks: {sorted(proto.tasks)}", status=422)
    if req.solution.kind not in proto.submission.kinds:
        raise Refused(f"unknown solution.kind {req.solution.kind!r}; kinds: {list(proto.submission.kinds)}", status=422)
    if req.engine.commit is not None:
        exact_commit(req.engine.commit, "engine.commit")
    spec = req.speculator
    if spec and spec.uri and not spec.uri.startswith("workspace:"):
        exact_commit(spec.revision, "speculator.revision")
    return req


def _check_quota(con, wh, account: Account, req: SubmissionRequest) -> None:
    q = quotas.summary(con, wh, account.account_id, account.kind, req.task_id, req.split)
    if q["left"] <= 0:
        raise QuotaExhausted(
            f"quota used: {q['used']} of {q['limit']} {req.split} evaluations on {req.task_id} "
            f"for a {account.kind.replace('_', ' ')} account (protocol section 8)"
        )


def _stage_engine(req: SubmissionRequest, work: Path) -> str:
    sub = load_protocol().submission
    max_bytes = sub.repository_engine_max_mib * 2**20
    raw = work / "engine"
    if req.engine.inline:
        try:
            data = base64.b64decode(req.engine.inline, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise Refused(f"engine.inline is not base64: {exc}") from exc
        extract_engine(data, raw, max_bytes)
        source = "inline"
    else:
        fetch_engine_repository(req.engine.repository, req.engine.commit, raw, max_bytes)
        source = f"{req.engine.repository}@{req.engine.commit}"
    root = engine_root(raw)
    (work / "engine-sealed").mkdir()
    root.rename(work / "engine-sealed" / TREE)
    return source


def _stage_speculator(req: SubmissionRequest, work: Path, home) -> str | None:
    spec = req.speculator
    if spec is None or not spec.uri:
        return None
    proto = load_protocol()
    max_bytes = int(proto.submission.speculator_max_share_of_target_bytes * target_bytes(req.task_id, home))
    dest = work / "speculator-sealed" / TREE
    dest.parent.mkdir()
    if spec.uri.startswith("workspace:"):
        copy_speculator_workspace(spec.uri, dest, max_bytes, list(proto.submission.speculator_allowed_files))
        return spec.uri
    fetch_speculator_hub(spec.uri, spec.revision, dest, max_bytes)
    return f"hf:{spec.uri}@{spec.revision}"


def submit(con, wh, account: Account, body: bytes) -> dict:
    """Accept a submission or raise Refused; returns the accepted submission's row."""
    from speculator_arena.runners.spec import new_evaluation_id

    req = parse(body)
    _check_quota(con, wh, account, req)
    home = wh.home
    work = Path(tempfile.mkdtemp(prefix=f"intake-{os.getpid()}-", dir=staging_dir(home)))
    try:
        engine_source = _stage_engine(req, work)
        speculator_source = _stage_speculator(req, work, home)
        engine_digest, engine_dir = seal_tree(work / "engine-sealed", "engine", engine_source, home)
        spec_digest = spec_dir = None
        if speculator_source:
            spec_digest, spec_dir = seal_tree(work / "speculator-sealed", "speculator", speculator_source, home)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    row = {
        "submission_id": f"sub-{uuid.uuid4().hex[:16]}",
        "evaluation_id": new_evaluation_id(req.task_id),
        "account_id": account.account_id,
        "task_id": req.task_id,
        "split": req.split,
        "protocol_version": load_protocol().version,
        "solution_kind": req.solution.kind,
        "solution_method": req.solution.method,
        "engine_source": engine_source,
        "engine_digest": engine_digest,
        "engine_dir": str(engine_dir),
        "speculator_source": speculator_source,
        "speculator_digest": spec_digest,
        "speculator_dir": str(spec_dir) if spec_dir else None,
        "accepted_at": time.time(),
    }
    with transaction(con):
        _check_quota(con, wh, account, req)
        con.execute(sql("insert_submission"), row)
    return row


def clean_staging(home=None) -> int:
    """Remove what a killed server process left in staging (never a submission: those are rows).

    A staging directory names the pid that made it; those of live processes (other workers
    still taking a submission) are left alone.
    """
    n = 0
    for d in staging_dir(home).iterdir():
        try:
            os.kill(int(d.name.split("-")[1]), 0)
            continue
        except (IndexError, ValueError, ProcessLookupError):
            pass
        except PermissionError:
            continue
        shutil.rmtree(d, ignore_errors=True)
        n += 1
    return n


def remove_unreferenced_seals(con, home=None, min_age_s: float = 3600.0) -> list[str]:
    """Sealed copies no submission names, older than `min_age_s`: what a killed server, or a
    submission that lost the race for the last quota slot after sealing, left behind.

    The age keeps a copy that an intake still in flight has just sealed (or found) and is about
    to name in its row.
    """
    from speculator_arena.frontdoor.seal import store_dir, unseal_and_remove

    store = store_dir(home)
    if not store.is_dir():
        return []
    named = {
        r[0]
        for r in con.execute(
            "SELECT engine_digest FROM submissions UNION "
            "SELECT speculator_digest FROM submissions WHERE speculator_digest IS NOT NULL"
        )
    }
    removed = []
    for entry in store.iterdir():
        if entry.name not in named and time.time() - entry.stat().st_mtime > min_age_s:
            unseal_and_remove(entry)
            removed.append(entry.name)
    return removed
