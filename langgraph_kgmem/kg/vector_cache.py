"""A bounded, per-process cache of vectors read from a remote vector backend (a database server),
where every read is a round trip. Cleared by every write of the KG (its rows may have changed)."""

from __future__ import annotations

from collections import OrderedDict
from typing import Sequence

import numpy as np

from langgraph_kgmem.kg.backends.contract import VectorBackend

VECTOR_CACHE_SIZE = 20_000   # vectors kept per process


class VectorReadCache:
    """Least recently read vectors go first once more than ``size`` are held."""

    def __init__(self, vectors: VectorBackend, size: int = VECTOR_CACHE_SIZE) -> None:
        self._vectors = vectors
        self.size = size
        self._cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()

    def clear(self) -> None:
        """Forget every cached vector (a write may have changed any of them)."""
        self._cache.clear()

    def _trim(self) -> None:
        while len(self._cache) > self.size:
            self._cache.popitem(last=False)

    def has(self, space: str, ids: Sequence[str]) -> list[bool]:
        """Which ids have a vector; reads the missing vectors themselves (not just whether they
        exist): the caller nearly always asks for them next, and then they come from here."""
        todo = list(dict.fromkeys(i for i in ids if (space, i) not in self._cache))
        for i, v in (self._vectors.get_present(space, todo) if todo else {}).items():
            self._cache[(space, i)] = v
        out = [(space, i) in self._cache for i in ids]
        self._trim()
        return out

    def get(self, space: str, ids: Sequence[str]) -> np.ndarray:
        """Rows of ``ids`` in order; KeyError (from the backend) when one has no vector. A call
        may ask for more than ``size`` vectors: its rows come from what it read, then the cache
        is trimmed."""
        todo = list(dict.fromkeys(i for i in ids if (space, i) not in self._cache))
        read: dict[str, np.ndarray] = {}
        if todo:
            read = dict(zip(todo, self._vectors.get(space, todo)))
            for i, v in read.items():
                self._cache[(space, i)] = v
        if not ids:
            return np.zeros((0, self._vectors.dimension() or 0), dtype=np.float32)
        rows = np.asarray([read[i] if i in read else self._cache[(space, i)] for i in ids], dtype=np.float32)
        self._trim()
        return rows
