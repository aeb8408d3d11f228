"""Imports point down: the CLI over the Dagster side over the domains over what every domain reads
(docs/contracts.md, "The path of one evaluation"), and no two modules import each other at load.

Read from the source with `ast` (every import, including those inside functions, which is where
this codebase puts heavy ones), so a lazy upward import counts as much as a top-level one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import speculator_arena

PACKAGE = Path(speculator_arena.__file__).resolve().parent
# top-level name under speculator_arena -> layer (higher may import lower, never the reverse)
LAYERS = {
    "cli": 3,
    "dagster_project": 2,
    "assets": 2,
    "settings": 0,
    "atomic": 0,
    "diskspace": 0,
    "sqlfiles": 0,
    "printing": 0,
    "protocol": 0,
    "warehouse": 0,
}
DOMAIN = 1


def _module(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, *, top_level_only: bool = False):
    """(imported module, line) for every `speculator_arena` import of a file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else ast.walk(tree)
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("speculator_arena"):
            for a in node.names:  # `from pkg import module` imports the module; else the module named
                sub = f"{node.module}.{a.name}"
                yield (sub if _is_module(sub) else node.module), node.lineno
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("speculator_arena"):
                    yield a.name, node.lineno


def _is_module(name: str) -> bool:
    rel = Path(*name.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()


def _layer(module: str) -> int:
    """A package's `commands.py` is its CLI adapter (cli.py registers it): it sits at least with the
    domains, so `arena protocol publish` may call the calibration's publisher."""
    parts = module.split(".")
    layer = LAYERS.get(parts[1], DOMAIN) if len(parts) > 1 else DOMAIN
    return max(layer, DOMAIN) if parts[-1] == "commands" else layer


def test_no_module_imports_a_layer_above_its_own():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        me = _module(path)
        for name, line in _imports(path):
            if _layer(name) > _layer(me):
                upward.append(f"{me}:{line} imports {name}")
    assert upward == [], "\n".join(upward)


def test_no_import_cycle_at_load():
    files = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph = {m: set() for m in files}
    for m, p in files.items():
        for name, _ in _imports(p, top_level_only=True):
            target = name if name in files else name.rsplit(".", 1)[0]
            if target in files and target != m:
                graph[m].add(target)
    cycles, state = [], {}

    def visit(m, stack):
        state[m] = 1
        stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 1:
                cycles.append(" -> ".join(stack[stack.index(n) :] + [n]))
            elif n not in state:
                visit(n, stack)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    assert cycles == [], "\n".join(cycles)
