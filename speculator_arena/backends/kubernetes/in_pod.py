"""`python -m speculator_arena.backends.kubernetes.in_pod`: the evaluation pod's entry point.

It runs the same harness as `arena evaluate` on a machine (runners/harness.py, the same
`EvaluationSpec`, passed as JSON by `pod_command`), with
ARENA_HOME the pod's results sub-directory, and then writes the results manifest (results.py)
that the launcher verifies before landing anything. The engines run in the pod's other
container, through its supervisor (engine_sidecar.py; `ARENA_ENGINE_SIDECAR` names it). Before
the harness starts, the supervisor must have answered and the sealed target and speculator are
checked against their manifests (full sha256): the pod must evaluate the bytes the arena
prepared; either failing voids the evaluation. Progress lines and status changes go to Dagster as Pipes messages when
the launcher opened a Pipes session (DAGSTER_PIPES_CONTEXT), and to stderr (the pod's log).

Exit status: 0 when the evaluation reached a final status (measured, failed or void) and the
manifest is written; anything else is a runner failure the launcher voids.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import ExitStack
from pathlib import Path

from speculator_arena import settings

POD_RESULTS = "/arena/results"  # the results volume's sub-directory of this evaluation
POD_ARTIFACTS = "/arena/artifacts"  # read-only: pools/, sealed targets and speculators, engines
POD_SCRATCH = "/arena/scratch"  # HOME and caches (emptyDir)
POD_ENGINE_SCRATCH = "/arena/engine"  # the engine container's HOME, logs and workspaces (emptyDir)
SIDECAR_LISTEN = "127.0.0.1:8470"  # the engine container's supervisor, on the pod's loopback
MODULE = "speculator_arena.backends.kubernetes.in_pod"


def pod_command(spec) -> list[str]:
    """The container's command for an EvaluationSpec (whose paths are the pod's): the spec itself,
    as the `evaluation` asset received it."""
    return ["python", "-m", MODULE, "--spec", spec.to_json()]


def parse(argv: list[str] | None):
    p = argparse.ArgumentParser(
        prog=f"python -m {MODULE}", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--spec", required=True, help="the EvaluationSpec as JSON (pod_command writes it)")
    p.add_argument("--home", default=None, help="ARENA_HOME (default: $ARENA_HOME or ./arena_home)")
    p.add_argument("--artifacts", default=POD_ARTIFACTS, help="the read-only artifacts mount (pools/)")
    return p.parse_args(argv)


def sealed_problems(spec) -> list[str]:
    """What differs between the sealed target/speculator and their manifests (full sha256)."""
    from speculator_arena.checkpoints.seal import verify_manifest

    problems = []
    for what, path in (("target", spec.target), ("speculator", spec.speculator)):
        if path:
            problems += [f"sealed {what}: {p}" for p in verify_manifest(path, full=True)]
    return problems


def sidecar_problems(spec) -> list[str]:
    """Connect to the engine container's supervisor (when the pod has one); what went wrong."""
    from speculator_arena.protocol import load_protocol
    from speculator_arena.runners import sidecar_engine

    if not sidecar_engine.address():
        return []
    task = load_protocol(spec.protocol_version).task(spec.task_id)
    try:
        sidecar_engine.supervisor(task.start_stop.health_timeout_seconds)
    except sidecar_engine.SidecarError as exc:
        return [str(exc)]
    return []


def _link_pools(home: Path, artifacts: Path) -> None:
    """The harness reads pools from ARENA_HOME/pools: point it at the read-only artifacts."""
    from speculator_arena.pools.layout import pools_dir

    link = pools_dir(home)
    if not link.exists() and pools_dir(artifacts).is_dir():
        link.symlink_to(pools_dir(artifacts), target_is_directory=True)


def _hand_over(home: Path) -> None:
    """Make the finished raw parts readable by the launcher. The harness keeps raw/ private
    (0700) while an engine runs, against the engine; every engine has stopped by now."""
    raw = home / "raw"
    if raw.is_dir():
        for path in [raw, *raw.rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)


class Reporter:
    """Progress and status to stderr and, inside a Pipes session, to Dagster."""

    def __init__(self, pipes=None):
        self.pipes = pipes

    def say(self, msg: str) -> None:
        print(msg, file=sys.stderr, flush=True)
        if self.pipes is not None:
            self.pipes.log.info(msg)

    def event(self, **payload) -> None:
        print(json.dumps(payload, default=str), file=sys.stderr, flush=True)
        if self.pipes is not None:
            self.pipes.report_custom_message(payload)


def run(args, reporter: Reporter) -> dict:
    from speculator_arena.backends.kubernetes.results import write_results_manifest
    from speculator_arena.rules.status import QUEUED, RUNNING, VOID
    from speculator_arena.runners.harness import Evaluation
    from speculator_arena.runners.queued import queue
    from speculator_arena.runners.spec import EvaluationSpec
    from speculator_arena.runners.status import write_status
    from speculator_arena.warehouse import arena_home

    home = arena_home(args.home)
    home.mkdir(parents=True, exist_ok=True)
    _link_pools(home, Path(args.artifacts))
    spec = EvaluationSpec.from_json(args.spec)
    problems = sidecar_problems(spec)  # before the harness opens the device the supervisor names
    ev = Evaluation(spec, home=home, progress=reporter.say)
    reporter.event(event="status", evaluation_id=spec.evaluation_id, status=QUEUED)
    row = queue(spec, home, device=ev.ctx.device)  # the row to void when the sealed inputs differ
    problems += sealed_problems(spec)
    if problems:
        row = write_status(ev.ctx.wh, row, VOID, void_reason="; ".join(problems)[:500])
        status = VOID
    else:
        reporter.event(event="status", evaluation_id=spec.evaluation_id, status=RUNNING)
        status = ev.run()
        row = ev.row or {}
    _hand_over(home)
    manifest = write_results_manifest(home, spec.evaluation_id)
    summary = {
        "event": "results",
        "evaluation_id": spec.evaluation_id,
        "status": status,
        "reason": row.get("void_reason") or row.get("failure_reason"),
        "parts": len(manifest["parts"]),
        "rows": sum(p["rows"] for p in manifest["parts"]),
    }
    reporter.event(**summary)
    return summary


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    with ExitStack() as stack:
        pipes = None
        if settings.get("DAGSTER_PIPES_CONTEXT"):
            from dagster_pipes import open_dagster_pipes

            pipes = stack.enter_context(open_dagster_pipes())
        run(args, Reporter(pipes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
