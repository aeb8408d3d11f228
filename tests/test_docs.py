"""The documentation site builds in strict mode, its pages stay small, and they state what is true
now rather than how it came about.

`mkdocs build --strict` with the repository's `mkdocs.yml` fails on a broken link, an anchor that
does not exist and a page left out of the nav (its `validation:` settings). Every Markdown page
under `docs/`, the README and the changelog stay under 40 KB (images are not pages). A short list
of words that only a development diary uses (an issue number, "this session", ...) is refused in
the pages and the README; the changelog, which is history, may name them.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
MAX_BYTES = 40 * 1024
# Wording of a development diary, not of a page that says what is true now.
DIARY = re.compile(
    r"\bissues? #?\d+\b|\bthis session\b|\bprevious session\b|\bfound on the way\b|\bwe first tried\b",
    re.IGNORECASE,
)


def _pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def test_the_site_builds_in_strict_mode(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"), "-d", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, f"mkdocs build --strict failed ({out.returncode}):\n{out.stdout}\n{out.stderr}"
    assert (tmp_path / "index.html").is_file()


def test_no_page_is_over_40_kb():
    files = [*_pages(), REPO / "README.md", REPO / "CHANGELOG.md"]
    assert len(files) > 3, "no pages found under docs/"
    big = {str(f.relative_to(REPO)): f.stat().st_size for f in files if f.stat().st_size > MAX_BYTES}
    assert not big, f"pages over {MAX_BYTES} bytes (split them by what a reader does): {big}"


def test_pages_do_not_narrate_how_the_project_was_developed():
    found = []
    for f in [*_pages(), REPO / "README.md"]:
        for n, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1):
            for m in DIARY.finditer(line):
                found.append(f"{f.relative_to(REPO)}:{n}: {m.group(0)!r}")
    assert not found, "diary wording in the docs (say what is true now, with its figures):\n" + "\n".join(found)


def test_the_diary_guard_catches_what_it_should_and_only_that():
    assert DIARY.search("as issue 31 asked") and DIARY.search("in this session we") and DIARY.search("Issue #7")
    assert not DIARY.search("the test session's real evaluation") and not DIARY.search("sessions of a pass")
