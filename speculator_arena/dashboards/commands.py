"""`arena board`: serve the Streamlit board, or print the same ranking as text (board/text.py).

Why a subprocess: `streamlit run` owns its event loop and signal handling; the command only
resolves the warehouse and the app's path, passes ARENA_HOME, and waits.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

APP = Path(__file__).resolve().parent / "app.py"


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("board", help="serve the board (Streamlit), or print it with --text")
    p.add_argument("--home", default=None, help="warehouse directory (default: $ARENA_HOME or ./arena_home)")
    p.add_argument("--port", type=int, default=8501, help="port to serve on (default 8501)")
    p.add_argument("--address", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--text", action="store_true", help="print the board as text instead of serving it")
    p.add_argument("--split", choices=("dev", "test"), default="test", help="with --text: which split (default test)")
    p.add_argument("--protocol", type=int, default=None, help="with --text: score under this version (default latest)")
    p.add_argument("--task", action="append", default=None, help="with --text: only this task (repeatable)")
    p.set_defaults(func=run)


def streamlit_command(port: int, address: str = "127.0.0.1") -> list[str]:
    return [
        sys.executable,
        "-m",
        "streamlit",
        "run",
        str(APP),
        "--server.headless",
        "true",
        "--server.port",
        str(port),
        "--server.address",
        address,
        "--browser.gatherUsageStats",
        "false",
        "--server.fileWatcherType",
        "none",
    ]


def run(args: argparse.Namespace) -> int:
    from speculator_arena.warehouse.store import arena_home

    home = arena_home(args.home)
    if args.text:
        from speculator_arena.board.text import read_board_text

        print(read_board_text(home, args.split, args.protocol, args.task))
        return 0
    if not 0 < args.port < 65536:
        raise ValueError(f"--port must be 1..65535, got {args.port}")
    env = dict(os.environ, ARENA_HOME=str(home))
    print(f"arena board: serving {home} at http://{args.address}:{args.port}/ (Ctrl-C stops it)", flush=True)
    proc = subprocess.Popen(streamlit_command(args.port, args.address), env=env)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        raise
