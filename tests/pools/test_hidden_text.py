"""No hidden text reaches the public pool, its data card, Dagster's metadata or any view."""

from __future__ import annotations

import json

import pytest

from speculator_arena.pools import checks
from speculator_arena.pools.build import BuildContext
from speculator_arena.warehouse import Warehouse

pytestmark = pytest.mark.slow


def _hidden(built_local) -> list[str]:
    ctx = BuildContext("local-smollm2", home=built_local["home"])
    texts = checks.hidden_only_texts(ctx)
    texts += [p["text"] for p in built_local["paraphrases"]]
    return texts


def test_hidden_text_stays_hidden(built_local):
    hidden = _hidden(built_local)
    assert len(hidden) > 100          # the hidden pool was built and holds real text

    def leaks(blob: str) -> list[str]:
        return [h[:60] for h in hidden if h in blob]

    root = built_local["root"]
    public_files = [p for p in root.rglob("*") if p.is_file() and "hidden" not in p.relative_to(root).parts
                    and p.suffix in (".json", ".jsonl", ".md")]
    assert any(p.name == "sessions.jsonl" for p in public_files)
    for p in public_files:
        assert not leaks(p.read_text(encoding="utf-8")), p
    # The card in its public form (what data_cards/ publishes) is among them; check it by name too.
    assert (root / "data_card" / "local-smollm2.md").is_file() and (root / "data_card" / "local-smollm2.json").is_file()
    # Every metadata value Dagster recorded for the build.
    res = built_local["result"]
    meta = []
    for e in res.all_events:
        data = e.event_specific_data
        for attr in ("materialization", "asset_check_evaluation"):
            obj = getattr(data, attr, None) if data is not None else None
            if obj is not None:
                meta.append(json.dumps({k: str(v) for k, v in obj.metadata.items()}))
        if e.message:
            meta.append(e.message)
    assert meta and not leaks("\n".join(meta))
    # Every DuckDB view of the warehouse: scan its text columns.
    con = Warehouse(built_local["home"]).connect(read_only=True)
    views = [r[0] for r in con.execute(
        "SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()]
    assert views
    for v in views:
        cols = [r[0] for r in con.execute(f'DESCRIBE "{v}"').fetchall() if r[1] == "VARCHAR"]
        for c in cols:
            vals = [r[0] for r in con.execute(f'SELECT "{c}" FROM "{v}" WHERE "{c}" IS NOT NULL').fetchall()]
            assert not leaks("\n".join(vals)), (v, c)
    con.close()


def test_the_check_catches_a_leak(built_local, tmp_path):
    """The disjointness check is not vacuous: copy one hidden turn into a public session."""
    import shutil

    from speculator_arena.pools.build import read_jsonl, write_jsonl

    home = tmp_path / "home"
    shutil.copytree(built_local["home"] / "pools", home / "pools")
    root = home / "pools" / "local-smollm2"
    hidden_sessions = read_jsonl(root / "hidden" / "test" / "sessions.jsonl")
    dev = read_jsonl(root / "dev" / "sessions.jsonl")
    ctx = BuildContext("local-smollm2", home=home)
    ok, _ = checks.public_hidden_disjoint(ctx)
    assert ok
    victim = next(t for s in hidden_sessions for t in s["turns"] if len(t["content"]) > 80
                  and t["content"] in checks.hidden_only_texts(ctx))
    dev[0]["turns"][0]["content"] = victim["content"]
    write_jsonl(root / "dev" / "sessions.jsonl", dev)
    ok, meta = checks.public_hidden_disjoint(ctx)
    assert not ok and meta["hidden_texts_in_public"] == 1
