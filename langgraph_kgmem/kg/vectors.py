"""The embedded vector indexes (the server one is :class:`~langgraph_kgmem.kg.postgres.PgVectorIndex`),
all implementing :class:`~langgraph_kgmem.kg.backend.VectorBackend`.

- :class:`NumpyVectorIndex`: in memory, brute-force cosine with numpy (tests; also the search
  mirror of the persistent index).
- :class:`ChromaVectorIndex`: vectors persisted in a Chroma ``PersistentClient``; we always pass
  explicit vectors (Chroma's default embedding function would download a model) and keep a numpy
  mirror for fast, deterministic search and bulk reads.
- :class:`HyperplaneIndex`: the closest-row search behind ``best`` (entity resolution), by
  locality-sensitive hashing, so a new name costs the same in a large KG as in a small one; the
  PostgreSQL backend uses it on its in-process copy of the entity vectors too.

Spaces separate families of vectors: ``"nodes"`` (entities, chunks, anchors ...) and ``"facts"``
(relation edges rendered as text).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from langgraph_kgmem.errors import KgmemInputError, NotAKnowledgeGraphError
from langgraph_kgmem.kg.files import append_vector_journal, replay_journal, write_journal
from langgraph_kgmem.ranking import best_first


class _Space:
    """Append-only rows with tombstones; compacts when a third of the rows are dead."""

    def __init__(self, dim: int | None = None) -> None:
        self.dim = dim
        self.ids: list[str] = []
        self.kinds: list[str] = []
        self.row: dict[str, int] = {}
        self._buf = np.zeros((0, dim or 0), dtype=np.float32)
        self._alive_buf = np.zeros(0, dtype=bool)
        self._kind_arr: np.ndarray | None = None
        self._masks: dict[Any, Any] = {}  # kind filter → row mask, ("rows", filter) → rows and ids (until a write)
        self.version = 0                  # bumped by every upsert/delete
        self.dirty: set[str] = set()      # ids upserted since the last take_dirty (when tracked)
        # (kinds, columns) -> candidate index over those rows, and the rows it has looked at
        self._candidate_indexes: dict[Any, tuple[HyperplaneIndex, int]] = {}

    def upsert(self, ids: Sequence[str], vectors: np.ndarray, kinds: Sequence[str], *,
               normalized: bool = False) -> None:
        vectors = check_vectors(vectors, ids, self.dim if self._buf.shape[1] else None)
        if self.dim is None or self._buf.shape[1] == 0:
            self.dim = vectors.shape[1]
            self._buf = np.zeros((0, self.dim), dtype=np.float32)
        if not normalized:
            vectors = unit_rows(vectors)
        new_rows, new_vecs = [], []
        pending: dict[str, int] = {}
        for i, (nid, kind) in enumerate(zip(ids, kinds)):
            if nid in pending:  # the same id twice in one call: the last vector wins
                new_vecs[pending[nid]] = vectors[i]
                continue
            r = self.row.get(nid)
            if r is not None:
                self._buf[r] = vectors[i]
                self.kinds[r] = kind
                self._candidate_indexes.clear()   # a row changed in place: its keys may be wrong now
            else:
                pending[nid] = len(new_rows)
                new_rows.append((nid, kind))
                new_vecs.append(vectors[i])
        if new_rows:
            start = len(self.ids)
            need = start + len(new_rows)
            if need > len(self._buf):  # amortised growth: appends stay O(1) per row
                cap = max(need, 2 * len(self._buf), 64)
                buf = np.zeros((cap, self.dim), dtype=np.float32)
                buf[:start] = self._buf[:start]
                self._buf = buf
                alive = np.zeros(cap, dtype=bool)
                alive[:start] = self._alive_buf[:start]
                self._alive_buf = alive
            self._buf[start:need] = np.asarray(new_vecs, dtype=np.float32)
            self._alive_buf[start:need] = True
            for j, (nid, kind) in enumerate(new_rows):
                self.row[nid] = start + j
            self.ids.extend(n for n, _ in new_rows)
            self.kinds.extend(k for _, k in new_rows)
        self.version += 1
        self._kind_arr = None
        self._masks.clear()

    @property
    def mat(self) -> np.ndarray:
        return self._buf[: len(self.ids)]

    @property
    def alive(self) -> np.ndarray:
        return self._alive_buf[: len(self.ids)]

    def delete(self, ids: Iterable[str]) -> None:
        for nid in ids:
            r = self.row.pop(nid, None)
            if r is not None:
                self._alive_buf[r] = False
        if len(self.alive) and (~self.alive).sum() > len(self.alive) / 3:
            keep = np.flatnonzero(self.alive)
            self._buf = self.mat[keep].copy()
            self._alive_buf = np.ones(len(keep), dtype=bool)
            self.ids = [self.ids[i] for i in keep]
            self.kinds = [self.kinds[i] for i in keep]
            self.row = {nid: i for i, nid in enumerate(self.ids)}
            self._candidate_indexes.clear()   # positions changed
        self.version += 1
        self._kind_arr = None
        self._masks.clear()

    def kind_mask(self, kinds: Sequence[str] | None) -> np.ndarray:
        """Live rows of these kinds (all live rows for ``None``); cached until the next write."""
        key = None if kinds is None else tuple(sorted(set(kinds)))
        mask = self._masks.get(key)
        if mask is None:
            if key is None:
                mask = self.alive.copy()
            else:
                if self._kind_arr is None:
                    self._kind_arr = np.asarray(self.kinds, dtype=object)
                mask = self.alive & np.isin(self._kind_arr, list(key))
            self._masks[key] = mask
        return mask

    def candidate_index(self, kinds: Sequence[str] | None, columns: slice | None) -> HyperplaneIndex:
        """The candidate index over the rows of these kinds (in these columns), brought up to date:
        rows appended since the last call are added (deleted ones stay in it; searches mask them
        by :attr:`alive`). Rebuilt only after a row changed in place or a compaction."""
        key = (None if kinds is None else tuple(sorted(set(kinds))),
               None if columns is None else (columns.start, columns.stop, columns.step))
        index, seen = self._candidate_indexes.get(key) or (None, 0)
        cols = columns if columns is not None else slice(None)
        if index is None:
            index = HyperplaneIndex(self.mat[:0, cols].shape[1])
        n = len(self.ids)
        if seen < n:
            wanted = None if key[0] is None else set(key[0])
            rows = np.asarray([r for r in range(seen, n) if self._alive_buf[r]
                               and (wanted is None or self.kinds[r] in wanted)], dtype=np.int64)
            if len(rows):
                index.add(rows, self.mat[rows][:, cols])
        self._candidate_indexes[key] = (index, n)
        return index

    def kind_rows(self, kinds: Sequence[str] | None) -> tuple[np.ndarray, list[str]]:
        """Positions and ids of the live rows of these kinds, in row order; cached until the next
        write like :meth:`kind_mask` (the ids list is shared: read it, never change it)."""
        key = ("rows", None if kinds is None else tuple(sorted(set(kinds))))
        hit = self._masks.get(key)
        if hit is None:
            rows = np.flatnonzero(self.kind_mask(kinds))
            hit = self._masks[key] = (rows, [self.ids[i] for i in rows])
        return hit


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


LSH_TABLES = 20     # independent hash tables: a pair one misses, another finds
LSH_BITS = 18       # hyperplanes per table: about N / 2**18 unrelated rows share a query's bucket
LSH_DOUBT = 6       # a query probes every bucket its 6 least certain sides lead to (64 per table)
LSH_SEED = 20240611  # fixed: the same rows give the same tables in every process
TAIL_ROWS = 2048    # newest rows, compared exactly, before they are filed into the tables


class HyperplaneIndex:
    """Top-1 cosine search whose cost per query grows far slower than the rows: entity resolution
    asks, for every new name, for the closest existing name, and comparing it with all of them
    made ingest slower with every document the KG held.

    Locality-sensitive hashing with random hyperplanes: a row's key in a table is the side of
    each of the table's :data:`LSH_BITS` hyperplanes it lies on. A query is compared exactly with
    the rows of :data:`LSH_TABLES` tables' buckets it probes, and with the newest rows (at most
    :data:`TAIL_ROWS`, not yet filed). In each table it probes its own bucket and every bucket
    reached by flipping any of its :data:`LSH_DOUBT` sides closest to a hyperplane (where a near
    row most likely lies on the other side). The hyperplanes are Gaussian, so the chance that a
    row at a given cosine is compared depends on that cosine alone, whatever the vectors look
    like: by simulation, about 2 in 10,000 at cosine 0.85 and fewer than 1 in 100,000 at 0.9 are
    missed (tests/test_candidate_search.py measures it). So the best match above a merge
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
        """(query, row index) pairs that share a probed bucket in some table, each pair once,
        sorted by query then row."""
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
        pairs = pairs[np.r_[True, pairs[1:] != pairs[:-1]]]
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


# Chroma: journaled vectors gathered before one upsert per space (a ~30-vector document's
# transaction each would cost a ~50 ms call; 4,096 rows are about 130 HotpotQA passages)
CHROMA_FLUSH_ROWS = 4096
_Part = tuple[list[str], np.ndarray, list[str]]   # (ids, vectors, kinds) of one upsert call


class NumpyVectorIndex:
    """In-memory vector index (cosine on unit vectors)."""

    transactional = False   # the KG reconciles vectors with the structure after a crash or rollback

    def __init__(self) -> None:
        self._spaces: dict[str, _Space] = {}
        self.track_dirty = False   # record upserted ids for take_dirty (incremental saving)
        self._files: Path | None = None   # KG directory whose vectors.journal each commit appends to
        self.journal_dropped_bytes = 0    # a crash's cut-short journal record dropped at open (replay_journal)

    def _space(self, space: str) -> _Space:
        return self._spaces.setdefault(space, _Space())

    def upsert(self, space: str, ids: Sequence[str], vectors: np.ndarray, kinds: Sequence[str], *,
               normalized: bool = False) -> None:
        """Store ``vectors`` as unit rows; ``normalized=True`` skips the scaling for rows that are
        unit already (e.g. read back from this index)."""
        if len(ids):
            s = self._space(space)
            s.upsert(ids, vectors, kinds, normalized=normalized)
            if self.track_dirty:
                s.dirty.update(ids)

    def delete(self, space: str, ids: Iterable[str]) -> None:
        self._space(space).delete(ids)

    def journal_to(self, root: Path) -> None:
        """Keep this index on disk in KG directory ``root``: each :meth:`commit` appends the vectors
        upserted since to ``vectors.journal`` (the KG folds it into ``vectors.npz`` at close)."""
        self._files, self.track_dirty = root, True

    def commit(self) -> None:
        """Make the transaction's upserts durable before the structure commits: journaled when the
        index lives in a KG directory, nothing to do in memory."""
        if self._files is not None:
            append_vector_journal(self._files, self)

    def flush(self) -> None:
        """Write what :meth:`upsert` deferred to durable storage (nothing: this index writes at once)."""

    def discard_pending(self) -> None:
        """Drop deferred writes not yet flushed (a rolled-back transaction's; nothing here)."""

    def has(self, space: str, ids: Sequence[str]) -> list[bool]:
        row = self._space(space).row
        return [i in row for i in ids]

    def get(self, space: str, ids: Sequence[str]) -> np.ndarray:
        s = self._space(space)
        missing = [i for i in ids if i not in s.row]
        if missing:
            raise KeyError(f"no vector for {missing[:3]} in space {space!r}")
        if not ids:
            return np.zeros((0, s.dim or 0), dtype=np.float32)
        return s.mat[[s.row[i] for i in ids]]

    def search(self, space: str, query: np.ndarray, k: int, kinds: Sequence[str] | None = None,
               restrict: Sequence[str] | None = None) -> list[tuple[str, float]]:
        s = self._space(space)
        if not len(s.ids) or k <= 0:
            return []
        q = np.asarray(query, dtype=np.float32).ravel()
        q = q / (np.linalg.norm(q) or 1.0)
        if restrict is not None:
            rows = np.array([s.row[i] for i in restrict if i in s.row], dtype=np.int64)
            if not len(rows):
                return []
            scores = s.mat[rows] @ q
            order = np.lexsort((rows, -scores))[:k]
            return [(s.ids[rows[i]], float(scores[i])) for i in order]
        mask = s.kind_mask(kinds)
        n = int(np.count_nonzero(mask))
        if not n:
            return []
        # one mat-vec over every row, then the filter: gathering the kept rows first would copy the
        # matrix on every query (tens of MB at 40k facts)
        scores = s.mat @ q
        scores[~mask] = -np.inf
        # ties broken by insertion order (row number) so results never depend on hash order
        return [(s.ids[i], float(scores[i])) for i in best_first(scores, min(k, n))]

    def best(self, space: str, queries: np.ndarray, kinds: Sequence[str] | None = None,
             columns: slice | None = None) -> list[tuple[str | None, float]]:
        """Top-1 (id, cosine) per row of ``queries`` (unit rows) among the rows of these kinds, by a
        :class:`HyperplaneIndex` kept up to date with the space (a full scan per query would grow with
        the KG); ties go to the earliest row, like :meth:`search`. ``(None, -1.0)`` when nothing
        matches. ``columns``: compare only these columns (rows and queries that are zero
        elsewhere, such as the fast embedding's short texts: the same cosines, less work)."""
        s = self._space(space)
        queries = np.asarray(queries, dtype=np.float32)
        if not len(queries) or not len(s.ids):
            return [(None, -1.0)] * len(queries)
        cols = columns if columns is not None else slice(None)
        rows, top = s.candidate_index(kinds, columns).best(queries[:, cols], s.alive)
        return [(s.ids[r], float(c)) if r >= 0 else (None, -1.0) for r, c in zip(rows.tolist(), top.tolist())]

    def scores(self, space: str, query: np.ndarray, kinds: Sequence[str] | None = None
               ) -> tuple[list[str], np.ndarray]:
        """Cosine of ``query`` with every live row of these kinds, in insertion order."""
        s = self._space(space)
        if not len(s.ids):
            return [], np.zeros(0, dtype=np.float32)
        rows, ids = s.kind_rows(kinds)
        q = np.asarray(query, dtype=np.float32).ravel()
        q = q / (np.linalg.norm(q) or 1.0)
        return ids, (s.mat @ q)[rows]

    def similar_pairs(self, space: str, kind: str, threshold: float, max_per_node: int,
                      since: int = 0) -> tuple[list[tuple[str, str, float]], int]:
        """Every unordered pair of ``kind`` rows with cosine ≥ ``threshold`` (see :func:`pairs_above`);
        exhaustive (``since`` is ignored: all pairs are recomputed; the watermark returned is 0)."""
        ids, mat = self.matrix(space, kinds=(kind,))
        return pairs_above(ids, mat, threshold, max_per_node), 0

    def matrix(self, space: str, kinds: Sequence[str] | None = None) -> tuple[list[str], np.ndarray]:
        s = self._space(space)
        rows = np.flatnonzero(s.kind_mask(kinds)) if len(s.ids) else np.zeros(0, dtype=np.int64)
        return [s.ids[i] for i in rows], s.mat[rows]

    def count(self, space: str) -> int:
        return len(self._space(space).row)

    def dimension(self) -> int | None:
        """The vectors' dimension (None while the index is empty)."""
        return next((sp.dim for sp in self._spaces.values() if sp.dim), None)

    def ids(self, space: str, kinds: Sequence[str] | None = None) -> list[str]:
        """Ids of the live rows (of these kinds), in insertion order."""
        s = self._space(space)
        if not len(s.ids):
            return []
        return [s.ids[i] for i in np.flatnonzero(s.kind_mask(kinds))]

    def version(self, space: str) -> int:
        """Changes whenever ``space`` is written (cache key for derived data)."""
        return self._space(space).version

    def take_dirty(self, space: str) -> list[str]:
        """Ids upserted in ``space`` since the last call that still have a vector, in row order
        (for incremental saving); clears the record."""
        s = self._space(space)
        out = [i for i in s.dirty if i in s.row]
        s.dirty = set()
        return sorted(out, key=s.row.__getitem__)


class ChromaVectorIndex(NumpyVectorIndex):
    """Chroma PersistentClient storage with a numpy search mirror loaded at open.

    Every upsert reaches the mirror at once (every read sees it). Chroma is written in batches:
    a call costs ~40-50 ms here whatever its size, and a document's transaction holds only ~30
    vectors. With a ``journal`` file, :meth:`commit` appends the transaction's vectors to it (they
    are durable before the structure commits) and Chroma gets them in one upsert per space once
    :data:`CHROMA_FLUSH_ROWS` have gathered, at :meth:`flush` (close) or before a delete; opening
    replays a journal a crash left into Chroma. Without one, each commit writes Chroma."""

    def __init__(self, path: str | Path, collection_prefix: str = "kgmem", *, journal: Path | None = None) -> None:
        super().__init__()
        import chromadb
        from chromadb.config import Settings

        from chromadb.errors import ChromaError

        self._prefix = collection_prefix
        self._collections: dict[str, object] = {}
        self._journal = journal
        self._pending: dict[str, list[_Part]] = {}     # this transaction's upserts
        self._committed: dict[str, list[_Part]] = {}   # journaled, not yet in Chroma
        self._committed_rows = 0
        try:
            # Chroma caches one client system per path string for the whole process: a relative
            # path would reach the cached system of another directory after a chdir
            self._client = chromadb.PersistentClient(
                path=str(Path(path).resolve()), settings=Settings(anonymized_telemetry=False, allow_reset=False)
            )
            for col in self._client.list_collections():
                name = col if isinstance(col, str) else col.name
                if name.startswith(self._prefix + "_"):
                    self._load(name[len(self._prefix) + 1:])
        except (ChromaError, sqlite3.DatabaseError, OSError, KgmemInputError) as exc:
            raise NotAKnowledgeGraphError(
                f"{path} is not a readable Chroma vector folder ({type(exc).__name__}: {exc}); nothing was "
                "written to it. Restore the KG directory from a backup, or build the KG again from its documents"
            ) from exc
        if journal is not None and journal.exists():   # a crash came before these reached Chroma
            replay_journal(journal, self)
            self.flush()

    def _collection(self, space: str):
        col = self._collections.get(space)
        if col is None:
            # embedding_function=None: we always pass vectors, Chroma must never embed by itself
            col = self._client.get_or_create_collection(
                f"{self._prefix}_{space}", embedding_function=None, metadata={"hnsw:space": "cosine"}
            )
            self._collections[space] = col
        return col

    def _load(self, space: str) -> None:
        col = self._collection(space)
        total = col.count()
        batch = 5000
        ids: list[str] = []
        kinds: list[str] = []
        vecs: list[np.ndarray] = []
        for off in range(0, total, batch):
            got = col.get(include=["embeddings", "metadatas"], limit=batch, offset=off)
            ids.extend(got["ids"])
            kinds.extend((m or {}).get("kind", "") for m in got["metadatas"])
            vecs.append(np.asarray(got["embeddings"], dtype=np.float32))
        if ids:
            # Chroma returns rows in its own order: sort by id so the mirror is deterministic
            order = sorted(range(len(ids)), key=ids.__getitem__)
            mat = np.vstack(vecs)[order]
            super().upsert(space, [ids[i] for i in order], mat, [kinds[i] for i in order])

    def upsert(self, space: str, ids: Sequence[str], vectors: np.ndarray, kinds: Sequence[str], *,
               normalized: bool = False) -> None:
        if not len(ids):
            return
        vectors = check_vectors(vectors, ids, self._space(space).dim)   # before anything reaches Chroma
        super().upsert(space, ids, vectors, kinds, normalized=normalized)
        self._pending.setdefault(space, []).append((list(ids), np.asarray(vectors), list(kinds)))

    def commit(self) -> None:
        """The transaction's upserts become durable before its structure commits: appended to the
        journal (to Chroma once enough have gathered), or written to Chroma without one."""
        if self._journal is None:
            self.flush()
            return
        if not self._pending:
            return
        write_journal(self._journal, [(space, ids, kinds, vecs) for space, parts in self._pending.items()
                                      for ids, vecs, kinds in parts])
        for space, parts in self._pending.items():
            self._committed.setdefault(space, []).extend(parts)
            self._committed_rows += sum(len(ids) for ids, _, _ in parts)
        self._pending = {}
        if self._committed_rows >= CHROMA_FLUSH_ROWS:
            self.flush()

    def flush(self) -> None:
        """One Chroma upsert per space for everything deferred (the last write of an id wins, as
        it did in the mirror); the journal then holds nothing Chroma lacks and goes."""
        spaces = {space: self._committed.get(space, []) + self._pending.get(space, [])
                  for space in {*self._committed, *self._pending}}
        for space, parts in spaces.items():
            last = {i: (p, j) for p, (ids, _, _) in enumerate(parts) for j, i in enumerate(ids)}
            if not last:
                continue
            ids = list(last)
            vectors = np.stack([parts[p][1][j] for p, j in last.values()])
            kinds = [parts[p][2][j] for p, j in last.values()]
            col = self._collection(space)
            step = 4000
            for off in range(0, len(ids), step):
                col.upsert(ids=ids[off:off + step], embeddings=vectors[off:off + step],
                           metadatas=[{"kind": k} for k in kinds[off:off + step]])
        self._pending, self._committed, self._committed_rows = {}, {}, 0
        if self._journal is not None:
            self._journal.unlink(missing_ok=True)

    def discard_pending(self) -> None:
        """Forget this transaction's upserts (it rolled back); committed ones stay journaled."""
        self._pending = {}

    def delete(self, space: str, ids: Iterable[str]) -> None:
        ids = list(ids)
        self.flush()   # deferred writes land first: a delete after an upsert must win
        if ids:
            col = self._collection(space)
            for off in range(0, len(ids), 4000):
                col.delete(ids=ids[off:off + 4000])
        super().delete(space, ids)
