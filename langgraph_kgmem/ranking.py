"""Deterministic top-k and rank fusion: the ranking routines every search and method uses.

Fixed fusion (:func:`interleave`, :func:`dense_led`) merges a graph method's ranking with vector
search's the same way for every question; adaptive fusion (:func:`adaptive_fuse`) lets the method
decide per question how many places its own ranking earns, from a confidence the method computes
from its own signals, with a stated guarantee at either end."""

from __future__ import annotations

from typing import Hashable, Sequence, TypeVar

import numpy as np

K = TypeVar("K", bound=Hashable)

# Reciprocal-rank-fusion constant (Cormack, Clarke & Büttcher, SIGIR 2009): a list's item at rank r
# (from 1) adds 1 / (RRF_K + r). 60 is the published value, not tuned here: it makes a passage that
# two rankings both place well beat one that a single ranking places first.
RRF_K = 60


def fusion_depth(k: int) -> int:
    """How deep each ranking is read for a fused top ``k``: ``max(k, 2·RRF_K)``. Below rank 2·RRF_K
    one list's contribution is under a third of its top item's and cannot lift a passage past one
    that both lists rank, so reading further only costs time."""
    return max(int(k), 2 * RRF_K)


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


def reciprocal_rank_fusion(rankings: Sequence[Sequence[K]], k: int | None = None, *,
                           rrf_k: float = RRF_K) -> list[tuple[K, float]]:
    """Fuse ranked lists (best first) into one: item ``d`` scores ``Σ_lists 1 / (rrf_k + rank(d))``
    with ranks from 1; a list that does not hold ``d`` adds nothing. Returns the best ``k`` (all
    when None) as ``(item, score)``, best first.

    Only ranks count, never the lists' own scores, so rankings on incomparable scales (PPR mass,
    cosine, a walk's discovery order) fuse without calibration. An item two lists both rank well
    beats one only a single list holds, even at the top of that list. Equal scores go to the
    item with the better rank in the earlier list (then the later lists, in order); a repeated
    item counts once per list, at its first place (ranks count distinct items)."""
    if rrf_k <= 0:
        raise ValueError(f"rrf_k must be positive, got {rrf_k}")
    score: dict[K, float] = {}
    first: dict[K, list[int]] = {}
    n = len(rankings)
    for li, ranking in enumerate(rankings):
        seen: set[K] = set()
        for item in ranking:
            if item in seen:
                continue
            seen.add(item)
            r = len(seen)
            score[item] = score.get(item, 0.0) + 1.0 / (rrf_k + r)
            first.setdefault(item, [0] * n)[li] = r
    big = max((len(x) for x in rankings), default=0) + 1
    # tie-break: ranks per list in list order, an absent one (0) counting as after every rank
    # (scores rounded: sums of the same terms in another order may differ in the last bit)
    order = sorted(score, key=lambda d: (-round(score[d], 12), *[(r or big) for r in first[d]]))
    return [(d, score[d]) for d in (order if k is None else order[:max(0, int(k))])]


def interleave(rankings: Sequence[Sequence[K]], k: int | None = None) -> list[tuple[K, float]]:
    """Merge ranked lists (best first) by taking turns: each list in order gives its best item not
    yet taken, round after round (team-draft interleaving without the draft). Returns the first
    ``k`` (all when None) as ``(item, 1 / position)``, best first.

    The guarantee fusion by score cannot give: the merged top ``n`` holds each list's top
    ``n // len(rankings)`` items, whatever the other lists say, so a method fused with vector search
    keeps vector search's top ``k`` within its own top ``2k`` and its own best passages first.
    No constant, no scores: lists on incomparable scales merge as they are. Repeats count once."""
    iters = [iter(r) for r in rankings]
    taken: dict[K, float] = {}
    limit = None if k is None else max(0, int(k))
    live = list(range(len(iters)))
    while live and (limit is None or len(taken) < limit):
        for li in list(live):
            if limit is not None and len(taken) >= limit:
                break
            for item in iters[li]:
                if item not in taken:
                    taken[item] = 1.0 / (len(taken) + 1)
                    break
            else:
                live.remove(li)
    return list(taken.items())


def dense_led(own: Sequence[K], dense: Sequence[K], k: int | None = None) -> list[tuple[K, float]]:
    """A method's own ranking fused with vector search's when the method's order is blind to how
    near each item is to the question (a walk's discovery order, fine scores of fact lines):
    vector search's best item takes ``own``'s first turn, then the two take turns, ``dense`` next
    (:func:`interleave`). Places 1 and 2 are vector search's top two, and the top ``2m + 1`` holds
    ``own``'s first ``m`` items and vector search's top ``m + 1``. Callers leave out of ``own``
    what vector search ranks far from the question (beyond :func:`fusion_depth`)."""
    return interleave([list(dense[:1]) + list(own), dense], k)


def shared_turns(own: Sequence[K], dense: Sequence[K], k: int | None = None, *,
                 share: float) -> list[tuple[K, float]]:
    """Merge a method's own ranking with vector search's, ``own`` holding about ``share`` of the
    places: place ``n`` (from 1) is ``own``'s turn while ``own`` has fewer than ``share · n`` of the
    places so far (``own`` opens whenever ``share > 0``); on its turn a list gives its best item not
    yet taken, and a list that has run out hands its turns to the other. Returns the first ``k``
    (all when None) as ``(item, 1 / place)``, best first.

    ``share`` 1 is ``own`` as it is, then vector search's remaining items; 0 the reverse; 0.5 is
    :func:`interleave` with ``own`` first. The first ``k`` places hold ``ceil(share · k)`` turns of
    ``own`` at most, so they hold all but that many of vector search's top ``k`` (an ``own`` turn that
    picks one of those costs nothing)."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"share must be within [0, 1], got {share}")
    lists = (iter(own), iter(dense))
    taken: dict[K, float] = {}
    limit = None if k is None else max(0, int(k))
    live = [True, True]
    mine = 0
    while any(live) and (limit is None or len(taken) < limit):
        turn = 0 if live[0] and (not live[1] or mine < share * (len(taken) + 1) - 1e-9) else 1
        for item in lists[turn]:
            if item not in taken:
                taken[item] = 1.0 / (len(taken) + 1)
                mine += turn == 0
                break
        else:
            live[turn] = False
    return list(taken.items())


def trust_share(confidence: float, *, weak: float, strong: float, k: int) -> float:
    """How much of a fused top ``k`` a method's own ranking earns from its ``confidence`` (in
    [0, 1], the method's own reading of its signals): below ``weak`` one place in ``k`` (vector
    search keeps all but one of its top ``k``), from ``strong`` on all of them (the method's full
    ranking), between the two every other place (:func:`interleave`)."""
    if not 0.0 <= weak <= strong:
        raise ValueError(f"fusion thresholds need 0 <= weak <= strong, got weak={weak}, strong={strong}")
    if confidence >= strong:
        return 1.0
    if confidence < weak:
        return 1.0 / max(1, int(k))
    return 0.5


def adaptive_fuse(own: Sequence[K], dense: Sequence[K], k: int, *, confidence: float, weak: float,
                  strong: float, depth: int | None = None) -> list[tuple[K, float]]:
    """A method's ranking fused with vector search's as far as the method trusts it this time
    (:func:`trust_share` of ``confidence``, then :func:`shared_turns`); all of both lists, best
    first, as ``(item, 1 / place)``.

    The guarantee, whatever the signals say: with ``confidence`` below ``weak`` the top ``k`` holds
    all but at most one of vector search's top ``k`` (so Recall@k is at most one passage below vector
    search's); with ``confidence`` at ``strong`` or above it is the method's own top ``k`` exactly.
    ``depth`` (default :func:`fusion_depth`) is how far each list is read for the merge; items
    beyond it follow, ``own``'s first."""
    depth = fusion_depth(k) if depth is None else max(int(k), int(depth))
    share = trust_share(confidence, weak=weak, strong=strong, k=k)
    fused = shared_turns(list(own[:depth]), list(dense[:depth]), share=share)
    taken = {x for x, _ in fused}
    rest = [x for x in dict.fromkeys([*own[depth:], *dense[depth:]]) if x not in taken]
    return fused + [(x, 1.0 / (len(fused) + i + 1)) for i, x in enumerate(rest)]


def overlap_at(a: Sequence[K], b: Sequence[K], k: int) -> float:
    """Share of ``a``'s first ``k`` items that are among ``b``'s first ``k``: how far two rankings
    agree at the top (0 when ``k`` is 0 or ``a`` is empty)."""
    top = list(dict.fromkeys(a))[:max(0, int(k))]
    return len(set(top) & set(list(dict.fromkeys(b))[:max(0, int(k))])) / len(top) if top else 0.0
