"""What a KG remembers, in words a person can read (``kg.memory()``, ``kgmem memory``).

The store holds memory in the shape the methods need: an edge memory is a vector keyed by an edge
id, the codebook is pages of integer rows. :func:`describe_memory` lists every namespace as
:func:`~langgraph_kgmem.memory.list_memory` does and adds, for each item, what it means, as the
method that keeps the kind declares on its spec (:class:`~langgraph_kgmem.memory.kinds.MemoryKind`:
ReMindRAG's edge memories as facts with their strength, R3-Cycle's reflections and trajectories,
CatRAG's neighbour summaries, AutoPrunedRetriever's codebook summarised as a whole). A kind no
imported method declares is listed with its items as stored.

:func:`format_memory` renders that listing as the text ``kgmem memory`` prints; :func:`node_label`
and :func:`edge_fact` are the KG's nodes and edges in words, for the methods' describers.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langgraph_kgmem.memory import list_items, memory_namespaces
from langgraph_kgmem.memory.kinds import memory_kind

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph

# how a structural edge reads between its two ends (a relation edge reads as its own relation text)
EDGE_WORDS = {"context": "mentioned in", "anchor_chunk": "titles", "next": "followed by", "synonym": "same as"}
LABEL_CHARS = 60   # a node's label in a fact is cut here: a fact is one line



def node_label(kg: "KnowledgeGraph", node_id: str) -> str:
    """An entity's name; a passage or anchor as its title (else its opening words), in quotes."""
    node = kg.node(node_id)
    if node is None:
        return node_id
    if node.kind in ("chunk", "anchor"):
        title = str(node.attrs.get("title") or "") if node.kind == "chunk" else node.text
        text = title or node.text
        label = " ".join(text.split())
        label = label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "…"
        return f"passage \"{label}\"" if node.kind == "chunk" else f"section \"{label}\""
    label = " ".join(node.text.split())
    return label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "…"


def edge_fact(kg: "KnowledgeGraph", edge_id: str) -> str:
    """``edge_id`` as a sentence-like fact: ``Marie Curie — born in → Warsaw``."""
    edge = kg.edge(edge_id)
    if edge is None:
        return f"(edge {edge_id} is no longer in the KG)"
    words = edge.text if edge.kind == "relation" and edge.text else EDGE_WORDS.get(edge.kind, edge.kind)
    return f"{node_label(kg, edge.src)} — {words} → {node_label(kg, edge.dst)}"


def describe_memory(kg: "KnowledgeGraph", store: "BaseStore", kind: str | None = None, *,
                    limit: int = 20) -> list[dict[str, Any]]:
    """What ``kg`` remembers, per namespace: the keys of
    :func:`~langgraph_kgmem.memory.list_memory` (``namespace``, ``kind``, ``scope``, ``items``,
    ``sample``) plus ``records``: up to ``limit`` items as a person reads them (in the order the
    kind ranks them, else most recent first), or for a kind read as a whole (the codebook)
    ``summary`` instead of its raw items."""
    out = []
    for ns in memory_namespaces(store, kg.name, kind):
        label, scope = ns[-1], list(ns[2:-1])
        items = list_items(store, ns)
        entry: dict[str, Any] = {"namespace": list(ns), "kind": label, "scope": scope, "items": len(items)}
        how = memory_kind(label)
        if how is not None and how.summarise is not None:
            entry["summary"] = how.summarise(kg, store, scope, limit)
            entry["sample"] = []   # raw storage pages say nothing to a person
        else:
            records = [(it, how.describe(kg, it.key, dict(it.value)) if how is not None and how.describe is not None
                        else {"key": it.key, **dict(it.value)}) for it in items]
            if how is not None and how.rank is not None:
                rank = how.rank
                records.sort(key=lambda p: (rank(p[1]), p[0].key))
            else:
                records.sort(key=lambda p: (str(p[0].updated_at), p[0].key), reverse=True)
            records = records[:limit]
            entry["records"] = [r for _, r in records]
            entry["sample"] = [{"key": it.key, "value": how.raw(dict(it.value)) if how is not None and how.raw is not None
                                else dict(it.value), "updated_at": str(it.updated_at)} for it, _ in records]
        out.append(entry)
    return out


def cut(text: Any, n: int = 160) -> str:
    """``text`` on one line, at most ``n`` characters (an ellipsis marks the cut)."""
    s = " ".join(str(text if text is not None else "").split())
    return s if len(s) <= n else s[:n - 1] + "…"


def format_memory(listing: list[dict[str, Any]], kg_name: str, kind: str | None = None) -> str:
    """The listing of :func:`describe_memory` as text for a person (``kgmem memory``)."""
    if not listing:
        return f"KG {kg_name!r} has no memory" + (f" of kind {kind}" if kind else "") + " yet"
    lines: list[str] = []
    for ns in listing:
        scope = "/".join(ns["scope"]) or "(shared)"
        how = memory_kind(ns["kind"])
        short = how.short if how is not None else ns["kind"]
        count = ""
        if "summary" not in ns:   # a summarised kind's items are storage pages: its summary gives the counts
            shown = len(ns["records"])
            count = f" {ns['items']} item(s)" + (f", {shown} shown" if shown < ns["items"] else "")
        lines.append(f"{how.title if how is not None else ns['kind']} (--kind {short}), scope {scope}:{count}")
        if "summary" in ns and how is not None and how.format_summary is not None:
            lines.extend(how.format_summary(ns["summary"]))
        else:
            render = how.format if how is not None and how.format is not None else (lambda r: [f"  {cut(r)}"])
            for r in ns["records"]:
                lines.extend(render(r))
    return "\n".join(lines)
