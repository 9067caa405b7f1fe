"""The PostgreSQL backend's vector index: one pgvector table per KG, HNSW searches re-ranked by
exact score, and a bounded in-process copy of entity vectors for resolution.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any, Iterable, Sequence

import numpy as np

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.kg.backends.base import VectorIndexBase
from langgraph_kgmem.kg.backends.postgres.graph import PostgresGraphStore
from langgraph_kgmem.kg.backends.postgres.hnsw import HnswIndexes
from langgraph_kgmem.kg.backends.postgres.pool import PgDatabase
from langgraph_kgmem.kg.vectors import HyperplaneIndex, check_vectors, pairs_above, unit_rows

HNSW_MIN_ROWS = 20_000    # a space gets its HNSW index once it holds this many vectors
# entity vectors a writer keeps in process for resolution; past it the server answers every name, by
# HNSW, or by an exact scan inside a bulk load (which drops the index): docs/capacity.md has the
# copy's bytes per row and that scan's cost
RESOLUTION_CACHE_ROWS = 2_000_000
HNSW_PAIRS_MAX_NEW = 500   # more new rows than this: synonym pairs by exact block products instead
DELETIONS_KEY = "vectors_deleted"   # kgmem_meta: vector delete statements committed (resolution copies start over)


def _arr(v: Any) -> np.ndarray:
    """A pgvector value as a float32 array (pgvector's loader returns its own Vector type)."""
    return np.asarray(v.to_numpy() if hasattr(v, "to_numpy") else v, dtype=np.float32)


class PgVectorIndex(VectorIndexBase):
    """:class:`~langgraph_kgmem.kg.backends.contract.VectorBackend` in one pgvector table per KG.

    Writes go through the calling thread's open transaction (so a document's vectors commit with
    its structure); searches use HNSW (cosine) with pgvector's iterative scan for kind filters and
    are re-ranked by exact score, ties to the earlier row. HNSW is approximate: on large KGs a
    result can differ from exhaustive search in its last places.
    """

    kind = "pgvector"
    transactional = True
    remote = True   # every read is a round trip: the KG caches what it read

    def __init__(self, db: PgDatabase, store: PostgresGraphStore) -> None:
        self.db = db
        self.store = store
        self.table = f"kgmem_vec_{store.kg_id}"
        with db.read() as conn:
            row = conn.execute("SELECT dim FROM kgmem_graphs WHERE id = %s", (store.kg_id,)).fetchone()
        self.dim: int | None = row[0] if row else None
        self.hnsw = HnswIndexes(db, store, self.table, lambda: HNSW_MIN_ROWS)
        if self.dim is not None:
            self.hnsw.repair_if_abandoned()   # a bulk load that crashed before building its indexes
        # see _resolution_rows: (space, kinds) -> (ids, seqs, vectors) and the deletion count it saw
        self._resolution: dict[tuple, tuple[list[str], list[int], np.ndarray]] = {}
        self._resolution_deletions: dict[tuple, str | None] = {}
        self._resolution_starts: dict[tuple, int] = {}   # times each copy started over (its index goes too)
        # (space, kinds, columns) -> candidate index over a copy's rows: (index, rows in it, copy's start)
        self._resolution_index: dict[tuple, tuple[HyperplaneIndex, int, int]] = {}

    def _ensure_table(self, dim: int) -> None:
        if self.dim is not None:
            if dim != self.dim:
                raise KgmemInputError(
                    f"vector dimension {dim} does not match KG {self.store.name!r}'s {self.dim}: reopen it "
                    "with the embeddings it was built with, or build a new KG under another name")
            return
        with self.store.transaction() as conn:
            row = conn.execute("SELECT dim FROM kgmem_graphs WHERE id = %s FOR UPDATE", (self.store.kg_id,)).fetchone()
            if row[0] is None:
                t = self.table
                conn.execute(f"CREATE TABLE IF NOT EXISTS {t}(space TEXT NOT NULL, id TEXT NOT NULL, kind TEXT NOT NULL, "
                             f"seq BIGSERIAL, v vector({int(dim)}) NOT NULL, PRIMARY KEY(space, id))")
                # exact scans of one kind (all passages' scores) read only that kind's rows
                conn.execute(f"CREATE INDEX IF NOT EXISTS {t}_kind ON {t}(space, kind, seq)")
                conn.execute("UPDATE kgmem_graphs SET dim = %s WHERE id = %s", (int(dim), self.store.kg_id))
                self.dim = int(dim)
            else:
                self.dim = int(row[0])
                self._ensure_table(dim)

    def _exists(self) -> bool:
        if self.dim is None:   # another process may have created the table since we looked
            with self.db.read() as conn:
                row = conn.execute("SELECT dim FROM kgmem_graphs WHERE id = %s", (self.store.kg_id,)).fetchone()
            self.dim = row[0] if row else None
        return self.dim is not None

    def upsert(self, space: str, ids: Sequence[str], vectors: np.ndarray, kinds: Sequence[str], *,
               normalized: bool = False) -> None:
        if not len(ids):
            return
        self._exists()
        mat = check_vectors(vectors, ids, self.dim)
        self._ensure_table(mat.shape[1])
        if not normalized:
            mat = unit_rows(mat)
        last: dict[str, int] = {i: r for r, i in enumerate(ids)}   # the same id twice: the last wins
        rows = list(last.values())
        # one statement for the batch (see PostgresGraphStore._upsert); vectors go binary: far
        # cheaper to send and parse than as text
        with self.store._write() as conn:
            conn.execute(f"INSERT INTO {self.table}(space, id, kind, v) "
                         f"SELECT %s, * FROM unnest(%s::text[], %s::text[], %b::vector[]) "
                         "ON CONFLICT(space, id) DO UPDATE SET kind = excluded.kind, v = excluded.v",
                         (space, list(last), [kinds[r] for r in rows], [mat[r] for r in rows]))
            # a searched space gets its HNSW index once it holds HNSW_MIN_ROWS vectors: below that an
            # exact scan is fast, and each row an HNSW index takes on insert costs more server time
            # than the rest of that row's ingest; bulk loads defer it (hnsw.py)
            self.hnsw.after_write(conn, space, len(rows))

    def bulk_load(self, *, only_if_large: bool = False) -> AbstractContextManager[None]:
        """A block whose writes do not maintain HNSW indexes, built once when it ends
        (:meth:`HnswIndexes.bulk_load <langgraph_kgmem.kg.backends.postgres.hnsw.HnswIndexes.bulk_load>`)."""
        return self.hnsw.bulk_load(only_if_large=only_if_large)

    def commit(self) -> None:
        """Nothing deferred: writes go through the open transaction."""

    def flush(self) -> None:
        """Nothing deferred: writes go through the open transaction."""

    def close(self) -> None:
        """Nothing held apart from the database pool, which :func:`open_postgres` releases."""

    def discard_pending(self) -> None:
        """A rollback undid the writes: which HNSW indexes exist is read again (the resolution
        copies notice undone rows themselves, see :meth:`_resolution_rows`)."""
        self.hnsw.forget()

    def delete(self, space: str, ids: Iterable[str]) -> None:
        """Delete the rows, and count the deletion (in the same transaction) for the resolution copies."""
        ids = list(ids)
        if ids and self._exists():
            with self.store._write() as conn:
                conn.execute(f"DELETE FROM {self.table} WHERE space = %s AND id = ANY(%s)", (space, ids))
                conn.execute("INSERT INTO kgmem_meta(kg, key, value) VALUES(%s, %s, '1') ON CONFLICT(kg, key) "
                             "DO UPDATE SET value = (kgmem_meta.value::bigint + 1)::text",
                             (self.store.kg_id, DELETIONS_KEY))

    def get_present(self, space: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors of those ``ids`` that have one (one query)."""
        if not len(ids) or not self._exists():
            return {}
        with self.db.read() as conn:
            return {r[0]: _arr(r[1]) for r in conn.cursor(binary=True).execute(
                f"SELECT id, v FROM {self.table} WHERE space = %s AND id = ANY(%s)", (space, list(ids)))}

    def get(self, space: str, ids: Sequence[str]) -> np.ndarray:
        if not len(ids):
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        found = self.get_present(space, ids)
        missing = [i for i in ids if i not in found]
        if missing:
            raise KeyError(f"no vector for {missing[:3]} in space {space!r}")
        return np.asarray([found[i] for i in ids], dtype=np.float32)

    def has(self, space: str, ids: Sequence[str]) -> list[bool]:
        if not len(ids) or not self._exists():
            return [False] * len(ids)
        with self.db.read() as conn:
            have = {r[0] for r in conn.execute(f"SELECT id FROM {self.table} WHERE space = %s AND id = ANY(%s)",
                                               (space, list(ids)))}
        return [i in have for i in ids]

    @staticmethod
    def _unit(q: np.ndarray) -> np.ndarray:
        q = np.asarray(q, dtype=np.float32).ravel()
        return q / (np.linalg.norm(q) or 1.0)

    def search(self, space: str, query: np.ndarray, k: int, kinds: Sequence[str] | None = None,
               restrict: Sequence[str] | None = None) -> list[tuple[str, float]]:
        if k <= 0 or not self._exists():
            return []
        q = self._unit(query)
        where, params = "space = %s", [space]
        if kinds is not None:
            where += " AND kind = ANY(%s)"
            params.append(list(kinds))
        if restrict is not None:
            if not len(restrict):
                return []
            where += " AND id = ANY(%s)"
            params.append(list(restrict))
        # a few extra rows so that exact re-ranking (and ties to the earlier row) is stable
        with self.db.read() as conn:
            rows = conn.execute(f"SELECT id, 1 - (v <=> %b), seq FROM {self.table} WHERE {where} "
                                f"ORDER BY v <=> %b LIMIT %s", (q, *params, q, k + 8)).fetchall()
        rows.sort(key=lambda r: (-round(r[1], 6), r[2]))
        return [(r[0], float(r[1])) for r in rows[:k]]

    def best(self, space: str, queries: np.ndarray, kinds: Sequence[str] | None = None,
             columns: slice | None = None) -> list[tuple[str | None, float]]:
        queries = np.asarray(queries, dtype=np.float32)
        if not len(queries) or not self._exists():
            return [(None, -1.0)] * len(queries)
        cached = self._resolution_rows(space, kinds)
        if cached is not None:   # in process, by the embedded index's search: ties go to the earlier row, as below
            ids, mat = cached
            if not ids:
                return [(None, -1.0)] * len(queries)
            cols = columns if columns is not None else slice(None)
            key = (space, tuple(kinds) if kinds is not None else None,
                   None if columns is None else (columns.start, columns.stop, columns.step))
            start = self._resolution_starts.get(key[:2], 0)
            index, seen, made = self._resolution_index.get(key) or (None, 0, -1)
            if index is None or made != start or seen > len(ids):
                index, seen = HyperplaneIndex(mat[:0, cols].shape[1]), 0
            if seen < len(ids):
                index.add(np.arange(seen, len(ids)), mat[seen:, cols])
            self._resolution_index[key] = (index, len(ids), start)
            rows, top = index.best(unit_rows(queries)[:, cols])
            return [(ids[r], float(c)) if r >= 0 else (None, -1.0) for r, c in zip(rows.tolist(), top.tolist())]
        kind_filter = " AND b.kind = ANY(%s)" if kinds is not None else ""
        params: list[Any] = [[self._unit(q) for q in queries], space] + ([list(kinds)] if kinds is not None else [])
        # one statement for all queries; a few candidates each, re-ranked exactly (ties: earlier row)
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT q.i, n.id, n.score, n.seq FROM unnest(%b::vector[]) WITH ORDINALITY AS q(v, i) "
                f"CROSS JOIN LATERAL (SELECT b.id, b.seq, 1 - (b.v <=> q.v) AS score FROM {self.table} b "
                f"WHERE b.space = %s{kind_filter} ORDER BY b.v <=> q.v LIMIT 4) n", params).fetchall()
        best: dict[int, tuple] = {}
        for i, nid, score, seq in rows:
            key = (-round(score, 6), seq)
            if i not in best or key < best[i][0]:
                best[i] = (key, nid, float(score))
        return [(best[i][1], best[i][2]) if i in best else (None, -1.0) for i in range(1, len(queries) + 1)]

    def _resolution_rows(self, space: str, kinds: Sequence[str] | None) -> tuple[list[str], np.ndarray] | None:
        """The vectors ``best`` searches (entity resolution during ingest), kept in this process
        and topped up by ``seq``, with a :class:`HyperplaneIndex` over them: a server-side exact
        scan per document would grow with the KG. The copy (and its index) starts over when rows it
        holds may have gone, found in one read that does not grow with the KG: the KG's deletion
        count (:data:`DELETIONS_KEY`, bumped by every :meth:`delete` in its transaction) moved, or
        its newest row is gone (a rollback undoes the newest rows: writers are serialised, so rows
        committed later have higher ``seq``). A writer of an earlier release deletes without
        counting; a process of this release writing beside it sees those deletions at its next
        open. Only writers call ``best``; above :data:`RESOLUTION_CACHE_ROWS` rows the server
        answers instead (None): by HNSW, or by an exact scan while a bulk load has dropped the index."""
        key = (space, tuple(kinds) if kinds is not None else None)
        ids, seqs, buf = self._resolution.get(key) or ([], [], np.zeros((0, self.dim or 0), dtype=np.float32))
        where, params = "space = %s", [space]
        if kinds is not None:
            where += " AND kind = ANY(%s)"
            params.append(list(kinds))
        with self.db.read() as conn:
            top = seqs[-1] if seqs else 0
            deletions, kept = conn.execute(
                f"SELECT (SELECT value FROM kgmem_meta WHERE kg = %s AND key = %s), "
                f"EXISTS(SELECT 1 FROM {self.table} WHERE {where} AND seq = %s)",
                (self.store.kg_id, DELETIONS_KEY, *params, top)).fetchone()
            if (ids and not kept) or deletions != self._resolution_deletions.get(key):   # start over
                ids, seqs, top = [], [], 0
                self._resolution_starts[key] = self._resolution_starts.get(key, 0) + 1
            self._resolution_deletions[key] = deletions
            new = conn.cursor(binary=True).execute(f"SELECT id, seq, v FROM {self.table} WHERE {where} AND seq > %s "
                                                   "ORDER BY seq", (*params, top)).fetchall()
        n = len(ids)
        if n + len(new) > RESOLUTION_CACHE_ROWS:
            self._resolution.pop(key, None)
            self._resolution_starts[key] = self._resolution_starts.get(key, 0) + 1
            return None
        if new:
            if n + len(new) > len(buf):   # grown by doubling: topping up costs what was added
                grown = np.zeros((max(2 * len(buf), n + len(new), 1024), self.dim or 0), dtype=np.float32)
                grown[:n] = buf[:n]
                buf = grown
            buf[n:n + len(new)] = np.asarray([_arr(r[2]) for r in new], dtype=np.float32)
            # extended in place: a new list per call would copy the whole copy's ids each window
            ids.extend(r[0] for r in new)
            seqs.extend(int(r[1]) for r in new)
        self._resolution[key] = (ids, seqs, buf)
        return ids, buf[:len(ids)]

    def scores(self, space: str, query: np.ndarray, kinds: Sequence[str] | None = None
               ) -> tuple[list[str], np.ndarray]:
        if not self._exists():
            return [], np.zeros(0, dtype=np.float32)
        q = self._unit(query)
        where, params = "space = %s", [space]
        if kinds is not None:
            where += " AND kind = ANY(%s)"
            params.append(list(kinds))
        with self.db.read() as conn:
            rows = conn.execute(f"SELECT id, 1 - (v <=> %b) FROM {self.table} WHERE {where} ORDER BY seq",
                                (q, *params)).fetchall()
        return [r[0] for r in rows], np.asarray([r[1] for r in rows], dtype=np.float32)

    def similar_pairs(self, space: str, kind: str, threshold: float, max_per_node: int,
                      since: int = 0) -> tuple[list[tuple[str, str, float]], int]:
        """Pairs involving rows added after watermark ``since``: a few new rows ask HNSW for their
        ``max_per_node`` nearest rows each; many (a first build) are compared exactly in blocks
        (:func:`pairs_above`), which copies the kind's vectors into this process for the call.
        Pairs of older rows were returned by earlier calls (the caller keeps them as edges)."""
        if not self._exists():
            return [], since
        t = self.table
        with self.db.read() as conn:
            mark, new = conn.execute(f"SELECT COALESCE(max(seq), 0), count(*) FILTER (WHERE seq > %s) FROM {t} "
                                     "WHERE space = %s AND kind = %s", (since, space, kind)).fetchone()
            if not new:
                return [], int(mark)
            if new > HNSW_PAIRS_MAX_NEW:
                rows = conn.cursor(binary=True).execute(
                    f"SELECT id, seq, v FROM {t} WHERE space = %s AND kind = %s AND seq <= %s ORDER BY seq",
                    (space, kind, mark)).fetchall()
                first_new = next(i for i, r in enumerate(rows) if r[1] > since)
                mat = np.asarray([_arr(r[2]) for r in rows], dtype=np.float32)
                return pairs_above([r[0] for r in rows], mat, threshold, max_per_node, first_new=first_new), int(mark)
            rows = conn.execute(
                f"SELECT a.id, a.seq, n.id, n.seq, 1 - (a.v <=> n.v) FROM {t} a CROSS JOIN LATERAL "
                f"(SELECT b.id, b.seq, b.v FROM {t} b WHERE b.space = a.space AND b.kind = a.kind AND b.id <> a.id "
                f" ORDER BY b.v <=> a.v LIMIT %s) n "
                f"WHERE a.space = %s AND a.kind = %s AND a.seq > %s AND a.seq <= %s AND 1 - (a.v <=> n.v) >= %s",
                (max_per_node, space, kind, since, mark, threshold)).fetchall()
        pairs: dict[tuple[str, str], float] = {}
        for a, aseq, b, bseq, sim in rows:
            key = (a, b) if aseq < bseq else (b, a)
            pairs[key] = max(pairs.get(key, -2.0), float(sim))
        return [(a, b, s) for (a, b), s in sorted(pairs.items())], int(mark)

    def matrix(self, space: str, kinds: Sequence[str] | None = None) -> tuple[list[str], np.ndarray]:
        """Every vector of the space (for analysis and migration; methods never need it here)."""
        if not self._exists():
            return [], np.zeros((0, 0), dtype=np.float32)
        where, params = "space = %s", [space]
        if kinds is not None:
            where += " AND kind = ANY(%s)"
            params.append(list(kinds))
        with self.db.read() as conn:
            rows = conn.cursor(binary=True).execute(f"SELECT id, v FROM {self.table} WHERE {where} ORDER BY seq",
                                                    params).fetchall()
        if not rows:
            return [], np.zeros((0, self.dim or 0), dtype=np.float32)
        return [r[0] for r in rows], np.asarray([_arr(r[1]) for r in rows], dtype=np.float32)

    def kinds(self, space: str, ids: Sequence[str]) -> list[str]:
        """The kind each of ``ids`` was stored with, in the order of ``ids``, in one read (KeyError
        for an id without a row; an addition to the contract)."""
        with self.db.read() as conn:
            found = {r[0]: r[1] for r in conn.execute(
                f"SELECT id, kind FROM {self.table} WHERE space = %s AND id = ANY(%s)", (space, list(ids)))}
        return [found[i] for i in ids]

    def count(self, space: str) -> int:
        if not self._exists():
            return 0
        with self.db.read() as conn:
            return conn.execute(f"SELECT count(*) FROM {self.table} WHERE space = %s", (space,)).fetchone()[0]

    def ids(self, space: str, kinds: Sequence[str] | None = None) -> list[str]:
        if not self._exists():
            return []
        where, params = "space = %s", [space]
        if kinds is not None:
            where += " AND kind = ANY(%s)"
            params.append(list(kinds))
        with self.db.read() as conn:
            return [r[0] for r in conn.execute(f"SELECT id FROM {self.table} WHERE {where} ORDER BY seq", params)]

    def version(self, space: str) -> int:
        return self.store.version()

    def dimension(self) -> int | None:
        self._exists()
        return self.dim
