"""The per-request export (board/export.py, `GET /api/evaluations/{id}/requests.parquet`): a dev
evaluation's timed requests as Parquet, the same rows and numbers as the raw parts, no column the
analysts' database would not hold for it; a test evaluation refused (403, and no rows from the SQL
even if the check were skipped), an unknown one 404."""

from __future__ import annotations

import io

import independent_shown as ind
import numpy as np
import pyarrow.parquet as pq
import pytest
from synthetic import write_synthetic_evaluation

from speculator_arena.board.data import board_sql, scoped_connection
from speculator_arena.board.export import ExportRefused, requests_parquet
from speculator_arena.protocol import load_protocol
from speculator_arena.warehouse import Warehouse
from speculator_arena.warehouse.analysts import ALLOWLIST

SLACK = load_protocol().count_slack_tokens
ADDED = {"counted", "family", "app", "tokens_per_chunk"}  # beside the request columns: derived, or the sessions rows'


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    wh = Warehouse(tmp_path_factory.mktemp("export") / "arena_home")
    write_synthetic_evaluation(wh, "d", account_id="acct-x", label="x", seed=70)
    write_synthetic_evaluation(wh, "t", account_id="acct-x", label="x", split="test", seed=71)
    wh.write_rows("replies", "d", [{"request_id": "planted", "engine": "candidate", "text": "REPLY-TEXT-d"}])
    return wh.home


def _read(body: bytes):
    return pq.read_table(io.BytesIO(body)).to_pandas()


def test_a_dev_export_is_its_timed_requests_as_stored(home):
    got = _read(requests_parquet(home, "d")).set_index("request_id")
    want = ind.timed_requests(home, "d", SLACK).set_index("request_id")
    assert sorted(got.index) == sorted(want.index) and len(got) > 100
    for col in ("sent_at", "first_token_at", "last_token_at", "ended_at", "output_tokens", "cached_tokens"):
        assert (got[col] == want.loc[got.index, col]).all(), col
    assert (got["counted"] == want.loc[got.index, "counted"]).all()
    for rid in got.index[:20]:
        assert np.array_equal(got.at[rid, "chunk_times"], want.at[rid, "chunk_times"])
        assert np.array_equal(got.at[rid, "chunk_tokens"], want.at[rid, "chunk_tokens"])
    assert set(got["family"]) == {"agent", "chat"}  # joined from the sessions rows
    for rid in got.index[:50]:  # acceptance per request as the stream shows it (board/context.py)
        toks = want.at[rid, "chunk_tokens"]
        assert got.at[rid, "tokens_per_chunk"] == pytest.approx(sum(toks) / len(toks), rel=1e-12)
    allowed = set(ALLOWLIST["requests"]) | ADDED
    assert set(got.reset_index().columns) <= allowed and "text" not in got.columns


def test_a_test_evaluation_is_refused_and_its_sql_returns_nothing(home):
    with pytest.raises(ExportRefused) as refused:
        requests_parquet(home, "t")
    assert refused.value.status == 403 and "dev evaluations only" in refused.value.reason
    with pytest.raises(ExportRefused) as unknown:
        requests_parquet(home, "no-such-evaluation")
    assert unknown.value.status == 404
    with scoped_connection(home, ["t"]) as con:  # were the check skipped, the query still holds nothing
        assert con.execute(board_sql("requests_export.sql"), ["t"]).fetchall() == []
        assert con.execute("SELECT count(*) FROM raw_requests WHERE evaluation_id = 't'").fetchone()[0] > 0


def test_the_api_serves_a_dev_export_and_refuses_a_test_one(home, tmp_path):
    import shutil

    from fastapi.testclient import TestClient

    from speculator_arena.frontdoor.api import create_app

    api_home = tmp_path / "api_home"
    shutil.copytree(home, api_home)  # the API's start-up writes its state beside the warehouse
    with TestClient(create_app(api_home)) as client:
        ok = client.get("/api/evaluations/d/requests.parquet")
        assert ok.status_code == 200 and ok.headers["content-type"] == "application/vnd.apache.parquet"
        assert 'filename="d-requests.parquet"' in ok.headers["content-disposition"]
        assert len(_read(ok.content)) == len(ind.timed_requests(home, "d", SLACK))
        refused = client.get("/api/evaluations/t/requests.parquet")
        assert refused.status_code == 403 and "dev evaluations only" in refused.json()["error"]
        assert client.get("/api/evaluations/nope/requests.parquet").status_code == 404
        assert client.get("/api/evaluations/d/requests.parquet", params={"protocol": 99}).status_code == 404
        v1 = _read(client.get("/api/evaluations/d/requests.parquet", params={"protocol": 1}).content)
        assert len(v1) == len(_read(ok.content))  # counted under v1's rules (no count slack)
