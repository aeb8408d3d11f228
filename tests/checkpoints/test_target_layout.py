"""The sealed target is read correctly by an engine that loads its tensors by name.

transformers re-ties a tied embedding whichever name it is stored under, so it cannot tell a
malformed checkpoint from a good one (FACTS.md: vLLM served a constant model from the arena's
own target). The check here is a second implementation: a Llama forward pass written from the
architecture's definition that takes every tensor by its save_pretrained name from the
safetensors file, with no tying of its own; its per-token log-probabilities of a fixed text must
match transformers' on the same directory.
"""

from __future__ import annotations

import json
import math

import pytest
import torch
from safetensors import safe_open

from speculator_arena.checkpoints.layout import EMBED, LM_HEAD, layout_problems

TEXT = "The river flows from the mountains to the sea, and along the way it feeds farms and towns."


def _tensors(directory) -> dict[str, torch.Tensor]:
    out = {}
    for f in sorted(directory.glob("*.safetensors")):
        with safe_open(str(f), "pt") as fh:
            out.update({k: fh.get_tensor(k) for k in fh.keys()})
    return out


def _rms(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def _rope(x, pos, theta):
    d = x.shape[-1]
    inv = 1.0 / theta ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = pos[:, None].double() * inv[None, :]
    cos, sin = torch.cat([ang.cos(), ang.cos()], -1).float(), torch.cat([ang.sin(), ang.sin()], -1).float()
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def independent_logprobs(directory, ids: list[int]) -> torch.Tensor:
    """log p(ids[i] | ids[:i]) for i >= 1, from the tensors as stored (no tying, no transformers).
    The output projection is `lm_head.weight` when stored, else the input embedding (the tie the
    config declares); the input embedding must be stored under its own name."""
    cfg = json.loads((directory / "config.json").read_text())
    w = _tensors(directory)
    h_dim, n_heads, n_kv = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd = cfg.get("head_dim") or h_dim // n_heads
    eps = cfg["rms_norm_eps"]
    theta = (cfg.get("rope_parameters") or {}).get("rope_theta") or cfg.get("rope_theta", 10000.0)
    x = w[EMBED][torch.tensor(ids)]  # KeyError here is the bug this test exists for
    n = len(ids)
    pos = torch.arange(n)
    mask = torch.full((n, n), float("-inf")).triu(1)
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        a = _rms(x, w[p + "input_layernorm.weight"], eps)
        q = (a @ w[p + "self_attn.q_proj.weight"].T).view(n, n_heads, hd).transpose(0, 1)
        k = (a @ w[p + "self_attn.k_proj.weight"].T).view(n, n_kv, hd).transpose(0, 1)
        v = (a @ w[p + "self_attn.v_proj.weight"].T).view(n, n_kv, hd).transpose(0, 1)
        q, k = _rope(q, pos, theta), _rope(k, pos, theta)
        k, v = k.repeat_interleave(n_heads // n_kv, 0), v.repeat_interleave(n_heads // n_kv, 0)
        att = torch.softmax(q @ k.transpose(1, 2) / math.sqrt(hd) + mask, -1) @ v
        x = x + att.transpose(0, 1).reshape(n, n_heads * hd) @ w[p + "self_attn.o_proj.weight"].T
        m = _rms(x, w[p + "post_attention_layernorm.weight"], eps)
        gate, up = m @ w[p + "mlp.gate_proj.weight"].T, m @ w[p + "mlp.up_proj.weight"].T
        x = x + (torch.nn.functional.silu(gate) * up) @ w[p + "mlp.down_proj.weight"].T
    head = w.get(LM_HEAD, w[EMBED] if cfg.get("tie_word_embeddings") else None)
    logits = _rms(x, w["model.norm.weight"], eps) @ head.T
    lp = torch.log_softmax(logits.double(), -1)
    return lp[:-1].gather(1, torch.tensor(ids[1:])[:, None]).squeeze(1)


def test_the_sealed_target_stores_its_weights_as_engines_load_them(smollm2_target):
    assert layout_problems(smollm2_target) == []
    with safe_open(str(smollm2_target / "model.safetensors"), "pt") as fh:
        keys = set(fh.keys())
    assert EMBED in keys and LM_HEAD not in keys


def test_a_second_implementation_gives_the_same_log_probabilities(smollm2_target):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(smollm2_target))
    ids = tok(TEXT)["input_ids"]
    ours = independent_logprobs(smollm2_target, ids)
    model = AutoModelForCausalLM.from_pretrained(str(smollm2_target), dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].double()
    theirs = torch.log_softmax(logits, -1)[:-1].gather(1, torch.tensor(ids[1:])[:, None]).squeeze(1)
    assert (ours - theirs).abs().max().item() < 1e-3
    # and the text is a text to this model, not a constant one (ln(1/vocab) per token)
    assert ours.mean().item() > math.log(1 / 49152) + 3


def test_a_checkpoint_with_only_the_tied_copy_is_refused(tmp_path, smollm2_target):
    """The layout the arena used to write (safetensors' save_model: the tied pair under
    `lm_head.weight` only) is named as the problem, and the second implementation cannot load it."""
    from safetensors.torch import save_file

    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "config.json").write_text((smollm2_target / "config.json").read_text())
    w = _tensors(smollm2_target)
    w[LM_HEAD] = w.pop(EMBED)
    save_file(w, str(bad / "model.safetensors"))
    problems = layout_problems(bad)
    assert any("embed_tokens" in p for p in problems) and any("tied" in p for p in problems)
    with pytest.raises(KeyError):
        independent_logprobs(bad, [1, 2, 3])
