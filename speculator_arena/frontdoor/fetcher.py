"""The fetch worker: fetches `fetching` submissions out of the request, in the API's process
but never in a request thread.

Why here: a repository (or the hub) may answer slowly or never, and 40 submissions naming a host
that accepts and never answers held every request thread of the API. Here each fetch is a
sandboxed child (`intake.fetch_submission`) under git's low-speed limit and an overall deadline
(`ARENA_FETCH_DEADLINE`), at most `ARENA_FETCH_WORKERS` at once per API process and at most
`ARENA_FETCHES_PER_ACCOUNT` per account across all of them, so one account's stalled fetches
neither hold the API nor delay everyone else's.

Several API processes share the work through the database: a fetch is claimed (its row's
`fetch_owner`) in a `BEGIN IMMEDIATE` transaction that also counts the account's fetches in
flight; a claim whose process is gone, or older than the deadline, is taken over.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from speculator_arena import settings
from speculator_arena.frontdoor.state import connect, sql, transaction

POLL_S = 2.0


def _alive(owner: str | None, started: float | None, deadline_s: float) -> bool:
    if not owner:
        return False
    if started is not None and time.time() - started > deadline_s + 120:
        return False
    try:
        os.kill(int(owner), 0)
    except (ValueError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


class Fetcher:
    """One per API process: `start()` at start-up, `wake()` after an intake inserted a fetching
    row, `stop()` at shutdown."""

    def __init__(self, home, workers: int | None = None, per_account: int | None = None):
        self.home = home
        self.workers = int(workers or settings.number("ARENA_FETCH_WORKERS"))
        self.per_account = int(per_account or settings.number("ARENA_FETCHES_PER_ACCOUNT"))
        self.deadline_s = settings.number("ARENA_FETCH_DEADLINE")
        self.owner = str(os.getpid())
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._running: set[str] = set()
        self._children: set[int] = set()  # the sandboxes' children in flight (their process groups)
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="arena-fetch")
        self._thread = threading.Thread(target=self._loop, name="arena-fetcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self) -> None:
        """No new fetch starts; those in flight are stopped (their children killed) and left
        `fetching` for the next worker, so a restart refuses nothing."""
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)
        with self._lock:
            children = list(self._children)
        for pid in children:
            try:
                os.killpg(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        self._pool.shutdown(wait=True, cancel_futures=True)

    def running(self) -> int:
        with self._lock:
            return len(self._running)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                for sid in self._claim():
                    self._pool.submit(self._fetch, sid)
            except Exception as exc:  # a busy database or a bad row must not end the worker
                print(f"[arena api] fetch worker: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
            self._wake.wait(POLL_S)
            self._wake.clear()

    def _claim(self) -> list[str]:
        free = self.workers - self.running()
        if free <= 0:
            return []
        con = connect(self.home)
        try:
            with transaction(con):
                rows = [dict(r) for r in con.execute(sql("fetching_submissions"))]
                if not rows:
                    return []
                in_flight: dict[str, int] = {}
                for r in rows:
                    if _alive(r["fetch_owner"], r["fetch_started"], self.deadline_s):
                        in_flight[r["account_id"]] = in_flight.get(r["account_id"], 0) + 1
                claimed = []
                now = time.time()
                for r in rows:
                    if len(claimed) >= free:
                        break
                    if _alive(r["fetch_owner"], r["fetch_started"], self.deadline_s):
                        continue
                    if in_flight.get(r["account_id"], 0) >= self.per_account:
                        continue
                    con.execute(
                        sql("claim_fetch"), {"owner": self.owner, "now": now, "submission_id": r["submission_id"]}
                    )
                    in_flight[r["account_id"]] = in_flight.get(r["account_id"], 0) + 1
                    claimed.append(r["submission_id"])
        finally:
            con.close()
        with self._lock:
            self._running.update(claimed)
        return claimed

    def _fetch(self, submission_id: str) -> None:
        from speculator_arena.frontdoor.intake import fetch_submission
        from speculator_arena.warehouse import Warehouse

        mine: list[int] = []

        def started(pid: int) -> None:
            mine.append(pid)
            with self._lock:
                self._children.add(pid)
            if self._stop.is_set():  # stopping already: do not let it run
                os.killpg(pid, signal.SIGKILL)

        con = connect(self.home)
        try:
            fetch_submission(
                con, Warehouse(self.home), submission_id, self.owner, started=started, stopping=self._stop.is_set
            )
        except Exception as exc:
            print(f"[arena api] fetch of {submission_id}: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        finally:
            con.close()
            with self._lock:
                self._running.discard(submission_id)
                self._children.difference_update(mine)  # reaped: their pids may be reused
            self._wake.set()  # a slot is free: the next one may start
