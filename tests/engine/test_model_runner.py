"""The pieces the engine builds on the real model: cache reuse, the self-draft, the quantized attack."""

from __future__ import annotations

import pytest
import torch

from speculator_arena.engine import model_runner as mr


@pytest.fixture(scope="module")
def model_and_tok(smollm2_target):
    from transformers import AutoTokenizer

    torch.set_num_threads(1)
    model = mr.load_target(str(smollm2_target), torch.device("cpu"), torch.float32)
    return model, AutoTokenizer.from_pretrained(str(smollm2_target))


@pytest.fixture(scope="module")
def ids(model_and_tok):
    _, tok = model_and_tok
    text = tok.apply_chat_template(
        [{"role": "user", "content": "Name three colours of the rainbow."}], add_generation_prompt=True, tokenize=False
    )
    return tok.encode(text, add_special_tokens=False)


@torch.inference_mode()
def test_reused_prefix_kv_gives_the_same_logits(model_and_tok, ids):
    model, _ = model_and_tok
    full = mr.forward(model, ids, mr.new_cache(), len(ids), "cpu")
    cache = mr.new_cache()
    mr.forward(model, ids[:20], cache, 1, "cpu")
    reused = mr.new_cache(mr.cache_kv(cache, 12))  # keep 12 of 20 positions
    assert mr.cache_len(reused) == 12
    tail = mr.forward(model, ids[12:], reused, len(ids) - 12, "cpu")
    assert torch.allclose(tail, full[12:], atol=1e-4)
    crop = mr.new_cache()
    mr.forward(model, ids, crop, 1, "cpu")
    mr.crop_cache(crop, 7)
    assert mr.cache_len(crop) == 7


@torch.inference_mode()
def test_self_draft_is_the_targets_first_layers(model_and_tok, ids):
    model, _ = model_and_tok
    draft = mr.build_self_draft(model, 24)
    assert sum(p.numel() for p in draft.parameters()) < sum(p.numel() for p in model.parameters())
    out = model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    expected = model.lm_head(model.model.norm(out.hidden_states[24]))[0]
    got = mr.forward(draft, ids, mr.new_cache(), len(ids), "cpu")
    assert torch.allclose(got, expected, atol=1e-4)
    # its KV for a prefix is the target's own KV of those layers
    tcache = mr.new_cache()
    mr.forward(model, ids, tcache, 1, "cpu")
    dcache = mr.new_cache()
    mr.forward(draft, ids, dcache, 1, "cpu")
    for (tk, tv), (dk, dv) in zip(mr.cache_kv(tcache, layers=24), mr.cache_kv(dcache)):
        assert torch.allclose(tk, dk, atol=1e-5) and torch.allclose(tv, dv, atol=1e-5)
    with pytest.raises(ValueError):
        mr.build_self_draft(model, 30)


@torch.inference_mode()
def test_int8_rounding_changes_the_model_a_little(smollm2_target, ids):
    model = mr.load_target(str(smollm2_target), torch.device("cpu"), torch.float32)
    before = torch.log_softmax(mr.forward(model, ids, mr.new_cache(), len(ids), "cpu"), -1)
    n = mr.quantize_weights_int8(model)
    assert n == 1 + 30 * 7  # tied embeddings/LM head once, 7 matrices per layer
    after = torch.log_softmax(mr.forward(model, ids, mr.new_cache(), len(ids), "cpu"), -1)
    gap = (after - before).abs().mean().item()
    assert 1e-4 < gap < 1.0


def test_kv_bytes_per_token(model_and_tok):
    model, _ = model_and_tok
    # 2 (K and V) x 30 layers x 3 KV heads x 64 dims x 4 bytes
    assert mr.kv_bytes_per_token(model.config, torch.float32) == 2 * 30 * 3 * 64 * 4
    assert mr.kv_bytes_per_token(model.config, torch.bfloat16) == 2 * 30 * 3 * 64 * 2
