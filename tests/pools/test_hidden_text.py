"""No hidden text reaches the public pool, its data card, Dagster's metadata or the analysts' database."""

from __future__ import annotations

import json

import pytest

from speculator_arena.pools.builder import checks
from speculator_arena.pools.builder.context import BuildContext
from speculator_arena.warehouse import Warehouse

pytestmark = pytest.mark.slow


def _hidden(built_local) -> list[str]:
    ctx = BuildContext("local-smollm2", home=built_local["home"])
    texts = checks.hidden_only_texts(ctx)
    texts += [p["text"] for p in built_local["paraphrases"]]
    return texts


def test_hidden_text_stays_hidden(built_local):
    hidden = _hidden(built_local)
    assert len(hidden) > 100  # the hidden pool was built and holds real text

    def leaks(blob: str) -> list[str]:
        return [h[:60] for h in hidden if h in blob]

    root = built_local["root"]
    public_files = [
        p
        for p in root.rglob("*")
        if p.is_file() and "hidden" not in p.relative_to(root).parts and p.suffix in (".json", ".jsonl", ".md")
    ]
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
    # The analysts' database (every table and view): the operators' raw views hold replies of
    # test-split evaluations, which may echo hidden text; the analysts' file must not.
    import duckdb

    from speculator_arena.warehouse import analysts

    path = analysts.refresh(built_local["home"]).path
    con = duckdb.connect(str(path), read_only=True)
    try:
        relations = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() UNION ALL "
                "SELECT view_name FROM duckdb_views() WHERE NOT internal"
            ).fetchall()
        ]
        assert "raw_replies" in relations and "pass_speeds" in relations
        for rel in relations:
            assert not leaks("\n".join(_text_values(con, rel))), rel
    finally:
        con.close()


def test_the_check_catches_a_leak(built_local, tmp_path):
    """The disjointness check is not vacuous: copy one hidden turn into a public session."""
    import shutil

    from speculator_arena.pools.layout import read_jsonl, write_jsonl

    home = tmp_path / "home"
    shutil.copytree(built_local["home"] / "pools", home / "pools")
    root = home / "pools" / "local-smollm2"
    hidden_sessions = read_jsonl(root / "hidden" / "test" / "sessions.jsonl")
    dev = read_jsonl(root / "dev" / "sessions.jsonl")
    ctx = BuildContext("local-smollm2", home=home)
    ok, _ = checks.public_hidden_disjoint(ctx)
    assert ok
    victim = next(
        t
        for s in hidden_sessions
        for t in s["turns"]
        if len(t["content"]) > 80 and t["content"] in checks.hidden_only_texts(ctx)
    )
    dev[0]["turns"][0]["content"] = victim["content"]
    write_jsonl(root / "dev" / "sessions.jsonl", dev)
    ok, meta = checks.public_hidden_disjoint(ctx)
    assert not ok and meta["hidden_texts_in_public"] == 1


def _text_values(con, relation: str) -> list[str]:
    """Every text a table or view holds: its VARCHAR columns and its lists of numbers as text
    (token ids decode to text), one string per value."""
    out = []
    for name, typ, *_ in con.execute(f'DESCRIBE "{relation}"').fetchall():
        if typ == "VARCHAR" or typ.endswith("[]"):
            out += [
                str(r[0])
                for r in con.execute(f'SELECT "{name}" FROM "{relation}" WHERE "{name}" IS NOT NULL').fetchall()
            ]
    return out


def test_a_test_split_evaluation_leaves_no_hidden_text_for_analysts(built_local, test_split_evaluation):
    """A real evaluation of the hidden pool, whose engine echoes its prompts: the raw replies
    hold hidden words (the operators' warehouse), and the analysts' arena.duckdb, refreshed at
    the evaluation's end, holds none of its replies, probe texts, token ids, logs or errors."""
    import duckdb

    from speculator_arena.warehouse import analysts

    home, eid = test_split_evaluation["home"], test_split_evaluation["evaluation_id"]
    assert "analysts' database" in test_split_evaluation["log"] and "refreshed" in test_split_evaluation["log"]
    wh = Warehouse(home)
    assert wh.read_table("evaluations", eid).to_pylist()[0]["split"] == "test"
    replies = [t for t in wh.read_table("replies", eid).column("text").to_pylist() if t and len(t) >= 24]
    assert len(replies) > 10
    # Positive control: the echoing engine put hidden prompt words in the raw replies.
    hidden = _hidden(built_local)
    hidden_words = {w for h in hidden for w in h.split() if len(w) >= 8}
    assert any(w in r for r in replies for w in r.split() if w in hidden_words)
    probe_ids = [str(x) for x in wh.read_table("probe_greedy", eid).column("token_ids").to_pylist() if x]
    fidelity_ids = [str(x) for x in wh.read_table("probe_fidelity", eid).column("token_ids").to_pylist() if x]
    assert probe_ids and fidelity_ids

    path = analysts.analysts_path(home)
    con = duckdb.connect(str(path), read_only=True)
    try:
        assert con.execute("SELECT count(*) FROM raw_requests WHERE evaluation_id = ?", [eid]).fetchone()[0] > 0
        assert con.execute("SELECT count(text) FROM raw_replies WHERE evaluation_id = ?", [eid]).fetchone()[0] == 0
        relations = [
            r[0]
            for r in con.execute(
                "SELECT table_name FROM duckdb_tables() UNION ALL "
                "SELECT view_name FROM duckdb_views() WHERE NOT internal"
            ).fetchall()
        ]
        assert {"raw_replies", "raw_requests", "staged_requests", "pass_speeds", "analyst_columns"} <= set(relations)
        blob = "\n".join(v for rel in relations for v in _text_values(con, rel))
    finally:
        con.close()
    assert not [r for r in replies if r in blob]
    assert not [h[:60] for h in hidden if h in blob]
    assert not [x for x in probe_ids + fidelity_ids if x in blob]
    logs = [t for t in wh.read_table("engine_starts", eid).column("log_text").to_pylist() if t and len(t) > 40]
    assert not [t for t in logs if t in blob]


def test_the_analysts_file_is_swapped_whole(test_split_evaluation, tmp_path):
    """A reader holding the file open keeps a whole file while a refresh renames a new one into
    place; a column added to a raw table later is not copied (deny by default)."""
    import duckdb

    from speculator_arena.warehouse import analysts

    home = test_split_evaluation["home"]
    path = analysts.analysts_path(home)
    reader = duckdb.connect(str(path), read_only=True)
    try:
        n = reader.execute("SELECT count(*) FROM raw_requests").fetchone()[0]
        analysts.refresh(home)
        assert reader.execute("SELECT count(*) FROM raw_requests").fetchone()[0] == n
    finally:
        reader.close()
    assert not list(home.glob(".arena.duckdb.*"))
    con = duckdb.connect(str(path), read_only=True)
    try:
        copied = dict(((t, c), k) for t, c, k in con.execute("SELECT * FROM analyst_columns").fetchall())
        assert copied[("replies", "text")] == "dev" and copied[("engine_starts", "log_text")] == "dev"
        cols = {r[0] for r in con.execute("DESCRIBE raw_replies").fetchall()}
        assert cols == {c for (t, c), k in copied.items() if t == "replies" and k != "no"}
    finally:
        con.close()
    saved = analysts.ALLOWLIST["replies"].pop("text")
    try:
        analysts.refresh(home)
        con = duckdb.connect(str(path), read_only=True)
        assert "text" not in {r[0] for r in con.execute("DESCRIBE raw_replies").fetchall()}
        con.close()
    finally:
        analysts.ALLOWLIST["replies"]["text"] = saved
        analysts.refresh(home)
