"""How a number on the board is made, and why, with the values of the protocol version chosen in
the sidebar (read from the document, so the page can never state a stale number) and links to
the protocol. What the arena measures is SCORING.md and protocol section 5-8; this page says it
for readers of other benchmarks' reports."""

import streamlit as st

from speculator_arena.board.goodput_objectives import objectives
from speculator_arena.dashboards import formatting as fmt
from speculator_arena.protocol import load_protocol
from speculator_arena.protocol.model import WORKLOADS


def _task_values(proto, task_id: str | None) -> str:
    if task_id not in proto.tasks:
        return ""
    t = proto.task(task_id)
    g = t.gates
    work = "; ".join(
        f"{w}: {t.lanes[w]} lane(s) × {t.workloads[w].interleave} session(s) per lane, {t.workloads[w].pass_seconds:g} s "
        f"per pass, speed by {t.workloads[w].speed.replace('_', ' ')}"
        for w in WORKLOADS
    )
    floor = t.limits.greedy_agreement_floor
    return f"""
**{task_id} under protocol v{proto.version}:** {work}; {t.passes_per_workload} passes per workload and
engine, a {t.grace_seconds:g} s grace after each pass. Gates: greedy agreement over {g.greedy_agreement.prompts}
prompts (floor {fmt.text(floor) or "none"}), sampled likelihood and first choice over {g.sampled_likelihood.replies}
replies (bounds ±{t.limits.likelihood_bound:g} and ±{t.limits.first_choice_bound:g} nats or shares, z = {g.z:g}),
target fidelity over {g.target_fidelity.texts} texts (ceiling {t.limits.fidelity_ceiling:g} nats per token),
reply length (±{g.length.bound:.0%}), device memory (utilization × device + {g.memory.slack_gib:g} GiB),
answering (at most {g.answering.max_unanswered_share:.0%} unanswered). Failure rule: a pass counts 0 when the
candidate fails more than max({t.failure_rule.min_excess}, {t.failure_rule.share_of_requests:.0%} of requests)
requests more than the stock engine. A reply counts up to max_tokens + {t.count_slack_tokens} tokens.
"""


def main() -> None:
    sel = st.session_state["selection"]
    version = sel.protocol_version
    proto = load_protocol(version)
    st.title("Methodology")
    protocol_link = f"[the protocol, v{version}](./protocol?protocol={version})"
    st.markdown(
        f"""
Every number here is recomputed from the raw rows the runner stored (requests with the arrival time
and token count of every streamed chunk, the engines' `/metrics` before and after every pass, device
memory, host contention, the gate probes), under {protocol_link}: its whole document and digest are on
the Protocol page and at `GET /api/protocol?version={version}`. Nothing derived is stored as the truth,
so a rule change re-scores every evaluation without running anything again.

### How a number is made
1. **Paired passes.** The candidate engine and the stock engine (the same target without speculation) serve the
   same sessions, in the same order, with the same seeds, on the same pod, one after the other; then the
   gate probes run. A pass's ratio is the candidate's speed over the stock engine's on the same sessions.
2. **Three regimes.** solo (one lane: speed per request), team and busy (several lanes with live
   sessions: speed over the *busy window*, the seconds during which every lane has a request in flight,
   so a lane idling on think time never dilutes the speed).
3. **SpecScore** = (r_solo · r_team · r_busy)^(1/3), r_w the median of the workload's pass ratios, when
   every gate passes; 0 when one fails or the candidate dies; void (refunded, never ranked) when the
   arena's side failed. Ranks are shared within each entry's 95% interval (the board's page).
{_task_values(proto, sel.task_id)}
### Why the arena counts tokens itself, from the text
An engine that streams several tokens in one chunk (any speculative decoder does) breaks per-token
latency in tools that count one token per chunk, and an engine's own `usage` is a claim. The arena
tokenizes every reply with the target's tokenizer and attributes its tokens to the chunks that carried
them (`chunk_tokens`), so speed, TPOT and tokens per chunk are the same arithmetic for every engine.

### Why counters are read around each pass
Prometheus counters are cumulative since the engine started: read once at the end they mix warm-up,
probes and every earlier pass. The arena reads `/metrics` before and after every timed pass and
differences the two readings; a figure is blank when any pass lacks a reading (or a counter went
down). Acceptance, acceptance by draft position and the verification-step histogram are the engine's
own claims, shown, never scored: the score is the measured speed.

### Why real text, and no `ignore_eos`
Speculation is data-dependent. Random or synthetic prompts make the target answer trivially or latch on
noise, and forcing replies to a fixed length with `ignore_eos` makes the model generate past its end,
where drafts are easy: both overstate acceptance (SPEED-Bench measured synthetic inputs overstating
throughput by 23%). The arena replays real multi-turn agent and chat sessions (the pools' data card),
with each turn's own reply budget, and replies end where the model ends them.

### Why the same pod and the same sessions
Speed depends on the GPU, its clocks, the host and the text. Comparing the candidate with a stock
engine measured elsewhere, or on other sessions, measures the difference between machines and texts.
Both engines run on the same device back to back, with the device checked idle in between, on the same
sessions (fresh for every pass, never sent twice in an evaluation), so the ratio is the speculator's.

### What the gates catch
A faster engine that changes what the model says is not lossless. The gates compare the candidate with
the stock engine: greedy agreement (the same greedy replies), sampled likelihood and first choice (the
stock engine scores both engines' sampled replies: a candidate that samples less likely tokens, or
leaves the target's first choice more often, fails), target fidelity (the same prompt log-probabilities:
a quantized or swapped target fails), reply length (replies cut short or padded), device memory (within
the budget the engine was given) and answering (from v2 a probe item left unanswered also counts at its
worst value in its gate).

### What void means
Void is the arena's failure, never the candidate's: the stock engine counted no tokens on a pass or
left more than the allowed share of a probe unanswered, the device did not fall idle, the host was
contended (other processes' CPU, steal, another process on the device), or the runner died. A void
evaluation is refunded and never ranked. Whatever a candidate returns (nothing, garbage, a crash) is its
own failure: it scores 0, never void.

### Shown, never scored
TTFT, TPOT, cache hit, the engine's acceptance report, throughput against interactivity, acceptance by
draft position, the verification-step histogram, acceptance by family and app, SPEED-Bench's speedup
proxy and goodput are on every evaluation's page, each blank with its reason when a row it needs is
missing (ADR-0009), and each reproducible from the analysts' database (docs/warehouse.md); its
per-request rows download as Parquet for dev evaluations.
"""
    )
    if sel.task_id in proto.tasks:
        obj, source = objectives(proto, sel.task_id)
        st.caption(
            "Goodput objectives of "
            + sel.task_id
            + ": "
            + "; ".join(
                f"{w} TTFT ≤ {obj[w].ttft_seconds:g} s, TPOT ≤ {obj[w].tpot_seconds * 1000:g} ms" for w in WORKLOADS
            )
            + f" ({source})."
        )


main()
