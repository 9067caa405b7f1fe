"""The time chain of a temporal KG: ``time_next`` edges linking each time node to the next one.

Records ingestion (:mod:`langgraph_kgmem.ingest.records`) adds time nodes; deleting a document
can remove some. Either way the chain is relinked around the time nodes that changed
(:meth:`~langgraph_kgmem.kg.graph.KgWriter.relink_time_chain`, which writes what
:func:`chain_changes` computes), so it visits every time node of the KG in order.
"""

from __future__ import annotations

from typing import Iterable

from langgraph_kgmem.kg.structure import GraphIndex
from langgraph_kgmem.kg.types import Edge, edge_id

TIME_NEXT_TEXT = "is followed by"
BATCH_SIZE = 5000   # edges per add_edges call


def chain_changes(graph: GraphIndex, time_ids: Iterable[str]) -> tuple[list[Edge], set[str]]:
    """The ``time_next`` edges to add around the time nodes ``time_ids`` (each to its neighbours in
    time) and the ids of the chain edges around them that skip a time node (to delete)."""
    times = sorted((int(n.attrs["slot"]), n.id) for n in graph.nodes.values() if n.kind == "time" and "slot" in n.attrs)
    pos = {nid: i for i, (_, nid) in enumerate(times)}
    touched = sorted({pos[t] for t in time_ids if t in pos})
    add: dict[str, Edge] = {}
    for i in touched:
        for (a, ta), (b, tb) in ((times[j], times[j + 1]) for j in (i - 1, i) if 0 <= j < len(times) - 1):
            eid = edge_id(ta, tb, "time_next", TIME_NEXT_TEXT)
            if eid not in graph.edges:
                add[eid] = Edge(eid, ta, tb, "time_next", TIME_NEXT_TEXT, 1.0, {"gap_hours": b - a})
    around = {times[j][1] for i in touched for j in (i - 1, i, i + 1) if 0 <= j < len(times)}
    skips = {e.id for nid in around for e in (graph.edges[x] for x in graph.out.get(nid, []) + graph.into.get(nid, []))
             if e.kind == "time_next" and pos.get(e.dst, -1) != pos.get(e.src, -3) + 1}
    return list(add.values()), skips
