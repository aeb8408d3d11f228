"""An engine's `plugin/` wheels installed offline by real pip into the engine's workspace."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from speculator_arena.sealed.plugins import PluginInstallError, install_plugins, with_plugin_path


def _wheel(tmp_path, dest):
    src = tmp_path / "src"
    (src / "arena_plugin_probe").mkdir(parents=True)
    (src / "arena_plugin_probe" / "__init__.py").write_text("VALUE = 'plugin loaded'\n")
    (src / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "arena-plugin-probe"\nversion = "0.1"\n'
    )
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(dest),
            str(src),
        ],
        check=True,
        capture_output=True,
    )


def test_plugin_wheels_are_installed_offline_and_importable(tmp_path):
    engine, workspace = tmp_path / "engine", tmp_path / "ws"
    (engine / "plugin").mkdir(parents=True)
    workspace.mkdir()
    assert install_plugins(engine, workspace) == {}  # no wheels: nothing to do
    _wheel(tmp_path, engine / "plugin")
    env = with_plugin_path({"PYTHONPATH": "/elsewhere"}, install_plugins(engine, workspace))
    assert env["PYTHONPATH"].startswith(str(workspace / "plugin-site") + ":")
    out = subprocess.run(
        [sys.executable, "-c", "import arena_plugin_probe as p; print(p.VALUE, p.__file__)"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.startswith("plugin loaded " + str(workspace / "plugin-site"))


def test_a_broken_plugin_wheel_is_a_clear_start_error(tmp_path):
    engine = tmp_path / "engine"
    (engine / "plugin").mkdir(parents=True)
    (engine / "plugin" / "broken-0.1-py3-none-any.whl").write_bytes(b"not a zip")
    with pytest.raises(PluginInstallError, match="cannot be installed offline"):
        install_plugins(engine, tmp_path)
