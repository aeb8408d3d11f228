"""One run the submission queue requested, in a process of its own: what `arena queue work` starts
for each free device when several are free (`launch.work_queue_once`, which starts
`python -m speculator_arena.dagster_project.queue_run` with the run's spec, home and tags as one
JSON argument), so that two GPU nodes' evaluations run at the same time without the Dagster
daemon. The process runs it through the one door (`launch.evaluate`, tagged with its device and
submission as the sensor asked), prints a failure as the worker would, and exits 0, or 1 when the
run raised. Its stderr is the worker's.
"""

from __future__ import annotations

import json
import sys


def main(argv: list[str] | None = None) -> int:
    from speculator_arena.dagster_project.launch import evaluate, run_failed
    from speculator_arena.runners.interrupt import CommandInterrupted
    from speculator_arena.runners.spec import EvaluationSpec

    payload = json.loads((argv if argv is not None else sys.argv[1:])[0])
    spec = EvaluationSpec.from_json(payload["spec"])
    try:
        evaluate(spec, payload["home"], tags=payload["tags"], analysts=False)
    except CommandInterrupted as exc:  # the worker's stop, forwarded: the evaluation is recorded void
        print(f"queue: {spec.evaluation_id} {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # noqa: BLE001 - the worker reports it and goes on
        print(run_failed(spec.evaluation_id, exc), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
