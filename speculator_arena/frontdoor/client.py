"""The kit's client: `arena submit`, talking to the arena's API (`ARENA_URL`, `ARENA_TOKEN`).

It packs an engine directory as an inline `.tar.gz` (or names a repository at a commit), posts
the section-2 JSON (with a speculator, or for a LowBArena task a quantized checkpoint `artifact`,
named where the arena fetches it: a workspace directory on its cluster or a hub repository at a
commit), then follows the submission's status until its evaluation has ended and its row is on
the board.
"""

from __future__ import annotations

import base64
import sys
import time
from pathlib import Path

import httpx

from speculator_arena import settings
from speculator_arena.errors import ArenaError
from speculator_arena.rules.status import SUBMISSION_FINAL
from speculator_arena.sealed.archive import pack_engine


class SubmitError(RuntimeError, ArenaError):
    """The arena refused the submission, or could not be reached; the message says why."""


def _split_at(value: str, what: str) -> tuple[str, str]:
    if "@" not in value:
        raise SubmitError(f"{what} must be NAME@COMMIT (an exact 40-hex commit), not {value!r}")
    name, _, commit = value.rpartition("@")
    return name, commit


def build_submission(
    task: str,
    split: str,
    kind: str,
    method: str = "",
    engine: str | None = None,
    engine_repo: str | None = None,
    speculator: str | None = None,
    engine_archive: bytes | None = None,
    artifact: str | None = None,
) -> dict:
    """The JSON of protocol section 2: the engine as a directory, a `.tar.gz`'s bytes, or URL@COMMIT;
    a speculator or (LowBArena) an artifact as `workspace:/DIR` or REPO@COMMIT."""
    if sum(map(bool, (engine, engine_repo, engine_archive))) != 1:
        raise SubmitError("give exactly one engine: a directory (--engine DIR), a .tar.gz, or --engine-repo URL@COMMIT")
    if engine or engine_archive:
        src = {"inline": base64.b64encode(engine_archive or pack_engine(Path(engine))).decode()}
    else:
        url, commit = _split_at(engine_repo, "--engine-repo")
        src = {"repository": url, "commit": commit}
    doc = {"task_id": task, "split": split, "engine": src, "solution": {"method": method, "kind": kind}}
    if speculator:
        doc["speculator"] = _checkpoint_source(speculator, "--speculator")
    if artifact:
        doc["artifact"] = _checkpoint_source(artifact, "--artifact")
    return doc


def _checkpoint_source(value: str, what: str) -> dict:
    """`workspace:/DIR` (an absolute `/DIR` means the same: a directory of the arena's cluster, not
    of this machine) or a Hugging Face REPO@COMMIT."""
    if value.startswith("/"):
        value = f"workspace:{value}"
    if value.startswith("workspace:"):
        return {"uri": value, "revision": ""}
    repo, rev = _split_at(value, what)
    return {"uri": repo, "revision": rev}


class Client:
    def __init__(self, url: str | None = None, token: str | None = None, timeout: float = 600.0):
        self.url = (url or settings.get("ARENA_URL")).rstrip("/")
        self.token = token if token is not None else settings.get("ARENA_TOKEN")
        self.http = httpx.Client(
            base_url=self.url, timeout=timeout, headers={"Authorization": f"Bearer {self.token}"} if self.token else {}
        )

    def _call(self, method: str, path: str, **kw) -> dict:
        try:
            r = self.http.request(method, path, **kw)
        except httpx.HTTPError as exc:
            raise SubmitError(f"cannot reach the arena at {self.url}: {exc}") from exc
        try:
            body = r.json()
        except ValueError:
            body = {"error": r.text[:300]}
        if r.status_code >= 400:
            raise SubmitError(f"{r.status_code}: {body.get('error', body)}")
        return body

    def submit(self, doc: dict) -> dict:
        return self._call("POST", "/api/submissions", json=doc)

    def status(self, submission_id: str) -> dict:
        return self._call("GET", f"/api/submissions/{submission_id}")

    def board(self, task: str, split: str) -> dict:
        return self._call("GET", "/api/board", params={"task": task, "split": split})

    def follow(self, submission_id: str, poll_s: float = 5.0, say=None, timeout_s: float | None = None) -> dict:
        """Poll until the evaluation ends (or the fetch of what the submission names was refused);
        `say` gets each change of status or progress (`fetching`, `queued`, `running`, ...)."""
        say = say or (lambda m: print(m, file=sys.stderr, flush=True))
        seen, t0 = None, time.time()
        while True:
            s = self.status(submission_id)
            now = (s["status"], s.get("progress"), s.get("position"))
            if now != seen:
                where = f" (position {s['position']} in the queue)" if s.get("position") else ""
                say(
                    f"[{time.time() - t0:5.0f} s] {s['status']}{where}"
                    + (f": {s['progress']}" if s.get("progress") else "")
                    + (f": {s.get('refusal_status')} {s['refusal']}" if s.get("refusal") else "")
                )
                seen = now
            if s["status"] in SUBMISSION_FINAL:
                return s
            if timeout_s is not None and time.time() - t0 > timeout_s:
                raise SubmitError(f"submission {submission_id} still {s['status']} after {timeout_s:.0f} s")
            time.sleep(poll_s)

    def board_entry(self, status: dict) -> dict | None:
        """The submission's row on its task's board, once the evaluation has been scored."""
        board = self.board(status["task_id"], status["split"])
        for section in ("participants", "references"):
            for row in board[section]:
                if row["evaluation_id"] == status["evaluation_id"]:
                    return row
        return None
