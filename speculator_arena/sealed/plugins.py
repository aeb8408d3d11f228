"""An engine's optional `plugin/` of wheels (protocol section 2), installed offline at start.

The engine has no network, so its extra Python packages come as wheels in `plugin/`. When the
engine starts, the runner installs them with pip from that folder only (`--no-index`), into the
engine's own workspace, and puts that folder first on the engine's PYTHONPATH.

Why wheels only, refused at intake and again at install: the runner installs before the
engine's user takes over (as root on the arena's machines), and a wheel runs no code when it is
installed, but an sdist does: pip builds it, which runs its build backend (`setup.py`). A wheel
that declares a dependency found in `plugin/` as an sdist would have pip build it. So `plugin/`
may hold regular `*.whl` files and nothing else (`check_plugin_dir`: a clear 422 at intake), and
pip is told `--only-binary :all:`, so that nothing is ever built even if an sdist got there.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

from speculator_arena.errors import ArenaError
from speculator_arena.sealed.refusal import Refused, echo

PLUGIN_DIR = "plugin"
INSTALL_TIMEOUT_S = 600


class PluginInstallError(RuntimeError, ArenaError):
    """The engine's plugin wheels could not be installed offline."""


def plugin_problems(engine_dir: Path) -> list[str]:
    """What in `engine_dir/plugin` is not a regular `*.whl` file (empty: nothing to refuse)."""
    folder = Path(engine_dir) / PLUGIN_DIR
    try:
        st = folder.lstat()
    except FileNotFoundError:
        return []
    if not stat.S_ISDIR(st.st_mode):
        return [f"{PLUGIN_DIR} is not a directory"]
    problems = []
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if not entry.is_file(follow_symlinks=False) or not entry.name.endswith(".whl"):
            problems.append(f"{PLUGIN_DIR}/{entry.name}")
    return problems


def check_plugin_dir(engine_dir: Path) -> None:
    """Refused (422) when `plugin/` holds anything but wheels: an sdist would be built (its code run)."""
    problems = plugin_problems(engine_dir)
    if problems:
        raise Refused(
            f"engine {PLUGIN_DIR}/ may hold only wheels (*.whl); refused: {echo(', '.join(problems[:5]))} "
            "(an sdist or other file would be built or run before the engine's user takes over)",
            status=422,
        )


def install_plugins(engine_dir: Path, workspace: Path, python: str | None = None) -> dict[str, str]:
    """Install `engine_dir/plugin/*.whl` into `workspace/plugin-site`; the env additions ({} if none)."""
    problems = plugin_problems(engine_dir)
    if problems:
        raise PluginInstallError(f"{PLUGIN_DIR}/ may hold only wheels; not installed: {', '.join(problems[:5])}")
    wheels = sorted((Path(engine_dir) / PLUGIN_DIR).glob("*.whl"))
    if not wheels:
        return {}
    site = Path(workspace) / "plugin-site"
    cmd = [
        python or sys.executable,
        "-m",
        "pip",
        "install",
        "--no-index",
        "--only-binary",
        ":all:",
        "--no-cache-dir",  # nothing of one engine's install is kept for another's
        "--find-links",
        str(Path(engine_dir) / PLUGIN_DIR),
        "--target",
        str(site),
        "--no-warn-script-location",
        "--disable-pip-version-check",
        "--quiet",
        *map(str, wheels),
    ]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
    if r.returncode != 0:
        raise PluginInstallError(f"plugin wheels cannot be installed offline: {r.stderr.strip()[-500:]}")
    return {"ARENA_PLUGIN_SITE": str(site)}


def with_plugin_path(env: dict[str, str], additions: dict[str, str]) -> dict[str, str]:
    """The engine's environment with the plugin folder first on PYTHONPATH."""
    if not additions:
        return env
    site = additions["ARENA_PLUGIN_SITE"]
    path = env.get("PYTHONPATH")
    return {**env, **additions, "PYTHONPATH": f"{site}:{path}" if path else site}
