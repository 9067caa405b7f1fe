"""CatRAG's memory kind as ``kgmem memory`` shows it: the cached neighbour summaries, each with
its entity and the number of facts it summarises."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph_kgmem.graphs.catrag.schemas import SUMMARY_KIND
from langgraph_kgmem.memory.kinds import MemoryKind
from langgraph_kgmem.memory.view import cut, node_label

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


def describe_summary(kg: "KnowledgeGraph", key: str, value: dict[str, Any]) -> dict[str, Any]:
    """One neighbour summary as a person reads it (the key is the entity's node id)."""
    return {"entity": node_label(kg, key), "summary": value.get("summary", ""), "facts": value.get("facts")}


def format_summary(r: dict[str, Any]) -> list[str]:
    """A described summary's line in ``kgmem memory``."""
    return [f"  {r['entity']} ({r['facts']} facts): {cut(r['summary'])}"]


SUMMARIES = MemoryKind(label=SUMMARY_KIND, short="summary", title="CatRAG neighbour summaries",
                       describe=describe_summary, format=format_summary)
