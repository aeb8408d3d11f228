"""Sealed target checkpoints: what the runner mounts read-only as `TARGET`.

`prepare_checkpoint(task_id)` builds a task's target directory once under
`$ARENA_HOME/checkpoints/<task_id>/` and returns its path; later calls reuse it. This package
imports only the standard library at import time (torch, transformers and huggingface_hub are
imported inside the functions that need them), so the runner and the CLI stay light.
"""

from speculator_arena.checkpoints.prepare import CheckpointError, checkpoint_dir, prepare_checkpoint
from speculator_arena.checkpoints.seal import read_manifest, verify_manifest

__all__ = ["CheckpointError", "checkpoint_dir", "prepare_checkpoint", "read_manifest", "verify_manifest"]
