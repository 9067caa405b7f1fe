"""The embedded backend's vector indexes, both implementing
:class:`~langgraph_kgmem.kg.backends.contract.VectorBackend`.

- :class:`NumpyVectorIndex`: in memory, exact cosine with numpy (tests, in-memory KGs, and
  the search mirror of the persistent index); a search filtered to some kinds (the passages) in a
  large space scores a contiguous copy of those rows (:data:`KIND_SCAN_MIN_ROWS`); in a KG directory (:meth:`NumpyVectorIndex.journal_to`)
  each commit appends to ``vectors.journal`` and closing folds it into ``vectors.npz``.
- :class:`ChromaVectorIndex`: vectors persisted in a Chroma ``PersistentClient``; we always pass
  explicit vectors (Chroma's default embedding function would download a model) and keep a numpy
  mirror for fast, deterministic search and bulk reads.

Spaces separate families of vectors: ``"nodes"`` (entities, chunks, anchors ...) and ``"facts"``
(relation edges rendered as text).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from langgraph_kgmem.errors import KgmemInputError, NotAKnowledgeGraphError
from langgraph_kgmem.kg.backends.base import VectorIndexBase
from langgraph_kgmem.kg.backends.embedded.files import (JOURNAL_FILE, append_vector_journal, replay_journal,
                                                       save_npz_vectors, write_journal)
from langgraph_kgmem.kg.vectors import HyperplaneIndex, check_vectors, pairs_above, unit_rows
from langgraph_kgmem.ranking import best_first

# A kind filter (e.g. only the passages) scores a contiguous copy of its rows, kept up to date by
# appends, instead of every row of the space: the passages are a fraction of the node space, and
# scoring the other rows is wasted work on every passage search (docs/capacity.md). Only spaces of at least
# KIND_SCAN_MIN_ROWS rows get one, so every smaller KG (the shipped benchmark sets: at most a few
# ten thousand nodes) scores exactly as a whole-space product does, to the last bit (a product over
# a copy may round a row's last bit otherwise); a filter keeping more than KIND_SCAN_MAX_SHARE of
# the rows scans the whole space (the copy would save less than it costs in memory).
KIND_SCAN_MIN_ROWS = 50_000
KIND_SCAN_MAX_SHARE = 0.5


class _KindScan:
    """A contiguous copy of the rows of some kinds (positions ascending), grown by appends. Rows
    deleted since they were copied stay in it (searches drop them by the space's alive mask); a
    row changed in place or a compaction makes the space drop the copy."""

    def __init__(self, dim: int) -> None:
        self.rows = np.zeros(0, dtype=np.int64)
        self.buf = np.zeros((0, dim), dtype=np.float32)
        self.n = 0       # rows copied
        self.seen = 0    # rows of the space looked at

    def add(self, rows: np.ndarray, vecs: np.ndarray) -> None:
        need = self.n + len(rows)
        if need > len(self.buf):   # doubling: appends cost what they add
            cap = max(need, 2 * len(self.buf), 1024)
            buf = np.zeros((cap, self.buf.shape[1]), dtype=np.float32)
            buf[:self.n] = self.buf[:self.n]
            grown = np.zeros(cap, dtype=np.int64)
            grown[:self.n] = self.rows[:self.n]
            self.buf, self.rows = buf, grown
        self.buf[self.n:need] = vecs
        self.rows[self.n:need] = rows
        self.n = need


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
        self._kind_scans: dict[tuple[str, ...], _KindScan] = {}   # kinds -> a copy of their rows

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
                self._kind_scans.clear()          # ... and its copies
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
            self._kind_scans.clear()
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

    def _kind_scan(self, kinds: Sequence[str]) -> _KindScan | None:
        """The copy of the rows of ``kinds``, brought up to date (rows appended since the last call
        are copied); None when the space is below :data:`KIND_SCAN_MIN_ROWS` rows or the kinds
        hold more than :data:`KIND_SCAN_MAX_SHARE` of it."""
        n = len(self.ids)
        if n < KIND_SCAN_MIN_ROWS:
            return None
        mask = self.kind_mask(kinds)
        if len(self.kind_rows(kinds)[0]) > KIND_SCAN_MAX_SHARE * n:
            return None
        key = tuple(sorted(set(kinds)))
        scan = self._kind_scans.get(key) or _KindScan(self.mat.shape[1])
        if scan.seen < n:
            fresh = scan.seen + np.flatnonzero(mask[scan.seen:n])
            if len(fresh):
                scan.add(fresh, self.mat[fresh])
            scan.seen = n
        self._kind_scans[key] = scan
        return scan

    def kind_scores(self, kinds: Sequence[str] | None, q: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Positions of the live rows of these kinds (ascending, as :meth:`kind_rows`) and the
        product of each with the unit vector ``q``: one matrix-vector product over the kinds' own
        copy (:meth:`_kind_scan`) where one is kept, else over the whole space."""
        rows = self.kind_rows(kinds)[0]
        scan = None if kinds is None else self._kind_scan(kinds)
        if scan is None:
            return rows, (self.mat @ q)[rows]
        scores = scan.buf[:scan.n] @ q
        if scan.n != len(rows):   # rows deleted since they were copied
            scores = scores[self._alive_buf[scan.rows[:scan.n]]]
        return rows, scores

    def kind_rows(self, kinds: Sequence[str] | None) -> tuple[np.ndarray, list[str]]:
        """Positions and ids of the live rows of these kinds, in row order; cached until the next
        write like :meth:`kind_mask` (the ids list is shared: read it, never change it)."""
        key = ("rows", None if kinds is None else tuple(sorted(set(kinds))))
        hit = self._masks.get(key)
        if hit is None:
            rows = np.flatnonzero(self.kind_mask(kinds))
            hit = self._masks[key] = (rows, [self.ids[i] for i in rows])
        return hit



# Chroma: journaled vectors gathered before one upsert per space. A Chroma call has a fixed cost
# that dwarfs one document's few dozen vectors, so a batch gathers those of a hundred-odd passages.
CHROMA_FLUSH_ROWS = 4096
_Part = tuple[list[str], np.ndarray, list[str]]   # (ids, vectors, kinds) of one upsert call


class NumpyVectorIndex(VectorIndexBase):
    """In-memory vector index (cosine on unit vectors)."""

    kind = "memory"
    transactional = False   # the KG reconciles vectors with the structure after a crash or rollback
    remote = False          # reads are in process: nothing for the KG to cache

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
        self._saved_state = self._state()   # what vectors.npz holds (rewritten at close if it changes)

    def _state(self) -> tuple[int, int]:
        return self.version("nodes"), self.version("facts")

    def close(self) -> None:
        """In a KG directory: fold the journal into a rewritten ``vectors.npz`` when anything
        changed since it was read (the journal alone would grow with every session)."""
        self.flush()
        root = self._files
        if root is not None and (self._state() != self._saved_state or (root / JOURNAL_FILE).exists()):
            save_npz_vectors(root, self)
            self._saved_state = self._state()

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

    def get_present(self, space: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        row = self._space(space).row
        present = [i for i in dict.fromkeys(ids) if i in row]
        return dict(zip(present, self.get(space, present)))

    def get(self, space: str, ids: Sequence[str]) -> np.ndarray:
        s = self._space(space)
        missing = [i for i in ids if i not in s.row]
        if missing:
            raise KeyError(f"no vector for {missing[:3]} in space {space!r}")
        if not ids:
            return np.zeros((0, s.dim or 0), dtype=np.float32)
        return s.mat[[s.row[i] for i in ids]]

    def prepare_scan(self, space: str, kinds: Sequence[str]) -> None:
        """Make now the copy of the rows of ``kinds`` that a search filtered to them scores (in a
        space of at least :data:`KIND_SCAN_MIN_ROWS` rows; nothing otherwise), so the first such
        search does not pay for it."""
        if space in self._spaces:
            self._spaces[space]._kind_scan(kinds)

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
        if kinds is None and len(s.row) == len(s.ids):   # every row, none deleted: no gather
            rows, scores = None, s.mat @ q
        else:
            # one product over the kinds' own copy of their rows where the space keeps one, else
            # over every row (gathering the kept rows first would copy them on every query)
            rows, scores = s.kind_scores(kinds, q)
        # ties broken by insertion order (row number) so results never depend on hash order
        return [(s.ids[i if rows is None else rows[i]], float(scores[i])) for i in best_first(scores, k)]

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
        q = np.asarray(query, dtype=np.float32).ravel()
        q = q / (np.linalg.norm(q) or 1.0)
        return s.kind_rows(kinds)[1], s.kind_scores(kinds, q)[1]

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
    a call has a fixed cost whatever its size, large beside what a document's transaction holds
    (a few dozen vectors). With a ``journal`` file, :meth:`commit` appends the transaction's vectors to it (they
    are durable before the structure commits) and Chroma gets them in one upsert per space once
    :data:`CHROMA_FLUSH_ROWS` have gathered, at :meth:`flush` (close) or before a delete; opening
    replays a journal a crash left into Chroma. Without one, each commit writes Chroma."""

    kind = "chroma"

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
