"""The accuracy items: each engine answers every item of the split with the same seeds, and the
project's graders score the answers (grading/: HumanEval's programs run only in the sandbox for
untrusted code; RULER's answers by string match).

Why the same seeds for both engines: the accuracy axis and gate read the paired difference of
one item under one seed, BF16's answer against the solution's; a second run (the test split's)
uses seeds of its own. Answers end where the model ends them (no ignore_eos), so their lengths
are also what the length gate and dL compare. An unanswered item (a failed request) is a row
with verdict `unanswered` and no score: the scorer pairs only items both engines answered, and
the length gate counts the candidate's unanswered ones against it.
"""

from __future__ import annotations

from speculator_arena.grading.dispatch import grade
from speculator_arena.runners.lowb.workload_pass import request_body, serve_requests
from speculator_arena.runners.tokens import count_tokens


def answer_items(
    items,
    base_url: str,
    served_name: str,
    sampling: dict,
    tokenizer,
    *,
    seed_of,
    at_once: int,
    deadline_s: float,
    alive,
    engine: str,
    run_index: int,
) -> list[dict]:
    """`lowb_items` rows of one engine's run (without the evaluation id)."""
    bodies = [
        request_body(served_name, item.messages, item.max_tokens, seed_of(item.item_id), sampling) for item in items
    ]
    results = serve_requests(base_url, bodies, at_once, deadline_s=deadline_s, alive=alive)
    rows = []
    for item, body, res in zip(items, bodies, results):
        base = {
            "engine": engine,
            "run_index": run_index,
            "item_id": item.item_id,
            "domain": item.domain,
            "benchmark": item.benchmark,
            "seed": body["seed"],
            "prompt_tokens": None,
        }
        if res is None or res.error is not None:
            why = "the engine was not running" if res is None else res.error
            rows.append(dict(base, output_tokens=None, score=None, verdict="unanswered", detail=str(why)[:200]))
            continue
        text = res.text
        verdict = grade(item, text)
        rows.append(
            dict(
                base,
                output_tokens=count_tokens(tokenizer, text) if text else 0,
                score=float(verdict.score),
                verdict=verdict.verdict,
                detail=(verdict.detail or "")[:200],
            )
        )
    return rows
