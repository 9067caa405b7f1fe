"""Personalized PageRank on a cached CSR snapshot, with per-query edge-weight overrides.

The snapshot stores the weighted adjacency ``W`` (row = source) and its transpose once. A query
may multiply individual directed entries ``(u → v)`` without touching the stored graph: the
override copies only the transposed data array (O(nnz)) and patches the affected out-degrees.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

import numpy as np
import scipy.sparse as sp


@dataclass(frozen=True)
class GraphSnapshot:
    """Immutable CSR view of the graph, built after writes and cached by the KG."""

    node_ids: tuple[str, ...]
    index: Mapping[str, int]
    kinds: np.ndarray           # node kind per row (dtype object)
    w: sp.csr_matrix            # weighted adjacency, row = source
    wt: sp.csr_matrix           # transpose of w (row = target), for the power iteration
    t_pos: np.ndarray           # t_pos[k] = position in wt.data of w.data[k]
    out_weight: np.ndarray      # row sums of w

    @property
    def n(self) -> int:
        return len(self.node_ids)

    def entry_positions(self, pairs: Iterable[tuple[int, int]]) -> list[tuple[int, int]]:
        """Positions in ``w.data`` of directed entries (u, v); missing entries are skipped."""
        out = []
        for u, v in pairs:
            lo, hi = self.w.indptr[u], self.w.indptr[u + 1]
            k = lo + np.searchsorted(self.w.indices[lo:hi], v)
            if k < hi and self.w.indices[k] == v:
                out.append((u, int(k)))
        return out


def build_snapshot(node_ids: list[str], kinds: list[str], src: np.ndarray, dst: np.ndarray,
                   weight: np.ndarray, *, symmetric: bool = True) -> GraphSnapshot:
    """Build a snapshot; with ``symmetric`` each edge is walkable both ways (parallel edges add)."""
    n = len(node_ids)
    if symmetric:
        rows = np.concatenate([src, dst])
        cols = np.concatenate([dst, src])
        data = np.concatenate([weight, weight])
    else:
        rows, cols, data = src, dst, weight
    keep = rows != cols
    w = sp.csr_matrix((data[keep].astype(np.float64), (rows[keep], cols[keep])), shape=(n, n))
    w.sum_duplicates()
    w.sort_indices()
    # transpose while remembering where each entry lands: carry entry ids through as data
    ids = sp.csr_matrix((np.arange(w.nnz, dtype=np.float64) + 1.0, w.indices.copy(), w.indptr.copy()),
                        shape=(n, n))
    idt = ids.T.tocsr()
    idt.sort_indices()
    t_pos = np.empty(w.nnz, dtype=np.int64)
    t_pos[idt.data.astype(np.int64) - 1] = np.arange(w.nnz)
    wt = sp.csr_matrix((w.data[idt.data.astype(np.int64) - 1], idt.indices, idt.indptr), shape=(n, n))
    out_weight = np.asarray(w.sum(axis=1)).ravel()
    return GraphSnapshot(tuple(node_ids), {nid: i for i, nid in enumerate(node_ids)},
                         np.asarray(kinds, dtype=object), w, wt, t_pos, out_weight)


def personalized_pagerank(snapshot: GraphSnapshot, reset: np.ndarray, *, damping: float = 0.5,
                          tol: float = 1e-8, max_iter: int = 200,
                          overrides: Mapping[tuple[int, int], float] | None = None) -> np.ndarray:
    """PPR scores (sum 1) for reset vector ``reset`` (non-negative, any scale).

    ``damping`` is the probability of following an edge (HippoRAG's convention, networkx's
    ``alpha``). Mass at nodes without out-edges returns to the reset distribution. ``overrides``
    maps directed entries ``(u, v)`` (row indices) to weight multipliers for this call only.
    """
    n = snapshot.n
    if n == 0:
        return np.zeros(0)
    if not 0.0 < damping < 1.0:
        raise ValueError(f"damping must be in (0, 1), got {damping}")
    r = np.nan_to_num(np.asarray(reset, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    r[r < 0] = 0.0
    total = r.sum()
    r = r / total if total > 0 else np.full(n, 1.0 / n)
    wt_data = snapshot.wt.data
    out_w = snapshot.out_weight
    if overrides:
        wt_data = wt_data.copy()
        out_w = out_w.copy()
        pos = snapshot.entry_positions(overrides.keys())
        mult = np.array([overrides[(u, int(snapshot.w.indices[k]))] for u, k in pos], dtype=np.float64)
        if pos:
            us = np.array([u for u, _ in pos])
            ks = np.array([k for _, k in pos])
            base = snapshot.w.data[ks]
            wt_data[snapshot.t_pos[ks]] = base * mult
            np.add.at(out_w, us, base * (mult - 1.0))
            out_w[np.abs(out_w) < 1e-12] = 0.0
    wt = sp.csr_matrix((wt_data, snapshot.wt.indices, snapshot.wt.indptr), shape=(n, n))
    with np.errstate(divide="ignore"):
        inv = np.where(out_w > 0, 1.0 / out_w, 0.0)
    dangling = out_w <= 0
    p = r.copy()
    for _ in range(max_iter):
        moved = wt @ (p * inv)
        new = damping * moved + (damping * p[dangling].sum() + (1.0 - damping)) * r
        err = np.abs(new - p).sum()
        p = new
        if err < tol:
            break
    return p / p.sum()


def push_ppr(snapshot: GraphSnapshot, reset: Mapping[int, float], *, damping: float = 0.5, eps: float = 1e-5,
             overrides: Mapping[tuple[int, int], float] | None = None,
             max_pushes: int = 5_000_000) -> tuple[np.ndarray, np.ndarray]:
    """Approximate PPR by forward push (Andersen, Chung & Lang): only nodes the residual mass
    reaches are touched, so the cost depends on ``eps`` and the seeds' neighbourhood, not on the
    graph's size.

    Same model as :func:`personalized_pagerank` (``damping`` = probability of following an edge;
    mass at a node without out-edges returns to the reset distribution; ``overrides`` multiply
    directed entries for this call). A node is pushed while its residual exceeds ``eps`` times
    its out-degree. Estimates never exceed the exact scores; the mass still unpushed, at most
    ``eps`` × the degrees of the nodes holding it, is what they lack (on an undirected graph each
    node's score is low by at most ``eps × degree``, ACL's bound). Returns (node rows, scores) of
    the touched nodes; the scores sum to one minus that unpushed mass.
    """
    if not 0.0 < damping < 1.0:
        raise ValueError(f"damping must be in (0, 1), got {damping}")
    w = snapshot.w
    indptr, indices, data = w.indptr, w.indices, w.data
    out_w = snapshot.out_weight
    r0 = {int(u): float(x) for u, x in reset.items() if np.isfinite(x) and x > 0 and 0 <= u < snapshot.n}
    total = sum(r0.values())
    if not r0 or snapshot.n == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    r0 = {u: x / total for u, x in r0.items()}
    patched: dict[int, tuple[np.ndarray, float]] = {}   # row → (its weights with overrides, its out-weight)
    if overrides:
        by_row: dict[int, list[tuple[int, float]]] = {}
        for u, k in snapshot.entry_positions(overrides.keys()):
            by_row.setdefault(u, []).append((k, float(overrides[(u, int(indices[k]))])))
        for u, entries in by_row.items():
            row = data[indptr[u]:indptr[u + 1]].copy()
            for k, mult in entries:
                row[k - indptr[u]] *= mult
            patched[u] = (row, float(row.sum()))
    est: dict[int, float] = {}
    res: dict[int, float] = dict(r0)
    deg = np.diff(indptr)
    queue = list(res)
    queued = set(queue)
    pushes = 0
    while queue and pushes < max_pushes:
        u = queue.pop()
        queued.discard(u)
        ru = res.get(u, 0.0)
        if ru <= eps * max(1, int(deg[u])):
            continue
        pushes += 1
        res[u] = 0.0
        est[u] = est.get(u, 0.0) + (1.0 - damping) * ru
        lo, hi = indptr[u], indptr[u + 1]
        if u in patched:
            wts, ow = patched[u]
        else:
            wts, ow = data[lo:hi], float(out_w[u])
        moved = damping * ru
        if ow <= 0:   # no way out: the mass returns to the reset distribution
            targets, amounts = list(r0), [moved * x for x in r0.values()]
        else:
            targets, amounts = indices[lo:hi].tolist(), (wts * (moved / ow)).tolist()
        for v, a in zip(targets, amounts):
            nv = res.get(v, 0.0) + a
            res[v] = nv
            if v not in queued and nv > eps * max(1, int(deg[v])):
                queue.append(v)
                queued.add(v)
    rows = np.fromiter(est, dtype=np.int64, count=len(est))
    return rows, np.fromiter(est.values(), dtype=np.float64, count=len(est))
