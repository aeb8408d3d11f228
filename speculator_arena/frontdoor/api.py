"""The arena's HTTP API (FastAPI on uvicorn): `arena api`, the same behind a proxy in production.

- `GET /api/protocol[?version=N]`: the protocol document (`arena protocol --json`), with an ETag.
- `POST /api/submissions`: a section-2 submission with `Authorization: Bearer <token>`.
- `GET /api/submissions/{id}`: the owner's status, progress and evaluation link.
- `GET /api/quota?task=&split=`: the caller's quota (a LowBArena task: LowBArena's quotas).
- `GET /api/board?task=&split=`: the public ranking as JSON.
- `GET /api/history?task=&split=&account=` (or `&label=` for a reference): one entry's history.
- `GET /api/evaluations/{id}/requests.parquet[?protocol=N]`: a dev evaluation's per-request rows (403 for test).
- `GET /api/evaluations/{id}/speculation_profile.json[?protocol=N]`: a dev evaluation's speculation profile (403 for test).
- `POST /register`: a participant token, only while the operators have opened registration.
Failed authentications are limited per client address (`authlimit.py`: 429 with Retry-After).
Errors are JSON `{"error": reason}` with the status code (4xx, a short reason without the
server's paths); OpenAPI docs are at `/docs`.

Every route's input is bounded (`bounded.BodyLimit`: heads, bodies; `bounded.load_json`:
depth and text). The handlers do their work (SQLite, scoring) in FastAPI's thread pool, one
SQLite connection per request; an intake's extraction runs in a child process, at most
`INTAKES_AT_ONCE` at a time (waiting requests hold no thread), and nothing in a request waits
on a host a participant named: repositories are fetched by the fetch worker (`fetcher.py`).
"""

from __future__ import annotations

import sys
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI, Header, Query, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response

from speculator_arena.frontdoor import accounts
from speculator_arena.frontdoor.authlimit import FailedAuthLimit
from speculator_arena.frontdoor.bounded import DEFAULT_BODY_BYTES, BodyLimit, load_json
from speculator_arena.frontdoor.errors import NotFound, scrub, server_paths
from speculator_arena.frontdoor.state import connect
from speculator_arena.rules.status import FETCHING, QUEUED
from speculator_arena.runners.privileges import recorded_refusal
from speculator_arena.sealed.refusal import Refused
from speculator_arena.warehouse import Warehouse, arena_home

# Room for the JSON around the largest inline engine the protocol allows.
BODY_SLACK = 64 * 1024
INTAKES_AT_ONCE = 4
SPLIT = "^(dev|test)$"
ARENAS = "^(speculator|lowbarena)$"


def body_limit(method: str, path: str) -> int:
    """The most body bytes a route takes: the submission's is the protocol's inline limit."""
    if method == "POST" and path == "/api/submissions":
        from speculator_arena.protocol import load_protocol

        return load_protocol().submission.inline_engine_max_chars + BODY_SLACK
    return DEFAULT_BODY_BYTES


def create_app(home=None) -> FastAPI:
    home = arena_home(home)
    state: dict = {}  # the board's memo (made at the first board request) and the fetch worker
    intake_slots = anyio.CapacityLimiter(INTAKES_AT_ONCE)
    paths = server_paths(home)
    auth_limit = FailedAuthLimit.from_settings()

    @asynccontextmanager
    async def lifespan(_app):
        from speculator_arena.frontdoor.fetcher import Fetcher
        from speculator_arena.frontdoor.intake import clean_staging, remove_unreferenced_seals

        # Nothing a killed server or a submission left can stop the API from starting.
        try:
            clean_staging(home)
            con = connect(home)
            try:
                remove_unreferenced_seals(con, home)
            finally:
                con.close()
        except Exception as exc:
            print(f"[arena api] start-up clean-up incomplete: {type(exc).__name__}: {exc}", file=sys.stderr)
        state["fetcher"] = Fetcher(home)
        state["fetcher"].start()
        try:
            yield
        finally:
            state["fetcher"].stop()

    app = FastAPI(
        title="SpeculatorArena",
        version="1",
        lifespan=lifespan,
        description="Submit speculators and engines, follow their evaluations, read the board.",
    )
    app.add_middleware(BodyLimit, limit=body_limit)

    @app.exception_handler(Refused)
    async def refused(_req, exc: Refused):
        headers = getattr(exc, "headers", None)
        return JSONResponse({"error": scrub(exc.reason, paths)}, status_code=exc.status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_req, exc: RequestValidationError):
        errs = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}"[:200] for e in exc.errors()[:5])
        return JSONResponse({"error": scrub(errs, paths)}, status_code=422)

    def _with_db(fn, *args):
        con = connect(home)
        try:
            return fn(con, *args)
        finally:
            con.close()

    def _account(con, request: Request, authorization: str | None) -> accounts.Account:
        """The caller's account, its failures counted against its address (`authlimit.py`)."""
        return auth_limit.authenticate(con, authorization, request.client.host if request.client else None)

    @app.get("/api/protocol", summary="The protocol version in force (or any published one)")
    def protocol(request: Request, version: int | None = Query(None), arena: str = Query("speculator", pattern=ARENAS)):
        from speculator_arena.protocol import available_versions, load_protocol
        from speculator_arena.protocol.lowb import lowb_available_versions, lowb_protocol_document

        if arena == "lowbarena":  # the second arena's rules, in their own version series
            if version is not None and version not in lowb_available_versions():
                raise NotFound(f"no LowBArena protocol {version}; published: {lowb_available_versions()}")
            doc = lowb_protocol_document(version)
        else:
            if version is not None and version not in available_versions():
                raise NotFound(f"no protocol version {version}; published: {available_versions()}")
            doc = load_protocol(version).as_document()
        etag = f'"{doc["digest"]}"'
        if request.headers.get("if-none-match") == etag:
            return Response(status_code=304, headers={"ETag": etag})
        return JSONResponse(doc, headers={"ETag": etag, "Cache-Control": "public, max-age=60"})

    @app.post("/api/submissions", status_code=201, summary="Submit (protocol section 2)")
    async def submit(request: Request, authorization: str | None = Header(None)):
        from speculator_arena.frontdoor.intake import submit as intake

        account = await run_in_threadpool(_with_db, _account, request, authorization)
        refusal = recorded_refusal(home)  # the queue's worker cannot run engines unprivileged
        if refusal:
            raise Refused(f"the arena cannot run submissions now: {refusal}", status=503)
        body = await request.body()  # bounded by BodyLimit as it streams
        row = await anyio.to_thread.run_sync(
            _with_db, lambda con: intake(con, Warehouse(home), account, body), limiter=intake_slots
        )
        if row["intake_status"] == FETCHING and "fetcher" in state:
            state["fetcher"].wake()
        return {
            "submission_id": row["submission_id"],
            "evaluation_id": row["evaluation_id"],
            "status": FETCHING if row["intake_status"] == FETCHING else QUEUED,
            "engine_digest": row["engine_digest"] or None,
            "speculator_digest": row["speculator_digest"],
            "artifact_digest": row["artifact_digest"],
        }

    @app.get("/api/submissions/{submission_id}", summary="The owner's view of a submission")
    def submission(submission_id: str, request: Request, authorization: str | None = Header(None)):
        from speculator_arena.frontdoor.queue import submission_status

        def look(con):
            account = _account(con, request, authorization)
            found = submission_status(con, Warehouse(home), submission_id, account.account_id)
            if found is None:
                raise NotFound(f"no submission {submission_id[:40]!r} of this account")
            return found

        return _with_db(look)

    @app.get("/api/quota", summary="The caller's quota use on a task and split")
    def quota(
        task: str,
        request: Request,
        split: str = Query("dev", pattern=SPLIT),
        authorization: str | None = Header(None),
    ):
        from speculator_arena.frontdoor.quotas import summary
        from speculator_arena.protocol import load_protocol
        from speculator_arena.protocol.lowb import is_lowb_task

        def look(con):
            account = _account(con, request, authorization)
            if task not in load_protocol().tasks and not is_lowb_task(task):
                raise NotFound(f"unknown task {task[:64]!r}")
            return summary(con, Warehouse(home), account.account_id, account.kind, task, split)

        return _with_db(look)

    @app.get("/api/board", summary="The public ranking of a task and split")
    def board(task: str, split: str = Query("test", pattern=SPLIT)):
        from speculator_arena.board.json_rows import board_json
        from speculator_arena.protocol import load_protocol
        from speculator_arena.protocol.lowb import is_lowb_task

        if is_lowb_task(task):  # LowBArena's board (board/lowb.py), scored from the raw rows
            from speculator_arena.board.lowb import lowb_board_json

            return lowb_board_json(home, task, split)
        if task not in load_protocol().tasks:
            raise NotFound(f"unknown task {task[:64]!r}")
        return board_json(_memo(), task, split)

    def _memo():
        if "board" not in state:  # one per app: scores are kept between requests, re-scored when changed
            from speculator_arena.board.memo import BoardMemo

            state["board"] = BoardMemo(home)
        return state["board"]

    @app.get("/api/history", summary="One entry's scored evaluations over time, with the regression flag")
    def history(
        task: str,
        split: str = Query("test", pattern=SPLIT),
        account: str | None = Query(None, max_length=200),
        label: str | None = Query(None, max_length=200),
    ):
        from speculator_arena.board.json_rows import history_json
        from speculator_arena.protocol import load_protocol

        if task not in load_protocol().tasks:
            raise NotFound(f"unknown task {task[:64]!r}")
        if (account is None) == (label is None):
            raise Refused("name one entry: account=<account id>, or label=<reference label>", status=422)
        return history_json(_memo(), task, split, account=account, label=label)

    @app.post("/register", status_code=201, summary="A participant token, while registration is open")
    async def register(request: Request):
        doc = load_json(await request.body())
        if not isinstance(doc, dict) or set(doc) != {"name"} or not isinstance(doc["name"], str):
            raise Refused('the body must be {"name": "<your name>"}', status=422)
        client = request.client.host if request.client else "unknown"
        account, token = await run_in_threadpool(_with_db, accounts.register, doc["name"], client)
        return {
            "account_id": account.account_id,
            "name": account.name,
            "kind": account.kind,
            "token": token,
            "note": "the token is shown once; the arena keeps only its hash",
        }

    # ---- the per-request export (issue 20): the board's read model, dev evaluations only ----
    @app.get(
        "/api/evaluations/{evaluation_id}/requests.parquet",
        summary="A dev evaluation's per-request rows as Parquet (test evaluations: 403)",
        response_class=Response,
    )
    def requests_parquet(evaluation_id: str, protocol: int | None = Query(None)):
        from speculator_arena.board.export import MEDIA_TYPE, ExportRefused, file_name
        from speculator_arena.board.export import requests_parquet as export
        from speculator_arena.protocol import available_versions

        if protocol is not None and protocol not in available_versions():
            raise NotFound(f"no protocol version {protocol}; published: {available_versions()}")
        try:
            body = export(home, evaluation_id, protocol)
        except ExportRefused as exc:
            raise Refused(exc.reason, status=exc.status) from None
        disposition = f'attachment; filename="{file_name(evaluation_id)}"'
        return Response(body, media_type=MEDIA_TYPE, headers={"Content-Disposition": disposition})

    # ---- the speculation profile (issue 35): the board's read model, dev evaluations only ----
    @app.get(
        "/api/evaluations/{evaluation_id}/speculation_profile.json",
        summary="A dev evaluation's speculation profile (Model-Optimizer schema 1.0; test evaluations: 403)",
        response_class=Response,
    )
    def speculation_profile(evaluation_id: str, protocol: int | None = Query(None)):
        from speculator_arena.board import profile
        from speculator_arena.board.export import ExportRefused, file_name
        from speculator_arena.protocol import available_versions

        if protocol is not None and protocol not in available_versions():
            raise NotFound(f"no protocol version {protocol}; published: {available_versions()}")
        try:
            body = profile.profile_json(profile.speculation_profile(home, evaluation_id, protocol))
        except ExportRefused as exc:
            raise Refused(exc.reason, status=exc.status) from None
        disposition = f'attachment; filename="{file_name(evaluation_id, profile.FILE_SUFFIX)}"'
        return Response(body, media_type=profile.MEDIA_TYPE, headers={"Content-Disposition": disposition})

    return app


def app_from_env() -> FastAPI:
    """uvicorn's factory (`arena api`): the app on `$ARENA_HOME`."""
    return create_app()
