"""Sources read as they are published: the same records as JSON Lines, as a JSON array, as
Parquet and gzip / bz2 / xz / zstd compressed (under names that do not say so: the content
decides) read into the same conversations and build the same pools; a file that the declared
format cannot read, a compressed file cut short, a record past the bound and sources the
structure cannot be fitted from are refused with the declared source, the file, what it is,
the records read and kept, and what to change.

Every file is written here, from the fixtures' records or from records of the shared data read
at test time (tests/pools/published.py)."""

from __future__ import annotations

import json
import os
import tracemalloc
from pathlib import Path

import pytest
from published import CODECS, compress, read_jsonl, write
from test_sources_as_data import FIX

from speculator_arena.pools.ingest import containers
from speculator_arena.pools.ingest.conversations import read_set
from speculator_arena.pools.ingest.readers import SourceFormatError

TASK = "local-smollm2"
FIXTURE = {"mini-swe-agent": "swe_trajectories.jsonl", "messages": "messages.jsonl", "questions": "questions.jsonl"}
FAMILY = {"mini-swe-agent": "agent", "messages": "chat", "questions": "chat"}


def _records(schema: str) -> list[dict]:
    """The fixture's records; for messages, with content lists joined into text, since a
    Parquet column holds one type (as a dataset's own Parquet would)."""
    recs = read_jsonl(FIX / FIXTURE[schema])
    if schema == "messages":
        for r in recs:
            for m in r["messages"]:
                if isinstance(m.get("content"), list):
                    m["content"] = "\n".join(p["text"] for p in m["content"])
    return recs


def _read(path: Path, fmt: str, schema: str):
    return read_set(path, fmt, FAMILY[schema], "fx", f"{schema} fixture")


def _same(a, b) -> None:
    assert [vars(c) for c in a.conversations] == [vars(c) for c in b.conversations]
    assert a.trajectories == b.trajectories and a.records == b.records and a.dropped == b.dropped
    assert a.tool_messages == b.tool_messages and a.notes == b.notes


CASES = [("jsonl", c) for c in CODECS] + [("json", c) for c in (None, *CODECS)] + [("parquet", None)]


@pytest.mark.parametrize("schema", list(FIXTURE))
@pytest.mark.parametrize("container,codec", CASES, ids=[f"{c}-{z or 'plain'}" for c, z in CASES])
def test_every_container_and_codec_reads_what_json_lines_read(tmp_path, schema, container, codec):
    recs = _records(schema)
    base = _read(write(tmp_path / "base.jsonl", recs, "jsonl"), f"{schema}-jsonl", schema)
    assert base.records == len(recs) and base.conversations
    # named `records.data`: neither the container nor the compression is told by the name
    got = _read(write(tmp_path / "records.data", recs, container, codec), f"{schema}-{container}", schema)
    _same(got, base)


def test_mini_swe_agent_traj_files_read_compressed(tmp_path):
    """mini-swe-agent's own `.traj.json` files, gzip-compressed in place: the same trajectories."""
    (tmp_path / "traj").mkdir()
    for f in sorted((FIX / "traj").glob("*.traj.json")):
        (tmp_path / "traj" / f.name).write_bytes(compress(f.read_bytes(), "gzip"))
    _same(
        read_set(tmp_path / "traj", "mini-swe-agent-traj", "agent", "fx", "t"),
        read_set(FIX / "traj", "mini-swe-agent-traj", "agent", "fx", "t"),
    )


# ---- the refusals of the issue, and their kin ---------------------------------------------------
def _refusal(path: Path, fmt: str, family: str = "chat") -> str:
    with pytest.raises(SourceFormatError) as exc:
        read_set(path, fmt, family, "x", "my published set")
    msg = str(exc.value)
    assert "declared source 'my published set'" in msg and f"(format: {fmt})" in msg and str(path) in msg, msg
    return msg


def test_a_json_array_declared_as_json_lines_is_told_to_declare_json(tmp_path):
    """tau-bench's trajectories are one JSON array; read as JSON Lines they were 'line 1 (byte 2)
    ... not JSON; a cut or broken record'."""
    p = write(tmp_path / "airline.json", _records("messages"), "json")
    msg = _refusal(p, "messages-jsonl")
    assert "a JSON array, not JSON Lines" in msg and "declare `format: messages-json`" in msg, msg
    assert "0 records read and 0 kept" in msg and "cut or broken" not in msg, msg
    assert len(_read(p, "messages-json", "messages").conversations) == 6  # declared so, it reads


@pytest.mark.parametrize(
    "kind,fmt,says",
    [
        (
            "jsonl",
            "questions-json",
            ["JSON Lines (one record per line), not a JSON array", "`format: questions-jsonl`"],
        ),
        ("parquet", "questions-jsonl", ["a Parquet file, not JSON Lines", "`format: questions-parquet`"]),
        ("parquet-gz", "questions-parquet", ["a Parquet file, gzip-compressed", "decompress the file"]),
        ("pretty", "questions-jsonl", ["one JSON object over several lines", "`format: questions-json`"]),
        ("pretty", "mini-swe-agent-jsonl", ["one JSON object over several lines", "`format: mini-swe-agent-traj`"]),
        ("lfs", "questions-parquet", ["a Git LFS pointer, not the data", "git lfs pull"]),
        ("html", "questions-jsonl", ["an HTML page", "download the raw file"]),
        ("zip", "questions-jsonl", ["a zip archive", "unpack it"]),
        ("empty-gz", "questions-jsonl", ["no records (an empty file)"]),
    ],
)
def test_a_file_the_declared_format_cannot_read_is_said_what_it_is(tmp_path, kind, fmt, says):
    recs = _records("questions")
    p = tmp_path / "published.bin"
    if kind in ("jsonl", "parquet"):
        write(p, recs, kind)
    elif kind == "parquet-gz":
        p.write_bytes(compress(write(tmp_path / "q.parquet", recs, "parquet").read_bytes(), "gzip"))
    elif kind == "pretty":
        p.write_text(json.dumps(recs[0], indent=2))
    elif kind == "lfs":
        p.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:4d7a2146\nsize 1048576\n")
    elif kind == "html":
        p.write_text("<!DOCTYPE html>\n<html><head><title>questions.jsonl</title></head></html>\n")
    elif kind == "zip":
        import zipfile

        with zipfile.ZipFile(p, "w") as z:
            z.writestr("question.jsonl", (FIX / "questions.jsonl").read_text())
    else:
        p.write_bytes(compress(b"\n", "gzip"))
    msg = _refusal(p, fmt, "agent" if fmt.startswith("mini") else "chat")
    assert all(s in msg for s in says), msg
    assert "0 records read and 0 kept" in msg, msg


def test_a_gzip_file_is_read_and_a_cut_one_says_so(tmp_path):
    """hh-rlhf's `harmless-base-test.jsonl.gz` was refused as 'not UTF-8 (invalid start byte)':
    gzip is read by its first bytes; a file cut short names the line where the stream ends."""
    recs = _records("messages")
    p = write(tmp_path / "harmless-base-test.jsonl.gz", recs, "jsonl", "gzip")
    assert len(_read(p, "messages-jsonl", "messages").conversations) == 6
    cut = tmp_path / "cut.jsonl.gz"
    cut.write_bytes(p.read_bytes()[:-40])
    msg = _refusal(cut, "messages-jsonl")
    assert "the gzip stream is cut or broken" in msg and "of the gzip-decompressed text" in msg, msg
    assert "not UTF-8" not in msg and "download it again" in msg, msg
    read = int(msg.split(" records read and ")[0].rsplit("(", 1)[1])
    assert 0 < read < len(recs), msg  # the records before the cut were read, and are counted


@pytest.mark.parametrize("codec", [None, "zstd"])
def test_a_json_array_cut_mid_element_names_the_element(tmp_path, codec):
    recs = _records("questions")
    text = json.dumps(recs, indent=1)
    p = tmp_path / "cut.json"
    p.write_bytes(compress(text[: len(text) - 150].encode(), codec))
    msg = _refusal(p, "questions-json")
    n = len(recs) - 1
    assert f"element [{n}]" in msg and f"after {n} complete elements" in msg and "it was cut" in msg, msg
    assert f"{n} records read and {n} kept" in msg, msg


def test_records_past_the_bound_are_refused_in_every_container(tmp_path, monkeypatch):
    monkeypatch.setenv("ARENA_MAX_RECORD_BYTES", "4096")
    recs = _records("questions")
    recs[3]["turns"][0] = "word " * 5000  # 25 kB, in the 4th record
    for container, codec in (("json", None), ("json", "xz"), ("parquet", None), ("jsonl", "bz2")):
        p = write(tmp_path / f"big.{container}", recs, container, codec)
        msg = _refusal(p, f"questions-{container}")
        assert "larger than 4096 bytes" in msg and "ARENA_MAX_RECORD_BYTES" in msg, (container, msg)
        assert "record 84" in msg or container == "json", msg  # the id, where the place gives it
        assert "3 records read and 3 kept" in msg, msg


def test_a_large_array_or_compressed_file_costs_what_its_records_cost(tmp_path):
    """7.5 MB of records in one JSON array, and 6.6 MB of JSON Lines gzip-compressed, are read
    holding about one record at a time: Python's traced allocations stay under 1 MB (reading
    either whole would hold more than the file)."""
    recs = _records("mini-swe-agent")
    many = [dict(recs[i % len(recs)], instance_id=f"big-{i}") for i in range(3000)]
    for container, codec in (("json", None), ("jsonl", "gzip")):
        p = write(tmp_path / f"many.{container}", many, container, codec)
        n = 0
        tracemalloc.start()
        try:
            for _where, obj in containers.iter_records(p, container):
                n += obj["instance_id"].startswith("big-")
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert n == len(many)
        assert peak < 1 << 20, (container, peak)


# ---- pools -----------------------------------------------------------------------------------
# The smallest source set that builds local-smollm2's pools (the shared data's 200 trajectories
# and 500 conversations, without the 125 MB ShareGPT file), each cut into three declared sets,
# each set in another container and compression, under names that do not say which.
PUBLISHED = [
    ("agent A", "mini-swe-agent", slice(0, 70), "json", "gzip", "agent_a.json"),
    ("agent B", "mini-swe-agent", slice(70, 140), "parquet", None, "agent_b.data"),
    ("agent C", "mini-swe-agent", slice(140, 200), "jsonl", "xz", "agent_c.jsonl"),
    ("chat A", "messages", slice(0, 100), "json", "zstd", "chat_a.json"),
    ("chat B", "messages", slice(100, 200), "parquet", None, "chat_b.parquet"),
    ("chat C", "messages", slice(200, 300), "jsonl", "bz2", "chat_c"),
]


def _declare(folder: Path, records: dict[str, list[dict]], published: bool) -> Path:
    folder.mkdir()
    sets = []
    for name, schema, part, container, codec, file in PUBLISHED:
        family = FAMILY[schema]
        if not published:
            container, codec, file = "jsonl", None, file.split(".")[0] + ".jsonl"
        path = write(folder / file, records[family][part], container, codec)
        sets.append(
            f"  - {{name: {name}, path: {path}, format: {schema}-{container}, family: {family}, "
            f"id_prefix: {family}, license: test}}\n"
        )
    decl = folder / "sets.yaml"
    decl.write_text("sets:\n" + "".join(sets))
    return decl


def _pool_files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
        and p.suffix in (".jsonl", ".json")
        and p.name not in ("manifest.json", "sources.json")
        and p.name != "structure.json"
        and "data_card" not in p.parts
    }


def test_pools_built_from_published_formats_equal_the_json_lines_pools(
    tmp_path, monkeypatch, shared_data, smollm2_target
):
    """Two builds (the public pool, its warm-up sessions and fidelity texts, the probes; no key,
    so no hidden pool: its split is the same hash of the same source ids) of the same records,
    as JSON Lines and as a JSON array, Parquet and compressed files: every session, warm-up
    session, fidelity text and probe is the same, byte for byte, as are the fitted statistics."""
    from build_all import build_all

    for k in (
        "ARENA_POOL_KEY",
        "ARENA_POOL_KEY_FILE",
        "ARENA_PARAPHRASES",
        "ARENA_CC_TRACES",
        "ARENA_PRODUCTION_STATS",
    ):
        monkeypatch.delenv(k, raising=False)
    # the session's target (whose tokenizer the builds count with) and embedding cache, where
    # the session's pool build made them (tests/pool_fixtures.py), else the session's target
    monkeypatch.setenv("ARENA_HOME", os.environ.get("ARENA_HOME") or str(smollm2_target.parents[1]))
    monkeypatch.setenv("ARENA_EMBED_CACHE", os.environ.get("ARENA_EMBED_CACHE") or str(tmp_path / "embeddings.npz"))
    # The CI profile's three passes per workload: the smallest source set holds the fidelity texts
    # of three passes' timed sessions, not of the shipped version's six (what is compared here is
    # the formats, not the pool's size).
    from ci_profile import stage_ci_protocol

    monkeypatch.setenv("ARENA_PROTOCOL_DIR", str(tmp_path / "protocol"))
    stage_ci_protocol(tmp_path / "protocol")
    records = {
        "agent": read_jsonl(shared_data / "agent" / "trajectories_200.jsonl"),
        "chat": read_jsonl(shared_data / "chat" / "sharegpt_multiturn_500.jsonl"),
    }
    roots = {}
    for kind in ("jsonl", "published"):
        decl = _declare(tmp_path / kind, records, kind == "published")
        build_all(TASK, shared_data, tmp_path / f"home-{kind}", progress=lambda _m: None, sources_file=decl)
        roots[kind] = (tmp_path / f"home-{kind}" / "pools" / TASK).resolve()
    a, b = (_pool_files(roots[k]) for k in ("jsonl", "published"))
    assert {"dev/sessions.jsonl", "dev/warmup.jsonl", "dev/fidelity.jsonl", "probes.jsonl"} <= set(a)
    assert a.keys() == b.keys()
    assert [k for k in a if a[k] != b[k]] == []  # sessions, warm-up, fidelity texts, probes: byte for byte
    ma, mb = (json.loads((roots[k] / "dev" / "manifest.json").read_text()) for k in ("jsonl", "published"))
    for k in ("built_at", "seconds", "structure_digest"):
        ma.pop(k), mb.pop(k)
    assert ma == mb and ma["sessions"] > 0 and ma["warmup"] > 0 and ma["fidelity"] > 0
    sa, sb = (json.loads((roots[k] / "structure.json").read_text()) for k in ("jsonl", "published"))
    assert sa["families"] == sb["families"] and sa["reference"] == sb["reference"]
    assert sa["statistics_digest"] == sb["statistics_digest"]
    assert sa["sources"] != sb["sources"]  # the files differ, byte for byte, and the structure names them
    ia, ib = (json.loads((roots[k] / "sources.json").read_text())["sources"] for k in ("jsonl", "published"))
    for x, y in zip(ia, ib):
        if x["name"] in {p[0] for p in PUBLISHED}:
            assert (x["records"], x["used"], x["dropped"]) == (y["records"], y["used"], y["dropped"])
            assert x["format"].endswith("-jsonl") and x["format"] != y["format"] or x["name"].endswith("C")
            assert x["used"] > 0, x
    dev = [json.loads(line) for line in (roots["published"] / "dev" / "sessions.jsonl").read_text().splitlines()]
    assert {s["family"] for s in dev} == {"agent", "chat"}


# ---- the structure fit ---------------------------------------------------------------------------
@pytest.fixture
def target_home(monkeypatch, smollm2_target) -> None:
    """ARENA_HOME where the target (whose tokenizer the fit counts with) is prepared: the
    session's pool home where it was built, else the session's target's."""
    monkeypatch.setenv("ARENA_HOME", os.environ.get("ARENA_HOME") or str(smollm2_target.parents[1]))
    for k in ("ARENA_CC_TRACES", "ARENA_PRODUCTION_STATS"):
        monkeypatch.delenv(k, raising=False)


def test_an_agent_set_without_usage_is_refused_naming_the_set_and_the_fields(tmp_path, target_home, shared_data):
    """Trajectories without the `usage` and `created` the agent structure is fitted from ended
    the build with `ValueError: no values to fit from mini-swe-agent trajectories (usage,
    created)`; the build now fails naming the declared set, the fields, in how many records."""
    from speculator_arena.dagster_project.launch import PoolBuildFailed, build_pools

    recs = _records("mini-swe-agent")
    for r in recs:
        r["messages"] = [{"role": m["role"], "content": m["content"]} for m in r["messages"]]
    agents = write(tmp_path / "agents.json", recs, "json", "gzip")
    decl = tmp_path / "sets.yaml"
    decl.write_text(
        "sets:\n"
        f"  - {{name: agents without usage, path: {agents}, format: mini-swe-agent-json, family: agent,"
        " id_prefix: a, license: MIT}\n"
        f"  - {{name: chats, path: {FIX / 'messages.jsonl'}, format: messages-jsonl, family: chat,"
        " id_prefix: c, license: MIT}\n"
    )
    home = tmp_path / "home"
    with pytest.raises(PoolBuildFailed) as exc:
        build_pools(TASK, data=str(shared_data), home=str(home), sources=str(decl))
    msg = str(exc.value)
    assert "StructureFitError" in msg and "the agent structure cannot be fitted" in msg, msg
    assert "'agents without usage': 4 trajectories kept; `usage` on an assistant message in 0 of 4" in msg, msg
    assert "`created` on two or more assistant messages in 0 of 4" in msg, msg
    assert "--cc-traces" in msg and "extends: default" in msg, msg
    assert not (home / "pools" / TASK).exists()  # nothing served, no build folder left
    assert not list((home / "pools" / ".builds" / TASK).glob("*"))


def test_a_chat_structure_without_replies_names_the_question_set(tmp_path, target_home, shared_data):
    """A chat family of question sets only has no recorded replies to fit reply lengths from
    ('no values to fit from ShareGPT assistant replies'): the error names the set and says so."""
    from speculator_arena.pools.builder.context import BuildContext
    from speculator_arena.pools.builder.inputs import fit_and_store_structure
    from speculator_arena.pools.builder.structure import StructureFitError

    questions = write(tmp_path / "questions.parquet", _records("questions"), "parquet")
    decl = tmp_path / "sets.yaml"
    decl.write_text(
        "sets:\n"
        f"  - {{name: agents, path: {FIX / 'swe_trajectories.jsonl'}, format: mini-swe-agent-jsonl,"
        " family: agent, id_prefix: a, license: MIT}\n"
        f"  - {{name: questions only, path: {questions}, format: questions-parquet, family: chat,"
        " id_prefix: q, license: MIT}\n"
    )
    ctx = BuildContext(TASK, shared_data, tmp_path / "home", root=tmp_path / "build", sources_file=decl)
    with pytest.raises(StructureFitError) as exc:
        fit_and_store_structure(ctx)
    msg = str(exc.value)
    assert "the chat structure cannot be fitted: no values for sharegpt_reply_tokens" in msg, msg
    assert "'questions only': 12 conversations kept, with a user turn 12, with a recorded (assistant) reply 0" in msg
    assert "question sets (`questions-*`) hold none" in msg, msg
    assert not (tmp_path / "build" / "structure.json").exists()
