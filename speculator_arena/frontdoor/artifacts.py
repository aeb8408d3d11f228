"""LowBArena's quantized checkpoint (a submission's `artifact`) at the front door: which files it
may hold, how large it may be, and the checks its intake child runs before it is sealed.

Why these rules: the LowB runner serves the sealed artifact as `ARTIFACT` to the participant's
engine and reads its safetensors headers before any engine code runs
(`checkpoints/inspect_tensors.py`). What that reading would refuse is refused here instead, while
a refusal still stores nothing and costs no quota: a pickle (`*.bin`, `*.pt`, `*.pkl`, ...: loading
one runs the participant's code in whatever process loads it), a link (what it points at is not
what was sealed), a safetensors header that lies, no `config.json`. Only checkpoint files are taken
(weights, JSON, tokenizer files); anything else in a workspace folder is left out, as a
speculator's is. Its bound is the task's BF16 target checkpoint, read the way a speculator's bound
is (the sealed target's manifest here, else the hub's listing): a quantization is smaller than BF16.

The header checks run in the intake's child (`worker.py`), never in the API: a header is hostile
JSON of up to 100 MiB, read under the child's memory and CPU limits.
"""

from __future__ import annotations

import re
import stat
from pathlib import Path

from speculator_arena.checkpoints.inspect_tensors import REFUSED_SUFFIXES
from speculator_arena.frontdoor.sources import COMMIT_RE, hub_target_bytes, local_target_bytes
from speculator_arena.protocol.lowb import load_lowb_protocol
from speculator_arena.sealed.refusal import Refused, echo

# Weights, configs and tokenizer files. `*.json` covers config.json, generation_config.json,
# tokenizer.json, tokenizer_config.json, special_tokens_map.json and vocab.json.
ALLOWED_FILES = ["*.safetensors", "*.json", "merges.txt", "*.jinja"]
# solution.kind of a LowBArena submission: the participant's own short label (nvfp4, w8a8, ...);
# the LowB protocol lists no kinds, and the references' exempt kinds (bf16) are not the
# participants' to claim.
KIND_RE = re.compile(r"[a-z0-9][a-z0-9_.+-]{0,31}")
HASH_BYTES_PER_S = 100 * 2**20  # the child hashes an artifact twice (its seal, inspect's digest)


def lowb_field_refusal(has_speculator: bool, kind: str) -> None:
    """A LowBArena submission's fields beyond the artifact itself: no speculator, a kind that
    labels a quantization (never an exempt reference kind)."""
    proto = load_lowb_protocol()
    if has_speculator:
        raise Refused(
            "a LowBArena task takes no `speculator`: submit the quantized checkpoint as `artifact` "
            "(a workspace:/DIR or a Hugging Face repository at a revision)",
            status=422,
        )
    if not KIND_RE.fullmatch(kind):
        raise Refused(
            f"solution.kind {echo(kind)} must be a short lowercase label such as int8, w4a16, nvfp4", status=422
        )
    if kind in proto.gates.contract.exempt_reference_kinds:
        raise Refused(f"solution.kind {echo(kind)} is a reference's kind; a submission is a quantization", status=422)


def max_bytes(task_id: str, home) -> int | None:
    """The artifact's bound: the task's sealed target's bytes when it is prepared here; None when
    the fetch worker must read them from the hub; refused when neither can say (a target made
    from a package, not prepared on this arena yet)."""
    local = local_target_bytes(task_id, home)
    if local is not None:
        return local
    if not COMMIT_RE.fullmatch(load_lowb_protocol().task(task_id).revision):
        raise Refused(
            f"the target of {task_id} is not prepared on this arena yet, and its size bounds the artifact; "
            "submit again once the operators have prepared it",
            status=503,
        )
    return None


def hub_max_bytes(model: str, revision: str) -> int:
    """The bound from the hub's listing of the task's target (the fetch worker's thread, or the
    child: it is given the target's name, as it reads no protocol)."""
    return hub_target_bytes(model, revision, ALLOWED_FILES)


def hash_seconds(nbytes: int) -> int:
    """CPU seconds the child may spend hashing an artifact of `nbytes` (on top of its base limit)."""
    return int(2 * nbytes / HASH_BYTES_PER_S) + 1


def _pickle_reason(rel: str) -> str | None:
    if rel.lower().endswith(REFUSED_SUFFIXES):
        return (
            f"artifact file {echo(rel)} is refused: weights must be *.safetensors "
            "(pickles such as *.bin, *.pt, *.pkl run code when they are loaded)"
        )
    return None


def workspace_refusal(rel: str, st) -> str | None:
    """Why a workspace artifact is refused for this entry (`sources.copy_workspace`'s `refuse`)."""
    if stat.S_ISLNK(st.st_mode):
        return f"artifact entry {echo(rel)} is a link; an artifact holds regular files only (copy the file)"
    if not stat.S_ISREG(st.st_mode) and not stat.S_ISDIR(st.st_mode):
        return f"artifact entry {echo(rel)} is a device, fifo or socket"
    return _pickle_reason(rel) if stat.S_ISREG(st.st_mode) else None


def fetch_hub(repo: str, revision: str, dest: Path, bound: int) -> None:
    """The intake child's fetch of a hub artifact: refused whole if its listing holds a pickle,
    else only its allowed files downloaded (`sources.fetch_speculator_hub`)."""
    from speculator_arena.checkpoints.hub import HubUnavailable, remote_files
    from speculator_arena.frontdoor.sources import fetch_speculator_hub

    try:
        names = remote_files(repo, revision)
    except HubUnavailable as exc:
        raise Refused(f"artifact {repo}@{revision}: {exc}", status=422) from exc
    for name in sorted(names):
        why = _pickle_reason(name)
        if why:
            raise Refused(why, status=422)
    fetch_speculator_hub(repo, revision, dest, bound, ALLOWED_FILES, what="artifact")


def check_artifact(tree: Path, bound: int) -> dict:
    """In the child, before the seal: regular files only (no link at all), at most `bound` bytes,
    no pickle, and every safetensors header readable with a config.json (`inspect_checkpoint`)."""
    from speculator_arena.checkpoints.inspect_tensors import MalformedCheckpoint, inspect_checkpoint
    from speculator_arena.sealed.archive import check_tree

    stats = check_tree(tree, bound, "artifact")
    if stats["links"]:
        raise Refused("artifact holds a link; an artifact holds regular files only", status=422)
    for path in tree.rglob("*"):
        why = _pickle_reason(path.relative_to(tree).as_posix())
        if why:
            raise Refused(why, status=422)
    try:
        report = inspect_checkpoint(tree)
    except MalformedCheckpoint as exc:
        raise Refused(f"artifact cannot be read: {str(exc).replace(str(tree), 'artifact')}", status=422) from exc
    return {**stats, "tensors": len(report.tensors), "declared_method": report.declared_method}
