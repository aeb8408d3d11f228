"""Intake: a submission (protocol section 2) checked whole before anything is stored.

Order, so that a refusal stores nothing and uses no quota:
1. the JSON, bounded (`bounded.load_json`), against section 2 (task, split, `solution.kind`,
   exactly one engine source, exact commits, a repository URL without credentials and not an
   internal address literal (`urls.py`; kept normalized), bounded free text; a LowBArena task
   with an `artifact` and no speculator, a speculator task with no `artifact`), and the
   account's quota (its arena's, a cheap early refusal);
2. what is local is staged in a sandbox (`sandbox.py`: a child process, a fresh directory, OS
   limits, the intake's own user): an inline engine extracted and sealed there, a workspace
   speculator copied there (links not followed) and sealed, a workspace artifact copied there
   (a link or a pickle refuses it), its headers read and sealed (`artifacts.py`), all before
   any engine code could run;
3. in one `BEGIN IMMEDIATE` transaction: the quota counted again, the sealed trees moved into
   the content-addressed store (`seal.store`; identical bytes share one copy) and the row
   inserted. Only a committed row is a submission; the sandbox is removed whatever happened.
4. what needs the network (an engine repository, a hub speculator or artifact) is not fetched in the
   request: the row is inserted as `fetching` (it counts in the quota; the queue never runs
   it), and the fetch worker (`fetcher.py`) fetches it in a sandbox of its own, then makes the
   row `accepted` with its digests, or `refused` with the reason (its quota refunded, its
   stored copies removed unless another submission names them).
A server killed at any step leaves either no row or a whole one; staging leftovers and old
unnamed sealed copies are removed when the API starts.

About 550 lines, kept whole: the order above is the security argument, and one module shows it
from the first check to the commit (the sandbox, the fetch worker, the store and what an artifact
may hold, `artifacts.py`, are their own).
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import time
import uuid
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from speculator_arena import settings
from speculator_arena.frontdoor import artifacts, quotas
from speculator_arena.frontdoor.accounts import Account
from speculator_arena.frontdoor.bounded import load_json
from speculator_arena.frontdoor.errors import QuotaExhausted, scrub, server_paths
from speculator_arena.frontdoor.sandbox import Limits, Sandbox
from speculator_arena.frontdoor.sources import (
    copy_speculator_workspace,
    copy_workspace,
    exact_commit,
    hub_repository,
    hub_target_bytes,
    local_target_bytes,
    workspace_path,
)
from speculator_arena.frontdoor.state import sql, staging_dir, transaction
from speculator_arena.frontdoor.urls import fetch_allow, parse_repository_url, refuse_internal_literal
from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.lowb import is_lowb_task, load_lowb_protocol
from speculator_arena.rules.status import ACCEPTED, FETCHING, REFUSED
from speculator_arena.sealed import archive
from speculator_arena.sealed.refusal import Refused, echo
from speculator_arena.sealed.store import TREE, remove_sealed, store, store_dir
from speculator_arena.sealed.trees import remove_tree
from speculator_arena.settings import arena_home

METHOD_CHARS = 200  # solution.method: free text, one line
INLINE_WALL_S = 120.0  # one inline engine's extraction and seal, end to end
INLINE_CPU_S = 60
INTAKE_MEMORY = 1 << 30  # the child's address space: far above what a bounded archive needs
FETCH_MEMORY = 2 << 30  # git and the hub client, with their threads


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SpeculatorSource(_Strict):
    uri: str = Field("", max_length=512)
    revision: str = Field("", max_length=64)


class ArtifactSource(SpeculatorSource):
    """LowBArena's quantized checkpoint: `workspace:/DIR`, or a hub repository at an exact revision."""


def _from_hub(src: SpeculatorSource | None) -> bool:
    return bool(src and src.uri and not src.uri.startswith("workspace:"))


def _from_workspace(src: SpeculatorSource | None) -> bool:
    return bool(src and src.uri.startswith("workspace:"))


def _source_label(src: SpeculatorSource | None) -> str | None:
    """How a row and a seal's manifest name a checkpoint's source."""
    if _from_hub(src):
        return f"hf:{src.uri}@{src.revision}"
    return src.uri if _from_workspace(src) else None


class EngineSource(_Strict):
    inline: str | None = None
    repository: str | None = Field(None, max_length=2000)
    commit: str | None = Field(None, max_length=64)

    @model_validator(mode="after")
    def _one_source(self) -> EngineSource:
        if bool(self.inline) == bool(self.repository):
            raise ValueError("give exactly one engine source: `inline` (base64 .tar.gz) or `repository` + `commit`")
        if self.repository and not self.commit:
            raise ValueError("engine.repository needs engine.commit (an exact 40-hex commit)")
        return self


class Solution(_Strict):
    method: str = Field("", max_length=METHOD_CHARS)
    kind: str = Field(max_length=32)


class SubmissionRequest(_Strict):
    task_id: str = Field(max_length=64)
    split: Literal["dev", "test"]
    speculator: SpeculatorSource | None = None
    artifact: ArtifactSource | None = None  # LowBArena tasks only
    engine: EngineSource
    solution: Solution

    @property
    def from_hub(self) -> bool:
        return _from_hub(self.speculator)

    @property
    def from_workspace(self) -> bool:
        return _from_workspace(self.speculator)

    @property
    def artifact_from_workspace(self) -> bool:
        return _from_workspace(self.artifact)


def repo_schemes() -> tuple[str, ...]:
    """URL schemes an engine repository may use; operators may add some (tests add `file`)."""
    return ("https", *(s.lower() for s in settings.listed("ARENA_ENGINE_REPO_SCHEMES", ",")))


def parse(body: bytes) -> SubmissionRequest:
    """The request body as a section-2 submission, or a Refused naming what is wrong."""
    proto = load_protocol()
    doc = load_json(body)
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
        errs = "; ".join(
            f"{echo('.'.join(map(str, e['loc'])) or 'body', 80)}: {e['msg']}"[:200] for e in exc.errors()[:5]
        )
        raise Refused(f"the submission does not follow protocol section 2: {errs}", status=422) from exc
    if is_lowb_task(req.task_id):
        _check_lowb_fields(req)
    else:
        _check_speculator_fields(req, proto)
    if req.engine.commit is not None:
        exact_commit(req.engine.commit, "engine.commit")
    if req.engine.repository is not None:  # kept normalized; an internal address literal refused now
        repo = parse_repository_url(req.engine.repository, repo_schemes())
        refuse_internal_literal(repo, fetch_allow())
        req.engine.repository = repo.url
    return req


def _check_speculator_fields(req: SubmissionRequest, proto) -> None:
    """A speculator-arena task: known, a known kind, no `artifact`, a hub speculator at a commit."""
    if req.task_id not in proto.tasks:
        tasks = sorted(proto.tasks) + sorted(load_lowb_protocol().tasks)
        raise Refused(f"unknown task {echo(req.task_id)}; tasks: {tasks}", status=422)
    if req.artifact is not None:
        raise Refused(
            f"`artifact` is a LowBArena field; {echo(req.task_id)} is a speculator-arena task "
            "(submit a speculator, or name a LowBArena task)",
            status=422,
        )
    if req.solution.kind not in proto.submission.kinds:
        raise Refused(
            f"unknown solution.kind {echo(req.solution.kind)}; kinds: {list(proto.submission.kinds)}", status=422
        )
    if req.from_hub:
        hub_repository(req.speculator.uri)
        exact_commit(req.speculator.revision, "speculator.revision")


def _check_lowb_fields(req: SubmissionRequest) -> None:
    """A LowBArena task: in the LowB protocol in force, an `artifact` (a workspace or a hub
    repository at a commit), no speculator, a kind that labels a quantization."""
    lowb = load_lowb_protocol()
    if req.task_id not in lowb.tasks:
        raise Refused(f"unknown task {echo(req.task_id)}; LowBArena tasks: {sorted(lowb.tasks)}", status=422)
    artifacts.lowb_field_refusal(req.speculator is not None, req.solution.kind)
    if not req.artifact or not req.artifact.uri:
        raise Refused(
            'a LowBArena submission needs `artifact`: the quantized checkpoint, as {"uri": "workspace:/DIR"} '
            'or {"uri": "owner/name", "revision": "<40-hex commit>"}',
            status=422,
        )
    if _from_hub(req.artifact):
        hub_repository(req.artifact.uri, "artifact")
        exact_commit(req.artifact.revision, "artifact.revision")


def _check_quota(con, wh, account: Account, req: SubmissionRequest) -> None:
    q = quotas.summary(con, wh, account.account_id, account.kind, req.task_id, req.split)
    if q["left"] <= 0:
        raise QuotaExhausted(
            f"quota used: {q['used']} of {q['limit']} {req.split} evaluations on {req.task_id} "
            f"for a {account.kind.replace('_', ' ')} account (protocol section 8)"
        )


def _engine_bytes() -> int:
    return load_protocol().submission.repository_engine_max_mib * 2**20


def _speculator_bytes(task_id: str, home) -> int | None:
    """A speculator's bound (a share of the target's bytes); None: the target is not prepared
    here, and the fetch worker reads its size from the hub."""
    target = local_target_bytes(task_id, home)
    share = load_protocol().submission.speculator_max_share_of_target_bytes
    return None if target is None else int(share * target)


def _inline_archive(req: SubmissionRequest) -> bytes:
    try:
        return base64.b64decode(req.engine.inline, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise Refused(f"engine.inline is not base64: {exc}") from exc


def workspace_roots() -> list[Path]:
    """Operator-approved workspaces (`ARENA_WORKSPACES`, colon-separated directories)."""
    return [Path(os.path.abspath(p)) for p in settings.listed("ARENA_WORKSPACES", ":")]


def _copy_workspace(uri: str, sandbox: Sandbox, max_bytes: int) -> None:
    allowed = list(load_protocol().submission.speculator_allowed_files)
    copy_speculator_workspace(uri, workspace_roots(), sandbox.dir / "speculator-sealed" / TREE, max_bytes, allowed)


def _copy_artifact(uri: str, sandbox: Sandbox, max_bytes: int) -> None:
    """A workspace artifact copied into the sandbox (a link or a pickle in it refuses it whole)."""
    dest = sandbox.dir / "artifact-sealed" / TREE
    refuse = artifacts.workspace_refusal
    copy_workspace(uri, workspace_roots(), dest, max_bytes, artifacts.ALLOWED_FILES, what="artifact", refuse=refuse)


def _stage_locally(req: SubmissionRequest, sandbox: Sandbox, home, sources: dict, artifact_bytes, started) -> None:
    """The inline engine extracted, the workspace speculator and artifact copied, all checked and
    sealed, in `sandbox`. `artifact_bytes`: the artifact's bound when it is copied now."""
    job: dict = dict(sources)
    file_size = hash_s = 0
    if req.engine.inline:
        job["engine"] = {"inline": True, "max_bytes": _engine_bytes(), "max_members": archive.MAX_MEMBERS}
        file_size = _engine_bytes()
    if req.from_workspace and _speculator_bytes(req.task_id, home) is not None:
        max_bytes = _speculator_bytes(req.task_id, home)
        _copy_workspace(req.speculator.uri, sandbox, max_bytes)
        job["speculator"] = {"staged": {"max_bytes": max_bytes}}
        file_size = max(file_size, max_bytes)
    if req.artifact_from_workspace and artifact_bytes is not None:
        _copy_artifact(req.artifact.uri, sandbox, artifact_bytes)
        job["artifact"] = {"staged": {"max_bytes": artifact_bytes}}
        hash_s = artifacts.hash_seconds(artifact_bytes)
    limits = Limits(INLINE_WALL_S + hash_s, INLINE_CPU_S + hash_s, INTAKE_MEMORY, file_size + 2**20)
    sandbox.run(job, _inline_archive(req) if req.engine.inline else None, limits, started=started)


def _fetch_spec(req: SubmissionRequest, workspace_now: bool, artifact_now: bool) -> str | None:
    """What the fetch worker is to fetch (JSON), or None when everything was staged in the request."""
    artifact_later = bool(req.artifact) and not artifact_now
    if not (req.engine.repository or req.from_hub or (req.from_workspace and not workspace_now) or artifact_later):
        return None
    engine = {"repository": req.engine.repository, "commit": req.engine.commit}
    speculator = {"uri": req.speculator.uri, "revision": req.speculator.revision} if req.speculator else None
    spec = {"engine": engine if req.engine.repository else None, "speculator": None if workspace_now else speculator}
    if artifact_later:
        spec["artifact"] = {"uri": req.artifact.uri, "revision": req.artifact.revision}
    return json.dumps(spec)


def _protocol_version(task_id: str) -> int:
    """The version the submission was taken under: its arena's, in force now."""
    return load_lowb_protocol().version if is_lowb_task(task_id) else load_protocol().version


def submit(con, wh, account: Account, body: bytes, started=None) -> dict:
    """Accept a submission or raise Refused; returns its row (`intake_status` 'accepted', or
    'fetching' when the fetch worker has yet to fetch part of it). `started(pid)`: the intake
    child's pid, when one runs."""
    from speculator_arena.runners.spec import new_evaluation_id

    req = parse(body)
    _check_quota(con, wh, account, req)
    home = wh.home
    sources = {
        "engine_source": "inline" if req.engine.inline else f"{req.engine.repository}@{req.engine.commit}",
        "speculator_source": _source_label(req.speculator),
        "artifact_source": _source_label(req.artifact),
    }
    # A workspace speculator is checked against its target's bytes: when the target is not
    # prepared here, those come from the hub, so the fetch worker copies it (no network here).
    # An artifact is bounded by the target's bytes the same way.
    workspace_now = req.from_workspace and _speculator_bytes(req.task_id, home) is not None
    if req.from_workspace:
        workspace_path(req.speculator.uri, workspace_roots())
    artifact_bytes = artifacts.max_bytes(req.task_id, home) if req.artifact else None
    artifact_now = req.artifact_from_workspace and artifact_bytes is not None
    if req.artifact_from_workspace:
        workspace_path(req.artifact.uri, workspace_roots(), "artifact")
    local = bool(req.engine.inline or workspace_now or artifact_now)
    with Sandbox(staging_dir(home)) if local else contextlib.nullcontext() as sandbox:
        if local:
            _stage_locally(req, sandbox, home, sources, artifact_bytes if artifact_now else None, started)
        fetch_spec = _fetch_spec(req, workspace_now, artifact_now)
        row = {
            "submission_id": f"sub-{uuid.uuid4().hex[:16]}",
            "evaluation_id": new_evaluation_id(req.task_id),
            "account_id": account.account_id,
            "task_id": req.task_id,
            "split": req.split,
            "protocol_version": _protocol_version(req.task_id),
            "solution_kind": req.solution.kind,
            "solution_method": req.solution.method,
            **sources,
            "engine_digest": "",
            "engine_dir": "",
            "speculator_digest": None,
            "speculator_dir": None,
            "artifact_digest": None,
            "artifact_dir": None,
            "accepted_at": time.time(),
            "intake_status": FETCHING if fetch_spec else ACCEPTED,
            "fetch_spec": fetch_spec,
        }
        with transaction(con):
            _check_quota(con, wh, account, req)
            if req.engine.inline:
                digest, tree = store(sandbox.dir / "engine-sealed", home)
                row.update(engine_digest=digest, engine_dir=str(tree))
            if workspace_now:
                digest, tree = store(sandbox.dir / "speculator-sealed", home)
                row.update(speculator_digest=digest, speculator_dir=str(tree))
            if artifact_now:
                digest, tree = store(sandbox.dir / "artifact-sealed", home)
                row.update(artifact_digest=digest, artifact_dir=str(tree))
            con.execute(sql("insert_submission"), row)
    return row


def fetch_limits(deadline_s: float, file_size: int) -> Limits:
    return Limits(
        wall_s=deadline_s + 30, cpu_s=int(deadline_s), address_space=FETCH_MEMORY, file_size=file_size, open_files=1024
    )


def _fetch_job(row, spec: dict, home, deadline: float) -> tuple[dict, Limits]:
    """The child's job for what a fetching row names, and its limits: the largest file it may
    write, and time to hash an artifact on top of the fetch's deadline."""
    job: dict = {k: row[k] for k in ("engine_source", "speculator_source", "artifact_source")}
    file_size = engine_bytes = _engine_bytes()
    if spec.get("engine"):
        job["engine"] = {
            "max_bytes": engine_bytes,
            "repository": {
                "url": spec["engine"]["repository"],
                "commit": spec["engine"]["commit"],
                "schemes": list(repo_schemes()),
                "allow": fetch_allow(),
                "deadline_s": deadline,
            },
        }
    if spec.get("speculator"):
        job["speculator"], written = _speculator_job(row["task_id"], spec["speculator"], home)
        file_size = max(file_size, written)
    hash_s = 0
    if spec.get("artifact"):
        job["artifact"], written, hashed = _artifact_job(row["task_id"], spec["artifact"], home)
        file_size, hash_s = max(file_size, written), artifacts.hash_seconds(hashed)
    return job, fetch_limits(deadline + hash_s, file_size + 2**20)


def _speculator_job(task_id: str, speculator: dict, home) -> tuple[dict, int]:
    """A speculator's part of a fetch job, and the largest file the child may write for it."""
    proto = load_protocol()
    allowed = list(proto.submission.speculator_allowed_files)
    share = proto.submission.speculator_max_share_of_target_bytes
    task = proto.tasks[task_id]
    max_bytes = _speculator_bytes(task_id, home)
    if speculator["uri"].startswith("workspace:"):
        if max_bytes is None:  # the fetch worker's thread may wait on the (operators') hub
            max_bytes = int(share * hub_target_bytes(task.model, task.revision, allowed))
        return {"staged": {"max_bytes": max_bytes}}, max_bytes
    hub = {
        "repo": speculator["uri"],
        "revision": speculator["revision"],
        "max_bytes": max_bytes,  # None: the child reads the target's size from the hub
        "target_model": task.model,
        "target_revision": task.revision,
        "share": share,
        "allowed": allowed,
    }
    return {"hub": hub}, max_bytes or 64 * 2**30


def _artifact_job(task_id: str, artifact: dict, home) -> tuple[dict, int, int]:
    """An artifact's part of a fetch job: (its part, the largest file the child may write for it,
    the most bytes it hashes). Its bound is the target's bytes, from the hub when not prepared here."""
    task = load_lowb_protocol().task(task_id)
    max_bytes = artifacts.max_bytes(task_id, home)
    if artifact["uri"].startswith("workspace:"):
        if max_bytes is None:  # the fetch worker's thread may wait on the (operators') hub
            max_bytes = artifacts.hub_max_bytes(task.model, task.revision)
        return {"staged": {"max_bytes": max_bytes}}, 0, max_bytes
    hub = {
        "repo": artifact["uri"],
        "revision": artifact["revision"],
        "max_bytes": max_bytes,  # None: the child reads the target's size from the hub
        "target_model": task.model,
        "target_revision": task.revision,
    }
    return {"hub": hub}, max_bytes or 64 * 2**30, max_bytes or 64 * 2**30


def fetch_submission(con, wh, submission_id: str, owner: str, started=None, stopping=lambda: False) -> str:
    """Fetch what a `fetching` submission names, in a sandbox; the row becomes `accepted` with
    its digests, or `refused` with the reason. Returns the new intake status. A fetch cut short
    because its API process is stopping (`stopping()`) is released for the next worker instead."""
    home = wh.home
    row = con.execute(sql("submission"), (submission_id,)).fetchone()
    if row is None or row["intake_status"] != FETCHING or row["fetch_owner"] != owner:
        return row["intake_status"] if row else "missing"
    spec = json.loads(row["fetch_spec"])
    deadline = settings.number("ARENA_FETCH_DEADLINE")
    try:
        job, limits = _fetch_job(row, spec, home, deadline)
    except Refused as exc:  # the target's size, read from the hub, is not to be had
        refuse_fetching(con, home, submission_id, exc.reason, exc.status)
        return REFUSED
    try:
        with Sandbox(staging_dir(home)) as sandbox:
            if "staged" in job.get("speculator", {}):
                _copy_workspace(spec["speculator"]["uri"], sandbox, job["speculator"]["staged"]["max_bytes"])
            if "staged" in job.get("artifact", {}):
                _copy_artifact(spec["artifact"]["uri"], sandbox, job["artifact"]["staged"]["max_bytes"])
            sandbox.run(job, None, limits, started=started)
            with transaction(con):
                current = con.execute(sql("fetch_claim_of"), (submission_id,)).fetchone()
                if current["intake_status"] != FETCHING or current["fetch_owner"] != owner:
                    return current["intake_status"]
                update = {
                    "submission_id": submission_id,
                    "engine_digest": row["engine_digest"],
                    "engine_dir": row["engine_dir"],
                    "speculator_digest": row["speculator_digest"],
                    "speculator_dir": row["speculator_dir"],
                    "artifact_digest": row["artifact_digest"],
                    "artifact_dir": row["artifact_dir"],
                }
                if spec.get("engine"):
                    digest, tree = store(sandbox.dir / "engine-sealed", home)
                    update.update(engine_digest=digest, engine_dir=str(tree))
                if spec.get("speculator"):
                    digest, tree = store(sandbox.dir / "speculator-sealed", home)
                    update.update(speculator_digest=digest, speculator_dir=str(tree))
                if spec.get("artifact"):
                    digest, tree = store(sandbox.dir / "artifact-sealed", home)
                    update.update(artifact_digest=digest, artifact_dir=str(tree))
                con.execute(sql("fetched_submission"), update)
        return ACCEPTED
    except Refused as exc:
        if stopping():
            con.execute(sql("release_fetch"), {"submission_id": submission_id, "owner": owner})
            return FETCHING
        refuse_fetching(con, home, submission_id, exc.reason, exc.status)
        return REFUSED
    except Exception as exc:  # the arena's side failed: refused and refunded, never left fetching
        refuse_fetching(con, home, submission_id, f"the arena could not fetch it ({type(exc).__name__})", 500)
        raise


def refuse_fetching(con, home, submission_id: str, reason: str, code: int) -> None:
    """A fetch that failed: the row refused (its quota refunded), and what it alone had in the
    store (an inline engine sealed at the request) removed."""
    reason = scrub(reason, server_paths(arena_home(home)))  # the owner reads it: no server paths
    with transaction(con):
        row = con.execute(sql("submission"), (submission_id,)).fetchone()
        con.execute(sql("refused_submission"), {"submission_id": submission_id, "reason": reason, "code": code})
        named = {r[0] for r in con.execute(sql("named_digests"))}
        for digest in (row["engine_digest"], row["speculator_digest"], row["artifact_digest"]) if row else ():
            if digest and digest not in named:
                remove_sealed(store_dir(home) / digest)


def clean_staging(home=None) -> int:
    """Remove what a killed server process left in staging (never a submission: those are rows).

    A staging directory names the pid that made it; those of live processes (other workers
    still taking a submission) are left alone. Never raises: a leftover that cannot be removed
    is reported, and cannot stop the API from starting.
    """
    n = 0
    try:
        entries = list(staging_dir(home).iterdir())
    except OSError as exc:
        print(f"[arena api] staging cannot be listed: {exc}", flush=True)
        return 0
    for d in entries:
        try:
            os.kill(int(d.name.split("-")[1]), 0)
            continue
        except (IndexError, ValueError, ProcessLookupError):
            pass
        except PermissionError:
            continue
        try:
            remove_tree(d)
            n += 1
        except (OSError, RecursionError) as exc:
            print(f"[arena api] staging leftover {d.name} not removed: {exc}", flush=True)
    return n


def remove_unreferenced_seals(con, home=None, min_age_s: float = 3600.0) -> list[str]:
    """Sealed copies no live submission names, older than `min_age_s`: what a killed server left
    between moving a copy into the store and committing its row.

    Inside a transaction, so no intake can be between those two steps meanwhile; the age keeps
    a copy that a fetch worker of another process is about to name.
    """
    store = store_dir(home)
    if not store.is_dir():
        return []
    removed = []
    with transaction(con):
        named = {r[0] for r in con.execute(sql("named_digests"))}
        for entry in store.iterdir():
            if entry.name not in named and time.time() - entry.lstat().st_mtime > min_age_s:
                remove_sealed(entry)
                removed.append(entry.name)
    return removed
