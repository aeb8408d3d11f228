"""The scorer's request store (scoring/request_store.py): a rescore that reads what it holds
scores exactly as a scoring that reads every request, and nothing stale is ever used.

Real warehouses of synthetic evaluations, the real scorer with the store on and off; a spy on
the scan's batches (the real function, wrapped) tells which evaluations' requests were read."""

from __future__ import annotations

import os
import shutil
import time

import pandas as pd
import pyarrow.parquet as pq
import pytest
from synthetic import write_synthetic_evaluation

from speculator_arena.protocol import load_protocol
from speculator_arena.scoring import busy_scan, request_store, score_warehouse
from speculator_arena.warehouse import Warehouse, catalog
from speculator_arena.warehouse.frame_files import generations

FRAMES = ("evaluations", "passes", "gates", "figures")
ATTACKS = (None, "length", "failures", "partial", "likelihood")


def _quiet() -> None:
    """Wait out the racy window: a partition written within it is never stored."""
    time.sleep(catalog.RACY_NS / 1e9 + 0.1)


@pytest.fixture
def home(tmp_path):
    wh = Warehouse(tmp_path / "home")
    for i, attack in enumerate(ATTACKS):
        write_synthetic_evaluation(wh, f"e{i}", attack=attack, seed=i)
    _quiet()
    return wh.home


@pytest.fixture
def read(monkeypatch):
    """The evaluations whose requests each scoring read (the real scan, spied on)."""
    seen: list[set] = []
    real = busy_scan.request_batches

    def spy(home, resolved, *a, **k):
        seen.append(set(resolved.packed_ids) | set(resolved.unpacked))
        return real(home, resolved, *a, **k)

    monkeypatch.setattr(busy_scan, "request_batches", spy)
    return seen


def _without_store(monkeypatch, *args, **kwargs):
    monkeypatch.setenv("ARENA_REQUEST_STORE", "0")
    try:
        return score_warehouse(*args, **kwargs)
    finally:
        monkeypatch.delenv("ARENA_REQUEST_STORE")


def _same(a, b) -> None:
    for name in FRAMES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_exact=True)


def test_a_rescore_reads_no_request_and_scores_as_a_full_read(home, read, monkeypatch):
    latest = load_protocol().version
    plain = _without_store(monkeypatch, home)
    assert not request_store.root(home).exists()  # off: nothing written
    first = score_warehouse(home)
    assert read[-1] == {f"e{i}" for i in range(len(ATTACKS))}
    assert sorted(request_store.load(home, read[-1]).keys) == sorted(read[-1])
    again = score_warehouse(home)
    assert read[-1] == set()  # every evaluation's per-request results came from the store
    _same(first, plain)
    _same(again, plain)
    # a protocol change with the same count slack: the store answers, the new version's rules apply
    older = latest - 1
    assert load_protocol(older).count_slack_tokens == load_protocol(latest).count_slack_tokens
    rescored = score_warehouse(home, older)
    assert read[-1] == set()
    _same(rescored, _without_store(monkeypatch, home, older))
    assert (rescored.evaluations.protocol_version == older).all()
    # half held, half read: the same result as either
    _clear(home)
    score_warehouse(home, evaluation_ids=["e0", "e2", "e4"])
    mixed = score_warehouse(home)
    assert read[-1] == {"e1", "e3"}
    _same(mixed, plain)


def _newest(home) -> dict:
    return {d.name: generations(d)[0] for d in request_store.store_dir(home).glob("s*")}


def _clear(home) -> None:
    shutil.rmtree(request_store.root(home))


def test_changed_rows_or_another_count_slack_are_read_again(home, read, monkeypatch):
    score_warehouse(home)
    wh = Warehouse(home)
    # the evaluation's rows rewritten (another seed: other requests, other times)
    write_synthetic_evaluation(wh, "e1", attack="length", seed=99)
    _quiet()
    changed = score_warehouse(home)
    assert read[-1] == {"e1"}
    _same(changed, _without_store(monkeypatch, home))
    # a document whose count slack differs: every request counted again under it, nothing held
    doc = load_protocol().model_dump(mode="json")
    doc["count_slack_tokens"] = 0
    slack0 = score_warehouse(home, document=doc)
    assert read[-1] == {f"e{i}" for i in range(len(ATTACKS))}
    _same(slack0, _without_store(monkeypatch, home, document=doc))
    # both slacks' rows are now kept per evaluation by the last one written: slack 0
    assert {k[-1] for k in request_store.load(home, ["e0", "e1", "e2"]).keys.values()} == {0}


def test_a_racy_evaluation_is_not_stored(home, read):
    write_synthetic_evaluation(Warehouse(home), "fresh", seed=7)  # written within the racy window
    score_warehouse(home)
    held = request_store.load(home, ["fresh", "e0"]).keys
    assert "fresh" not in held and "e0" in held
    score_warehouse(home)
    assert "fresh" in read[-1]


def test_a_broken_or_unwritable_store_changes_nothing(home, read, monkeypatch):
    plain = _without_store(monkeypatch, home)
    score_warehouse(home)
    torn = _newest(home)
    for gen in torn.values():
        (gen / "busy.parquet").write_bytes(b"not parquet")  # torn by a disk error
        (gen / "sums.parquet").unlink(missing_ok=True)
    _same(score_warehouse(home), plain)
    assert len(read[-1]) == len(ATTACKS)  # nothing readable: everything read again
    assert all(_newest(home)[s] != g for s, g in torn.items())  # and each shard written whole again
    # a stored table of another layout (a column missing) is not taken either
    for gen in _newest(home).values():
        t = pq.read_table(gen / "prints.parquet")
        pq.write_table(t.drop_columns([request_store.SLACK]), gen / "prints.parquet")
    _same(score_warehouse(home), plain)
    assert len(read[-1]) == len(ATTACKS)
    # the home's scores/ is not writable (a file where the store's folder goes): scoring goes on
    _clear(home)
    request_store.root(home).write_text("in the way")
    _same(score_warehouse(home), plain)
    assert request_store.load(home, ["e0"]).keys == {}


def test_scoring_one_evaluation_reads_and_writes_its_shard_alone(home, read, monkeypatch):
    score_warehouse(home)
    before = _newest(home)
    write_synthetic_evaluation(Warehouse(home), "late", seed=11)
    _quiet()
    one = score_warehouse(home, evaluation_ids=["late"])
    assert read[-1] == {"late"}
    after = _newest(home)
    mine = f"s{request_store.shard_of('late'):02d}"
    assert after[mine] != before.get(mine)  # its shard has a new generation...
    assert {s: g for s, g in after.items() if s != mine} == {s: g for s, g in before.items() if s != mine}
    assert set(request_store.load(home, ["late"]).shards) == {request_store.shard_of("late")}
    _same(one, _without_store(monkeypatch, home, evaluation_ids=["late"]))
    # ... and kept what that shard held of others
    every = score_warehouse(home)
    assert read[-1] == set()
    _same(every, _without_store(monkeypatch, home))


def test_a_store_of_other_source_is_never_read_and_goes_after_an_hour(home, monkeypatch):
    score_warehouse(home)
    mine = request_store.store_dir(home)
    other = mine.with_name("0" * 16)
    mine.rename(other)  # as a previous version of the scorer left it
    assert request_store.load(home, ["e0", "e1"]).keys == {}
    score_warehouse(home)
    assert other.exists()  # written within the hour: a process on the old code may still read it
    old = time.time() - request_store.STALE_AFTER_SECONDS - 60
    for p in [other, *other.glob("s*"), *other.glob("s*/g-*")]:
        os.utime(p, (old, old))
    assert request_store.prune(home) == [other] and not other.exists() and mine.exists()
