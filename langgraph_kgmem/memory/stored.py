"""Memory records read back from a store, checked before they are used.

A memory store is a database anyone who can write it can edit; a record of the wrong shape must
end in :class:`~langgraph_kgmem.errors.CorruptStoredDataError` naming the namespace and key, not
in a ``ValueError`` from numpy or a ``KeyError`` deep in a method.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from langgraph_kgmem.errors import CorruptStoredDataError

_FIX = ("nothing was changed. Delete that memory with `kgmem memory --reset --kind edge` (ReMindRAG learns it "
        "again), or restore the memory store from a backup")


def edge_record(item: Any, dim: int, ns: Sequence[str]) -> tuple[np.ndarray, int, list[str]]:
    """``(vector, update count, kept questions)`` of a stored ReMindRAG edge-memory item: a vector
    of ``dim`` finite numbers, a count >= 0 and a list of questions (absent in older records).

    Raises:
        CorruptStoredDataError: the record is not in that shape.
    """
    value = getattr(item, "value", None)
    where = f"the edge memory {'/'.join(ns)} of edge {str(getattr(item, 'key', '?'))[:80]!r}"
    v = value.get("v") if isinstance(value, dict) else None
    ok = isinstance(v, list) and len(v) == dim and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) for x in v)
    if not ok:
        shape = f"{len(v)} values" if isinstance(v, list) else type(v).__name__
        raise CorruptStoredDataError(f"{where} holds {shape} where a vector of {dim} finite numbers belongs "
                                     f"(the KG's embedding dimension); {_FIX}")
    n, q = value.get("n", 0), value.get("q", [])
    if isinstance(n, bool) or not isinstance(n, int) or n < 0 or not isinstance(q, list) \
            or not all(isinstance(x, str) for x in q):
        raise CorruptStoredDataError(f"{where} has the update count {str(n)[:20]!r} and questions of type "
                                     f"{type(q).__name__}; {_FIX}")
    return np.asarray(v, dtype=np.float64), n, list(q)
