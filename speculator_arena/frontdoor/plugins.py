"""An engine's optional `plugin/` of wheels (protocol section 2), installed offline at start.

The engine has no network, so its extra Python packages come as wheels in `plugin/`. When the
engine starts, the runner installs them with pip from that folder only (`--no-index`), into the
engine's own workspace, and puts that folder first on the engine's PYTHONPATH. Wheels run no
code when installed, so this is safe to do before the engine's user takes over the workspace.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

PLUGIN_DIR = "plugin"
INSTALL_TIMEOUT_S = 600


class PluginInstallError(RuntimeError):
    """The engine's plugin wheels could not be installed offline."""


def install_plugins(engine_dir: Path, workspace: Path, python: str | None = None) -> dict[str, str]:
    """Install `engine_dir/plugin/*.whl` into `workspace/plugin-site`; the env additions ({} if none)."""
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
