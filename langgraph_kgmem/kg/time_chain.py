"""The time chain of a temporal KG: ``time_next`` edges linking each time node to the next one.

Records ingestion (:mod:`langgraph_kgmem.ingest.records`) adds time nodes; deleting a document
can remove some. Either way the chain is relinked around the time nodes that changed, so it
visits every time node of the KG in order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from langgraph_kgmem.kg.backends.contract import DERIVED_SOURCE
from langgraph_kgmem.kg.types import Edge, edge_id

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore

TIME_NEXT_TEXT = "is followed by"
BATCH_SIZE = 5000   # edges per add_edges call


def relink_time_chain(kg: "KnowledgeGraphCore", time_ids: Iterable[str], *, batch_size: int = BATCH_SIZE) -> int:
    """Link each time node of ``time_ids`` to its neighbours in time by ``time_next`` edges and
    drop the chain edges around them that skip a time node, so that the chain visits every time
    node of the KG in order, across add_records batches and after deletions. Chain edges are
    derived structure: they live as long as both ends do. Returns the number of edges added."""
    times = sorted((int(n.attrs["slot"]), n.id) for n in kg.nodes("time") if "slot" in n.attrs)
    pos = {nid: i for i, (_, nid) in enumerate(times)}
    touched = sorted({pos[t] for t in time_ids if t in pos})
    add: dict[str, Edge] = {}
    for i in touched:
        for (a, ta), (b, tb) in ((times[j], times[j + 1]) for j in (i - 1, i) if 0 <= j < len(times) - 1):
            eid = edge_id(ta, tb, "time_next", TIME_NEXT_TEXT)
            if kg.edge(eid) is None:
                add[eid] = Edge(eid, ta, tb, "time_next", TIME_NEXT_TEXT, 1.0, {"gap_hours": b - a})
    around = {times[j][1] for i in touched for j in (i - 1, i, i + 1) if 0 <= j < len(times)}
    skips = {e.id for nid in around for e in kg.edges_of(nid)
             if e.kind == "time_next" and pos.get(e.dst, -1) != pos.get(e.src, -3) + 1}
    new = list(add.values())
    with kg.transaction():
        kg.delete_edges(skips)
        for off in range(0, len(new), batch_size):
            kg.add_edges(new[off:off + batch_size], source=DERIVED_SOURCE, embed_facts=False)
    return len(new)
