"""Accounts by invitation, and their bearer tokens.

A token is `sa_<token id>_<secret>`: the id (8 random bytes) finds the row, the secret (32
random bytes, 256 bits) proves it. Only sha256(secret) is stored, and it is compared with
`hmac.compare_digest` (constant time). Why sha256 and not argon2: argon2's cost protects
low-entropy passwords against guessing from a stolen hash; a 256-bit random secret cannot be
guessed from its hash at any cost, and a slow hash would only slow every API call.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import sqlite3
import time
import uuid
from dataclasses import dataclass

from speculator_arena import settings
from speculator_arena.frontdoor.errors import Unauthorized
from speculator_arena.frontdoor.state import get_setting, set_setting, sql, transaction
from speculator_arena.sealed.refusal import Refused, echo

KINDS = ("participant", "study_agent")
TOKEN_RE = re.compile(r"sa_([0-9a-f]{16})_([A-Za-z0-9_-]{43})")  # fullmatch: no trailing newline
NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{1,62}")
REGISTRATION = "registration_open"


@dataclass(frozen=True)
class Account:
    account_id: str
    name: str
    kind: str


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def _new_token(con: sqlite3.Connection, account_id: str) -> str:
    token_id, secret = secrets.token_hex(8), secrets.token_urlsafe(32)
    con.execute(
        sql("insert_token"),
        (token_id, account_id, _hash(secret), time.time()),
    )
    return f"sa_{token_id}_{secret}"


def invite(con: sqlite3.Connection, name: str, kind: str = "participant") -> tuple[Account, str]:
    """Create an account and its first token; the token is returned once and never stored."""
    with transaction(con):
        return _create(con, name, kind)


def _create(con: sqlite3.Connection, name: str, kind: str) -> tuple[Account, str]:
    """The account and its token, inside the caller's transaction."""
    if kind not in KINDS:
        raise Refused(f"account kind must be one of {KINDS}, not {echo(kind)}")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name):
        raise Refused("account name: 2 to 63 letters, digits, '.', '_' or '-', starting with a letter or digit")
    account = Account(account_id=f"acct-{uuid.uuid4().hex[:12]}", name=name, kind=kind)
    if con.execute(sql("account_named"), (name,)).fetchone():
        raise Refused(f"an account named {name!r} already exists", status=409)
    con.execute(
        sql("insert_account"),
        (account.account_id, name, kind, time.time()),
    )
    return account, _new_token(con, account.account_id)


def register(con: sqlite3.Connection, name: str, client: str = "unknown") -> tuple[Account, str]:
    """`POST /register`: a participant account, only while the operators keep registration open,
    at most `ARENA_REGISTER_PER_HOUR` per client address and `ARENA_REGISTER_MAX` in all (counted
    in the same transaction as the insert, so concurrent requests cannot pass the bounds)."""
    if not registration_open(con):
        raise Refused("registration is closed: ask the operators for an invitation", status=403)
    per_hour, cap = int(settings.number("ARENA_REGISTER_PER_HOUR")), int(settings.number("ARENA_REGISTER_MAX"))
    with transaction(con):
        counts = con.execute(sql("registration_counts"), {"client": client, "since": time.time() - 3600}).fetchone()
        if counts["total"] >= cap:
            raise Refused("registration is full: ask the operators for an invitation", status=403)
        if counts["recent"] >= per_hour:
            raise Refused(f"at most {per_hour} registrations per hour from one address: try again later", status=429)
        account, token = _create(con, name, "participant")
        con.execute(
            sql("insert_registration"),
            (account.account_id, client, time.time()),
        )
    return account, token


def revoke(con: sqlite3.Connection, name: str) -> int:
    """Revoke an account and every token of it; returns the number of tokens revoked."""
    now = time.time()
    with transaction(con):
        row = con.execute(sql("account_id_of_name"), (name,)).fetchone()
        if row is None:
            raise Refused(f"no account named {name!r}", status=404)
        con.execute(sql("revoke_account"), (now, row["account_id"]))
        n = con.execute(sql("revoke_tokens"), (now, row["account_id"])).rowcount
    return n


def _bearer(authorization: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, None without one."""
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


def token_id(authorization: str | None) -> str | None:
    """The id part of a well-formed bearer token (whether or not it is valid), else None."""
    m = TOKEN_RE.fullmatch(_bearer(authorization) or "")
    return m.group(1) if m else None


def authenticate(con: sqlite3.Connection, authorization: str | None) -> Account:
    """The account of an `Authorization: Bearer <token>` header, or Unauthorized."""
    token = _bearer(authorization)
    if token is None:
        raise Unauthorized("missing bearer token: send `Authorization: Bearer <token>`")
    m = TOKEN_RE.fullmatch(token)
    row = con.execute(sql("token_lookup"), (m.group(1),)).fetchone() if m else None
    # The secret's hash is compared even without a row, so both answers take the same time.
    stored = row["secret_hash"] if row else _hash("")
    given = _hash(m.group(2)) if m else _hash("-")
    if not (hmac.compare_digest(stored, given) and row):
        raise Unauthorized("invalid or revoked token")
    return Account(row["account_id"], row["name"], row["kind"])


def accounts(con: sqlite3.Connection) -> list[dict]:
    return [dict(r) for r in con.execute(sql("list_accounts"))]


def registration_open(con: sqlite3.Connection) -> bool:
    return get_setting(con, REGISTRATION, "0") == "1"


def set_registration(con: sqlite3.Connection, is_open: bool) -> None:
    with transaction(con):
        set_setting(con, REGISTRATION, "1" if is_open else "0")
