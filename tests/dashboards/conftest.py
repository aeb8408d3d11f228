"""Fixtures of the board's tests: warehouses (empty, synthetic; `real_home`, the
real local evaluation, is tests/conftest.py's, shared with every test directory) and a helper
that opens a page of the real app with Streamlit's AppTest.

The synthetic warehouse is written by the scoring domain's `write_synthetic_evaluation`, whose
rows are complete paired evaluations; every number a test expects is computed by the scorer
over the *whole* warehouse, so the board's own scoped reads are checked against it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from speculator_arena.warehouse import Warehouse

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "speculator_arena" / "dashboards" / "app.py"
TASK = "local-smollm2"

# (evaluation_id, keyword arguments of write_synthetic_evaluation)
SYNTHETIC = [
    (
        "ev-alpha",
        dict(
            account_id="acct-a",
            label="alpha",
            seed=1,
            created_at=1.8e9 + 10,
            speedups={"solo": 1.6, "team": 1.4, "busy": 1.2},
        ),
    ),
    (
        "ev-alpha-old",
        dict(
            account_id="acct-a",
            label="alpha-old",
            seed=2,
            created_at=1.8e9 + 1,
            speedups={"solo": 2.5, "team": 2.5, "busy": 2.5},
        ),
    ),
    (
        "ev-alpha-test",
        dict(
            account_id="acct-a",
            label="alpha",
            split="test",
            seed=3,
            created_at=1.8e9 + 20,
            # far below its dev score (1.39) under any gap up to v5's calibrated 0.398
            speedups={"solo": 0.7, "team": 0.65, "busy": 0.6},
        ),
    ),
    (
        "ev-beta",
        dict(
            account_id="acct-b",
            label="beta",
            seed=4,
            created_at=1.8e9 + 30,
            # below alpha by more than both intervals, widened by v5's calibrated noise (0.08 a side)
            speedups={"solo": 1.1, "team": 1.05, "busy": 1.0},
        ),
    ),
    (
        "ev-longer",
        dict(
            account_id="acct-d",
            label="longer",
            seed=5,
            created_at=1.8e9 + 40,
            attack="length",
            speedups={"solo": 1.9, "team": 1.8, "busy": 1.7},
        ),
    ),
    ("ev-partial", dict(account_id="acct-c", label="partial", seed=6, created_at=1.8e9 + 50, attack="partial")),
    ("ev-void", dict(account_id="acct-e", label="voided", seed=7, created_at=1.8e9 + 60, attack="void")),
    (
        "ev-ref-ngram",
        dict(
            account_id="operators",
            label="dev-ngram-4",
            is_reference=True,
            seed=8,
            created_at=1.8e9 + 70,
            speedups={"solo": 1.25, "team": 1.15, "busy": 1.05},
        ),
    ),
    (
        "ev-gpu",
        dict(
            task_id="qwen3-8b",
            account_id="acct-g",
            label="gpu-run",
            seed=9,
            created_at=1.8e9 + 80,
            speedups={"solo": 1.4, "team": 1.3, "busy": 1.2},
        ),
    ),
]


def write_synthetic(home: Path, entries=SYNTHETIC) -> Warehouse:
    from synthetic import write_synthetic_evaluation

    wh = Warehouse(home)
    for eid, kw in entries:
        write_synthetic_evaluation(wh, eid, **kw)
    return wh


@pytest.fixture(scope="session")
def synthetic_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("board-synthetic") / "arena_home"
    write_synthetic(home)
    return home


@pytest.fixture
def empty_home(tmp_path) -> Path:
    home = tmp_path / "empty_home"
    home.mkdir()
    return home


@pytest.fixture
def app(monkeypatch):
    """open_page(home, page=None, **query) -> a run AppTest of the real app on that page."""
    from streamlit.testing.v1 import AppTest

    def open_page(home: Path, page: str | None = None, **query) -> AppTest:
        monkeypatch.setenv("ARENA_HOME", str(home))
        at = AppTest.from_file(str(APP), default_timeout=180)
        at.query_params.update({k: str(v) for k, v in query.items()})
        at.run()
        if page is not None:
            at.switch_page(f"views/{page}.py").run()
        return at

    return open_page


def page_text(at) -> str:
    """Every element's content on the page (markdown, tables, metrics, JSON, code, charts), as text."""
    out = []

    def walk(node):
        proto = getattr(node, "proto", None)
        if proto is not None:
            out.append(str(proto))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return "\n".join(out)


def scores_of_whole_warehouse(home: Path, protocol_version: int | None = None):
    """The scorer's own answer over every evaluation: what the board must agree with."""
    from speculator_arena.scoring import score_warehouse

    return score_warehouse(Warehouse(home), protocol_version=protocol_version)
