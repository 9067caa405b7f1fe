"""Personalized PageRank on a cached CSR snapshot: exact power iteration and forward push.

The snapshot stores the weighted adjacency ``W`` (row = source) and its transpose once. A query
may multiply individual directed entries ``(u → v)`` without touching the stored graph: the
exact iteration adds a small correction matrix beside the stored one, push patches the few rows
involved. Writes after a snapshot was built go into a small ``delta`` matrix beside it (see
:func:`extend_snapshot`), merged into the base only once it grows, so one new document costs a
few milliseconds instead of a rebuild of the whole CSR.

Two algorithms (``KnowledgeGraph.ppr`` picks, see :func:`choose_method`):

- :func:`personalized_pagerank`: power iteration over the whole graph. ``strict`` (tests,
  reference) iterates in float64 to ``tol``; otherwise it iterates in float32 (half the memory
  traffic) and, given a ``top_k``, stops as soon as the top-k is certified: the remaining error
  bound ``err·d/(1−d)`` of the contraction is smaller than half the gap below the k-th score.
- :func:`push_ppr`: forward push (Andersen, Chung & Lang), touching only what the seeds'
  residual mass reaches: its cost depends on ``eps`` and the seeds' neighbourhood, not on the
  graph's size.

``"auto"`` (:func:`auto_ppr`) uses push only when its answer is provably as accurate as the exact
iteration's: push knows its own error (the mass it has not yet placed, and on a symmetric graph a
per-node bound from the residual left), so it lowers ``eps`` until the top-k is certified and gives
up for exact once push would cost more than a small share of the graph. On hub-heavy graphs hubs
sit in the top-k with scores push settles only at a fine eps: there auto runs exact.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator, Literal, Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from langgraph_kgmem.ranking import best_first

PprMethod = Literal["auto", "exact", "push"]
PUSH_MIN_ENTRIES = 400_000       # "auto" tries push only on snapshots of this many directed entries ...
PUSH_BUDGET_SHARE = 0.05         # ... letting it read at most this share of them, over all its eps steps
AUTO_EPS_STEP = 10.0             # "auto" lowers push's eps by this factor until the answer is accurate enough
BULK_SPREAD_SHARE = 8            # a push round reaching 1/8 of the rows spreads its mass densely
FLOAT32_TOL = 1e-6               # float32 iterations cannot resolve an L1 change much below this
DELTA_MERGE_MIN = 20_000         # a delta is merged into the base beyond this many entries ...
DELTA_MERGE_FRACTION = 0.02      # ... or this fraction of the base, whichever is larger


# ------------------------------------------------------------------------------ node tables


class NodeTable:
    """Node ids, rows and kinds shared by one KG's snapshots. It only grows by appending, so a
    snapshot of ``n`` rows stays valid while later snapshots see more rows; a removed node means
    a new table."""

    def __init__(self, ids: Iterable[str], kinds: Iterable[str]) -> None:
        self.ids: list[str] = list(ids)
        self.index: dict[str, int] = {nid: i for i, nid in enumerate(self.ids)}
        ks = list(kinds)
        self._kinds = np.empty(max(16, len(ks) + len(ks) // 4), dtype=object)
        self._kinds[:len(ks)] = ks

    def __len__(self) -> int:
        return len(self.ids)

    def append(self, ids: Sequence[str], kinds: Sequence[str]) -> None:
        """Add nodes as new rows after the existing ones (the rows earlier snapshots use stay as they are)."""
        n = len(self.ids)
        if n + len(ids) > len(self._kinds):   # amortised doubling; earlier snapshots keep their views
            grown = np.empty(2 * (n + len(ids)), dtype=object)
            grown[:n] = self._kinds[:n]
            self._kinds = grown
        self._kinds[n:n + len(ids)] = list(kinds)
        for i, nid in enumerate(ids):
            self.index[nid] = n + i
        self.ids.extend(ids)

    def kinds(self, n: int) -> np.ndarray:
        """The node kind of each of the first ``n`` rows (a view, not a copy)."""
        return self._kinds[:n]


class RowIds(Sequence[str]):
    """The first ``n`` ids of a :class:`NodeTable` (row → node id)."""

    def __init__(self, table: NodeTable, n: int) -> None:
        self._ids, self._n = table.ids, n

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self._ids[j] for j in range(*i.indices(self._n))]
        i = int(i)
        if not -self._n <= i < self._n:
            raise IndexError(f"row {i} outside a snapshot of {self._n} nodes")
        return self._ids[i % self._n]

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids[:self._n])


class RowIndex(Mapping[str, int]):
    """Node id → row, for the first ``n`` rows of a :class:`NodeTable`."""

    def __init__(self, table: NodeTable, n: int) -> None:
        self._index, self._ids, self._n = table.index, table.ids, n

    def __getitem__(self, nid: str) -> int:
        i = self._index[nid]
        if i >= self._n:
            raise KeyError(nid)
        return i

    def get(self, nid: str, default: Any = None) -> Any:
        """The row of ``nid``, or ``default`` when it is not among the first ``n`` rows."""
        i = self._index.get(nid)
        return default if i is None or i >= self._n else i

    def __contains__(self, nid: object) -> bool:
        i = self._index.get(nid)  # type: ignore[call-overload]
        return i is not None and i < self._n

    def __iter__(self) -> Iterator[str]:
        return iter(self._ids[:self._n])

    def __len__(self) -> int:
        return self._n


# ------------------------------------------------------------------------------ snapshots


@dataclass(frozen=True)
class GraphSnapshot:
    """Immutable CSR view of the graph, cached by the KG until its next write.

    ``w``/``wt`` are the base adjacency (row = source) and its transpose; ``delta`` (row = source)
    holds weight changes written since the base was built (``None`` when there are none); the
    effective graph is ``w + delta``, and ``out_weight`` its row sums."""

    node_ids: Sequence[str]
    index: Mapping[str, int]
    kinds: np.ndarray           # node kind per row (dtype object)
    w: sp.csr_matrix            # base weighted adjacency, row = source
    wt: sp.csr_matrix           # transpose of w (row = target), for the power iteration
    out_weight: np.ndarray      # row sums of w + delta
    delta: sp.csr_matrix | None = None
    table: NodeTable | None = field(default=None, compare=False, repr=False)
    _memo: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def n(self) -> int:
        """How many nodes (rows) the snapshot has."""
        return len(self.node_ids)

    @property
    def nnz(self) -> int:
        """Directed entries, base and delta together (the size "auto" looks at)."""
        return self.w.nnz + (self.delta.nnz if self.delta is not None else 0)

    def _cached(self, key: str, make: Any) -> Any:
        val = self._memo.get(key)
        if val is None:
            val = self._memo[key] = make()
        return val

    def symmetric(self) -> bool:
        """Whether the effective graph is its own transpose (every edge walkable both ways with one
        weight): then a walk is reversible and push can bound each score's error by its node's weight
        (:func:`certified_top_k`). One pass over the stored arrays, cached."""
        def same(a: sp.csr_matrix, b: sp.csr_matrix) -> bool:
            return (a.shape == b.shape and np.array_equal(a.indptr, b.indptr)
                    and np.array_equal(a.indices, b.indices) and np.allclose(a.data, b.data, rtol=1e-9, atol=0.0))

        def make() -> bool:
            if not same(self.w, self.wt):
                return False
            if self.delta is None:
                return True
            dt = self.delta.T.tocsr()
            dt.sort_indices()
            return same(self.delta, dt)

        return self._cached("symmetric", make)

    def kind_rows(self, node_kinds: Sequence[str]) -> np.ndarray:
        """Rows whose node is of one of ``node_kinds`` (a whole-graph pass, memoised per snapshot)."""
        kinds = sorted(node_kinds)
        return self._cached(f"rows:{kinds}", lambda: np.flatnonzero(np.isin(self.kinds, kinds)))

    def wt_as(self, dtype: Any) -> sp.csr_matrix:
        """:attr:`wt` with its weights in ``dtype`` (memoised; the matrix itself when it already is)."""
        if np.dtype(dtype) == self.wt.dtype:
            return self.wt
        return self._cached(f"wt:{np.dtype(dtype)}", lambda: sp.csr_matrix(
            (self.wt.data.astype(dtype), self.wt.indices, self.wt.indptr), shape=self.wt.shape))

    @property
    def degree(self) -> np.ndarray:
        """Out-entries per row of the base (push's threshold; a delta row counts its own)."""
        return self._cached("degree", lambda: np.diff(self.w.indptr))

    @property
    def delta_rows(self) -> dict[int, tuple[np.ndarray, np.ndarray]]:
        """Row → (targets, weights) of ``w + delta`` for every row the delta touches."""
        def make() -> dict[int, tuple[np.ndarray, np.ndarray]]:
            if self.delta is None:
                return {}
            return {int(u): self._merged_row(int(u)) for u in np.flatnonzero(np.diff(self.delta.indptr))}
        return self._cached("delta_rows", make)

    def _merged_row(self, u: int) -> tuple[np.ndarray, np.ndarray]:
        w, d = self.w, self.delta
        cols = np.concatenate([w.indices[w.indptr[u]:w.indptr[u + 1]], d.indices[d.indptr[u]:d.indptr[u + 1]]])
        vals = np.concatenate([w.data[w.indptr[u]:w.indptr[u + 1]], d.data[d.indptr[u]:d.indptr[u + 1]]])
        uniq, inv = np.unique(cols, return_inverse=True)
        sums = np.zeros(len(uniq))
        np.add.at(sums, inv, vals)
        return uniq, sums

    def row(self, u: int) -> tuple[np.ndarray, np.ndarray]:
        """(targets, weights) of row ``u`` of the effective graph."""
        merged = self.delta_rows.get(u)
        if merged is not None:
            return merged
        lo, hi = self.w.indptr[u], self.w.indptr[u + 1]
        return self.w.indices[lo:hi], self.w.data[lo:hi]

    def entry_weights(self, pairs: Iterable[tuple[int, int]]) -> list[tuple[int, int, float]]:
        """(u, v, weight) of the directed entries among ``pairs`` that exist; others are skipped."""
        out = []
        for u, v in pairs:
            if not (0 <= u < self.n and 0 <= v < self.n):
                continue
            cols, vals = self.row(u)
            k = int(np.searchsorted(cols, v))
            if k < len(cols) and cols[k] == v:
                out.append((u, v, float(vals[k])))
        return out


def _directed(src: np.ndarray, dst: np.ndarray, weight: np.ndarray, symmetric: bool) -> tuple[np.ndarray, ...]:
    if symmetric:
        rows, cols, data = np.concatenate([src, dst]), np.concatenate([dst, src]), np.concatenate([weight, weight])
    else:
        rows, cols, data = np.asarray(src), np.asarray(dst), np.asarray(weight)
    keep = rows != cols   # a self-loop never moves a walk
    return rows[keep], cols[keep], data[keep].astype(np.float64)


def degree_order(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Node positions by falling degree (ties by position): a locality order for the rows."""
    deg = np.bincount(src, minlength=n) + np.bincount(dst, minlength=n)
    return np.argsort(-deg, kind="stable")


def build_snapshot(node_ids: Sequence[str], kinds: Sequence[str], src: np.ndarray, dst: np.ndarray,
                   weight: np.ndarray, *, symmetric: bool = True, table: NodeTable | None = None) -> GraphSnapshot:
    """Build a snapshot; with ``symmetric`` each edge is walkable both ways (parallel edges add).
    ``table`` (holding exactly ``node_ids``) is shared instead of building a new one."""
    if table is None or len(table) != len(node_ids):
        table = NodeTable(node_ids, kinds)
    rows, cols, data = _directed(src, dst, weight, symmetric)
    return _from_entries(table, len(node_ids), rows, cols, data)


def _from_entries(table: NodeTable, n: int, rows: np.ndarray, cols: np.ndarray, data: np.ndarray) -> GraphSnapshot:
    w = sp.csr_matrix((data, (rows, cols)), shape=(n, n))
    w.sum_duplicates()
    w.data[np.abs(w.data) < 1e-12] = 0.0   # an edge removed since: its entry goes
    w.eliminate_zeros()
    w.sort_indices()
    wt = w.T.tocsr()
    wt.sort_indices()
    out_weight = np.asarray(w.sum(axis=1)).ravel()
    return GraphSnapshot(RowIds(table, n), RowIndex(table, n), table.kinds(n), w, wt, out_weight, None, table)


def _pad(m: sp.csr_matrix, n: int) -> sp.csr_matrix:
    """The same entries in an n × n matrix (rows and columns appended empty); shares the arrays."""
    if m.shape[0] == n:
        return m
    indptr = np.concatenate([m.indptr, np.full(n - m.shape[0], m.indptr[-1], dtype=m.indptr.dtype)])
    return sp.csr_matrix((m.data, m.indices, indptr), shape=(n, n))


def extend_snapshot(snap: GraphSnapshot, n: int, rows: np.ndarray, cols: np.ndarray, data: np.ndarray) -> GraphSnapshot:
    """``snap`` with its node table's rows up to ``n`` and the directed weight changes
    ``(rows, cols, data)`` added (negative for a removed or lightened edge).

    The changes go into the small ``delta`` matrix; once it holds more than
    ``max(DELTA_MERGE_MIN, DELTA_MERGE_FRACTION × base entries)`` entries the two are merged
    into a new base (one CSR build from arrays, no pass over Python objects)."""
    table = snap.table
    if table is None or len(table) < n:
        raise ValueError("extend_snapshot needs the snapshot's node table grown to n rows first")
    keep = rows != cols
    new_rows, new_cols, new_data = rows[keep], cols[keep], np.asarray(data, dtype=np.float64)[keep]
    rows, cols, data = new_rows, new_cols, new_data
    if snap.delta is not None:
        old = snap.delta.tocoo()
        rows, cols, data = np.concatenate([old.row, rows]), np.concatenate([old.col, cols]), np.concatenate([old.data, data])
    if len(rows) > max(DELTA_MERGE_MIN, DELTA_MERGE_FRACTION * snap.w.nnz):
        base = snap.w.tocoo()
        return _from_entries(table, n, np.concatenate([base.row, rows]), np.concatenate([base.col, cols]),
                             np.concatenate([base.data, data]))
    delta = None
    if len(rows):
        delta = sp.csr_matrix((data, (rows, cols)), shape=(n, n))
        delta.sum_duplicates()
        delta.sort_indices()
    out_weight = np.zeros(n)
    out_weight[:snap.n] = snap.out_weight
    np.add.at(out_weight, new_rows, new_data)
    out_weight[np.abs(out_weight) < 1e-12] = 0.0
    # the base is unchanged: so are its float32 copy and degrees (padded with the new rows)
    memo = {k: _pad(v, n) for k, v in snap._memo.items() if k.startswith("wt:")}
    if "degree" in snap._memo:
        memo["degree"] = np.concatenate([snap._memo["degree"], np.zeros(n - snap.n, dtype=snap._memo["degree"].dtype)])
    return GraphSnapshot(RowIds(table, n), RowIndex(table, n), table.kinds(n), _pad(snap.w, n), _pad(snap.wt, n),
                         out_weight, delta, table, memo)


# ------------------------------------------------------------------------------ the two algorithms


def choose_method(snap: GraphSnapshot, method: PprMethod, push_min_entries: int = PUSH_MIN_ENTRIES, *,
                  strict: bool = False) -> str:
    """What a call runs: ``"exact"`` or ``"push"`` as asked; ``"auto"`` is ``"exact"`` on a snapshot
    under ``push_min_entries`` directed entries (an edge walkable both ways counts twice: a whole
    iteration there costs a few milliseconds) or when ``strict`` asks for float64, else ``"auto"``:
    :func:`auto_ppr` decides per query, from the accuracy push actually reached."""
    if method == "auto" and (strict or snap.nnz < push_min_entries):
        return "exact"
    return method


@dataclass
class PushBudget:
    """How many adjacency entries a push may read (``limit``), how many it read (``spent``), whether
    it ran to its threshold (``complete``) rather than stopping at the limit, and at the end the
    largest residual per unit of out-weight left on any node (``residual_per_weight``)."""

    limit: float
    spent: int = 0
    complete: bool = True
    residual_per_weight: float = 0.0


def push_error(scores: np.ndarray) -> float:
    """The L1 error of push's scores: they never exceed the exact ones and the exact scores sum to 1,
    so what they lack in all is ``1 − sum(scores)`` (the residual left unpushed, times ``damping``).
    It also bounds every single score's error."""
    return max(0.0, 1.0 - float(scores.sum()))


def exact_error_bound(damping: float, tol: float) -> float:
    """The L1 error the non-strict exact iteration guarantees when it stops on its tolerance:
    ``err·d/(1−d)`` with ``err`` below ``max(tol, FLOAT32_TOL)``."""
    return max(tol, FLOAT32_TOL) * damping / (1.0 - damping)


def certified_top_k(rows: np.ndarray, scores: np.ndarray, k: int, n_rows: int, *, error: float,
                    top_rows: np.ndarray | None = None, weights: np.ndarray | None = None,
                    residual_per_weight: float | None = None) -> bool:
    """Whether push's top ``k`` (among ``top_rows``, default every one of the ``n_rows``) is the exact
    top ``k`` as a set — the guarantee the exact iteration's early stop gives. Push's scores are never
    high (untouched rows score 0) and each is low by at most ``error``, the L1 error; on a symmetric
    graph also by at most ``weights[u] × residual_per_weight`` (the walk is reversible, so the mass
    still to come to ``u`` is its weight times at most the largest residual per weight left). The set
    is certain once the k-th best score beats every other row's upper bound."""
    if top_rows is not None:
        cand = np.asarray(top_rows, dtype=np.int64)
        keep = np.isin(rows, cand)
        rows, scores = rows[keep], scores[keep]
    n_cand = n_rows if top_rows is None else len(cand)
    k = min(k, n_cand)
    if k <= 0 or k >= n_cand:
        return True
    if len(scores) < k:
        return False

    def bound(w: np.ndarray | float) -> np.ndarray | float:
        if weights is None or residual_per_weight is None or not np.isfinite(residual_per_weight):
            return error
        return np.minimum(error, np.asarray(w) * residual_per_weight)

    top = np.argpartition(-scores, k - 1)[:k]   # the k best, in no order: the certificate is about the set
    rest = np.ones(len(scores), dtype=bool)
    rest[top] = False
    upper = ([float(np.max(scores[rest] + bound(weights[rows[rest]] if weights is not None else 0.0)))]
             if rest.any() else [])
    if len(rows) < n_cand:   # untouched candidates: score 0, upper bound from their largest weight
        untouched = np.ones(n_rows, dtype=bool)
        untouched[rows] = False
        idle = np.flatnonzero(untouched) if top_rows is None else cand[untouched[cand]]
        upper.append(float(bound(float(weights[idle].max())) if weights is not None else error))
    return float(scores[top].min()) > max(upper)


def auto_ppr(snapshot: GraphSnapshot, reset: Mapping[int, float] | SparseReset, *, damping: float, eps: float, tol: float,
             top_k: int | None, top_rows: np.ndarray | None,
             overrides: Mapping[tuple[int, int], float] | None) -> tuple[np.ndarray, np.ndarray, float] | None:
    """``"auto"`` on a large snapshot: push, starting at ``eps`` and lowering it ``AUTO_EPS_STEP``-fold,
    until its answer is as accurate as the exact iteration's would be — the top ``top_k`` certified
    (:func:`certified_top_k`), or without ``top_k`` an L1 error within :func:`exact_error_bound`.

    Push may read at most ``PUSH_BUDGET_SHARE`` of the snapshot's entries in all; a step whose cost,
    predicted as the last step's times ``AUTO_EPS_STEP``, would pass that is not started. Returns
    (rows, scores, L1 error), or None: exact is cheaper at that accuracy (hubs in the answer, whose
    scores push only settles at a fine eps, or a reset spread over much of the graph). A reset whose
    rows alone hold more entries than that (HippoRAG 2's, over every passage) goes to exact at once:
    a push that cannot push each of its rows once leaves their mass unplaced, and trying costs a
    pass over the reset per ``eps`` step."""
    budget = PushBudget(PUSH_BUDGET_SHARE * snapshot.nnz)
    reset = sparse_reset(reset, snapshot.n)   # once, not per eps step
    if int(snapshot.degree[reset[0]].sum()) > budget.limit:
        return None
    target = exact_error_bound(damping, tol)
    # per-node bounds need a reversible walk: a symmetric graph, no per-query overrides
    symmetric = not overrides and snapshot.symmetric()
    step = eps
    while True:
        before = budget.spent
        rows, scores = push_ppr(snapshot, reset, damping=damping, eps=step, overrides=overrides, budget=budget)
        if not len(rows) or not budget.complete:
            return None
        error = push_error(scores)
        reversible = ({"weights": snapshot.out_weight, "residual_per_weight": budget.residual_per_weight}
                      if symmetric else {})
        if error <= target or (top_k and certified_top_k(rows, scores, top_k, snapshot.n, error=error,
                                                         top_rows=top_rows, **reversible)):
            return rows, scores, error
        step_cost = budget.spent - before
        if step_cost == 0 or budget.spent + step_cost * AUTO_EPS_STEP > budget.limit:
            return None
        step /= AUTO_EPS_STEP


def _clean_reset(reset: np.ndarray, n: int) -> np.ndarray:
    r = np.asarray(reset, dtype=np.float64)
    if not (np.isfinite(r).all() and (r >= 0).all()):   # else nothing to clean: no copy
        r = np.nan_to_num(r, nan=0.0, posinf=0.0, neginf=0.0)
        r[r < 0] = 0.0
    total = r.sum()
    return r / total if total > 0 else np.full(n, 1.0 / n)


def _override_weights(snap: GraphSnapshot, overrides: Mapping[tuple[int, int], float] | None) -> list[tuple[int, int, float, float]]:
    """(u, v, weight, multiplier) for the overridden entries that exist."""
    if not overrides:
        return []
    return [(u, v, w, float(overrides[(u, v)])) for u, v, w in snap.entry_weights(overrides.keys())]


def personalized_pagerank(snapshot: GraphSnapshot, reset: np.ndarray, *, damping: float = 0.5,
                          tol: float = 1e-8, max_iter: int = 200,
                          overrides: Mapping[tuple[int, int], float] | None = None,
                          strict: bool = True, top_k: int | None = None,
                          top_rows: np.ndarray | None = None) -> np.ndarray:
    """PPR scores (sum 1) for reset vector ``reset`` (non-negative, any scale).

    ``damping`` is the probability of following an edge (HippoRAG's convention, networkx's
    ``alpha``). Mass at nodes without out-edges returns to the reset distribution. ``overrides``
    maps directed entries ``(u, v)`` (row indices) to weight multipliers for this call only.

    ``strict`` (default): float64 until the L1 change is below ``tol``. Otherwise float32 until
    it is below ``max(tol, FLOAT32_TOL)``, and with ``top_k`` also as soon as the top ``top_k``
    of ``top_rows`` (default: every row) is certified: every score is within the remaining
    error bound ``err·d/(1−d)`` of its limit, and that bound is below half the gap between the
    k-th and the (k+1)-th score, so no further iteration can change which rows are the top k.
    """
    n = snapshot.n
    if n == 0:
        return np.zeros(0)
    if not 0.0 < damping < 1.0:
        raise ValueError(f"damping must be in (0, 1), got {damping}")
    dtype = np.float64 if strict else np.float32
    if not strict:
        tol = max(tol, FLOAT32_TOL)
    r = _clean_reset(reset, n).astype(dtype)
    out_w = snapshot.out_weight
    # the delta and the overrides act through one small matrix C beside the stored transpose
    c_rows, c_cols, c_data = [], [], []
    if snapshot.delta is not None:
        d = snapshot.delta.tocoo()
        c_rows.append(d.col), c_cols.append(d.row), c_data.append(d.data)
    ov = _override_weights(snapshot, overrides)
    if ov:
        out_w = out_w.copy()
        us = np.array([u for u, _, _, _ in ov])
        change = np.array([w * (m - 1.0) for _, _, w, m in ov])
        c_rows.append(np.array([v for _, v, _, _ in ov])), c_cols.append(us), c_data.append(change)
        np.add.at(out_w, us, change)
        out_w[np.abs(out_w) < 1e-12] = 0.0
    corr = None
    if c_rows:
        corr = sp.csr_matrix((np.concatenate(c_data).astype(dtype), (np.concatenate(c_rows), np.concatenate(c_cols))),
                             shape=(n, n))
    wt = snapshot.wt_as(dtype)

    def walk_arrays() -> tuple[np.ndarray, np.ndarray]:
        with np.errstate(divide="ignore"):
            inv = np.where(out_w > 0, 1.0 / out_w, 0.0).astype(dtype)
        return inv, np.flatnonzero(out_w <= 0)

    # the snapshot's own (every query without overrides: a whole-graph pass, kept per snapshot)
    inv, dangling_rows = walk_arrays() if ov else snapshot._cached(f"walk:{np.dtype(dtype)}", walk_arrays)
    any_dangling = len(dangling_rows) > 0
    certify = not strict and top_k is not None and top_k > 0
    cand = np.arange(n) if top_rows is None else np.asarray(top_rows, dtype=np.int64)
    k = min(int(top_k or 0), len(cand))
    bound_factor = damping / (1.0 - damping)
    p = r.copy()
    # scratch reused by every iteration: on a large graph the temporaries' allocation cost as much
    # as the product itself (the same operations in the same order: the same scores to the bit)
    x, part_r, diff = np.empty_like(p), np.empty_like(p), np.empty_like(p)
    for _ in range(max_iter):
        np.multiply(p, inv, out=x)
        new = wt @ x
        if corr is not None:
            new += corr @ x
        back = damping * float(p[dangling_rows].sum()) if any_dangling else 0.0
        new *= damping
        np.multiply(r, back + (1.0 - damping), out=part_r)
        new += part_r
        np.subtract(new, p, out=diff)
        err = float(np.abs(diff, out=diff).sum())
        p = new
        if err < tol:
            break
        if certify and 0 < k < len(cand) and err * bound_factor < 1e-2:
            sub = p[cand]
            part = np.partition(sub, len(sub) - k - 1)
            gap = float(part[len(sub) - k] - part[len(sub) - k - 1])   # k-th best minus (k+1)-th best
            if gap > 2.0 * err * bound_factor:
                break
    p = p.astype(np.float64)
    return p / p.sum()


SparseReset = tuple[np.ndarray, np.ndarray]   # (rows, weights): a reset vector's non-zero entries


def sparse_reset(reset: Mapping[int, float] | SparseReset, n: int) -> SparseReset:
    """A reset's positive, finite weights on rows ``[0, n)`` as (rows ascending, weights summing
    to 1), empty when there are none; repeated rows add up. ``reset`` is ``{row: weight}`` or
    (rows, weights) arrays: a reset over every passage (HippoRAG 2's) has as many entries as the
    KG has passages, so it is checked in arrays, not entry by entry."""
    if isinstance(reset, Mapping):
        rows = np.fromiter(reset.keys(), dtype=np.int64, count=len(reset))
        weights = np.fromiter(reset.values(), dtype=np.float64, count=len(reset))
    else:
        rows = np.asarray(reset[0], dtype=np.int64).ravel()
        weights = np.asarray(reset[1], dtype=np.float64).ravel()
    keep = np.isfinite(weights) & (weights > 0) & (rows >= 0) & (rows < n)
    rows, weights = rows[keep], weights[keep]
    if not len(rows):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    if len(rows) > 1 and not bool(np.all(rows[1:] > rows[:-1])):   # not ascending and distinct already
        uniq, inv = np.unique(rows, return_inverse=True)
        rows, weights = uniq, np.bincount(inv, weights=weights, minlength=len(uniq))
    return rows, weights / weights.sum()


def push_ppr(snapshot: GraphSnapshot, reset: Mapping[int, float] | SparseReset, *, damping: float = 0.5, eps: float = 1e-5,
             overrides: Mapping[tuple[int, int], float] | None = None,
             max_pushes: int = 5_000_000, budget: PushBudget | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Approximate PPR by forward push (Andersen, Chung & Lang) from ``reset`` (``{row: weight}`` or
    (rows, weights) arrays, see :func:`sparse_reset`): only nodes the residual mass reaches are touched, so the cost depends on ``eps`` and the seeds' neighbourhood, not on the
    graph's size.

    Same model as :func:`personalized_pagerank` (``damping`` = probability of following an edge;
    mass at a node without out-edges returns to the reset distribution; ``overrides`` multiply
    directed entries for this call). A node is pushed while its residual exceeds ``eps`` times
    its out-degree. At the end every node keeps ``(1 − damping)`` of the residual still sitting
    on it (the part of its own walk that stops at once), so the estimates never exceed the exact
    scores; what they lack is the rest of the unpushed mass, at most ``eps`` × the degrees of
    the nodes holding it (on an undirected graph each node's score is low by at most
    ``eps × degree``, ACL's bound). In all, the scores miss exactly ``1 − sum(scores)`` of the exact
    scores' mass (:func:`push_error`). ``budget`` (see :class:`PushBudget`) caps the entries read.
    Returns (node rows, ascending; scores) of the touched nodes.
    """
    if not 0.0 < damping < 1.0:
        raise ValueError(f"damping must be in (0, 1), got {damping}")
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps}")
    w = snapshot.w
    indptr, indices, data = w.indptr, w.indices, w.data
    out_w = snapshot.out_weight
    n = snapshot.n
    seeds, seed_share = sparse_reset(reset, n)
    if not len(seeds):
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    # rows that differ from the base: written since it was built (delta), or overridden now
    ov = _override_weights(snapshot, overrides)
    by_row: dict[int, dict[int, float]] = {}
    for u, v, _, m in ov:
        by_row.setdefault(u, {})[v] = m
    patched: dict[int, tuple[np.ndarray, np.ndarray, float]] = {}
    for u in set(snapshot.delta_rows) | set(by_row):
        cols, vals = snapshot.row(u)
        vals = vals.astype(np.float64, copy=True)
        for v, m in by_row.get(u, {}).items():
            vals[np.searchsorted(cols, v)] *= m
        patched[u] = (cols, vals, float(vals.sum()))
    patched_rows = np.fromiter(patched, dtype=np.int64, count=len(patched))
    deg = snapshot.degree
    # dense scratch: np.zeros is calloc, so only the pages the push touches cost anything
    res = np.zeros(n)
    est = np.zeros(n)
    res[seeds] = seed_share

    def over_threshold(res: np.ndarray, cand: np.ndarray) -> np.ndarray:
        thr = eps * np.maximum(1, deg[cand])
        if len(patched_rows):
            hit = np.flatnonzero(np.isin(cand, patched_rows))
            thr[hit] = [eps * max(1, len(patched[int(cand[i])][0])) for i in hit]
        return cand[res[cand] > thr]

    def rows_of(f: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        starts = indptr[f]
        lens = indptr[f + 1] - starts
        pos = slice_positions(starts, lens)
        return indices[pos], data[pos], lens

    return push_rounds(res, est, seeds, seed_share, damping=damping, max_pushes=max_pushes,
                       over_threshold=over_threshold, out_weight=lambda f: out_w[f], rows_of=rows_of,
                       patched=patched, budget=budget, entries=lambda f: int(deg[f].sum()))


def spread(res: np.ndarray, targets: np.ndarray, mass: np.ndarray) -> None:
    """``res[targets] += mass`` with repeated targets adding up. A round that pushes hubs reaches a
    large share of the graph: then one dense ``bincount`` over all rows spreads the mass in bulk,
    far cheaper than ``np.add.at``'s per-entry updates; small rounds stay sparse."""
    if len(targets) * BULK_SPREAD_SHARE >= len(res):
        res += np.bincount(targets, weights=mass, minlength=len(res))[:len(res)]
    else:
        np.add.at(res, targets, mass)


def distinct(rows: np.ndarray, n: int) -> np.ndarray:
    """The distinct values of ``rows`` (all in ``[0, n)``), ascending. A round that reaches a large share
    of the graph marks a dense mask in bulk; smaller ones sort. (``np.unique``'s hashing is many times
    slower than either on the millions of repeated targets a hub's push produces.)"""
    if len(rows) * BULK_SPREAD_SHARE >= n:
        mark = np.zeros(n, dtype=bool)
        mark[rows] = True
        return np.flatnonzero(mark)
    ordered = np.sort(rows)
    if len(ordered) < 2:
        return ordered
    return ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]


def slice_positions(starts: np.ndarray, lens: np.ndarray) -> np.ndarray:
    """Buffer positions of the slices ``[start, start + len)``, concatenated, without a Python loop."""
    total = int(lens.sum())
    return np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens) + np.repeat(starts, lens)


def push_rounds(res: np.ndarray, est: np.ndarray, seeds: np.ndarray, seed_share: np.ndarray, *, damping: float,
                max_pushes: int, over_threshold: Callable[[np.ndarray, np.ndarray], np.ndarray],
                out_weight: Callable[[np.ndarray], np.ndarray],
                rows_of: Callable[[np.ndarray], tuple[np.ndarray, np.ndarray, np.ndarray]],
                patched: Mapping[int, tuple[np.ndarray, np.ndarray, float]],
                grow: Callable[[np.ndarray], np.ndarray] | None = None,
                budget: PushBudget | None = None,
                entries: Callable[[np.ndarray], int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Forward push in synchronous rounds, whatever holds the adjacency: every node over its
    threshold (``over_threshold(res, candidates)``) pushes at once, vectorised; any push order
    keeps "exact = estimate + what the residual would still spread". ``rows_of(frontier)`` gives
    their out-entries (targets, weights, entries per row), ``out_weight`` their weight sums,
    ``patched`` rows replaced for this query (``{row: (targets, weights, weight sum)}``); ``grow``
    widens ``res``/``est`` when the row space grows during the push (a lazily read graph);
    ``budget`` counts the adjacency entries read and stops the push once they pass its limit;
    with ``entries(frontier)`` (how many entries a round would read) a round that would pass it is
    not started (a reset spread over every passage makes one round read much of the graph).
    Returns (touched rows, ascending; scores) with the unpushed residual's own share added."""
    grow = grow or (lambda arr: arr)
    patched_rows = np.fromiter(patched, dtype=np.int64, count=len(patched))
    touched = [seeds]
    frontier = over_threshold(res, seeds)
    pushes = 0
    while len(frontier) and pushes < max_pushes:
        if budget is not None and (budget.spent >= budget.limit or entries is not None
                                   and budget.spent + entries(frontier) > budget.limit):
            budget.complete = False
            break
        pushes += len(frontier)
        ru = res[frontier]
        res[frontier] = 0.0
        est[frontier] += (1.0 - damping) * ru
        moved = damping * ru
        special = np.isin(frontier, patched_rows) if len(patched_rows) else np.zeros(len(frontier), dtype=bool)
        ow = out_weight(frontier)
        dead = (ow <= 0) & ~special
        plain = ~special & ~dead
        targets = []
        if plain.any():
            f, share = frontier[plain], moved[plain] / ow[plain]
            t, vals, lens = rows_of(f)
            res = grow(res)
            spread(res, t, vals * np.repeat(share, lens))
            targets.append(t)
            if budget is not None:
                budget.spent += len(t)
        back = float(moved[dead].sum())
        for i in np.flatnonzero(special):
            cols, vals, pw = patched[int(frontier[i])]
            if pw <= 0:
                back += float(moved[i])
            else:
                res = grow(res)
                np.add.at(res, cols, vals * (moved[i] / pw))
                targets.append(np.asarray(cols, dtype=np.int64))
                if budget is not None:
                    budget.spent += len(cols)
        if back > 0:   # no way out: the mass returns to the reset distribution
            res[seeds] += back * seed_share
            targets.append(seeds)
        if not targets:
            break
        est = grow(est)
        cand = distinct(np.concatenate(targets), len(res))
        touched.append(cand)
        frontier = over_threshold(res, cand)
    rows = distinct(np.concatenate(touched), len(res))
    scores = est[rows] + (1.0 - damping) * res[rows]
    if budget is not None and len(rows):
        left, ow = res[rows], out_weight(rows)
        stuck = (left > 0) & (ow <= 0)
        budget.residual_per_weight = np.inf if stuck.any() else float(np.max(left / np.where(ow > 0, ow, 1.0)))
    keep = scores > 0
    return rows[keep], scores[keep]


@dataclass(frozen=True)
class PprResult:
    """One PPR query's scores over a snapshot: every row (exact) or the rows push touched (the
    others score 0). ``method`` is the algorithm that ran; ``error`` the L1 error push's scores
    are known to have (None for exact, whose bound follows from ``tol``)."""

    snapshot: GraphSnapshot
    method: str
    rows: np.ndarray
    scores: np.ndarray
    error: float | None = None

    def dense(self) -> np.ndarray:
        """Scores of every snapshot row."""
        if self.method == "exact":
            return self.scores
        out = np.zeros(self.snapshot.n)
        out[self.rows] = self.scores
        return out

    def ranked(self, rows: np.ndarray | None = None, k: int | None = None) -> list[tuple[int, float]]:
        """(row, score) best first among ``rows`` (default: all), ties by row: exact and push
        order equal scores alike."""
        if rows is None:
            cand, sc = self.rows, self.scores
        elif self.method == "exact":
            cand, sc = rows, self.scores[rows]
        else:
            keep = np.isin(self.rows, rows)
            cand, sc = self.rows[keep], self.scores[keep]
        order = np.argsort(cand, kind="stable")
        cand, sc = cand[order], sc[order]
        return [(int(cand[i]), float(sc[i])) for i in best_first(sc, k)]


def ppr_scores(snapshot: GraphSnapshot, reset: np.ndarray | Mapping[int, float], *, method: PprMethod = "auto",
               damping: float = 0.5, eps: float = 1e-5, overrides: Mapping[tuple[int, int], float] | None = None,
               tol: float = 1e-8, max_iter: int = 200, strict: bool = False, top_k: int | None = None,
               top_rows: np.ndarray | None = None,
               push_min_entries: int = PUSH_MIN_ENTRIES) -> PprResult:
    """One PPR query by either algorithm, or by the one ``"auto"`` finds cheaper at the accuracy
    asked (:func:`choose_method`, :func:`auto_ppr`): ``top_k`` (among ``top_rows``) asks for the
    exact top-k set, no ``top_k`` for an L1 error within what ``tol`` gives the exact iteration.

    ``reset`` is a dense vector over the snapshot's rows or a sparse ``{row: weight}``. Exact
    returns every row; push only the rows it touched (the others score 0). With no positive
    reset weight, push answers as the exact method does (a walk reset uniformly over all nodes).
    """
    used = choose_method(snapshot, method, push_min_entries, strict=strict)
    if used in ("push", "auto"):
        if isinstance(reset, Mapping):
            sparse = sparse_reset(reset, snapshot.n)
        else:
            arr = np.asarray(reset, dtype=np.float64)
            nz = np.flatnonzero(np.isfinite(arr) & (arr > 0))
            sparse = (nz, arr[nz])
        if used == "push":
            rows, scores = push_ppr(snapshot, sparse, damping=damping, eps=eps, overrides=overrides)
            if len(rows) or snapshot.n == 0:
                return PprResult(snapshot, used, rows, scores, push_error(scores))
            reset = np.zeros(snapshot.n)
        else:
            pushed = auto_ppr(snapshot, sparse, damping=damping, eps=eps, tol=tol, top_k=top_k, top_rows=top_rows,
                              overrides=overrides)
            if pushed is not None:
                return PprResult(snapshot, "push", *pushed)
            if not len(sparse[0]):
                reset = np.zeros(snapshot.n)
        used = "exact"
    if isinstance(reset, Mapping):
        dense = np.zeros(snapshot.n)
        for u, x in reset.items():
            if 0 <= u < snapshot.n and np.isfinite(x) and x > 0:
                dense[u] += x
        reset = dense
    scores = personalized_pagerank(snapshot, reset, damping=damping, tol=tol, max_iter=max_iter, overrides=overrides,
                                   strict=strict, top_k=top_k, top_rows=top_rows)
    return PprResult(snapshot, used, np.arange(snapshot.n), scores)
