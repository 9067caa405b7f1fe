"""A bounded, per-process cache of vectors read from a remote vector backend (a database server),
where every read is a round trip. Cleared by every write of the KG (its rows may have changed)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Sequence

import numpy as np

from langgraph_kgmem.kg.backends.contract import VectorBackend

VECTOR_CACHE_SIZE = 20_000   # vectors kept per process


class VectorReadCache:
    """The vectors read last are kept; the oldest go first once more than ``size`` are held.

    Shared by every thread that asks the KG (a server's callers): a call takes what it needs from
    the cache under a lock and works on its own copy, so another call's trim or a write's
    ``clear`` between its round trip and its answer never takes a row from under it, and what a
    call read before a ``clear`` is not put back after it."""

    def __init__(self, vectors: VectorBackend, size: int = VECTOR_CACHE_SIZE) -> None:
        self._vectors = vectors
        self.size = size
        self._cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self._cleared = 0   # clears so far: a read that straddles one is not cached

    def clear(self) -> None:
        """Forget every cached vector (a write may have changed any of them)."""
        with self._lock:
            self._cache.clear()
            self._cleared += 1

    def _cached(self, space: str, ids: Sequence[str]) -> tuple[dict[str, np.ndarray], int]:
        with self._lock:
            return ({i: v for i in dict.fromkeys(ids) if (v := self._cache.get((space, i))) is not None},
                    self._cleared)

    def _keep(self, space: str, read: dict[str, np.ndarray], cleared: int) -> None:
        with self._lock:
            if cleared != self._cleared:
                return
            for i, v in read.items():
                self._cache[(space, i)] = v
            while len(self._cache) > self.size:
                self._cache.popitem(last=False)

    def has(self, space: str, ids: Sequence[str]) -> list[bool]:
        """Which ids have a vector; reads the missing vectors themselves (not just whether they
        exist): the caller nearly always asks for them next, and then they come from here."""
        have, cleared = self._cached(space, ids)
        todo = [i for i in dict.fromkeys(ids) if i not in have]
        read = self._vectors.get_present(space, todo) if todo else {}
        self._keep(space, read, cleared)
        return [i in have or i in read for i in ids]

    def get(self, space: str, ids: Sequence[str]) -> np.ndarray:
        """Rows of ``ids`` in order; KeyError (from the backend) when one has no vector. A call
        may ask for more than ``size`` vectors: its rows come from what it read, then the cache
        is trimmed."""
        if not ids:
            return np.zeros((0, self._vectors.dimension() or 0), dtype=np.float32)
        have, cleared = self._cached(space, ids)
        todo = [i for i in dict.fromkeys(ids) if i not in have]
        if todo:
            read = dict(zip(todo, self._vectors.get(space, todo)))
            self._keep(space, read, cleared)
            have.update(read)
        return np.asarray([have[i] for i in ids], dtype=np.float32)
