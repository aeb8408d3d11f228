"""Which repository URLs the arena will fetch, and which addresses it will connect to for them.

A participant names the URL, so without these rules the intake is a port scanner of the arena's
own network (loopback, the cluster's private ranges, the cloud metadata address) that reports
what it found in its error messages. The syntax is checked when the submission arrives (no
network in the request); the host is resolved by the fetching worker just before it connects,
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
    """The URL's parts, or Refused: an allowed scheme, a host, no credentials, no control text."""
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
    if scheme not in schemes:
        raise Refused(f"engine.repository must be a {' or '.join(schemes)} URL, not {echo(url)}")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise Refused("engine.repository must not carry credentials (user:password@): the arena fetches public URLs")
    if scheme == "file":
        return RepositoryUrl(url, scheme, None, None)
    if not parts.hostname:
        raise Refused(f"engine.repository {echo(url)} names no host")
    return RepositoryUrl(url, scheme, parts.hostname.lower(), port or DEFAULT_PORTS.get(scheme))


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
        mapped = getattr(address, "ipv4_mapped", None)
        checked = mapped or address
        if not checked.is_global and not _allowed(repo.host, checked, allow):
            raise Refused(
                f"engine repository host {echo(repo.host)} resolves to a loopback, private, link-local or "
                "reserved address; the arena fetches from public hosts only"
            )
        if str(address) not in addresses:
            addresses.append(str(address))
    if not addresses:
        raise Refused(f"engine repository host {echo(repo.host)} does not resolve")
    return addresses


def curl_resolve(repo: RepositoryUrl, addresses: list[str]) -> str:
    """git's `http.curloptResolve` value pinning the host to the checked addresses."""
    shown = ",".join(f"[{a}]" if ":" in a else a for a in addresses)
    return f"{repo.host}:{repo.port}:{shown}"
