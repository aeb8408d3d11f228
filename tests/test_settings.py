"""One home for every environment variable: nothing outside `speculator_arena/settings.py` reads
the environment for configuration, every `ARENA_*` name the code mentions is declared there, and
the README's table is the one the declarations generate."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from speculator_arena import settings

PACKAGE = Path(settings.__file__).resolve().parent
README = PACKAGE.parent / "README.md"
# Variables the arena SETS for the engines it starts (protocol section 3 and the plugin path),
# never reads as its own configuration.
SET_FOR_ENGINES = {"ARENA_PYTHON", "ARENA_PLUGIN_SITE"}
# Reads of the environment that are not configuration: what a subprocess inherits (git's PATH),
# the runner's user name for provenance, the variables passed through to engines by name (by the
# runner, and in a pod by the engine container's supervisor: its device variables), the intake
# child's PATH.
FORWARDED = {
    ("frontdoor/sources.py", "PATH"),
    ("frontdoor/sandbox.py", "PATH"),
    ("runners/provenance.py", "USER"),
    ("runners/engines.py", None),
    ("backends/kubernetes/engine_sidecar.py", None),
}


def _environment_reads(tree: ast.AST):
    """(variable or None, line) for `os.environ.get(X)`, `os.getenv(X)` and `os.environ[X]` loads."""
    for node in ast.walk(tree):
        target = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            f = node.func
            if (
                f.attr == "get" and isinstance(f.value, ast.Attribute) and f.value.attr == "environ"
            ) or f.attr == "getenv":
                target = node.args[0] if node.args else None
            else:
                continue
        elif (
            isinstance(node, ast.Subscript)
            and isinstance(node.ctx, ast.Load)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr == "environ"
        ):
            target = node.slice
        else:
            continue
        name = target.value if isinstance(target, ast.Constant) else None
        yield name, node.lineno


def test_nothing_outside_settings_reads_the_environment():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "settings.py" or rel.startswith("engine/"):  # the development engine is its own program
            continue
        for name, line in _environment_reads(ast.parse(path.read_text(encoding="utf-8"))):
            if (rel, name) not in FORWARDED:
                found.append(f"{rel}:{line} reads {name or 'a computed name'}")
    assert found == [], "read these through speculator_arena.settings:\n" + "\n".join(found)


def test_every_arena_variable_the_code_names_is_declared():
    declared = set(settings.VARIABLES) | SET_FOR_ENGINES
    prefixes = {n[: -len("<FIELD>")] for n in settings.VARIABLES if n.endswith("<FIELD>")}
    named = set()
    for path in PACKAGE.rglob("*.py"):
        named |= set(re.findall(r"\bARENA_[A-Z0-9_]*[A-Z0-9]\b", path.read_text(encoding="utf-8")))
    undeclared = {n for n in named - declared if not any(n.startswith(p) for p in prefixes)}
    assert undeclared == set()


def test_the_readme_table_is_the_declarations():
    text = README.read_text(encoding="utf-8")
    block = text.split("<!-- settings:begin -->\n", 1)[1].split("\n<!-- settings:end -->", 1)[0]
    assert block == settings.markdown_table()


def test_values_are_read_when_asked_with_their_defaults(monkeypatch, tmp_path):
    monkeypatch.delenv("ARENA_PACKS", raising=False)
    assert settings.flag("ARENA_PACKS") is True  # default on
    monkeypatch.setenv("ARENA_PACKS", "0")
    assert settings.flag("ARENA_PACKS") is False
    monkeypatch.setenv("ARENA_NO_NVML", "1")
    assert settings.flag("ARENA_NO_NVML") is True
    monkeypatch.setenv("ARENA_HOME", str(tmp_path))
    assert settings.arena_home() == tmp_path.resolve() and settings.arena_home("x") == Path("x").resolve()
    monkeypatch.setenv("ARENA_CHECKPOINT_CACHE", "")
    assert settings.raw("ARENA_CHECKPOINT_CACHE") == "" and settings.get("ARENA_CHECKPOINT_CACHE").endswith(
        "checkpoints"
    )
    monkeypatch.setenv("ARENA_K8S_NAMESPACE", "arena-x")
    assert settings.prefixed("ARENA_K8S_")["namespace"] == "arena-x"
    with pytest.raises(KeyError):
        settings.get("ARENA_HOMME")  # a misspelt name fails instead of taking a default
