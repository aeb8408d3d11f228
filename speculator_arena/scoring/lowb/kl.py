"""KL(BF16 || candidate) per token from both engines' top-k prompt_logprobs, and the perplexity ratio.

Why a completion at all: an engine returns only its top-k log-probabilities at each prompt position
(and the prompt token's), so neither distribution is known in full. The completion (kl_topk) keeps
every probability that is known exactly and bounds the unknown ones by what the candidate's own rows
allow, so that a candidate cannot lower its KL by returning fewer or different ids.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

CHUNK = 16384  # positions per vectorized block: (chunk, k, k) comparisons stay near 50 MB at k = 20


def kl_topk(p_ids, p_logprobs, token, p_token_logprob, q_ids, q_logprobs, q_token_logprob, floor=1e-12):
    """KL(p || q) in nats at each position, p the stock's and q the candidate's distribution, each
    known by its top-k (`*_ids`, `*_logprobs`: arrays (n, k), padded with id -1 and log-probability
    -inf) and by the prompt token's log-probability (`token`, `*_token_logprob`: arrays (n,)).

    Completed as follows (the arena's reading of "KL from prompt_logprobs"):
    - S = the stock's top-k ids plus the prompt token; p_i is exact for every i in S (the prompt
      token's from its token_logprob);
    - q_i is exact when i is in the candidate's top-k or is the prompt token (its token_logprob);
      otherwise q_i = min(the candidate's k-th largest probability, r_q / m), r_q = 1 - the sum of
      the candidate's top-k probabilities (and the prompt token's when outside them), m = the number
      of ids of S missing from the candidate's rows: a missing id is at most as likely as the
      candidate's least likely listed id, and the missing ids share what is left;
    - the tail (every id outside S) is one bucket: p_t = max(1 - sum_S p, 0), q_t = max(1 - sum_S q,
      floor);
    - KL = sum_S p_i log(p_i / q_i) + p_t log(p_t / q_t), with 0 log 0 = 0.
    Every q is at least `floor` (a log-probability of -inf, or nothing left to share, would make the
    KL infinite from a rounding of the engine's). The bucketed tail makes this a lower bound of the
    exact KL by the log-sum inequality, tight when S holds most of p's mass (tests/scoring/
    test_lowb_scoring.py compares it with the exact KL of the small model).
    """
    p_ids, q_ids = np.atleast_2d(p_ids).astype(np.int64), np.atleast_2d(q_ids).astype(np.int64)
    p_lp, q_lp = np.atleast_2d(p_logprobs).astype(float), np.atleast_2d(q_logprobs).astype(float)
    token = np.atleast_1d(token).astype(np.int64)
    p_tok, q_tok = (
        np.exp(np.atleast_1d(p_token_logprob).astype(float)),
        np.exp(np.atleast_1d(q_token_logprob).astype(float)),
    )
    out = np.empty(len(token))
    for lo in range(0, len(token), CHUNK):
        s = slice(lo, lo + CHUNK)
        out[s] = _kl_block(p_ids[s], p_lp[s], token[s], p_tok[s], q_ids[s], q_lp[s], q_tok[s], floor)
    return out


def _kl_block(p_ids, p_lp, token, p_tok, q_ids, q_lp, q_tok, floor):
    p_valid, q_valid = p_ids >= 0, q_ids >= 0
    pp = np.where(p_valid, np.exp(p_lp), 0.0)
    qp = np.where(q_valid, np.exp(q_lp), 0.0)
    is_tok = p_valid & (p_ids == token[:, None])
    tok_in_p, tok_in_q = is_tok.any(1), (q_valid & (q_ids == token[:, None])).any(1)
    match = (q_ids[:, None, :] == p_ids[:, :, None]) & q_valid[:, None, :] & p_valid[:, :, None]
    found = match.any(2)
    q_at = (match * qp[:, None, :]).sum(2)
    exact = found | is_tok
    left = np.maximum(1.0 - qp.sum(1) - np.where(tok_in_q, 0.0, q_tok), 0.0)
    missing = (p_valid & ~exact).sum(1)
    kth = np.where(q_valid, qp, np.inf).min(1)
    fill = np.minimum(kth, left / np.maximum(missing, 1))
    q_at = np.where(is_tok, q_tok[:, None], np.where(found, q_at, fill[:, None]))
    q_at = np.maximum(q_at, floor)
    p_at = np.where(is_tok, p_tok[:, None], pp)
    # the prompt token outside the stock's top-k: one more member of S, both probabilities exact
    p_extra = np.where(tok_in_p, 0.0, p_tok)
    q_extra = np.where(tok_in_p, 0.0, np.maximum(q_tok, floor))
    sum_p = np.where(p_valid, p_at, 0.0).sum(1) + p_extra
    sum_q = np.where(p_valid, q_at, 0.0).sum(1) + q_extra
    p_t, q_t = np.maximum(1.0 - sum_p, 0.0), np.maximum(1.0 - sum_q, floor)
    terms = np.where(p_valid, _plogpq(p_at, q_at), 0.0).sum(1)
    return terms + _plogpq(p_extra, np.where(tok_in_p, 1.0, q_extra)) + _plogpq(p_t, q_t)


def _plogpq(p, q):
    """p log(p / q), 0 where p is 0 (q > 0 wherever p is not)."""
    positive = p > 0
    return np.where(positive, p * np.log(np.where(positive, p, 1.0) / np.where(positive, q, 1.0)), 0.0)


def padded(lists: pa.ChunkedArray | pa.Array, fill, dtype) -> np.ndarray:
    """A list column as an (n, k) array, k its longest list, shorter and null lists padded with `fill`."""
    arr = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
    n = len(arr)
    lengths = pc.fill_null(pc.list_value_length(arr), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    k = int(lengths.max()) if n else 0
    out = np.full((n, k), fill, dtype=dtype)
    if n and k:
        values = pc.list_flatten(arr).to_numpy(zero_copy_only=False).astype(dtype)
        rows = np.repeat(np.arange(n), lengths)
        starts = np.cumsum(lengths) - lengths
        cols = np.arange(len(values)) - np.repeat(starts, lengths)
        out[rows, cols] = values
    return out


def kl_by_evaluation(positions: pa.Table, floor: float) -> pd.DataFrame:
    """Per evaluation: the mean KL over every position both engines answered, the positions, and the
    perplexity ratio exp(mean -log q(token)) / exp(mean -log p(token)) over the same positions."""
    if positions.num_rows == 0:
        return pd.DataFrame(columns=["evaluation_id", "kl", "positions", "perplexity_ratio"])
    kl = kl_topk(
        padded(positions["p_ids"], -1, np.int64),
        padded(positions["p_logprobs"], -np.inf, float),
        positions["token_id"].to_numpy(),
        positions["p_token_logprob"].to_numpy(zero_copy_only=False),
        padded(positions["q_ids"], -1, np.int64),
        padded(positions["q_logprobs"], -np.inf, float),
        positions["q_token_logprob"].to_numpy(zero_copy_only=False),
        floor,
    )
    frame = pd.DataFrame(
        {
            "evaluation_id": positions["evaluation_id"].to_numpy(zero_copy_only=False),
            "kl": kl,
            "p_nll": -positions["p_token_logprob"].to_numpy(zero_copy_only=False),
            "q_nll": -positions["q_token_logprob"].to_numpy(zero_copy_only=False),
        }
    )
    g = frame.groupby("evaluation_id", sort=True)
    out = g.agg(kl=("kl", "mean"), positions=("kl", "size"), p_nll=("p_nll", "mean"), q_nll=("q_nll", "mean"))
    out["perplexity_ratio"] = np.exp(out["q_nll"] - out["p_nll"])
    return out.drop(columns=["p_nll", "q_nll"]).reset_index()
