"""Base classes a backend builds on: every member of the contract that is not in its required core
(:data:`~langgraph_kgmem.kg.backends.contract.GRAPH_CORE`,
:data:`~langgraph_kgmem.kg.backends.contract.VECTOR_CORE`) has a default here, written on the core
alone, as LangGraph's ``BaseStore`` builds ``get``/``put``/``search`` on ``batch``.

A new backend subclasses :class:`GraphStoreBase` and :class:`VectorIndexBase`, implements the core,
and is complete. The defaults are correct but read more than they need (a loop of point reads, a
scan of every row); a backend that answers them in one read overrides them and declares the
``bulk_reads`` capability, which the conformance suite then checks against these defaults. A
backend that several processes open at once overrides the change-log members and declares
``shared``.
"""

from __future__ import annotations

import hashlib
from contextlib import AbstractContextManager, nullcontext
from typing import Any, Iterable, Sequence

import numpy as np

from langgraph_kgmem.kg.types import Edge, Node
from langgraph_kgmem.kg.vectors import pairs_above
from langgraph_kgmem.ranking import best_first


def lock_key(key: str) -> int:
    """``key`` as a signed 32-bit integer (an advisory-lock key, a lock-file stripe), stable across processes."""
    return int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=4).digest(), "big", signed=True)


class GraphStoreBase:
    """Defaults of the structure store's optional members, built on the core."""

    #: one process at a time: no change log, the facade's cache is the truth
    shared = False
    #: the shared backend's hook (set by the facade); nothing to catch up on here
    on_begin = None

    def version(self) -> int:
        """Not shared: no committed versions to tell apart (always 0)."""
        return 0

    def last_committed_version(self) -> int | None:
        """Not shared: nothing to report (None)."""
        return None

    def changes_since(self, version: int, conn: Any = None) -> None:
        """Not shared: no change log (None: the facade would reload all, and never asks)."""
        return None

    def load_all(self) -> tuple[int, Iterable[Node], Iterable[Edge]]:
        """Nodes and edges read one after the other: consistent when one process writes the KG."""
        return self.version(), self.load_nodes(), self.load_edges()   # type: ignore[attr-defined]

    def document_count(self) -> int:
        """How many documents :meth:`documents` lists."""
        return len(self.documents())   # type: ignore[attr-defined]

    def document_hashes(self, doc_ids: Sequence[str]) -> dict[str, str]:
        """Document id -> content hash for the ids with a row, by one :meth:`document` each."""
        found: dict[str, str] = {}
        for doc_id in dict.fromkeys(doc_ids):
            row = self.document(doc_id)   # type: ignore[attr-defined]
            if row is not None:
                found[doc_id] = row["content_hash"]
        return found

    def node_sources_many(self, node_ids: Sequence[str]) -> dict[str, list[str]]:
        """Node id -> its sources, by one :meth:`node_sources` each."""
        return {n: self.node_sources(n) for n in dict.fromkeys(node_ids)}   # type: ignore[attr-defined]

    def edge_sources_many(self, edge_ids: Sequence[str]) -> dict[str, list[str]]:
        """Edge id -> its sources, by one :meth:`edge_sources` each."""
        return {e: self.edge_sources(e) for e in dict.fromkeys(edge_ids)}   # type: ignore[attr-defined]

    def alias_count(self) -> int:
        """How many aliases :meth:`aliases` lists."""
        return len(self.aliases())   # type: ignore[attr-defined]

    def alias_targets(self, aliases: Sequence[str]) -> dict[str, str]:
        """Alias -> node id for the recorded ones among ``aliases``, by one :meth:`alias_target` each."""
        found: dict[str, str] = {}
        for alias in dict.fromkeys(aliases):
            target = self.alias_target(alias)   # type: ignore[attr-defined]
            if target is not None:
                found[alias] = target
        return found

    def analyze(self) -> None:
        """No planner statistics to refresh."""


def _unit(query: np.ndarray) -> np.ndarray:
    q = np.asarray(query, dtype=np.float32).ravel()
    return q / (np.linalg.norm(q) or 1.0)


class VectorIndexBase:
    """Defaults of the vector index's optional members, built on the core (``upsert``, ``delete``,
    ``get_present``, ``matrix``, ``count``, ``version``, ``dimension``)."""

    #: writes land at once, outside the structure's transaction: the KG reconciles after a crash
    transactional = False
    #: reads are in process: nothing for the KG to cache
    remote = False

    def commit(self) -> None:
        """Nothing deferred: every upsert is stored when made."""

    def flush(self) -> None:
        """Nothing deferred to write."""

    def discard_pending(self) -> None:
        """Nothing deferred to forget."""

    def bulk_load(self, *, only_if_large: bool = False) -> AbstractContextManager[None]:
        """No index worth deferring: an empty block."""
        return nullcontext()

    def close(self) -> None:
        """Write what is deferred (:meth:`flush`); nothing else is held."""
        self.flush()

    def get(self, space: str, ids: Sequence[str]) -> np.ndarray:
        """Rows in the order of ``ids``, from :meth:`get_present`; KeyError naming ids without one."""
        found = self.get_present(space, ids)   # type: ignore[attr-defined]
        missing = [i for i in ids if i not in found]
        if missing:
            raise KeyError(f"no vector for {missing[:3]} in space {space!r}")
        if not len(ids):
            return np.zeros((0, self.dimension() or 0), dtype=np.float32)   # type: ignore[attr-defined]
        return np.stack([np.asarray(found[i], dtype=np.float32) for i in ids])

    def has(self, space: str, ids: Sequence[str]) -> list[bool]:
        """Whether each id has a vector, from :meth:`get_present`."""
        found = self.get_present(space, ids)   # type: ignore[attr-defined]
        return [i in found for i in ids]

    def ids(self, space: str, kinds: Sequence[str] | None = None) -> list[str]:
        """Ids of the rows of these kinds in insertion order, from :meth:`matrix`."""
        return list(self.matrix(space, kinds)[0])   # type: ignore[attr-defined]

    def scores(self, space: str, query: np.ndarray, kinds: Sequence[str] | None = None
               ) -> tuple[list[str], np.ndarray]:
        """Cosine of ``query`` with every row of these kinds, in insertion order (a scan of :meth:`matrix`)."""
        ids, mat = self.matrix(space, kinds)   # type: ignore[attr-defined]
        if not len(ids):
            return [], np.zeros(0, dtype=np.float32)
        return list(ids), np.asarray(mat, dtype=np.float32) @ _unit(query)

    def search(self, space: str, query: np.ndarray, k: int, kinds: Sequence[str] | None = None,
               restrict: Sequence[str] | None = None) -> list[tuple[str, float]]:
        """The ``k`` best rows by :meth:`scores`, ties to the earlier row; ``restrict``: only those
        ids (of any kind)."""
        if k <= 0:
            return []
        ids, scores = self.scores(space, query, None if restrict is not None else kinds)
        rows = np.arange(len(ids))
        if restrict is not None:
            keep = set(restrict)
            rows = np.array([r for r, i in enumerate(ids) if i in keep], dtype=np.int64)
        if not len(rows):
            return []
        return [(ids[rows[r]], float(scores[rows[r]])) for r in best_first(scores[rows], k)]

    def best(self, space: str, queries: np.ndarray, kinds: Sequence[str] | None = None,
             columns: slice | None = None) -> list[tuple[str | None, float]]:
        """Top-1 (id, cosine) per query row by a scan of :meth:`matrix`, ties to the earlier row;
        ``(None, -1.0)`` when nothing matches."""
        queries = np.asarray(queries, dtype=np.float32)
        ids, mat = self.matrix(space, kinds)   # type: ignore[attr-defined]
        if not len(queries) or not len(ids):
            return [(None, -1.0)] * len(queries)
        cols = columns if columns is not None else slice(None)
        sims = queries[:, cols] @ np.asarray(mat, dtype=np.float32)[:, cols].T
        top = sims.argmax(axis=1)   # the first of equal maxima: the earlier row
        return [(ids[j], float(sims[r, j])) for r, j in enumerate(top.tolist())]

    def similar_pairs(self, space: str, kind: str, threshold: float, max_per_node: int,
                      since: int = 0) -> tuple[list[tuple[str, str, float]], int]:
        """Every pair of ``kind`` rows at or above ``threshold`` (:func:`~langgraph_kgmem.kg.vectors.pairs_above`),
        recomputed in full each time (the watermark returned is 0)."""
        ids, mat = self.matrix(space, (kind,))   # type: ignore[attr-defined]
        return pairs_above(list(ids), mat, threshold, max_per_node), 0
