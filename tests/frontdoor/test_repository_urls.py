"""Repository URLs judged in the request (issue 35): a scheme in any case, an address literal in
any form the resolver reads (`[::1]`, `0x7f.1`, `2130706433`, ...) refused at once when it is
internal (400, nothing stored, no quota used, no connection made), `ARENA_FETCH_ALLOW` honoured
as the fetch worker honours it, and the URL kept normalized: the submission that names
`GIT://0X7F.1:<port>/...` is fetched from a real `git daemon` on loopback as `git://127.0.0.1:<port>/...`."""

from __future__ import annotations

import pytest

from speculator_arena.frontdoor.urls import ip_literal, parse_repository_url
from speculator_arena.sealed.refusal import Refused

from .conftest import submission
from .test_hostile import Stall
from .test_refusals import _git_repo, _head

PUBLIC_ONLY = "the arena fetches from public hosts only"


def _doc(url: str, commit: str = "a" * 40) -> dict:
    doc = submission()
    doc["engine"] = {"repository": url, "commit": commit}
    return doc


@pytest.mark.parametrize(
    "netloc",
    [
        "127.0.0.1:{port}",
        "0x7f.1:{port}",  # inet_aton forms: hex, short, decimal, octal
        "127.1:{port}",
        "2130706433:{port}",
        "0177.0.0.1:{port}",
        "127.0.0.1.:{port}",
        "[::1]:{port}",
        "[::ffff:127.0.0.1]:{port}",
        "[::ffff:7f00:1]:{port}",
        "169.254.169.254",
        "10.1.2.3",
        "100.64.0.1",
        "0.0.0.0",
        "240.0.0.1",
        "[fe80::1%25eth0]",
        "[fd00::1]",
    ],
)
@pytest.mark.parametrize("scheme", ["https", "HTTPS", "hTtPs"])
def test_internal_literals_are_refused_in_the_request(front, scheme, netloc):
    with Stall() as stall:
        url = f"{scheme}://{netloc.format(port=stall.port)}/engine.git"
        front.assert_refused(front.post(_doc(url)), 400, PUBLIC_ONLY)
        assert stall.accepted == 0


def test_schemes_in_any_case(front, monkeypatch):
    """The scheme is compared in lower case, the operators' extra schemes too; others refused."""
    front.assert_refused(front.post(_doc("FTP://example.org/e.git")), 400, "must be a https or file URL")
    monkeypatch.setenv("ARENA_ENGINE_REPO_SCHEMES", "FILE")
    front.assert_refused(front.post(_doc("GIT://example.org/e.git")), 400, "must be a https or file URL")


def test_kept_normalized():
    """Scheme and host in lower case, a literal in its canonical form; path and port as given."""
    cases = {
        "HTTPS://Example.ORG/Org/E.git": ("https://example.org/Org/E.git", "example.org", 443),
        "https://0x7f.1:8443/a": ("https://127.0.0.1:8443/a", "127.0.0.1", 8443),
        "https://[0:0::1]/a?b": ("https://[::1]/a?b", "::1", 443),
        "GIT://2130706433/e": ("git://127.0.0.1/e", "127.0.0.1", 9418),
        "FILE:///srv/Mirror.git": ("file:///srv/Mirror.git", None, None),
    }
    for given, (url, host, port) in cases.items():
        repo = parse_repository_url(given, ("https", "git", "file"))
        assert (repo.url, repo.host, repo.port) == (url, host, port), given
    assert ip_literal("example.org") is None and ip_literal("1.2.3.4.5") is None
    with pytest.raises(Refused, match="credentials"):
        parse_repository_url("HTTPS://u:p@example.org/e.git", ("https",))


def test_allowed_literal_is_fetched_from_its_normalized_url(front, public_dir, git_daemon, monkeypatch):
    """With loopback admitted (ARENA_FETCH_ALLOW, as for an operator's internal mirror), the request
    takes the literal the fetch worker would take, keeps it normalized, and the worker fetches it."""
    repo = _git_repo(public_dir / "engine", {"launch.sh": b"#!/bin/bash\necho serve\n"})
    monkeypatch.setenv("ARENA_ENGINE_REPO_SCHEMES", "GIT")
    url = f"GIT://0X7F.1:{git_daemon.port}/engine"
    front.assert_refused(front.post(_doc(url, _head(repo))), 400, PUBLIC_ONLY)  # not admitted yet
    monkeypatch.setenv("ARENA_FETCH_ALLOW", "127.0.0.0/8")
    r = front.post(_doc(url, _head(repo)))
    assert r.status_code == 201 and r.json()["status"] == "fetching", r.text
    settled = front.settle(r)
    assert settled["status"] == "queued", (settled["refusal"], settled["refusal_status"])
    from speculator_arena.frontdoor.state import connect

    row = connect(front.home).execute("SELECT engine_source, fetch_spec FROM submissions").fetchone()
    assert row["engine_source"] == f"{git_daemon.url}/engine@{_head(repo)}"
    assert f"{git_daemon.url}/engine" in row["fetch_spec"]
    assert front.quota()["used"] == 1
