"""Suffix decoding (SuffixDecoding, Oliaro et al. 2024; vLLM's `method: "suffix"` via Arctic
Inference): point-mass drafts from the longest suffix of the context that occurred before.

What it proposes. For a request whose context is prompt + generated tokens (in multi-turn chat the
prompt holds every earlier turn of the session, so this is the session's prompts and outputs):

1. Match: the longest suffix of the context, at most `max_match` tokens and with no fixed n like
   n-gram lookup's n_max, that also ends at an earlier position followed by a token. It is looked
   up in the request's own context and in the cross-request store (below); the store is used only
   when it gives a strictly longer match than the request's own context (or the own context gives
   none, or an empty draft).
2. Continue by frequency: among the occurrences of the matched suffix, the next token is the most
   frequent one that follows them (ties: the one that occurred latest); the occurrences are then
   narrowed to those followed by it, and so on. Each step's share (count of the chosen token over
   the occurrences that have a next token) multiplies into a running probability; drafting stops
   once it falls below `min_prob` (the paper's `min_token_prob`, 0.1), when no occurrence has a
   next token, or after min(k, floor(alpha * match_len)) tokens (the paper's and Arctic's
   `max_spec_factor`: a longer match earns a longer draft).

Drafts are point masses (q = one-hot) verified by sampling.verify, so the engine stays lossless
whatever is proposed; the drafter only decides how often drafts are accepted.

Cross-request store. Outputs this engine process generated for earlier requests (not their
prompts, as in Arctic's "global tree"), at most `max_stored` requests, least recently used first out
(storing or supplying a draft counts as a use). It lives in memory only and is never persisted:
an engine process serves one evaluation start, whose sessions all come from one pool split, so a
draft can never carry tokens across a pool's split (nor across evaluations). Every proposed draft is
a continuation that occurs right after the matched suffix in the request's own context or in one
output this same process stored, and a new SuffixDrafter starts empty
(tests/engine/test_suffix_drafter.py checks both against a brute-force search).

Why our own structure rather than Arctic Inference's. PyPI's `arctic-inference` (checked at 0.3.0,
Apache-2.0) does contain `arctic_inference.suffix_decoding.SuffixDecodingCache` (start_request /
add_active_response / speculate / stop_request over a C++ suffix tree with per-request "local"
trees and a FIFO-bounded "global" tree of responses), and the C++ core itself needs neither vLLM
nor CUDA. But no version with it ships a wheel for CPython 3.11 on manylinux x86_64 (0.3.0 is an
sdist only; the only installable wheel, 0.0.4 py3-none-any, predates suffix decoding), and
building the sdist needs cmake, nanobind, a C++20 compiler and torch>=2.10 in the build
environment, plus protobuf/grpc code generation: too much to carry into the engine images for one
data structure. Two deliberate differences from it: Arctic scores every match length and keeps the
highest-scoring draft, and counts occurrences that end the sequence in a step's denominator; here
the longest match decides (as n-gram lookup's longest n does) and only occurrences with a next token
count.

Why this structure. Each source is a growing token array (numpy, capacity doubled, sentinel -1 past
the end and between stored outputs) with inverted indexes unigram -> positions and bigram -> end
positions, both updated per appended token (O(1); the context is never re-indexed, so a step costs
the new tokens plus the candidate filtering). A match starts from the positions of the context's
last bigram (or last token) and is extended backwards with vectorised comparisons, keeping the
last non-empty candidate set: cost proportional to the occurrences of that bigram, not to the
context length: about 0.2 ms a step for a 5000-token context of skewed (Zipf) tokens with 50
stored outputs, well under 1% of a CPU forward pass of the target. A suffix automaton would find the match in O(1) but needs
occurrence counts per state maintained along suffix links, which the positions give for free here.
Evicted outputs are overwritten with the sentinel (stale index entries then fail the token check)
and the store is compacted once dead tokens outnumber live ones.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

MAX_STORED = 256  # earlier outputs the cross-request store keeps (requests, least recently used out)
SENTINEL = -1  # never a token id: marks the end of the filled part and the gaps between outputs


def _bigram(a: int, b: int) -> int:
    return (int(a) << 32) | (int(b) & 0xFFFF_FFFF)


class _TokenIndex:
    """One growing token array with unigram -> positions and bigram -> end-position indexes."""

    def __init__(self, capacity: int = 1024):
        self.buf = np.full(max(16, capacity), SENTINEL, dtype=np.int64)
        self.size = 0
        self._uni: dict[int, list[int]] = {}
        self._bi: dict[int, list[int]] = {}

    def extend(self, tokens: Sequence[int]) -> None:
        n = len(tokens)
        if self.size + n + 1 >= len(self.buf):  # always keep a sentinel after the last token
            grown = np.full(max(2 * len(self.buf), self.size + n + 2), SENTINEL, dtype=np.int64)
            grown[: self.size] = self.buf[: self.size]
            self.buf = grown
        buf, uni, bi = self.buf, self._uni, self._bi
        pos = self.size
        prev = int(buf[pos - 1]) if pos else SENTINEL
        for t in tokens:
            t = int(t)
            buf[pos] = t
            if t != SENTINEL:
                uni.setdefault(t, []).append(pos)
                if prev != SENTINEL:
                    bi.setdefault(_bigram(prev, t), []).append(pos)
            prev = t
            pos += 1
        self.size = pos

    def longest_match(self, tail: np.ndarray, max_match: int) -> tuple[int, np.ndarray]:
        """The longest m <= max_match such that tail[-m:] ends at some position e of this array with
        a (non-sentinel) token after it, and every such e. (0, empty) when none."""
        if not len(tail):
            return 0, np.empty(0, dtype=np.int64)
        buf = self.buf
        cand = self._bi.get(_bigram(tail[-2], tail[-1])) if len(tail) >= 2 and max_match >= 2 else None
        if cand:
            ends, m = np.asarray(cand, dtype=np.int64), 2
        else:
            cand = self._uni.get(int(tail[-1]))
            if not cand:
                return 0, np.empty(0, dtype=np.int64)
            ends, m = np.asarray(cand, dtype=np.int64), 1
        # stale (evicted) entries fail this check; the sentinel after e excludes the context's own end
        ok = buf[ends + 1] != SENTINEL
        for j in range(m):
            ok &= buf[ends - j] == tail[-1 - j]
        ends = ends[ok]
        if not ends.size:
            if m == 2:  # the bigram occurred only where nothing follows: try the last token alone
                return self.longest_match(tail[-1:], 1)
            return 0, ends
        limit = min(max_match, len(tail))
        while m < limit:
            at = ends - m
            keep = at >= 0
            keep[keep] = buf[at[keep]] == tail[-1 - m]
            if not keep.any():
                break
            ends, m = ends[keep], m + 1
        return m, ends


def follow(buf: np.ndarray, ends: np.ndarray, budget: int, min_prob: float) -> tuple[list[int], np.ndarray]:
    """Walk forward from the match ends, taking the most frequent next token each step (ties: the
    latest occurrence), while the running product of shares stays >= min_prob. Returns the draft
    and the end positions of the occurrences that the whole draft followed."""
    draft: list[int] = []
    pos = ends + 1
    prob = 1.0
    while len(draft) < budget:
        toks = buf[pos]
        live = toks != SENTINEL
        pos, toks = pos[live], toks[live]
        if not pos.size:
            break
        vals, counts = np.unique(toks, return_counts=True)
        top = counts.max()
        if (counts == top).sum() == 1:
            tok = int(vals[counts.argmax()])
        else:  # ties: the token whose occurrence is the latest
            tied = np.isin(toks, vals[counts == top])
            tok = int(toks[tied][pos[tied].argmax()])
        prob *= top / pos.size
        if prob < min_prob:
            break
        draft.append(tok)
        pos = pos[toks == tok] + 1
    return draft, pos - 1


class SuffixDrafter:
    """Per-request suffix indexes plus a bounded cross-request store of finished outputs.

    Not thread-safe: the development engine calls it from its one worker thread only."""

    compact_min_tokens = 4096  # the store is compacted once its dead tokens exceed this and its live ones

    def __init__(self, max_match: int = 64, min_prob: float = 0.1, alpha: float = 1.0, max_stored: int = MAX_STORED):
        if max_match < 1 or alpha <= 0 or not 0.0 <= min_prob <= 1.0 or max_stored < 0:
            raise ValueError("suffix drafter: max_match >= 1, alpha > 0, 0 <= min_prob <= 1, max_stored >= 0")
        self.max_match, self.min_prob, self.alpha, self.max_stored = max_match, min_prob, alpha, max_stored
        self._active: dict[object, _TokenIndex] = {}
        # the store: all kept outputs in one array, each followed by a sentinel
        self._store = _TokenIndex(4096)
        self._spans: OrderedDict[int, tuple[int, int]] = OrderedDict()  # output id -> [start, end), LRU order
        self._next_id = 0
        self._dead = 0  # store tokens of evicted outputs, overwritten with the sentinel

    # ---- per request ----------------------------------------------------------------------
    def propose(self, key: object, context: Sequence[int], k: int) -> list[int]:
        """Up to k draft tokens after `context`, which for one `key` only ever grows by appending
        (the request's prompt + tokens generated so far). An empty list: no proposal."""
        local = self._active.get(key)
        if local is None:
            local = self._active[key] = _TokenIndex(2 * len(context) + 64)
        if len(context) > local.size:
            local.extend(context[local.size :])
        if k <= 0 or local.size < 2:
            return []
        tail = local.buf[max(0, local.size - self.max_match) : local.size]
        m_local, ends_local = local.longest_match(tail, self.max_match)
        m_store, ends_store = self._store.longest_match(tail, self.max_match) if self._spans else (0, None)
        order = [(m_local, local, ends_local), (m_store, self._store, ends_store)]
        if m_store > m_local:
            order.reverse()
        for m, source, ends in order:
            if m == 0:
                continue
            budget = min(k, int(self.alpha * m + 1e-6))
            draft, used = follow(source.buf, ends, budget, self.min_prob)
            if draft:
                if source is self._store:
                    self._touch(used)
                return draft
        return []

    def finish(self, key: object, output: Sequence[int] | None = None) -> None:
        """The request is over: drop its index, and keep `output` (its generated tokens) in the store."""
        self._active.pop(key, None)
        if output:
            self.store(output)

    # ---- cross-request store ----------------------------------------------------------------
    def store(self, output: Sequence[int]) -> None:
        if self.max_stored == 0 or not len(output):
            return
        start = self._store.size
        self._store.extend(list(output) + [SENTINEL])
        self._spans[self._next_id] = (start, start + len(output))
        self._next_id += 1
        while len(self._spans) > self.max_stored:
            _, (a, b) = self._spans.popitem(last=False)
            self._store.buf[a:b] = SENTINEL
            self._dead += b - a + 1
        if self._dead > max(self.compact_min_tokens, self._store.size - self._dead):
            self._compact()

    @property
    def stored_outputs(self) -> list[list[int]]:
        """The outputs kept, least recently used first (for tests and diagnostics)."""
        return [self._store.buf[a:b].tolist() for a, b in self._spans.values()]

    @property
    def active_requests(self) -> int:
        return len(self._active)

    def _touch(self, ends: np.ndarray) -> None:
        """Mark the outputs holding these store positions as just used (LRU)."""
        ids = list(self._spans)
        starts = np.fromiter((self._spans[i][0] for i in ids), dtype=np.int64, count=len(ids))
        order = np.argsort(starts)
        which = np.searchsorted(starts[order], np.unique(ends), side="right") - 1
        for w in np.unique(which):
            if w >= 0:
                self._spans.move_to_end(ids[order[w]])

    def _compact(self) -> None:
        outputs = [(i, self._store.buf[a:b].tolist()) for i, (a, b) in self._spans.items()]
        self._store = _TokenIndex(2 * sum(len(o) + 1 for _, o in outputs) + 64)
        self._spans = OrderedDict()
        self._dead = 0
        for i, out in outputs:
            start = self._store.size
            self._store.extend(out + [SENTINEL])
            self._spans[i] = (start, start + len(out))
