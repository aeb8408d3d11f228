"""Helpers for hand-made evaluations: a few request rows whose right answers are computed by hand."""

from __future__ import annotations

from speculator_arena.warehouse import Warehouse


def write_hand_pass(
    wh: Warehouse,
    eid: str,
    pass_id: str,
    engine: str,
    lanes: int,
    requests,
    *,
    started_at=0.0,
    ends_at=100.0,
    grace_ends_at=160.0,
    task_id="local-smollm2",
    status="measured",
):
    """`requests`: (lane, sent, last, tokens, done, chunks) with chunks a list of (time, tokens) or None."""
    workload, idx = pass_id.split("-")
    wh.write_rows(
        "evaluations",
        eid,
        [
            dict(
                task_id=task_id,
                split="dev",
                protocol_version=1,
                account_id="hand",
                is_reference=False,
                label="hand",
                status=status,
                created_at=1.0,
            )
        ],
        part="status",
        replace=True,
    )
    wh.write_rows(
        "passes",
        eid,
        [
            dict(
                pass_id=pass_id,
                engine=engine,
                workload=workload,
                pass_index=int(idx),
                lanes=lanes,
                started_at=started_at,
                ends_at=ends_at,
                grace_ends_at=grace_ends_at,
                finished_at=ends_at,
                status="complete",
            )
        ],
        part=f"{pass_id}-{engine}",
    )
    rows = []
    for i, (lane, sent, last, tokens, done, chunks) in enumerate(requests):
        chunks = chunks or [(last, tokens)]
        rows.append(
            dict(
                pass_id=pass_id,
                engine=engine,
                workload=workload,
                pass_index=int(idx),
                request_id=f"{engine}-{pass_id}-{i}",
                lane=lane,
                session_id=f"s{i}",
                turn=0,
                sent_at=sent,
                first_token_at=chunks[0][0],
                last_token_at=last,
                ended_at=last,
                output_tokens=tokens,
                max_tokens=1000,
                done=done,
                chunk_times=[c[0] for c in chunks],
                chunk_tokens=[c[1] for c in chunks],
            )
        )
    wh.write_rows("requests", eid, rows, part=f"{pass_id}-{engine}")
