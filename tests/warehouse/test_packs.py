"""Packs (warehouse/packs.py): a rebuildable copy that changes how fast rows are read, never which."""

import os
import subprocess
import sys
import time

import dagster as dg
import pandas as pd
import pytest
from synthetic import ATTACKS, write_synthetic_evaluation

from speculator_arena.rules.status import FINAL
from speculator_arena.scoring import score_warehouse
from speculator_arena.warehouse import Warehouse, catalog, packs


def _settle():
    """Let every partition's mtime age past the racy window, as packing requires."""
    time.sleep(catalog.RACY_FINE_NS / 1e9 * 3)


def _frames(scores):
    """The scorer's frames in a canonical row order (reading order is not part of the result)."""
    out = {}
    for name, keys in (
        ("evaluations", ["evaluation_id"]),
        ("passes", ["evaluation_id", "pass_id"]),
        ("gates", ["evaluation_id", "gate"]),
        ("figures", ["evaluation_id", "engine", "workload", "figure"]),
    ):
        df = getattr(scores, name)
        out[name] = df.sort_values(keys, kind="stable").reset_index(drop=True)
    return out


def _assert_same_scores(a, b):
    """Equal up to the last bits of float sums (SQL aggregates rows in reading order, which a pack
    changes, as DuckDB's threads can on any read)."""
    fa, fb = _frames(a), _frames(b)
    for name in fa:
        pd.testing.assert_frame_equal(fa[name], fb[name], check_exact=False, rtol=1e-12, atol=1e-12, obj=name)


@pytest.fixture
def varied(tmp_path):
    """Finished evaluations of every synthetic kind (failures, voids, partial runs...), one still running."""
    wh = Warehouse(tmp_path / "home")
    kinds = [a for a in ATTACKS if a is not None]
    for i, attack in enumerate([None, *kinds]):
        write_synthetic_evaluation(
            wh,
            f"e{i:02d}",
            seed=i,
            attack=attack,
            account_id=f"acct-{i % 3}",
            split="test" if i % 2 else "dev",
            created_at=1.7e9 + i,
        )
    write_synthetic_evaluation(wh, "running", seed=99, created_at=1.7e9 + 99)
    wh.write_rows(
        "evaluations",
        "running",
        [dict(task_id="local-smollm2", split="dev", status="running", account_id="acct-0", created_at=1.7e9 + 99)],
        part="status",
        replace=True,
    )
    _settle()
    return wh


def test_scores_are_identical_from_packs_and_from_parts(varied):
    before = score_warehouse(varied)
    report = packs.pack(varied.home, group_size=4)
    finished = set(before.evaluations.loc[before.evaluations["status"].isin(FINAL), "evaluation_id"])
    assert report.packed == len(finished) and report.pack is not None
    resolved = packs.resolve(varied.home, sorted(before.evaluations["evaluation_id"]))
    assert set(resolved.packed_ids) == finished and set(resolved.unpacked) == {
        "running",
        "e08",
    }  # e08: partial, still running
    _assert_same_scores(before, score_warehouse(varied))
    some = sorted(finished)[:3]
    _assert_same_scores(
        score_warehouse(varied, evaluation_ids=some), score_warehouse(Warehouse(varied.home), evaluation_ids=some)
    )
    assert packs.pack(varied.home).pack is None  # nothing new: no second pack


def test_a_changed_evaluation_is_read_from_its_parts(varied):
    packs.pack(varied.home)
    target = "e00"
    old = score_warehouse(varied, evaluation_ids=[target]).evaluations.iloc[0]
    assert pd.notna(old["specscore"])
    # the runner voids it after the pack was written: the pack's copy is stale from that moment
    row = varied.read_table("evaluations", target).to_pylist()[0]
    row.update(status="void", void_reason="operator voided it")
    varied.write_rows("evaluations", target, [row], part="status", replace=True)
    resolved = packs.resolve(varied.home, [target, "e01"])
    assert resolved.unpacked == [target] and resolved.packed_ids == ["e01"]
    new = score_warehouse(varied, evaluation_ids=[target]).evaluations.iloc[0]
    assert pd.isna(new["specscore"]) and "operator voided it" in new["specscore_reason"]
    # an added part of another table is seen the same way
    varied.write_rows("metrics", "e01", [dict(pass_id="extra", engine="stock", name="x", phase="after", value=1.0)])
    assert packs.resolve(varied.home, ["e01"]).unpacked == ["e01"]
    _settle()
    report = packs.pack(varied.home)
    assert report.packed == 2 and not report.rewritten  # only what changed goes into the new pack
    assert packs.resolve(varied.home, [target, "e01"]).unpacked == []


def test_broken_or_missing_packs_cost_time_not_rows(varied):
    before = score_warehouse(varied)
    packs.pack(varied.home)
    (pack,) = [p for p in packs.packs_dir(varied.home).iterdir() if p.name.startswith("pack-")]
    (pack / "manifest.parquet").write_bytes(b"not parquet")
    assert packs.resolve(varied.home, ["e00"]).unpacked == ["e00"]
    _assert_same_scores(before, score_warehouse(varied))
    import shutil

    shutil.rmtree(packs.packs_dir(varied.home))
    _assert_same_scores(before, score_warehouse(varied))


def test_too_many_packs_are_rewritten_as_one_and_retired_ones_removed(tmp_path, monkeypatch):
    wh = Warehouse(tmp_path / "home")
    for i in range(3):
        write_synthetic_evaluation(wh, f"e{i}", seed=i, created_at=1.7e9 + i)
        _settle()
        r = packs.pack(wh.home, max_packs=2)
        assert r.packed == (1 if i < 2 else 3) and r.rewritten == (i == 2)
    live = packs._live_packs(wh.home)
    assert len(live) == 1 and sorted(packs.resolve(wh.home, ["e0", "e1", "e2"]).packed) == live
    assert len([p for p in packs.packs_dir(wh.home).iterdir() if (p / "RETIRED").exists()]) == 2
    monkeypatch.setattr(packs, "RETIRED_GRACE_S", 0)
    assert packs.pack(wh.home).removed == 2
    assert [p.name for p in packs.packs_dir(wh.home).iterdir()] == [live[0].name]


def test_evaluations_written_moments_ago_wait_for_the_next_run(tmp_path):
    wh = Warehouse(tmp_path / "home")
    write_synthetic_evaluation(wh, "fresh", seed=1)
    r = packs.pack(wh.home)  # no settling: its partitions' mtimes are not trusted yet
    assert r.packed == 0 and r.skipped_recent == 1


def test_replies_are_never_packed(varied):
    packs.pack(varied.home)
    (pack,) = packs._live_packs(varied.home)
    assert not (pack / "replies.parquet").exists()
    assert {p.stem for p in pack.glob("*.parquet")} == set(packs.PACKED_TABLES) | {"manifest"}


def test_cli_and_dagster_asset_pack(varied):
    env = dict(os.environ, ARENA_HOME=str(varied.home))
    out = subprocess.run(
        [sys.executable, "-m", "speculator_arena.cli", "warehouse", "pack"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "packed 12 evaluations" in out or "packed" in out
    n = len(packs.resolve(varied.home, [f"e{i:02d}" for i in range(20)]).packed_ids)
    assert n > 0
    again = subprocess.run(
        [sys.executable, "-m", "speculator_arena.cli", "warehouse", "pack"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "nothing to pack" in again

    from speculator_arena.assets.packs import raw_packs
    from speculator_arena.assets.resources import default_resources

    result = dg.materialize([raw_packs], resources=default_resources(varied.home))
    assert result.success
    md = result.asset_materializations_for_node("raw_packs")[0].metadata
    assert md["packed"].value == 0


def test_no_warehouse_is_a_clear_error(tmp_path):
    env = dict(os.environ, ARENA_HOME=str(tmp_path / "nowhere"))
    r = subprocess.run(
        [sys.executable, "-m", "speculator_arena.cli", "warehouse", "pack"], env=env, capture_output=True, text=True
    )
    assert r.returncode == 2 and "no warehouse at" in r.stderr


def test_definitions_schedule_the_packing():
    from speculator_arena.dagster_project.definitions import build_definitions

    defs = build_definitions()
    schedule = defs.resolve_schedule_def("pack_raw_every_10_minutes")
    assert schedule.cron_schedule == "*/10 * * * *"
    assert defs.resolve_assets_def("raw_packs") is not None
