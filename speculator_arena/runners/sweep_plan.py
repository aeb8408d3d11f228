"""A sweep's plan: one engine evaluated over values of one speculation setting (`arena sweep`).

Why the value goes into a copy of the engine directory and not into the engine's environment:
an engine gets only the variables of protocol section 3, and what it speculates with is its own
launch.sh's choice (docs/participants/engine-contract.md). So each point of a sweep is an
ordinary engine directory, `$ARENA_HOME/sweeps/<sweep_id>/<NAME>=<value>/`, a copy of the
engine with the one occurrence of the setting in its launch.sh replaced: `NAME=VALUE` (shell, as
the development engines set `DEV_ENGINE_SPEC_K=4`) or `"NAME": VALUE` (JSON inside launch.sh, as
vLLM's `--speculative-config` holds `"num_speculative_tokens": 4`). The runner copies whatever
engine directory it is given into the engine's own workspace and hands it to the engine's user
there (lifecycle.unpack_engine), so a copy under ARENA_HOME runs as any engine does, even where
ARENA_HOME is closed to that user.

A setting absent, present more than once, or a value that is not a plain number or identifier
is a `SweepError` before anything is copied, stored or evaluated. Each point's evaluation ids are
fixed by the sweep and the value (`evaluation_id`), so a sweep run again finds what it stored.
The manifest (`sweep.json` beside the points) says what the sweep is; the results are read from
the stored evaluations (board/sweep.py), never from the manifest.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

from speculator_arena.atomic import write_json_atomic
from speculator_arena.errors import ArenaError

SWEEPS = "sweeps"  # under ARENA_HOME
MANIFEST = "sweep.json"
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
VALUE = re.compile(r"-?[0-9]+(\.[0-9]+)?|[A-Za-z_][A-Za-z0-9_]*")
SWEEP_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,79}")


class SweepError(ValueError, ArenaError):
    """A sweep that cannot be made as asked: nothing was copied, stored or evaluated."""


def check_name(name: str) -> str:
    if not NAME.fullmatch(name or ""):
        raise SweepError(f"setting {name!r} is not a variable or key name (letters, digits, _)")
    return name


def check_values(values: list[str]) -> list[str]:
    """The values as given (text, so `4` and `4.0` stay what launch.sh will say), each a plain
    number or identifier, none twice, at least one."""
    out = [v.strip() for v in values if v.strip()]
    if not out:
        raise SweepError("no values to sweep (--values 1,2,4,8)")
    bad = [v for v in out if not VALUE.fullmatch(v)]
    if bad:
        raise SweepError(f"values must be plain numbers or identifiers, not {', '.join(map(repr, bad))}")
    if len(set(out)) != len(out):
        raise SweepError(f"a value is given twice: {', '.join(out)}")
    return out


def check_sweep_id(sweep_id: str) -> str:
    if not SWEEP_ID.fullmatch(sweep_id or ""):
        raise SweepError(f"sweep id {sweep_id!r}: letters, digits, '.', '_' and '-', starting with a letter or digit")
    return sweep_id


def new_sweep_id() -> str:
    return "sweep-" + time.strftime("%Y%m%d-%H%M%S", time.gmtime())


def _patterns(name: str) -> list[tuple[str, re.Pattern]]:
    shell = re.compile(rf"(?<![A-Za-z0-9_$]){re.escape(name)}=(?P<value>\"[^\"\n]*\"|'[^'\n]*'|[^\s;&|)]*)")
    js = re.compile(rf"\"{re.escape(name)}\"\s*:\s*(?P<value>\"[^\"\n]*\"|[^\s,}}\]]+)")
    return [("shell", shell), ("json", js)]


def substitute(text: str, name: str, value: str) -> str:
    """launch.sh's text with the one occurrence of the setting given `value` (module docstring);
    a quoted JSON value stays quoted. SweepError when it occurs zero or several times."""
    check_name(name)
    check_values([value])
    hits = [(kind, m) for kind, p in _patterns(name) for m in p.finditer(text)]
    if len(hits) != 1:
        found = "; ".join(f"{kind} at line {text.count(chr(10), 0, m.start()) + 1}" for kind, m in hits)
        raise SweepError(
            f'the setting {name} must occur exactly once in launch.sh, as {name}=VALUE or "{name}": VALUE; '
            + (f"it occurs {len(hits)} times ({found})" if hits else "it does not occur")
        )
    kind, m = hits[0]
    new = f'"{value}"' if kind == "json" and m.group("value").startswith('"') else value
    return text[: m.start("value")] + new + text[m.end("value") :]


def sweep_dir(home, sweep_id: str) -> Path:
    return Path(home) / SWEEPS / check_sweep_id(sweep_id)


def point_engine(engine_dir: Path, home, sweep_id: str, name: str, value: str) -> Path:
    """The point's engine directory (a copy of `engine_dir` with the setting replaced), made
    again each time from the engine as it is now: a launch.sh that changed is seen by the
    provenance's digest of the copy."""
    launch = Path(engine_dir) / "launch.sh"
    if not launch.is_file():
        raise SweepError(f"engine {engine_dir} has no launch.sh at its top")
    text = substitute(launch.read_text(encoding="utf-8"), name, value)
    dest = sweep_dir(home, sweep_id) / f"{name}={value}"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(engine_dir, dest, symlinks=True)
    (dest / "launch.sh").write_text(text, encoding="utf-8")
    return dest


def evaluation_id(sweep_id: str, name: str, value: str, attempt: int = 1) -> str:
    """The point's evaluation id: `<sweep_id>-<name>-<value>` (lower case, `.` kept), `-a<N>`
    after it for the Nth attempt (a void or failed one made again)."""
    base = re.sub(r"[^a-z0-9._-]", "-", f"{sweep_id}-{name}-{value}".lower())
    return base if attempt == 1 else f"{base}-a{attempt}"


def write_manifest(home, doc: dict) -> Path:
    path = sweep_dir(home, doc["sweep_id"]) / MANIFEST
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(path, doc)
    return path


def read_manifest(home, sweep_id: str) -> dict:
    path = sweep_dir(home, sweep_id) / MANIFEST
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SweepError(f"no sweep {sweep_id!r} in {Path(home) / SWEEPS}") from None


def list_sweeps(home) -> list[dict]:
    """Every sweep's manifest in this home, newest first (an unreadable one is left out)."""
    root = Path(home) / SWEEPS
    out = []
    for path in sorted(root.glob(f"*/{MANIFEST}")) if root.is_dir() else []:
        try:
            out.append(json.loads(path.read_text(encoding="utf-8")))
        except (OSError, ValueError):
            continue
    return sorted(out, key=lambda d: d.get("created_at") or 0, reverse=True)
