"""`arena board`: the text board, and serving the Streamlit board on a port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time

import httpx

from speculator_arena.cli import main
from speculator_arena.dashboards import formatting as fmt
from speculator_arena.dashboards.commands import APP, streamlit_command

from .conftest import REPO, scores_of_whole_warehouse


def test_text_board_prints_the_ranking(synthetic_home, capsys, monkeypatch):
    monkeypatch.setenv("ARENA_HOME", str(synthetic_home))
    assert main(["board", "--text", "--split", "dev"]) == 0
    out = capsys.readouterr().out
    ev = scores_of_whole_warehouse(synthetic_home).evaluations.set_index("evaluation_id")
    alpha = next(ln for ln in out.splitlines() if " alpha " in ln)
    assert alpha.split()[0] == "1" and fmt.score(ev.at["ev-alpha", "specscore"]) in alpha
    assert fmt.ratio(ev.at["ev-alpha", "r_team"]) in alpha
    assert "gate failed: length" in next(ln for ln in out.splitlines() if " longer " in ln)
    assert "== qwen3-8b (dev) ==" in out and "gpu-run" in out
    assert "partial" not in out  # still running: not on the board until it finishes
    assert main(["board", "--text", "--split", "test", "--task", "local-smollm2", "--home", str(synthetic_home)]) == 0
    out = capsys.readouterr().out
    assert "dev/test gap flagged" in out and "qwen3-8b" not in out


def test_text_board_on_an_empty_warehouse(tmp_path, capsys):
    assert main(["board", "--text", "--home", str(tmp_path / "nothing")]) == 0
    assert "(no evaluations stored)" in capsys.readouterr().out


def test_bad_port_is_a_clear_error(capsys):
    assert main(["board", "--port", "70000"]) == 2
    assert "--port must be 1..65535" in capsys.readouterr().err


def test_streamlit_command_is_headless_on_the_port():
    cmd = streamlit_command(8765)
    assert cmd[:4] == [sys.executable, "-m", "streamlit", "run"] and cmd[4] == str(APP)
    assert cmd[cmd.index("--server.port") + 1] == "8765"
    assert cmd[cmd.index("--server.headless") + 1] == "true"


def test_arena_board_serves_the_app(synthetic_home):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "speculator_arena.cli", "board", "--port", str(port), "--home", str(synthetic_home)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
        env=dict(os.environ),
    )
    try:
        deadline, ok = time.monotonic() + 90, False
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                ok = httpx.get(f"http://127.0.0.1:{port}/_stcore/health", timeout=1).text == "ok"
                if ok:
                    break
            except httpx.HTTPError:
                time.sleep(0.3)
        assert ok, proc.stdout.read1().decode() if proc.poll() is not None else "no answer within 90 s"
        assert "<title>Streamlit</title>" in httpx.get(f"http://127.0.0.1:{port}/", timeout=5).text
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=30)
    head = proc.stdout.read().decode()
    assert f"serving {synthetic_home} at http://127.0.0.1:{port}/" in head
