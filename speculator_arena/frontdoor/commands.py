"""`arena api`, `arena accounts` and `arena submit` (`arena queue`: dagster_project/commands.py)."""

from __future__ import annotations

import argparse
import sys


def register(sub: argparse._SubParsersAction) -> None:
    a = sub.add_parser("api", help="serve the arena's HTTP API (uvicorn; put a proxy in front in production)")
    a.add_argument("--host", default="127.0.0.1")
    a.add_argument("--port", type=int, default=8000)
    a.add_argument("--workers", type=int, default=1)
    a.add_argument("--forwarded-allow-ips", default="127.0.0.1", help="proxies whose X-Forwarded-* headers are trusted")
    a.set_defaults(func=_api)

    acc = sub.add_parser("accounts", help="invite, revoke and list accounts; open or close registration")
    asub = acc.add_subparsers(dest="action", required=True)
    inv = asub.add_parser("invite", help="create an account and print its token (shown once)")
    inv.add_argument("name")
    inv.add_argument("--study-agent", action="store_true", help="an arena study agent (its own quota)")
    inv.set_defaults(func=_invite)
    rev = asub.add_parser("revoke", help="revoke an account and all its tokens")
    rev.add_argument("name")
    rev.set_defaults(func=_revoke)
    asub.add_parser("list", help="every account").set_defaults(func=_list)
    reg = asub.add_parser("registration", help="open or close POST /register")
    reg.add_argument("state", choices=("open", "closed", "status"))
    reg.set_defaults(func=_registration)

    s = sub.add_parser(
        "submit", help="submit an engine (and speculator, or LowBArena artifact) to the arena (ARENA_URL, ARENA_TOKEN)"
    )
    s.add_argument("--task", required=True)
    s.add_argument("--split", default="dev", choices=("dev", "test"))
    s.add_argument("--engine", help="engine directory (sent inline as a .tar.gz)")
    s.add_argument("--engine-repo", help="URL@COMMIT of an engine repository")
    s.add_argument("--speculator", help="Hugging Face REPO@COMMIT, or workspace:/DIR on the arena's cluster")
    s.add_argument(
        "--artifact",
        metavar="DIR",
        help="LowBArena: the quantized checkpoint, workspace:/DIR (or /DIR) on the arena's cluster, or REPO@COMMIT",
    )
    s.add_argument(
        "--kind", default="other", help="solution.kind: ngram, suffix, draft, eagle3, mtp, other (LowBArena: int8, ...)"
    )
    s.add_argument("--method", default="", help="solution.method, free text")
    s.add_argument("--url", default=None, help="the arena (default: $ARENA_URL)")
    s.add_argument("--no-wait", action="store_true", help="print the submission and return")
    s.add_argument("--poll", type=float, default=5.0)
    s.set_defaults(func=_submit)


def _api(args) -> int:
    import uvicorn

    from speculator_arena.frontdoor.bounded import MAX_HEAD_BYTES

    uvicorn.run(
        "speculator_arena.frontdoor.api:app_from_env",
        factory=True,
        host=args.host,
        port=args.port,
        workers=args.workers,
        proxy_headers=True,
        forwarded_allow_ips=args.forwarded_allow_ips,
        # h11, not httptools: h11 bounds a request head while it arrives (httptools reads any size)
        http="h11",
        h11_max_incomplete_event_size=MAX_HEAD_BYTES,
    )
    return 0


def _con():
    from speculator_arena.frontdoor.state import connect

    return connect()


def _invite(args) -> int:
    from speculator_arena.frontdoor.accounts import invite

    account, token = invite(_con(), args.name, "study_agent" if args.study_agent else "participant")
    print(f"account {account.name} ({account.kind}, {account.account_id})", file=sys.stderr)
    print("token (shown once; the arena keeps only its hash):", file=sys.stderr)
    print(token)
    return 0


def _revoke(args) -> int:
    from speculator_arena.frontdoor.accounts import revoke

    n = revoke(_con(), args.name)
    print(f"account {args.name} revoked ({n} token(s))")
    return 0


def _list(args) -> int:
    from speculator_arena.frontdoor.accounts import accounts
    from speculator_arena.printing import print_json

    print_json(accounts(_con()))
    return 0


def _registration(args) -> int:
    from speculator_arena.frontdoor.accounts import registration_open, set_registration

    con = _con()
    if args.state != "status":
        set_registration(con, args.state == "open")
    print(f"registration is {'open' if registration_open(con) else 'closed'}")
    return 0


def _submit(args) -> int:
    from speculator_arena.frontdoor.client import Client, SubmitError, build_submission
    from speculator_arena.printing import print_json
    from speculator_arena.rules.status import MEASURED, REFUSED, VOID

    try:
        doc = build_submission(
            args.task,
            args.split,
            args.kind,
            args.method,
            args.engine,
            args.engine_repo,
            args.speculator,
            artifact=args.artifact,
        )
        client = Client(args.url)
        got = client.submit(doc)
        print(f"accepted: submission {got['submission_id']}, evaluation {got['evaluation_id']}", file=sys.stderr)
        if args.no_wait:
            print_json(got)
            return 0
        final = client.follow(got["submission_id"], poll_s=args.poll)
        if final["status"] == REFUSED:
            raise SubmitError(f"{final.get('refusal_status')}: {final.get('refusal')}")
        entry = client.board_entry(final) if final["status"] != VOID else None
    except SubmitError as exc:
        print(f"arena submit: {exc}", file=sys.stderr)
        return 2
    print_json({"submission": final, "board": entry})
    return 0 if final["status"] == MEASURED else 1
