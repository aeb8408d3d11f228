"""Token guessing against `arena api` (issue 35): failed authentications are limited per client
address (429 with Retry-After, before the token is looked at), never per token or account, so the
guesser cannot lock the token's owner out. The server is real uvicorn on 127.0.0.1, which trusts
`X-Forwarded-For` from loopback as it trusts the operators' proxy: that header plays the clients'
addresses."""

from __future__ import annotations

import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from speculator_arena.frontdoor.authlimit import FailedAuthLimit, client_key

from .conftest import TASK
from .test_server import ApiServer

FAILURES, WINDOW = 8, 10
ENV = {"ARENA_AUTH_FAILURES": str(FAILURES), "ARENA_AUTH_WINDOW": str(WINDOW)}


@pytest.fixture(scope="module")
def api():
    import tempfile

    from speculator_arena.frontdoor.accounts import invite
    from speculator_arena.frontdoor.state import connect
    from speculator_arena.sealed.trees import remove_tree

    around = Path(tempfile.mkdtemp(prefix="arena-fd-"))
    con = connect(around / "home")
    tokens = {name: invite(con, name)[1] for name in ("victim", "neighbour", "other")}
    con.close()
    server = ApiServer(around / "home", env=ENV)
    server.tokens = tokens
    server.http = httpx.Client(base_url=server.url, timeout=30)  # kept alive: guessing at full speed
    yield server
    server.http.close()
    server.stop()
    remove_tree(around)


def _quota(api, token: str, client: str) -> httpx.Response:
    return api.http.get(
        "/api/quota", params={"task": TASK}, headers={"Authorization": f"Bearer {token}", "X-Forwarded-For": client}
    )


def _wrong(token: str) -> str:
    """The same token id with another secret: guessing a known token's secret."""
    return token.rsplit("_", 1)[0] + "_" + secrets.token_urlsafe(32)


def test_guessing_is_limited_and_the_owner_is_not_locked_out(api):
    victim, neighbour, other = (api.tokens[n] for n in ("victim", "neighbour", "other"))
    attacker, home, elsewhere = "203.0.113.7", "203.0.113.7", "198.51.100.9"
    # the neighbour (behind the attacker's NAT) used its token from there before the guessing
    assert _quota(api, neighbour, home).status_code == 200
    t0 = time.time()
    with ThreadPoolExecutor(10) as pool:
        answers = list(pool.map(lambda _: _quota(api, _wrong(victim), attacker), range(500)))
    took = time.time() - t0
    codes = [r.status_code for r in answers]
    assert set(codes) == {401, 429}, set(codes)
    # FAILURES answered 401 per window the flood spanned (one, unless the machine is very slow), and
    # at most the requests in flight at once more (each checked before its failure was counted)
    windows = 1 + int(took // WINDOW)
    assert FAILURES <= codes.count(401) <= FAILURES * windows + 10, (codes.count(401), took)
    limited = [r for r in answers if r.status_code == 429]
    assert all(1 <= int(r.headers["Retry-After"]) <= WINDOW for r in limited)
    assert "too many failed authentications" in limited[0].json()["error"]
    # the guessed token's owner, from any other address, is not locked out
    assert _quota(api, victim, elsewhere).status_code == 200
    assert _quota(api, victim, "192.0.2.1").status_code == 200
    # from the limited address, a token is not even looked at (no oracle: a right guess is 429 too) ...
    r = _quota(api, other, attacker)
    assert r.status_code == 429 and "Retry-After" in r.headers
    # ... except one that authenticated from there before: its owner keeps working
    assert _quota(api, neighbour, home).status_code == 200
    assert _quota(api, _wrong(neighbour), home).status_code == 429  # its id with a guessed secret: limited
    # the limit ends when the window has passed its failures
    time.sleep(int(limited[-1].headers["Retry-After"]) + 0.5)
    assert _quota(api, _wrong(victim), attacker).status_code == 401
    assert _quota(api, other, attacker).status_code == 200


def test_every_route_that_authenticates_counts(api):
    """Submissions and a submission's status count too; an IPv6 client is counted by its /64."""
    headers = {"Authorization": "Bearer sa_0123456789abcdef_" + "A" * 43}
    codes = []
    for i in range(FAILURES + 2):
        h = dict(headers, **{"X-Forwarded-For": f"2001:db8:1:2::{i + 1:x}"})
        if i % 2:
            codes.append(api.http.post("/api/submissions", json={}, headers=h).status_code)
        else:
            codes.append(api.http.get("/api/submissions/sub-x", headers=h).status_code)
    assert codes == [401] * FAILURES + [429, 429], codes
    other_64 = {"X-Forwarded-For": "2001:db8:1:3::1", **headers}
    assert api.http.get("/api/submissions/sub-x", headers=other_64).status_code == 401


def test_the_window_slides():
    """The limiter alone, on its own clock: N failures within the window, then 429 until the oldest
    leaves it; successes never count; the known set needs a success."""
    now = [1000.0]
    limit = FailedAuthLimit(3, 10.0, clock=lambda: now[0])
    for dt in (0, 2, 4):
        now[0] = 1000.0 + dt
        assert limit.retry_after("a") is None
        limit.failed("a")
    assert limit.retry_after("a") == 6  # the failure at 1000 leaves the window at 1010
    assert limit.retry_after("b") is None  # another address
    assert not limit.known("a", "t1")
    limit.succeeded("a", "t1")
    assert limit.known("a", "t1") and not limit.known("b", "t1") and not limit.known("a", None)
    now[0] = 1010.5
    assert limit.retry_after("a") is None
    assert [client_key(h) for h in ("10.0.0.1", "::ffff:10.0.0.1", "2001:db8::1", "2001:db8::ffff", "testclient")] == [
        "10.0.0.1",
        "10.0.0.1",
        "2001:db8::/64",
        "2001:db8::/64",
        "testclient",
    ]
