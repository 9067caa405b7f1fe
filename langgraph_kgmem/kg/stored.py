"""Rows read back from a KG's database, checked before they reach the in-memory graph.

Both backends keep node, edge and document attributes as JSON text and read them back through
these functions: a value the package never writes (text that is not JSON, a JSON array or number
where an object belongs, a weight that is not a finite number) is a
:class:`~langgraph_kgmem.errors.CorruptStoredDataError` naming the database, the table and the
row, not a ``JSONDecodeError`` or ``AttributeError`` somewhere later.
"""

from __future__ import annotations

import json
import math
from typing import Any, Iterable, Iterator, Sequence

from langgraph_kgmem.errors import CorruptStoredDataError
from langgraph_kgmem.kg.types import Edge, Node

_FIX = "nothing was changed. Restore the KG from a backup, or build it again from its documents"


def json_object(text: Any, where: str) -> dict[str, Any]:
    """The JSON object stored as ``text`` (attributes or metadata of the row ``where`` names).

    Raises:
        CorruptStoredDataError: ``text`` is not JSON, or not a JSON object.
    """
    try:
        value = json.loads(text)
    except (TypeError, ValueError, RecursionError) as exc:
        raise CorruptStoredDataError(f"{where} holds {str(text)[:60]!r}, which is not JSON ({exc}); {_FIX}") from None
    if not isinstance(value, dict):
        raise CorruptStoredDataError(f"{where} holds a JSON {type(value).__name__}, not an object; {_FIX}")
    return value


def node_from_row(row: Sequence[Any], db: str) -> Node:
    """A :class:`Node` from ``(id, kind, text, attrs)`` read from database ``db``."""
    return Node(row[0], row[1], row[2], json_object(row[3], f"{db}: the attributes of node {str(row[0])[:80]!r}"))


def edge_from_row(row: Sequence[Any], db: str) -> Edge:
    """An :class:`Edge` from ``(id, src, dst, kind, text, weight, attrs)`` read from database ``db``."""
    where = f"{db}: edge {str(row[0])[:80]!r}"
    weight = row[5]
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight):
        raise CorruptStoredDataError(f"{where} has the weight {str(weight)[:40]!r}, not a finite number; {_FIX}")
    return Edge(row[0], row[1], row[2], row[3], row[4], float(weight), json_object(row[6], f"{where}'s attributes"))


def checked_graph(nodes: Iterable[Node], edges: Iterable[Edge], db: str) -> tuple[list[Node], Iterator[Edge]]:
    """``nodes`` (read now) and ``edges``, each edge checked, as it is read, to join two of those
    nodes: an edge to a missing node is what a dropped or edited row leaves, never a write."""
    nodes = list(nodes)
    ids = {n.id for n in nodes}

    def check(edges: Iterable[Edge]) -> Iterator[Edge]:
        for e in edges:
            if e.src not in ids or e.dst not in ids:
                gone = e.src if e.src not in ids else e.dst
                raise CorruptStoredDataError(
                    f"{db}: edge {e.id[:80]!r} joins node {gone[:80]!r}, which the database does not hold; {_FIX}")
            yield e

    return nodes, check(edges)
