"""ReMindRAG's memory kind: the per-edge memory vectors (``edge_memory``), as ``kgmem memory``
shows them — each edge as its fact, its strength (the vector's length, 0 to 1: how far replay can
lean on the edge), its uses (updates applied) and the questions that strengthened it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from langgraph_kgmem.memory import EDGE_MEMORY_KIND
from langgraph_kgmem.memory.kinds import MemoryKind
from langgraph_kgmem.memory.view import cut, edge_fact

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


def describe_edge_memory(kg: "KnowledgeGraph", key: str, value: dict[str, Any]) -> dict[str, Any]:
    """One edge memory as a person reads it: the edge, its fact, strength, uses and questions."""
    v = np.asarray(value.get("v", []), dtype=np.float64)
    return {"edge": key, "fact": edge_fact(kg, key), "strength": round(float(np.linalg.norm(v)), 3),
            "uses": int(value.get("n", 0)), "questions": list(value.get("q", []))}


def format_edge_memory(r: dict[str, Any]) -> list[str]:
    """A described edge memory's lines in ``kgmem memory``."""
    return [f"  {r['fact']}", f"      strength {r['strength']:.2f}, used {r['uses']} time(s)  [{r['edge']}]",
            *(f"      asked: {cut(q, 120)}" for q in r["questions"])]


def raw_edge_memory(value: dict[str, Any]) -> dict[str, Any]:
    """A stored edge memory as a raw listing shows it: its update count and vector norm."""
    if "v" not in value:
        return value
    return {"updates": int(value.get("n", 0)),
            "norm": round(float(np.linalg.norm(np.asarray(value["v"], dtype=np.float64))), 4)}


EDGE_MEMORY = MemoryKind(label=EDGE_MEMORY_KIND, short="edge", title="ReMindRAG edge memory: edges that helped answer",
                         describe=describe_edge_memory, format=format_edge_memory,
                         rank=lambda r: (-r["strength"], -r["uses"]), raw=raw_edge_memory)
