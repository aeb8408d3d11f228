"""The board's read model loads without Streamlit: `GET /api/board` (and the per-request export)
and `arena board --text` read `speculator_arena.board`, never the Streamlit board (`dashboards/`),
so neither path imports it.

Each path runs in a fresh interpreter (a module imported by pytest or another test would hide
the import), over a warehouse with one synthetic evaluation so that the whole read happens: the
catalog, the memo, the scorer, the ranking and the JSON or the text.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from synthetic import write_synthetic_evaluation

import speculator_arena
from speculator_arena.warehouse import Warehouse

BOARD = Path(speculator_arena.__file__).resolve().parent / "board"
TASK = "local-smollm2"

API = """
import json, sys
from fastapi.testclient import TestClient
from speculator_arena.frontdoor.api import create_app

after_import = "streamlit" in sys.modules
with TestClient(create_app(sys.argv[1])) as client:
    r = client.get("/api/board", params={"task": sys.argv[2], "split": "dev"})
    export = client.get("/api/evaluations/ev-plain/requests.parquet")
print(json.dumps({
    "after_import": after_import,
    "status": r.status_code,
    "export": [export.status_code, export.headers.get("content-type")],
    "labels": [row["label"] for row in r.json().get("participants", [])],
    "streamlit": "streamlit" in sys.modules,
    "modules": sorted(m for m in sys.modules if m.startswith("speculator_arena")),
}))
"""

TEXT = """
import json, sys
from speculator_arena.cli import main

rc = main(["board", "--text", "--home", sys.argv[1], "--split", "dev"])
print(json.dumps({
    "rc": rc,
    "streamlit": "streamlit" in sys.modules,
    "modules": sorted(m for m in sys.modules if m.startswith("speculator_arena")),
}))
"""


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    wh = Warehouse(tmp_path_factory.mktemp("board") / "home")
    write_synthetic_evaluation(wh, "ev-plain", task_id=TASK, account_id="acct-p", label="plainlabel", seed=3)
    return wh.home


def _run(script: str, *args: str) -> tuple[str, dict]:
    proc = subprocess.run(
        [sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    return "\n".join(lines[:-1]), json.loads(lines[-1])


def test_the_api_serves_the_board_without_importing_streamlit(home):
    _, out = _run(API, str(home), TASK)
    assert out["status"] == 200 and out["labels"] == ["plainlabel"]  # the whole read happened
    assert out["export"] == [200, "application/vnd.apache.parquet"]  # the per-request export too
    assert not out["after_import"] and not out["streamlit"]
    assert "speculator_arena.board.json_rows" in out["modules"] and "speculator_arena.board.ranking" in out["modules"]
    assert not [m for m in out["modules"] if m.startswith("speculator_arena.dashboards")]


def test_the_text_board_prints_without_importing_streamlit(home):
    text, out = _run(TEXT, str(home))
    assert out["rc"] == 0 and "plainlabel" in text and f"== {TASK} (dev) ==" in text
    assert not out["streamlit"]
    assert "speculator_arena.board.text" in out["modules"]


def test_no_module_of_the_board_imports_streamlit():
    """Every import, inside functions too, so a lazy one cannot slip into a path not run above."""
    found = []
    for path in sorted(BOARD.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            found += [
                f"{path.name}:{node.lineno} {n}"
                for n in names
                if n.split(".")[0] in ("streamlit", "altair") or n.startswith("speculator_arena.dashboards")
            ]
    assert len(list(BOARD.rglob("*.py"))) >= 7 and found == []
