"""Failed authentications limited per client address (issue 35: 500 wrong tokens in 1.2 s from
one client were all answered 401, at full speed).

After `ARENA_AUTH_FAILURES` failed authentications from one address within `ARENA_AUTH_WINDOW`
seconds, that address's requests are answered `429` with `Retry-After` *before* their token is
looked at, until its oldest failure leaves the window: answering 429 only to wrong tokens would
still tell the guesser which token is right, at the same speed. An IPv6 client is counted by its
/64 (one host usually holds a whole /64, and would otherwise rotate through it).

The limit is per address, never per token or account, so a guesser cannot lock a token's owner
out: the owner's requests from any other address are not counted against. A token that
authenticated from an address before (within `KNOWN_S`) is still checked from that address while
it is limited, so an owner who shares the guesser's address (a NAT, a proxy) keeps working;
entering that set needs a valid token, so it gives a guesser nothing. Successes never count.
A failure is counted when its answer is known, so requests already in flight when an address
reaches its limit are still answered 401 (at most the API's thread pool more than the limit):
reserving a slot before the lookup would count an owner's concurrent valid requests as failures.

Why in memory, per API process, and not in the front door's SQLite (where the per-account fetch
limit and the registration rate are shared by every process): this runs before every
authentication, and a flood of failures would become a flood of database writes taking the write
lock that intakes need. With N API processes (`--workers N`), an address may fail up to N times
the limit per window before all of them answer 429; operators size the setting with that in mind
(docs/operators/accounts-and-api.md). Memory is bounded: at most `MAX_CLIENTS` addresses are remembered, the
least recently seen forgotten first.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections import OrderedDict, deque

from speculator_arena import settings
from speculator_arena.frontdoor import accounts
from speculator_arena.frontdoor.errors import TooManyFailures, Unauthorized

MAX_CLIENTS = 100_000
KNOWN_S = 24 * 3600.0  # how long a token's success from an address keeps it checked there
KNOWN_PER_CLIENT = 16


def client_key(host: str | None) -> str:
    """The address failures are counted by: an IPv4 address, an IPv6 /64, or the text given."""
    try:
        address = ipaddress.ip_address(host or "")
    except ValueError:
        return host or "unknown"
    mapped = getattr(address, "ipv4_mapped", None)
    if mapped is not None:
        return str(mapped)
    if address.version == 6:
        return str(ipaddress.ip_network(f"{address.exploded}/64", strict=False))
    return str(address)


class FailedAuthLimit:
    """The failures of each client address in the last `window_s` seconds, and the tokens known
    to have authenticated from it. Thread-safe (the API's handlers run in a thread pool)."""

    def __init__(self, failures: int, window_s: float, clock=time.monotonic):
        self.failures, self.window_s, self.clock = failures, window_s, clock
        self._lock = threading.Lock()
        self._failed: OrderedDict[str, deque[float]] = OrderedDict()
        self._known: OrderedDict[str, dict[str, float]] = OrderedDict()

    @classmethod
    def from_settings(cls) -> FailedAuthLimit:
        return cls(int(settings.number("ARENA_AUTH_FAILURES")), settings.number("ARENA_AUTH_WINDOW"))

    def retry_after(self, key: str) -> int | None:
        """Seconds until `key` may try again; None while it is under the limit."""
        with self._lock:
            times = self._failed.get(key)
            if times is None:
                return None
            horizon = self.clock() - self.window_s
            while times and times[0] <= horizon:
                times.popleft()
            if len(times) < self.failures:
                return None
            return max(1, math.ceil(times[-self.failures] - horizon))

    def failed(self, key: str) -> None:
        with self._lock:
            times = self._failed.pop(key, None) or deque(maxlen=max(self.failures, 1))
            times.append(self.clock())
            self._failed[key] = times  # most recently seen last
            while len(self._failed) > MAX_CLIENTS:
                self._failed.popitem(last=False)

    def succeeded(self, key: str, token_id: str) -> None:
        with self._lock:
            known = self._known.pop(key, None) or {}
            known[token_id] = self.clock()
            while len(known) > KNOWN_PER_CLIENT:
                del known[min(known, key=known.get)]
            self._known[key] = known
            while len(self._known) > MAX_CLIENTS:
                self._known.popitem(last=False)

    def known(self, key: str, token_id: str | None) -> bool:
        with self._lock:
            at = self._known.get(key, {}).get(token_id) if token_id else None
            return at is not None and self.clock() - at < KNOWN_S

    def authenticate(self, con, authorization: str | None, client: str | None) -> accounts.Account:
        """`accounts.authenticate`, counted for `client`'s address; TooManyFailures (429) while
        that address is over its limit, unless the token authenticated from it before."""
        key, token_id = client_key(client), accounts.token_id(authorization)
        wait = self.retry_after(key)
        if wait is not None and not self.known(key, token_id):
            raise TooManyFailures(wait)
        try:
            account = accounts.authenticate(con, authorization)
        except Unauthorized:
            self.failed(key)
            if wait is not None:  # a known token's id with a wrong secret: limited all the same
                raise TooManyFailures(wait) from None
            raise
        self.succeeded(key, token_id)
        return account
