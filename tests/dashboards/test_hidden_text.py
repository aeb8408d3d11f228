"""The board never shows hidden text (protocol section 8; docs/contributors/architecture.md, "Hidden data stays hidden").

A test-split evaluation carries marker strings wherever hidden text could leak from: its reply
texts, its greedy probe replies, its engine's start-up log, an engine error that echoes a
prompt, and a hidden pool on disk. No page, on either split, may show any of them. A dev
evaluation carries markers in its log and errors too, and those *are* shown: the check can fail.
"""

from __future__ import annotations

import pytest

from speculator_arena.warehouse import Warehouse

from .conftest import TASK, page_text

HIDDEN = [
    "HIDDEN-REPLY-7f3a",
    "HIDDEN-PROBE-91c2",
    "HIDDEN-LOG-55d0",
    "HIDDEN-ERROR-e21b",
    "HIDDEN-POOL-0a9f",
    "HIDDEN-METRIC-3d7e",  # a metric name and label the test evaluation's engine wrote
]
DEV_LOG, DEV_ERROR = "DEV-LOG-VISIBLE-3b1", "DEV-ERROR-VISIBLE-8c4"


def _plant(wh: Warehouse, eid: str, log: str, error: str, reply: str | None, probe: str | None) -> None:
    req = wh.read_table("requests", eid).to_pandas()
    first = req[req["pass_id"] == "solo-0"].iloc[0]
    if reply:
        wh.write_rows("replies", eid, [{"request_id": first["request_id"], "engine": "candidate", "text": reply}])
    if probe:
        wh.write_rows(
            "probe_greedy",
            eid,
            [
                {
                    "engine": "candidate",
                    "prompt_id": "planted",
                    "prompt_index": 999,
                    "token_ids": [1, 2],
                    "text": probe,
                    "answered": True,
                }
            ],
        )
    wh.write_rows(
        "engine_starts",
        eid,
        [
            {
                "engine": "candidate",
                "purpose": "probe",
                "start_index": 7,
                "started_at": float(first["sent_at"]),
                "healthy_at": float(first["sent_at"]) + 1,
                "stopped_at": float(first["sent_at"]) + 2,
                "exit_code": 0,
                "stop_signal": "SIGTERM",
                "run_as_user": "engine",
                "unprivileged": True,
                "offload_detected": False,
                "died": False,
                "device_idle_seconds": 1.0,
                "device_idle_ok": None,
                "log_text": f"starting...\n{log}\n",
            }
        ],
    )
    wh.write_rows(
        "requests",
        eid,
        [
            {
                "pass_id": "solo-0",
                "engine": "candidate",
                "workload": "solo",
                "pass_index": 0,
                "request_id": "planted-error",
                "lane": 0,
                "session_id": "planted",
                "turn": 0,
                "seed": 1,
                "sent_at": float(first["sent_at"]),
                "ended_at": float(first["sent_at"]) + 0.5,
                "prompt_tokens": 10,
                "output_tokens": 0,
                "max_tokens": 16,
                "done": False,
                "error": f"HTTP 400: prompt too long: {error}",
                "window_cut": False,
                "chunk_times": [],
                "chunk_tokens": [],
            }
        ],
    )


@pytest.fixture(scope="module")
def planted_home(tmp_path_factory):
    from synthetic import write_synthetic_evaluation

    home = tmp_path_factory.mktemp("board-hidden") / "arena_home"
    wh = Warehouse(home)
    write_synthetic_evaluation(wh, "h-dev", account_id="acct-h", label="hider", seed=21, created_at=1.8e9)
    write_synthetic_evaluation(
        wh, "h-test", account_id="acct-h", label="hider", split="test", seed=22, created_at=1.8e9 + 10
    )
    _plant(wh, "h-test", HIDDEN[2], HIDDEN[3], HIDDEN[0], HIDDEN[1])
    wh.write_rows(
        "metrics",
        "h-test",
        [
            {
                "pass_id": "solo-0",
                "engine": "candidate",
                "phase": phase,
                "taken_at": 1.8e9,
                "name": f"vllm:{HIDDEN[5]}",
                "labels": f'{{"position": "0", "x": "{HIDDEN[5]}"}}',
                "value": 1.0,
            }
            for phase in ("before", "after")
        ],
    )
    _plant(wh, "h-dev", DEV_LOG, DEV_ERROR, None, None)
    hidden = home / "pools" / TASK / "hidden"
    hidden.mkdir(parents=True)
    (hidden / "sessions.jsonl").write_text(f'{{"turns": ["{HIDDEN[4]}"]}}\n')
    (hidden / "data_card.md").write_text(HIDDEN[4])
    return home


VIEWS = [
    ("board", {}),
    ("task", {}),
    ("methodology", {}),
    ("references", {}),
    ("gap", {}),
    ("protocol", {}),
    ("data_card", {}),
    ("evaluation", {"evaluation": "h-test"}),
    ("evaluation", {"evaluation": "h-dev"}),
]


@pytest.mark.parametrize("split", ["dev", "test"])
@pytest.mark.parametrize("page,query", VIEWS, ids=[f"{p}-{q.get('evaluation', '')}" for p, q in VIEWS])
def test_no_page_shows_hidden_text(app, planted_home, page, query, split):
    at = app(planted_home, None if page == "board" else page, task=TASK, split=split, **query)
    assert not at.exception, [e.value for e in at.exception]
    text = page_text(at)
    for marker in HIDDEN:
        assert marker not in text, f"{marker} shown on {page} {query} ({split})"


def test_the_test_evaluation_page_says_what_it_withholds(app, planted_home):
    at = app(planted_home, "evaluation", task=TASK, evaluation="h-test")
    text = page_text(at)
    assert "Start-up logs of test evaluations are not shown" in text
    assert "Error texts of test evaluations are not shown" in text
    failures = next(t.value for t in at.table if "failure" in t.value.columns)
    assert (failures["failure"] == "error").any() and (failures["error"] == "").all()


def test_dev_logs_and_errors_are_shown(app, planted_home):
    """The positive control: the same planting on a dev evaluation is visible."""
    at = app(planted_home, "evaluation", task=TASK, evaluation="h-dev")
    text = page_text(at)
    assert DEV_LOG in text and DEV_ERROR in text


def test_text_board_shows_no_hidden_text(planted_home):
    from speculator_arena.board.text import read_board_text as board_text

    for split in ("dev", "test"):
        out = board_text(planted_home, split, None)
        assert "hider" in out
        assert not any(m in out for m in HIDDEN)


@pytest.mark.slow
@pytest.mark.parametrize("page", ["evaluation", "board"])
def test_a_real_test_split_evaluation_shows_no_reply_or_hidden_text(app, test_split_evaluation, page):
    """The evaluation page and the board of a real test-split evaluation whose engine echoed
    its hidden prompts (tests/pool_fixtures.py): none of its replies, probe replies or the
    hidden pool's texts appear."""
    from speculator_arena.pools.builder import checks
    from speculator_arena.pools.builder.context import BuildContext

    home, eid = test_split_evaluation["home"], test_split_evaluation["evaluation_id"]
    wh = Warehouse(home)
    texts = [t for t in wh.read_table("replies", eid).column("text").to_pylist() if t and len(t) >= 24]
    texts += [t for t in wh.read_table("probe_greedy", eid).column("text").to_pylist() if t and len(t) >= 24]
    texts += checks.hidden_only_texts(BuildContext(TASK, home=home))
    assert len(texts) > 100
    query = {"evaluation": eid} if page == "evaluation" else {"split": "test"}
    at = app(home, None if page == "board" else page, task=TASK, **query)
    assert not at.exception, [e.value for e in at.exception]
    shown = page_text(at)
    assert "echo (test split)" in shown or eid in shown  # the page is about this evaluation
    assert not [t[:60] for t in texts if t in shown]
