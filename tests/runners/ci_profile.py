"""The CI profile: the latest shipped protocol with the local task's passes and probes shortened, staged as a
new version through ARENA_PROTOCOL_DIR (the way operators stage versions, and tests use it).

Why staged and not a second task id: pools and checkpoints are built per task id, and the
embedded task's pool and target are what CI should exercise; only the clock is shorter.
Limits stay the shipped version's (the steal allowed aside: CI's VM is not the arena's machine): honest
engines must pass them and attacks must fail them as they are.
"""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import yaml


def full_profile() -> bool:
    """ARENA_TEST_PROFILE=full: the runs beyond CI's time (docs/contributors/tests.md, "Profiles and
    markers"): tests marked `full` (tests/conftest.py) and every attack run (attack_runs.py)."""
    return os.environ.get("ARENA_TEST_PROFILE") == "full"


CI_MAX_STEAL_SHARE = 0.5  # the steal the staged test versions allow (see stage_ci_protocol)
# The development engine's threads (OMP_NUM_THREADS, which the runner passes on) in the suite's
# real evaluations. The suite's machines have two cores and while an evaluation runs its engine is
# the only busy process; with one thread an attack-profile evaluation took 202 s here, with two
# 126 s (prefill and prompt_logprobs scoring are the engine's heavy part).
ENGINE_THREADS = "2"

# The engine starts of a mirrored evaluation, in order (engine, purpose): C S S C timed, then the probes.
MIRRORED_STARTS = [
    ("candidate", "timed"),
    ("stock", "timed"),
    ("stock", "timed"),
    ("candidate", "timed"),
    ("candidate", "probe"),
    ("stock", "probe"),
]

CI_OVERRIDES = {
    # three short passes per workload, one start per engine, whatever the shipped version gives
    # the task (v4: two long ones, mirrored): the suite's checks of pass order, medians and stored
    # rows count on three, and sequential is what every public task runs; the mirrored pairing
    # has its own real evaluation (tests/runners/test_mirrored.py)
    "passes_per_workload": 3,
    "pairing": "sequential",
    "interleaving": None,
    "workloads": {
        "solo": {"interleave": 1, "pass_seconds": 4, "speed": "request_time"},
        "team": {"interleave": 2, "pass_seconds": 4, "speed": "busy_window"},
        "busy": {"interleave": 2, "pass_seconds": 4, "speed": "busy_window"},
    },
    "grace_seconds": 15,
    "gates": {
        "greedy_agreement": {"prompts": 4, "temperature": 0.0, "max_tokens": 24, "concurrency": 1},
        "sampled_likelihood": {"replies": 16, "context_tokens": 300, "reply_chars": 300},
        "target_fidelity": {"texts": 4},
    },
    "start_stop": {"health_timeout_seconds": 120, "sigterm_grace_seconds": 5},
}


# The attack profile: one pass per workload; solo and team short, busy longer and with more lanes
# (the pool's blocks follow the lanes), so that each engine leaves about two dozen counted replies:
# enough for the likelihood check to see loose acceptance and for the length gate to see a cut,
# in what CI can afford for nine evaluations of the real model on two cores.
ATTACK_OVERRIDES = {
    "lanes": {"solo": 1, "team": 2, "busy": 6},
    "workloads": {
        "solo": {"interleave": 1, "pass_seconds": 2, "speed": "request_time"},
        "team": {"interleave": 2, "pass_seconds": 2, "speed": "busy_window"},
        "busy": {"interleave": 2, "pass_seconds": 10, "speed": "busy_window"},
    },
    "passes_per_workload": 1,
    "grace_seconds": 60,
    "max_tokens_cap": 24,
    "gates": {
        "greedy_agreement": {"prompts": 3, "temperature": 0.0, "max_tokens": 16, "concurrency": 1},
        "sampled_likelihood": {"replies": 24, "context_tokens": 200, "reply_chars": 300},
        "target_fidelity": {"texts": 3},
    },
    "start_stop": {"health_timeout_seconds": 180, "sigterm_grace_seconds": 5},
}


# Gate limits that no honest engine fails by chance, for tests of something other than the gates
# (stage_ci_protocol's loose_gates). With a handful of probe items the likelihood and first-choice
# checks of an honest candidate fail about one run in ten (two tests at 1.96 standard errors,
# estimated from four replies): CI at cd19e73 scored the front door's honest n-gram engine 0.
LOOSE_LIMITS = {"likelihood_bound": 100.0, "first_choice_bound": 1.0, "greedy_agreement_floor": 0.0}
LOOSE_LENGTH_BOUND = 1.0


def stage_ci_protocol(
    directory: Path,
    task_id: str = "local-smollm2",
    *,
    warmup_waves: int | None = None,
    loose_gates: bool = False,
    **extra,
) -> int:
    """Write v<latest+1>.yaml into `directory` from the latest shipped version; return its number.
    `extra` overrides the task's values; `warmup_waves` (a protocol-wide value) the warm-up waves,
    which evaluations that measure no speed skip (a quarter of an evaluation of the real model);
    `loose_gates` the statistical gates' limits (LOOSE_LIMITS), for tests whose subject is not the
    gates: the fidelity ceiling, answering and memory stay the shipped ones."""
    shipped = resources.files("speculator_arena.protocol") / "versions"
    latest = max(int(f.name[1:-5]) for f in shipped.iterdir() if f.name.startswith("v") and f.name.endswith(".yaml"))
    doc = yaml.safe_load((shipped / f"v{latest}.yaml").read_text())
    version = latest + 1
    doc["version"] = version
    doc["notes"] = f"CI profile (tests only): v{latest} with short passes and few probes on the local task"
    task = doc["tasks"][task_id]
    for k, v in {**CI_OVERRIDES, **extra}.items():
        task[k] = v
    if warmup_waves is not None:
        doc["warmup_waves"] = warmup_waves
    if loose_gates:
        task["limits"] = {**task["limits"], **LOOSE_LIMITS}
        doc["gates"]["length"]["bound"] = LOOSE_LENGTH_BOUND
    # CI's machine is a VM whose hypervisor steals 5% or more of its CPU time in a short pass
    # (CI at 5b49bd8: "steal 5.3%" voided three attack runs and the test-split run), which no test
    # controls; the staged test version allows it (CI_MAX_STEAL_SHARE). The foreign-CPU limit stays
    # the shipped one, and the attack module's hog proves it is enforced; the steal rule itself is
    # checked on stored rows (tests/scoring/test_outcomes.py).
    if doc.get("contention"):
        doc["contention"]["max_steal_share"] = max(doc["contention"]["max_steal_share"], CI_MAX_STEAL_SHARE)
    # A developer whose machine runs other work meanwhile may raise the foreign-CPU limit of the
    # staged test version (its evaluations would be void "host contended" otherwise); CI never
    # sets it, so CI's evaluations are judged by the shipped limit.
    loose = os.environ.get("ARENA_TEST_MAX_FOREIGN_CPU_SHARE")
    if loose and doc.get("contention"):
        doc["contention"]["max_foreign_cpu_share"] = float(loose)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"v{version}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return version


# The fewest probes that leave every gate measured (with loose statistical limits: LOOSE_LIMITS).
TINY_GATES = {
    "greedy_agreement": {"prompts": 2, "temperature": 0.0, "max_tokens": 16, "concurrency": 1},
    "sampled_likelihood": {"replies": 4, "context_tokens": 200, "reply_chars": 300},
    "target_fidelity": {"texts": 2},
}


def stage_tiny_protocol(directory: Path, *, seconds=(1, 1, 2), passes: int = 1, **extra) -> int:
    """The smallest real evaluation: no warm-up waves, `passes` passes per workload of `seconds`
    (solo, team, busy), TINY_GATES with loose limits; for tests whose subject is how an evaluation
    comes in, is stored or is shown (the front door, sweeps, an entry's history), not its speeds or
    the gates' power (the session's real evaluation and the attack runs test those)."""
    solo, team, busy = seconds
    return stage_ci_protocol(
        directory,
        warmup_waves=0,
        loose_gates=True,
        passes_per_workload=passes,
        workloads={
            "solo": {"interleave": 1, "pass_seconds": solo, "speed": "request_time"},
            "team": {"interleave": 2, "pass_seconds": team, "speed": "busy_window"},
            "busy": {"interleave": 2, "pass_seconds": busy, "speed": "busy_window"},
        },
        gates=TINY_GATES,
        **extra,
    )


def stage_lowb_ci_protocol(directory: Path, **task_overrides) -> int:
    """LowBArena's CI profile: lowb-p<latest+1>.yaml in `directory` from the latest shipped LowBArena
    version, with CI's steal allowance (as `stage_ci_protocol` says why) and `task_overrides` on
    lowb-smollm2 (each a key of the task, e.g. `workloads=...`); every limit the shipped one."""
    shipped = resources.files("speculator_arena.protocol") / "lowb_versions"
    latest = max(int(f.name[1:-5]) for f in shipped.iterdir() if f.name.startswith("p") and f.name.endswith(".yaml"))
    doc = yaml.safe_load((shipped / f"p{latest}.yaml").read_text())
    version = latest + 1
    doc["version"] = version
    doc["notes"] = f"CI profile (tests only): p{latest} with CI's steal allowance"
    doc["runner"]["contention"]["max_steal_share"] = max(
        doc["runner"]["contention"]["max_steal_share"], CI_MAX_STEAL_SHARE
    )
    loose = os.environ.get("ARENA_TEST_MAX_FOREIGN_CPU_SHARE")
    if loose:
        doc["runner"]["contention"]["max_foreign_cpu_share"] = float(loose)
    doc["tasks"]["lowb-smollm2"].update(task_overrides)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"lowb-p{version}.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    return version
