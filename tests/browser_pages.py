"""The board served by `streamlit run` and read by a real headless Chromium: shared by the browser
tests (tests/dashboards/test_browser.py) and the end-to-end tests that look at the page their own
evaluations made (a sweep's, an entry's history). Screenshots go under test-artifacts/board/
(gitignored; CI uploads them)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from speculator_arena.dashboards.commands import streamlit_command

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "test-artifacts" / "board"
CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-quic",
    "--no-first-run",
]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    """`streamlit run` of the board on a free port, in its own process group (stopped by its id)."""

    def __init__(self, home: Path):
        import httpx

        self.port = _free_port()
        env = dict(os.environ, ARENA_HOME=str(home), OMP_NUM_THREADS="1")
        self.proc = subprocess.Popen(
            streamlit_command(self.port),
            env=env,
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"streamlit exited: {self.proc.stdout.read().decode()[-2000:]}")
            try:
                if httpx.get(f"{self.url}/_stcore/health", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                time.sleep(0.3)
        self.stop()
        raise RuntimeError("streamlit did not answer /_stcore/health within 90 s")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def expect(locator):
    from playwright.sync_api import expect as pw_expect

    return pw_expect(locator)


def page_shows(home: Path, path: str, texts: list[str], shot: str) -> None:
    """Serve the board on `home`, open `path` (e.g. "/sweep?sweep=k") in headless Chromium and wait
    until every one of `texts` is on the page; keep a screenshot as `shot`.png. Skips where
    Chromium or Playwright is missing, as the browser tests do."""
    if not CHROMIUM.exists():
        pytest.skip("Debian's chromium is not installed at /usr/bin/chromium")
    pw = pytest.importorskip("playwright.sync_api")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    served = Served(home)
    try:
        with pw.sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
            try:
                page = browser.new_page(viewport={"width": 1600, "height": 1200})
                page.goto(served.url + path)
                body = page.locator("body")
                for text in texts:  # retried until the page has rendered it (elements stream in)
                    expect(body).to_contain_text(text, timeout=90_000)
                page.wait_for_timeout(1500)  # let the charts draw before the screenshot
                page.screenshot(path=str(ARTIFACTS / f"{shot}.png"), full_page=True)
            finally:
                browser.close()
    finally:
        served.stop()
    assert (ARTIFACTS / f"{shot}.png").stat().st_size > 10_000, shot
