"""Imports point down a ranked list of packages, and nothing imports in a circle
(docs/contributors/contracts.md, "Layers"; docs/contributors/architecture.md, "The data's path is the imports' path").

Every package of `speculator_arena` has a rank (RANKS); a module may import modules of its own
package or of a lower rank, never a higher one, and no two packages may import each other. A
package's `commands.py` is its CLI adapter (cli.py registers it) and sits with the CLI. Imports
are read from the source with `ast`, including those inside functions (where this codebase puts
heavy ones), so a lazy upward import counts as much as a top-level one.
"""

from __future__ import annotations

import ast
from pathlib import Path

import speculator_arena

PACKAGE = Path(speculator_arena.__file__).resolve().parent
# Low to high: what every module reads; the protocol as data; the rules it implies; the raw
# measurements; the domains that only read below them; the runner and where it runs; the scorer;
# the board's read model; calibration; the front door; the Streamlit pages; Dagster; the CLI.
RANKS = {
    "settings": 0,
    "atomic": 0,
    "diskspace": 0,
    "sqlfiles": 0,
    "printing": 0,
    "system_users": 0,
    "errors": 0,
    "protocol": 1,
    "rules": 2,
    "warehouse": 3,
    "checkpoints": 4,
    "engine": 4,
    "sealed": 5,
    "pools": 5,
    "grading": 5,
    "runners": 6,
    "backends": 7,
    "scoring": 8,
    "board": 9,
    "calibration": 10,
    "frontdoor": 11,
    "dashboards": 12,
    "assets": 13,
    "dagster_project": 14,
    "cli": 15,
}
COMMANDS = 15  # a package's commands.py: its CLI adapter


def _module(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_module(name: str) -> bool:
    rel = Path(*name.split(".")[1:])
    return (PACKAGE / rel).with_suffix(".py").is_file() or (PACKAGE / rel / "__init__.py").is_file()


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


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "speculator_arena"


def _rank(module: str) -> int:
    if module.split(".")[-1] == "commands":
        return COMMANDS
    return RANKS[_package(module)]


def _edges():
    for path in sorted(PACKAGE.rglob("*.py")):
        me = _module(path)
        for name, line in _imports(path):
            yield me, name, line


def test_every_package_has_a_rank():
    packages = {_package(_module(p)) for p in PACKAGE.rglob("*.py")} - {"speculator_arena"}
    assert sorted(packages - set(RANKS)) == []
    assert sorted(set(RANKS) - packages) == []


def test_no_module_imports_a_package_ranked_above_its_own():
    upward = [
        f"{me}:{line} imports {name}"
        for me, name, line in _edges()
        if _package(name) != _package(me) and _package(name) != "speculator_arena" and _rank(name) > _rank(me)
    ]
    assert upward == [], "\n".join(upward)


def test_no_two_packages_import_each_other():
    """Package to package, CLI adapters aside: the ranks forbid it, and this says which pair."""
    pairs = {
        (_package(me), _package(name))
        for me, name, _ in _edges()
        if _package(me) != _package(name) and "commands" not in (me.split(".")[-1], name.split(".")[-1])
    }
    both = sorted(f"{a} <-> {b}" for a, b in pairs if (b, a) in pairs and a < b)
    assert both == []


def _module_graph(top_level_only: bool) -> dict[str, set[str]]:
    """Module -> the project's modules it imports (a module's import of its own parent package
    aside when imports inside functions count: Python loads the package first in any case)."""
    files = {_module(p): p for p in PACKAGE.rglob("*.py")}
    graph = {m: set() for m in files}
    for m, p in files.items():
        for name, _ in _imports(p, top_level_only=top_level_only):
            target = name if name in files else name.rsplit(".", 1)[0]
            if target in files and target != m and (top_level_only or not m.startswith(target + ".")):
                graph[m].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[str]:
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
    return cycles


def test_no_import_cycle_at_load():
    assert _cycles(_module_graph(top_level_only=True)) == []


def test_the_rules_are_pure():
    """The base layer does no I/O of the arena's: it imports nothing of the arena but the protocol."""
    bad = [
        f"{me}:{line} imports {name}"
        for me, name, line in _edges()
        if _package(me) == "rules" and _package(name) not in ("rules", "protocol")
    ]
    assert bad == []


def test_no_two_modules_import_each_other():
    """Module to module, imports inside functions included (they are circles all the same, only
    put off to run time: the calibration's asset and its launcher were one)."""
    assert _cycles(_module_graph(top_level_only=False)) == []


def test_the_assets_hold_definitions_only():
    """`assets/` holds Dagster definitions and resources: it imports no launcher (they sit above
    it, in dagster_project/) and no asset materializes another inside its step."""
    up = [
        f"{me}:{line} imports {name}"
        for me, name, line in _edges()
        if me.startswith("speculator_arena.assets") and _package(name) == "dagster_project"
    ]
    assert up == [], "\n".join(up)
    runs = []
    for path in sorted((PACKAGE / "assets").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            called = node.func if isinstance(node, ast.Call) else None
            name = getattr(called, "attr", None) or getattr(called, "id", None)
            if name in ("materialize", "materialize_to_memory", "execute_in_process"):
                runs.append(f"{path.name}:{node.lineno} calls {name}")
    assert runs == [], "\n".join(runs)


def test_the_pools_ingest_reads_sources_and_nothing_of_the_builder():
    """pools/ is split (issue 34): `pools.ingest` reads the sources (readers, formats, the declared
    sets) and imports nothing of `pools.builder` (the build's steps) or of the served pool's API;
    the builder reads through it."""
    up = [
        f"{me}:{line} imports {name}"
        for me, name, line in _edges()
        if me.startswith("speculator_arena.pools.ingest")
        and (name.startswith("speculator_arena.pools.builder") or name == "speculator_arena.pools.api")
    ]
    assert up == [], "\n".join(up)
