"""The KG seen as a GRBench-style environment: node features and neighbours by relation.

Used by the graph tools (RetrieveNode, NodeFeature, NeighbourCheck, NodeDegree) and by agents.
Every function returns an *observation* string an LLM can act on; unknown ids, features and
relations produce a helpful message listing what exists, never an exception. With ``fenced=True``
(the tools an outer agent calls) every piece of KG text in an observation (names, features,
relations) comes inside the prompt fence (``<data>...</data>``, :func:`~langgraph_kgmem.llm.prompts.fence`),
ids through :func:`~langgraph_kgmem.llm.prompts.data_text`; R3-Cycle reads plain observations and
fences them itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.llm.prompts import data_text, fence
from langgraph_kgmem.kg.types import Edge, Node, edge_id

if TYPE_CHECKING:
    from langgraph_kgmem.knowledge_graph import KnowledgeGraph

MAX_LISTED = 30


class GraphEnv:
    """Feature/neighbour access over a :class:`KnowledgeGraph` (``fenced=True``: KG text in the
    observations comes inside the prompt fence, for an outer agent)."""

    fenced = False   # also for subclasses whose own __init__ does not call this one

    def __init__(self, kg: "KnowledgeGraph", *, fenced: bool = False) -> None:
        self.kg = kg
        self.fenced = fenced
        kg.prefetch_scores(("entity",))   # RetrieveNode's search, on a server KG's copy: read now, not at a first question

    def _text(self, text: str) -> str:
        """KG text in an observation: quoted (``'Warsaw'``), or fenced for an outer agent."""
        return fence(text, inline=True, empty="''") if self.fenced else repr(text)

    def _value(self, text: str) -> str:
        """A listed or read value: as it is, or fenced for an outer agent."""
        return fence(text, inline=True, empty="''") if self.fenced else text

    def _id(self, node_id: str) -> str:
        return data_text(node_id) if self.fenced else node_id

    # -- features -----------------------------------------------------------------------------
    def features(self, node: Node) -> dict[str, Any]:
        """A node's features: its stored ``features`` (else its name), its kind, and for an entity without
        stored features its source passages and a description from the first one; chunks and anchors
        add their text."""
        feats = dict(node.attrs.get("features", {}))
        if not feats:
            feats["name"] = node.text
        feats.setdefault("kind", node.attrs.get("type", node.kind))
        if node.kind == "entity" and "features" not in node.attrs:
            chunks = [n for _, n in self.kg.neighbors(node.id, kinds=("context",), node_kinds=("chunk",))]
            if chunks:
                feats["source_passages"] = [c.attrs.get("title") or c.id for c in chunks[:5]]
                feats["description"] = chunks[0].text[:400]
        if node.kind in ("chunk", "anchor"):
            feats.setdefault("text", node.text)
        return feats

    def relations(self, node_id: str) -> list[str]:
        """The relations a node has, sorted: a relation edge's text, else the edge's kind."""
        rels = []
        for e in self.kg.edges_of(node_id):
            rels.append(e.text if e.kind == "relation" and e.text else e.kind)
        return sorted(dict.fromkeys(rels))

    def _unknown_node(self, node_id: str) -> str:
        return (f"Node {self._text(node_id)} does not exist. Use RetrieveNode with a keyword to find a valid node id "
                "(ids look like the ones RetrieveNode returns).")

    # -- observations ---------------------------------------------------------------------------
    def retrieve_node(self, keyword: str, top_n: int = 1) -> str:
        """Observation: the id of the entity closest to ``keyword`` (or the ``top_n`` closest with scores)."""
        if not keyword or not keyword.strip():
            return "RetrieveNode needs a non-empty keyword."
        hits = self.kg.nearest(keyword, max(1, top_n), kinds=("entity",))
        if not hits:
            return "The graph has no nodes yet."
        if top_n <= 1:
            node, score = hits[0]
            return f"The id of the node most related to {self._text(keyword)} is {self._id(node.id)} ({self._text(node.text)})."
        return "Nodes most related to {}: {}".format(
            self._text(keyword), "; ".join(f"{self._id(n.id)} ({self._text(n.text)}, {s:.2f})" for n, s in hits))

    def node_feature(self, node_id: str, feature: str) -> str:
        """Observation: one feature of a node, or the features it has when ``feature`` is not one."""
        node = self.kg.node(node_id)
        if node is None:
            return self._unknown_node(node_id)
        feats = self.features(node)
        if feature not in feats:
            return (f"Node {self._id(node_id)} has no feature {self._text(feature)}; available features are: "
                    f"{self._value(', '.join(sorted(map(str, feats))))}.")
        val = feats[feature]
        return f"The {self._value(feature)} of node {self._id(node_id)} is: {self._value(json.dumps(val) if not isinstance(val, str) else val)}"

    def neighbour_ids(self, node_id: str, relation: str) -> list[Edge] | None:
        """The edges of ``node_id`` along ``relation`` (matched exactly on the edge text or kind, else as
        the KG's neighbour search matches it); None when the node does not exist."""
        if self.kg.node(node_id) is None:
            return None
        exact = [e for e in self.kg.edges_of(node_id) if (e.text == relation) or (e.kind == relation and not e.text)]
        if exact:
            return exact
        return [e for e, _ in self.kg.neighbors(node_id, relation=relation)]

    def neighbour_check(self, node_id: str, relation: str) -> str:
        """Observation: the neighbours along ``relation`` (at most ``MAX_LISTED`` shown), or the node's
        relations when it has none along that one."""
        edges = self.neighbour_ids(node_id, relation)
        if edges is None:
            return self._unknown_node(node_id)
        if not edges:
            return (f"Node {self._id(node_id)} has no neighbours along relation {self._text(relation)}; its relations are: "
                    f"{self._value(', '.join(self.relations(node_id)[:MAX_LISTED])) or 'none'}.")
        others = [e.dst if e.src == node_id else e.src for e in edges]
        others = list(dict.fromkeys(others))
        shown = ", ".join(f"{self._id(o)} ({self._text(self.kg.node(o).text[:40])})"  # type: ignore[union-attr]
                          for o in others[:MAX_LISTED])
        more = f" and {len(others) - MAX_LISTED} more" if len(others) > MAX_LISTED else ""
        return f"The {self._value(relation)} neighbours of {self._id(node_id)} are: {shown}{more}."

    def node_degree(self, node_id: str, relation: str) -> str:
        """Observation: how many distinct neighbours a node has along ``relation`` (its relations when 0)."""
        edges = self.neighbour_ids(node_id, relation)
        if edges is None:
            return self._unknown_node(node_id)
        n = len({e.dst if e.src == node_id else e.src for e in edges})
        if n == 0:
            return (f"Node {self._id(node_id)} has 0 neighbours along relation {self._text(relation)}; its relations are: "
                    f"{self._value(', '.join(self.relations(node_id)[:MAX_LISTED])) or 'none'}.")
        return f"Node {self._id(node_id)} has {n} neighbours along relation {self._text(relation)}."


def load_grbench(kg: "KnowledgeGraph", data: dict[str, Any] | str | Path, *, source: str = "grbench") -> dict[str, int]:
    """Load a GRBench-format graph ``{node_type: {node_id: {"features": {...}, "neighbors":
    {relation: [node_id, ...]}}}}`` into ``kg``: one entity node per id (text = its name/title
    feature), ``relation`` edges named by the relation. Neighbour ids that no node defines are
    reported, not invented."""
    if not isinstance(data, dict):
        p = Path(data)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise KgmemInputError(f"cannot read GRBench graph {p}: {exc}") from exc
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise KgmemInputError("a GRBench graph is {node_type: {node_id: {features, neighbors}}}")
    nodes: list[Node] = []
    known: set[str] = set()
    for ntype in sorted(data):
        for nid in sorted(data[ntype]):
            rec = data[ntype][nid] or {}
            feats = dict(rec.get("features", {}))
            label = next((str(feats[k]) for k in ("name", "title", "label") if feats.get(k)), str(nid))
            nodes.append(Node(str(nid), "entity", label, {"type": ntype, "features": feats}))
            known.add(str(nid))
    kg.add_nodes(nodes, source=source)
    edges: dict[str, Edge] = {}
    dangling = 0
    for ntype in sorted(data):
        for nid in sorted(data[ntype]):
            for rel, targets in sorted((data[ntype][nid] or {}).get("neighbors", {}).items()):
                for t in targets:
                    t = str(t)
                    if t not in known:
                        dangling += 1
                        continue
                    eid = edge_id(str(nid), t, "relation", rel)
                    edges[eid] = Edge(eid, str(nid), t, "relation", rel)
    kg.add_edges(list(edges.values()), source=source, embed_facts=False)
    kg.writer.put_document(source, title=source, status="done")
    return {"nodes": len(nodes), "edges": len(edges), "dangling_neighbours": dangling}
