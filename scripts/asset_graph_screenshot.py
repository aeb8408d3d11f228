"""Draw the Dagster asset graph of the arena into docs/asset-graph.png (issue 19's screenshot).

    .venv/bin/python scripts/asset_graph_screenshot.py [--out docs/asset-graph.png]

Starts `dagster-webserver` on the arena's definitions with an empty DAGSTER_HOME, opens the
global lineage in Debian's chromium (Playwright, as the board's browser tests do), expands every
asset group, and saves the view. The groups' state lives in the browser's storage, so each group
is expanded and the page reloaded in turn.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PORT = 3917


def wait_up(url: str, seconds: float = 90) -> None:
    end = time.time() + seconds
    while time.time() < end:
        try:
            urllib.request.urlopen(url, timeout=2)
            return
        except OSError:
            time.sleep(1)
    raise SystemExit(f"dagster-webserver did not answer at {url} within {seconds:.0f} s")


def shoot(url: str, out: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-dev-shm-usage"])
        pg = b.new_page(viewport={"width": 2400, "height": 1100})
        pg.goto(url, wait_until="networkidle", timeout=120_000)
        pg.wait_for_timeout(4000)
        skip = pg.get_by_role("button", name="Skip")  # the first visit's newsletter dialog
        if skip.count():
            skip.first.click()
        for _ in range(12):  # one collapsed group at a time
            icons = pg.locator('[aria-label="unfold_more"]')
            if not icons.count():
                break
            icons.first.click()
            pg.wait_for_timeout(800)
            pg.reload(wait_until="networkidle")
            pg.wait_for_timeout(4000)
        pg.get_by_role("button", name="Hide navigation").click(timeout=3000)
        pg.reload(wait_until="networkidle")
        pg.wait_for_timeout(6000)
        pg.locator('[aria-label="zoom_out"]').first.click()
        pg.wait_for_timeout(1500)
        pg.screenshot(path=str(out))
        b.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=str(REPO / "docs" / "asset-graph.png"))
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "DAGSTER_HOME": home, "ARENA_HOME": home}
        bin_dir = Path(sys.executable).parent
        server = subprocess.Popen(
            [str(bin_dir / "dagster-webserver"), "-m", "speculator_arena.dagster_project.definitions",
             "-h", "127.0.0.1", "-p", str(PORT)],
            env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            wait_up(f"http://127.0.0.1:{PORT}/")
            shoot(f"http://127.0.0.1:{PORT}/asset-groups", Path(args.out))
        finally:
            server.terminate()
            server.wait(timeout=30)
    print(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
