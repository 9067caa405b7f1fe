"""Deterministic top-k: the one ranking routine every search and method uses."""

from __future__ import annotations

import numpy as np


def best_first(scores: np.ndarray, k: int | None = None) -> np.ndarray:
    """Indices of the ``k`` highest ``scores`` (all when ``k`` is None), best first; equal scores
    by index, also at the cut, so results never depend on partition or hash order. O(n) to find
    the candidates, then a sort of only those."""
    scores = np.asarray(scores)
    n = len(scores)
    k = n if k is None else max(0, min(int(k), n))
    if k == 0:
        return np.zeros(0, dtype=np.int64)
    if k < n:
        kth = np.partition(-scores, k - 1)[k - 1]        # minus the k-th best score
        cand = np.flatnonzero(-scores <= kth)            # everything at least that good, ties included
    else:
        cand = np.arange(n)
    return cand[np.lexsort((cand, -scores[cand]))][:k].astype(np.int64)
