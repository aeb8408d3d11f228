"""Which repository URLs the arena will fetch, and which addresses it will connect to for them.

A participant names the URL, so without these rules the intake is a port scanner of the arena's
own network (loopback, the cluster's private ranges, the cloud metadata address) that reports
what it found in its error messages. The syntax is checked when the submission arrives (no
network in the request), and a host that is an address literal (`127.0.0.1`, `[::1]`, and the
forms the resolver also reads as one: `0x7f.1`, `127.1`, `2130706433`) is judged there too, by
the same rule (`judge_address`), since that needs no lookup; the URL is kept normalized (scheme
and host in lower case, a literal in its canonical form), so what is stored is what is fetched.
A name is resolved by the fetching worker just before it connects,
every address it resolves to must be public (`ipaddress`'s `is_global`: not loopback, private,
link-local, shared, reserved, multicast or unspecified; metadata addresses are link-local or
private), and git is then pinned to the address that was checked (`http.curloptResolve`), so a
second lookup cannot answer differently. Operators may admit internal hosts or networks
(`ARENA_FETCH_ALLOW`). URLs with credentials are refused: they would be kept in provenance.
"""

from __future__ import annotations

import ipaddress
import socket
import urllib.parse
from dataclasses import dataclass

from speculator_arena import settings
from speculator_arena.sealed.refusal import Refused, echo

MAX_URL_CHARS = 2000
DEFAULT_PORTS = {"https": 443, "http": 80, "ssh": 22, "git": 9418}


@dataclass(frozen=True)
class RepositoryUrl:
    url: str
    scheme: str
    host: str | None  # None for file:// (tests, operator mirrors)
    port: int | None


def parse_repository_url(url: str, schemes: tuple[str, ...]) -> RepositoryUrl:
    """The URL's parts, normalized, or Refused: an allowed scheme (in any case), a host, no
    credentials, no control text."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_CHARS:
        raise Refused(f"engine.repository must be a URL of at most {MAX_URL_CHARS} characters")
    if any(c.isspace() or ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        raise Refused(f"engine.repository {echo(url)} holds spaces or control characters")
    try:
        parts = urllib.parse.urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise Refused(f"engine.repository {echo(url)} is not a valid URL ({exc})") from exc
    scheme = parts.scheme.lower()
    if scheme not in {s.lower() for s in schemes}:
        raise Refused(f"engine.repository must be a {' or '.join(schemes)} URL, not {echo(url)}")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise Refused("engine.repository must not carry credentials (user:password@): the arena fetches public URLs")
    if scheme == "file":
        return RepositoryUrl(scheme + url[len(parts.scheme) :], scheme, None, None)
    if not parts.hostname:
        raise Refused(f"engine.repository {echo(url)} names no host")
    address = ip_literal(parts.hostname)
    host = parts.hostname.lower() if address is None else str(address)
    shown = f"[{host.replace('%', '%25')}]" if ":" in host else host
    netloc = shown if port is None else f"{shown}:{port}"
    normalized = urllib.parse.urlunsplit((scheme, netloc, parts.path, parts.query, parts.fragment))
    return RepositoryUrl(normalized, scheme, host, port or DEFAULT_PORTS.get(scheme))


def ip_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a URL's host names literally, or None for a name. Every form the resolver
    (`getaddrinfo`, hence git and curl) would read as an address counts: `::1`, `fe80::1%25eth0`,
    and IPv4's `inet_aton` forms (`0x7f.1`, `127.1`, `0177.0.0.1`, `2130706433`); a trailing dot
    is ignored. Parsing only: nothing is looked up."""
    name = urllib.parse.unquote(host).rstrip(".")
    try:
        return ipaddress.ip_address(name)
    except ValueError:
        pass
    if ":" in name or not name:
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(name))
    except OSError:
        return None


def fetch_allow() -> list[str]:
    """`ARENA_FETCH_ALLOW`: hosts or networks admitted although not public."""
    return settings.listed("ARENA_FETCH_ALLOW", ",")


def _allowed(host: str, address: ipaddress._BaseAddress, allow: list[str]) -> bool:
    for item in allow:
        item = item.strip().lower()
        if not item:
            continue
        if item == host:
            return True
        try:
            if address in ipaddress.ip_network(item, strict=False):
                return True
        except ValueError:
            continue
    return False


def judge_address(host: str, address: ipaddress._BaseAddress, allow: list[str]) -> None:
    """The one rule for an address a repository's host is (a literal, in the request) or resolves
    to (in the fetch worker): public (an IPv4-mapped address judged as its IPv4), or admitted by
    `allow` (the host's name or a network holding the address); Refused otherwise."""
    checked = getattr(address, "ipv4_mapped", None) or address
    if not checked.is_global and not _allowed(host, checked, allow):
        raise Refused(
            f"engine repository host {echo(host)} is or resolves to a loopback, private, link-local or "
            "reserved address; the arena fetches from public hosts only"
        )


def refuse_internal_literal(repo: RepositoryUrl, allow: list[str]) -> None:
    """In the request, without resolving anything: a host that is an address literal, judged now."""
    if repo.host is not None and (address := ip_literal(repo.host)) is not None:
        judge_address(repo.host, address, allow)


def public_addresses(repo: RepositoryUrl, allow: list[str]) -> list[str]:
    """The addresses `repo.host` resolves to, every one public or admitted by `allow`; Refused
    when one is not (the URL is refused whole: a host resolving to one internal address may be
    answered by it)."""
    if repo.host is None:
        return []
    try:
        infos = socket.getaddrinfo(repo.host, repo.port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise Refused(f"engine repository host {echo(repo.host)} does not resolve") from exc
    addresses = []
    for info in infos:
        address = ipaddress.ip_address(info[4][0].split("%")[0])
        judge_address(repo.host, address, allow)
        if str(address) not in addresses:
            addresses.append(str(address))
    if not addresses:
        raise Refused(f"engine repository host {echo(repo.host)} does not resolve")
    return addresses


def curl_resolve(repo: RepositoryUrl, addresses: list[str]) -> str:
    """git's `http.curloptResolve` value pinning the host to the checked addresses."""
    shown = ",".join(f"[{a}]" if ":" in a else a for a in addresses)
    return f"{repo.host}:{repo.port}:{shown}"
