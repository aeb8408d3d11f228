"""The names a checkpoint's weights are stored under: the layout every engine reads correctly.

A model with tied input and output embeddings holds one tensor under two names
(`model.embed_tokens.weight` and `lm_head.weight`). transformers' `save_pretrained` keeps the
first and drops the second (`_tied_weights_keys`), and every loader expects that: transformers
re-ties whichever name it finds, but vLLM loads `model.embed_tokens.weight` by name and, when only
`lm_head.weight` is there, serves an embedding table it never loaded (a constant model, every
prompt log-probability ln(1/vocab)). So the arena writes, and checks, save_pretrained's names.
"""

from __future__ import annotations

from pathlib import Path

# Recorded in the prepared target's manifest: a target prepared before this layout is rebuilt.
WEIGHTS_LAYOUT = "save_pretrained-tied-v1"
EMBED, LM_HEAD = "model.embed_tokens.weight", "lm_head.weight"


def pretrained_state_dict(model) -> dict:
    """The model's tensors under save_pretrained's names (contiguous, no shared storage)."""
    state = {k: v.detach().contiguous() for k, v in model.state_dict().items()}
    if getattr(model.config, "tie_word_embeddings", False):
        state.setdefault(EMBED, state.get(LM_HEAD))
        state.pop(LM_HEAD, None)
    return state


def layout_problems(directory: str | Path) -> list[str]:
    """What is wrong with a checkpoint's tensor names (empty when an engine loading by name gets
    every weight): the tied embedding under its input name, no tied copy, nothing missing."""
    import json

    from safetensors import safe_open

    directory = Path(directory)
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    keys: set[str] = set()
    for f in sorted(directory.glob("*.safetensors")):
        with safe_open(str(f), "pt") as fh:
            keys.update(fh.keys())
    problems = []
    if EMBED not in keys:
        problems.append(f"no {EMBED}: an engine loading by name never reads the embedding table")
    if config.get("tie_word_embeddings") and LM_HEAD in keys:
        problems.append(f"{LM_HEAD} stored beside a tied embedding (save_pretrained drops it)")
    if not config.get("tie_word_embeddings") and LM_HEAD not in keys:
        problems.append(f"no {LM_HEAD} and the embeddings are not tied")
    layers = config.get("num_hidden_layers")
    if layers and not any(k.startswith(f"model.layers.{layers - 1}.") for k in keys):
        problems.append(f"no weights of the last layer (model.layers.{layers - 1})")
    return problems
