"""Vector math every vector backend shares: input checks, unit rows, similar pairs, and the
closest-row search behind ``best`` (entity resolution).

:class:`HyperplaneIndex` finds closest rows by locality-sensitive hashing, so a new name costs the
same in a large KG as in a small one; the embedded indexes
(:mod:`~langgraph_kgmem.kg.backends.embedded.vectors`) and the PostgreSQL backend's in-process copy
of the entity vectors use it alike.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from langgraph_kgmem.errors import KgmemInputError

def check_vectors(vectors: object, ids: Sequence[str], dim: int | None) -> np.ndarray:
    """``vectors`` as a float32 matrix with one finite row of dimension ``dim`` per id.

    Raises:
        KgmemInputError: wrong shape or dimension, or NaN/inf values (an embedding model that
            returned garbage; such rows would silently empty every search and poison PageRank).
    """
    try:
        mat = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise KgmemInputError(f"vectors must be numbers, one row per id: {exc}") from exc
    if mat.ndim != 2 or len(mat) != len(ids):
        raise KgmemInputError(f"vectors must be a 2-D array with one row per id: got shape {mat.shape} "
                              f"for {len(ids)} ids")
    if dim is not None and mat.shape[1] != dim:
        raise KgmemInputError(
            f"vector dimension {mat.shape[1]} does not match the KG's {dim}: the embedding model changed? "
            "Reopen the KG with the embeddings it was built with, or build a new KG")
    if mat.shape[1] == 0:
        raise KgmemInputError("vectors have dimension 0: the embedding model returned empty vectors")
    bad = ~np.isfinite(mat).all(axis=1)
    if bad.any():
        first = [ids[i] for i in np.flatnonzero(bad)[:3]]
        raise KgmemInputError(
            f"{int(bad.sum())} vector(s) contain NaN or inf (e.g. for {first}): the embedding model returned "
            "invalid values; nothing was written. Check the model, or its input text")
    return mat


def pairs_above(ids: Sequence[str], mat: np.ndarray, threshold: float, max_per_node: int, *, first_new: int = 0,
                block: int = 2048) -> list[tuple[str, str, float]]:
    """Unordered pairs of rows (unit vectors, in insertion order) with cosine ≥ ``threshold``,
    earlier row first; each row keeps its ``max_per_node`` best later partners. With
    ``first_new`` only pairs that involve a row at or after it are returned (an incremental run).
    Exact, in blocks of matrix products."""
    mat = np.asarray(mat, dtype=np.float32)
    pairs: list[tuple[str, str, float]] = []
    for off in range(0, len(ids), block):
        sims = mat[off:off + block] @ mat.T
        for r in range(sims.shape[0]):
            i = off + r
            row = sims[r]
            cand = np.flatnonzero(row >= threshold)
            cand = cand[cand > max(i, first_new - 1)] if i < first_new else cand[cand > i]
            if len(cand) > max_per_node:
                cand = cand[np.argsort(-row[cand], kind="stable")[:max_per_node]]
            pairs.extend((ids[i], ids[j], float(row[j])) for j in sorted(cand.tolist()))
    return pairs


LSH_TABLES = 28     # independent hash tables: a pair some miss, others find
LSH_BITS = 18       # hyperplanes per table: about N / 2**18 unrelated rows share a query's bucket
# tables a row must share a probed bucket with a query in to be compared with it: an unrelated
# row lands in one table's probed buckets with a chance that does not shrink as the KG grows, so
# with one hit the rows compared per query grew in proportion to the KG; two hits of independent
# tables make that chance's square (see docs/capacity.md)
LSH_MIN_HITS = 2
LSH_DOUBT = 6       # a query probes every bucket its 6 least certain sides lead to (64 per table)
LSH_SEED = 20240611  # fixed: the same rows give the same tables in every process
TAIL_ROWS = 2048    # newest rows, compared exactly, before they are filed into the tables


class HyperplaneIndex:
    """Top-1 cosine search whose cost per query grows far slower than the rows: entity resolution
    asks, for every new name, for the closest existing name, and comparing it with all of them
    would make ingest slower with every document the KG holds.

    Locality-sensitive hashing with random hyperplanes: a row's key in a table is the side of
    each of the table's :data:`LSH_BITS` hyperplanes it lies on. A query is compared exactly with
    the rows of :data:`LSH_TABLES` tables' buckets it probes, and with the newest rows (at most
    :data:`TAIL_ROWS`, not yet filed). In each table it probes its own bucket and every bucket
    reached by flipping any of its :data:`LSH_DOUBT` sides closest to a hyperplane (where a near
    row most likely lies on the other side). The hyperplanes are Gaussian, so the chance that a
    row at a given cosine is compared depends on that cosine alone, whatever the vectors look
    like: by simulation, about 8 in 100,000 at cosine 0.85 and fewer than 1 in 10,000,000 at 0.9 are
    missed (tests/test_candidate_search.py measures it). A row is compared only when it shares a
    probed bucket in at least :data:`LSH_MIN_HITS` tables: an unrelated row's chance of one such
    hit is the same in a large KG as in a small one, so comparing every row with one hit would make
    the comparisons per query grow with the KG. So the best match above a merge
    threshold is a full scan's but for that chance; a poor best match (cosine 0.5) may be missed,
    which merging ignores anyway. Ties go to the lowest position, like a full scan's first maximum.

    Rows are appended with ascending positions (the caller's numbering); the sorted keys of each
    table grow by merging in :data:`TAIL_ROWS` rows at a time."""

    def __init__(self, dim: int) -> None:
        rng = np.random.default_rng(LSH_SEED)
        self.planes = rng.standard_normal((dim, LSH_TABLES * LSH_BITS)).astype(np.float32)
        self.weights = np.left_shift(np.int64(1), np.arange(LSH_BITS, dtype=np.int64))
        # row s: which of the LSH_DOUBT least certain sides probe s flips (subset s, as bits)
        self.subsets = ((np.arange(1 << LSH_DOUBT)[:, None] >> np.arange(LSH_DOUBT)) & 1).astype(np.int64)
        self.dim = dim
        self.n = 0        # rows held
        self.filed = 0    # rows [0, filed) are in the tables, the rest in the tail
        self.rows = np.zeros(0, dtype=np.int64)                  # index -> caller's position
        self.vecs = np.zeros((0, dim), dtype=np.float32)
        self.keys = np.zeros((LSH_TABLES, 0), dtype=np.int64)    # per table, sorted
        self.order = np.zeros((LSH_TABLES, 0), dtype=np.int64)   # index of each sorted key's row

    def _project(self, vecs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(n, tables, bits) projections on the hyperplanes, and (n, tables) keys: bit k of a
        table's key is the side of its k-th hyperplane."""
        proj = (vecs @ self.planes).reshape(len(vecs), LSH_TABLES, LSH_BITS)
        return proj, (proj > 0).astype(np.int64) @ self.weights

    def add(self, rows: np.ndarray, vecs: np.ndarray) -> None:
        """Append rows (positions above every one added so far) with their unit vectors."""
        rows = np.asarray(rows, dtype=np.int64)
        vecs = np.asarray(vecs, dtype=np.float32)
        need = self.n + len(rows)
        if need > len(self.rows):   # doubling: appends cost what they add
            cap = max(need, 2 * len(self.rows), 256)
            grown_rows = np.zeros(cap, dtype=np.int64)
            grown_rows[:self.n] = self.rows[:self.n]
            grown = np.zeros((cap, self.dim), dtype=np.float32)
            grown[:self.n] = self.vecs[:self.n]
            self.rows, self.vecs = grown_rows, grown
        self.rows[self.n:need] = rows
        self.vecs[self.n:need] = vecs
        self.n = need
        if self.n - self.filed >= TAIL_ROWS:
            self._file()

    def _file(self) -> None:
        """The tail into every table: its keys sorted, then merged in after equal keys (rows keep
        ascending order within a bucket)."""
        new = np.arange(self.filed, self.n, dtype=np.int64)
        keys = self._project(self.vecs[self.filed:self.n])[1].T
        merged_keys, merged_order = [], []
        for t in range(LSH_TABLES):
            by_key = np.argsort(keys[t], kind="stable")
            at = np.searchsorted(self.keys[t], keys[t][by_key], side="right")
            merged_keys.append(np.insert(self.keys[t], at, keys[t][by_key]))
            merged_order.append(np.insert(self.order[t], at, new[by_key]))
        self.keys, self.order = np.stack(merged_keys), np.stack(merged_order)
        self.filed = self.n

    def candidates(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(query, row index) pairs that share a probed bucket in at least :data:`LSH_MIN_HITS`
        tables, each pair once, sorted by query then row."""
        if not self.filed:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        proj, qkeys = self._project(queries)
        doubt = np.argsort(np.abs(proj), axis=2, kind="stable")[:, :, :LSH_DOUBT]   # (m, tables, doubt)
        flips = np.left_shift(np.int64(1), doubt) @ self.subsets.T                   # (m, tables, probes)
        per_query = flips.shape[2]
        found = []
        for t in range(LSH_TABLES):
            probes = (qkeys[:, t, None] ^ flips[:, t, :]).ravel()
            by_key = np.argsort(probes)   # sorted needles: each search starts where the last ended
            lo = np.empty_like(probes)
            count = np.empty_like(probes)
            lo[by_key] = np.searchsorted(self.keys[t], probes[by_key], side="left")
            count[by_key] = np.searchsorted(self.keys[t], probes[by_key], side="right")
            count -= lo
            hit = np.flatnonzero(count)
            if not len(hit):
                continue
            lo, count = lo[hit], count[hit]
            # every entry of each [lo, lo + count) range, as one index array
            starts = np.repeat(lo - np.concatenate(([0], np.cumsum(count)[:-1])), count)
            entries = self.order[t][starts + np.arange(int(count.sum()))]
            found.append(np.repeat(hit // per_query, count) * self.n + entries)
        if not found:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        pairs = np.sort(np.concatenate(found))
        # a pair appears once per table it shares a bucket in (one row, one key per table; a
        # query's probes of a table are distinct keys): runs of at least LSH_MIN_HITS equal values
        starts = np.flatnonzero(np.r_[True, pairs[1:] != pairs[:-1]])
        hits = np.diff(np.r_[starts, len(pairs)])
        pairs = pairs[starts[hits >= LSH_MIN_HITS]]
        return pairs // self.n, pairs % self.n

    def best(self, queries: np.ndarray, alive: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Per query row (unit), the position of its most similar row found and the cosine;
        position -1 (cosine -inf) when no row is found. ``alive``: a mask over positions; rows
        outside it (deleted) never match."""
        queries = np.asarray(queries, dtype=np.float32)
        m = len(queries)
        top_rows = np.full(m, -1, dtype=np.int64)
        top = np.full(m, -np.inf, dtype=np.float32)
        if not m or not self.n:
            return top_rows, top
        if self.filed < self.n:   # the tail, exactly
            sims = queries @ self.vecs[self.filed:self.n].T
            if alive is not None:
                sims[:, ~alive[self.rows[self.filed:self.n]]] = -np.inf
            j = np.argmax(sims, axis=1)
            top[:] = sims[np.arange(m), j]
            top_rows[:] = self.rows[self.filed + j]
        qs, idx = self.candidates(queries)
        if len(qs):
            bounds = np.flatnonzero(np.diff(qs)) + 1
            for q, ii in zip(qs[np.r_[0, bounds]].tolist(), np.split(idx, bounds)):
                sims = self.vecs[ii] @ queries[q]
                if alive is not None:
                    sims[~alive[self.rows[ii]]] = -np.inf
                j = int(np.argmax(sims))   # rows ascend: the first maximum is the lowest position
                # a filed row's position is below every tail row's: on a tie it wins
                if sims[j] >= top[q] and sims[j] > -np.inf:
                    top[q], top_rows[q] = sims[j], self.rows[ii[j]]
        top_rows[top == -np.inf] = -1
        return top_rows, top


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)
