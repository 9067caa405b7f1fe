"""Cross-session memory on a LangGraph ``BaseStore``, namespaced per KG.

Thin typed wrappers; every namespace is ``("kgmem", <kg name>, <kind>)``:

- :class:`EdgeMemory` (``edge_memory``): ReMindRAG's per-edge memory vectors.
- :class:`RecordMemory` (any kind: ``trajectories``, ``reflections``, ``codebook``, ``summaries`` ...):
  pydantic/JSON records by key.

The store comes from the argument, or from the running graph (``langgraph.config.get_store()``).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

import numpy as np
from langgraph.store.base import BaseStore, GetOp, PutOp

from langgraph_kgmem.errors import ConfigurationError
from langgraph_kgmem.kg.types import check_kg_name

ROOT = "kgmem"


def namespace(kg_name: str, kind: str) -> tuple[str, ...]:
    return (ROOT, check_kg_name(kg_name), kind)


def resolve_store(store: BaseStore | None) -> BaseStore:
    if store is not None:
        return store
    try:
        from langgraph.config import get_store

        found = get_store()
    except RuntimeError:
        found = None
    if found is None:
        raise ConfigurationError(
            "This method keeps cross-session memory in a LangGraph store: compile the graph with "
            "store=... (e.g. `checkpointer, store = kg.persistence()`), or pass store= to the factory.")
    return found


def _list_all(store: BaseStore, ns: tuple[str, ...], page: int = 1000) -> list[Any]:
    items, offset = [], 0
    while True:
        batch = store.search(ns, limit=page, offset=offset)
        items.extend(batch)
        if len(batch) < page:
            return items
        offset += page


class RecordMemory:
    """JSON records under one namespace (key → dict)."""

    def __init__(self, store: BaseStore, kg_name: str, kind: str) -> None:
        self.store = store
        self.ns = namespace(kg_name, kind)

    def put(self, key: str, value: Mapping[str, Any]) -> None:
        self.store.put(self.ns, key, dict(value), index=False)

    def get(self, key: str) -> dict[str, Any] | None:
        item = self.store.get(self.ns, key)
        return dict(item.value) if item else None

    def delete(self, key: str) -> None:
        self.store.delete(self.ns, key)

    def all(self) -> dict[str, dict[str, Any]]:
        return {it.key: dict(it.value) for it in sorted(_list_all(self.store, self.ns), key=lambda i: i.key)}


class EdgeMemory:
    """Per-edge memory vectors (ReMindRAG) under ``("kgmem", kg_name, "edge_memory")`` as
    ``{"v": [...], "n": updates applied}``.
    Missing edges read as the zero vector. Reads and writes are one batched store call for the
    edges asked about, so their cost does not grow with the memory's size."""

    def __init__(self, store: BaseStore, kg_name: str, dim: int) -> None:
        self.store = store
        self.ns = namespace(kg_name, "edge_memory")
        self.dim = dim

    def many(self, edge_ids: Iterable[str]) -> np.ndarray:
        ids = list(edge_ids)
        out = np.zeros((len(ids), self.dim))
        if ids:
            for i, item in enumerate(self.store.batch([GetOp(self.ns, e, refresh_ttl=False) for e in ids])):
                if item is not None:
                    out[i] = np.asarray(item.value["v"], dtype=np.float64)
        return out

    def get(self, edge_id: str) -> np.ndarray:
        return self.many([edge_id])[0]

    def put_many(self, vectors: Mapping[str, np.ndarray], counts: Mapping[str, int] | None = None) -> None:
        if vectors:
            self.store.batch([PutOp(self.ns, e, {"v": [round(float(x), 7) for x in np.asarray(v, dtype=np.float64)],
                                                 "n": int((counts or {}).get(e, 0))},
                                    index=False) for e, v in sorted(vectors.items())])

    def update(self, edge_ids: Sequence[str], change: Callable[[int, np.ndarray], np.ndarray | None]) -> int:
        """Apply ``change(position, old vector) -> new vector | None (unchanged)`` to each edge as
        one read-modify-write under :func:`~langgraph_kgmem.memory.locks.memory_lock`, so updates
        from other threads and processes are never lost (each record counts the updates applied
        to it in ``"n"``). Returns how many edges were written."""
        from langgraph_kgmem.memory.locks import memory_lock

        ids = list(edge_ids)
        if not ids:
            return 0
        with memory_lock(self.store, "edge_memory:" + self.ns[1]):
            items = self.store.batch([GetOp(self.ns, e, refresh_ttl=False) for e in ids])
            new: dict[str, np.ndarray] = {}
            counts: dict[str, int] = {}
            for k, (eid, item) in enumerate(zip(ids, items)):
                old = np.asarray(item.value["v"], dtype=np.float64) if item is not None else np.zeros(self.dim)
                v = change(k, old)
                if v is not None:
                    new[eid] = v
                    counts[eid] = (int(item.value.get("n", 0)) if item is not None else 0) + 1
            self.put_many(new, counts)
        return len(new)

    def update_counts(self) -> dict[str, int]:
        """Updates applied per edge (lists the whole namespace)."""
        return {it.key: int(it.value.get("n", 0)) for it in _list_all(self.store, self.ns)}

    def keys(self) -> list[str]:
        """Every edge with a memory (lists the whole namespace)."""
        return sorted(it.key for it in _list_all(self.store, self.ns))

    def __len__(self) -> int:
        return len(self.keys())


__all__ = ["EdgeMemory", "RecordMemory", "namespace", "resolve_store"]
