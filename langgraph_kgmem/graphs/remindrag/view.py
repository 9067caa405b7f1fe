"""ReMindRAG's view of the KG: evidence units (a chunk and its anchor count as one, named by the
chunk id), each node's traversable edges with neighbour vectors (cached per KG version), the
collected subgraph's evidence, and the paths through it that memorisation rewards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from langgraph_kgmem.graphs.remindrag.schemas import TRAVERSE_KINDS, UNIT_KINDS

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


@dataclass
class Expansion:
    """A node's traversable edges: edge ids, neighbour unit ids, cos(emb(a), emb(b)), neighbour
    vectors, and the nodes every one of those edges touches (the node, and a chunk's anchor)."""

    edge_ids: list[str]
    nbr_ids: list[str]
    cos_ab: np.ndarray
    nbr_vecs: np.ndarray
    members: list[str]


class GraphView:
    """Chunk+anchor units, neighbour expansions and node vectors, cached per KG version."""

    def __init__(self, kg: "KnowledgeGraph") -> None:
        self.kg = kg
        self._version = -1
        self._exp: dict[str, Expansion] = {}
        self._anchor: dict[str, str | None] = {}
        self._dim: int | None = None

    @property
    def dim(self) -> int:
        """The KG's embedding dimension (embedding one probe text once, on first use)."""
        if self._dim is None:
            self._dim = len(self.kg.embed_query("dimension probe"))
        return self._dim

    def _check(self) -> None:
        if self.kg.version != self._version:
            self._version = self.kg.version
            self._exp.clear()
            self._anchor.clear()

    def unit(self, nid: str) -> str:
        """The evidence unit of node ``nid``: an anchor stands for its chunk; any other node for itself."""
        node = self.kg.node(nid)
        if node is not None and node.kind == "anchor":
            chunk = self.kg.chunk_of_anchor(nid)
            return chunk.id if chunk is not None else nid
        return nid

    def anchor_of(self, chunk_id: str) -> str | None:
        """The anchor node of chunk ``chunk_id`` (None without one), cached until the KG changes."""
        self._check()
        if chunk_id not in self._anchor:
            found = [n.id for _, n in self.kg.neighbors(chunk_id, kinds=("anchor_chunk",)) if n.kind == "anchor"]
            self._anchor[chunk_id] = found[0] if found else None
        return self._anchor[chunk_id]

    def members(self, nid: str) -> list[str]:
        """The nodes unit ``nid`` is read from: itself, and a chunk's anchor."""
        node = self.kg.node(nid)
        if node is not None and node.kind == "chunk":
            anc = self.anchor_of(nid)
            if anc:
                return [nid, anc]
        return [nid]

    def _neighbours(self, nid: str) -> tuple[list[str], list[str], list[str]]:
        """(edge ids, neighbour units, the nodes they were read from) of ``nid`` (a chunk expands
        with its anchor)."""
        kg = self.kg
        members = self.members(nid)
        edge_ids, nbrs = [], []
        seen_edges: set[str] = set()
        for m in members:
            for e, other in kg.neighbors(m, kinds=TRAVERSE_KINDS, node_kinds=UNIT_KINDS):
                if e.id in seen_edges:
                    continue
                seen_edges.add(e.id)
                u = self.unit(other.id)
                if u == nid:
                    continue
                edge_ids.append(e.id)
                nbrs.append(u)
        return edge_ids, nbrs, members

    def expand_many(self, nids: Sequence[str]) -> dict[str, Expansion]:
        """Expansions of ``nids``; the vectors of every node they reach are read in one call (one
        round trip on a database server, instead of one per node)."""
        self._check()
        todo = [n for n in dict.fromkeys(nids) if n not in self._exp]
        if todo:
            lists = {n: self._neighbours(n) for n in todo}
            uniq = list(dict.fromkeys([x for n in todo for x in [n, *lists[n][1]]]))
            have = self.kg.has_vectors(uniq)
            mat = np.zeros((len(uniq), self.dim), dtype=np.float32)
            rows = [i for i, h in enumerate(have) if h]
            if rows:
                mat[rows] = self.kg.vectors([uniq[i] for i in rows])
            pos = {u: i for i, u in enumerate(uniq)}
            for n in todo:
                edge_ids, nbrs, members = lists[n]
                if nbrs:
                    nbr_vecs = mat[[pos[b] for b in nbrs]]
                    cos_ab = nbr_vecs @ mat[pos[n]]
                else:
                    nbr_vecs, cos_ab = np.zeros((0, self.dim), dtype=np.float32), np.zeros(0)
                self._exp[n] = Expansion(edge_ids, nbrs, np.asarray(cos_ab, dtype=np.float64), nbr_vecs, members)
        return {n: self._exp[n] for n in nids}

    def expand(self, nid: str) -> Expansion:
        """The :class:`Expansion` of one node (see :meth:`expand_many`)."""
        return self.expand_many([nid])[nid]



def evidence_ids(kg: "KnowledgeGraph", nodes: Sequence[str], edges: Sequence[str]) -> tuple[list[str], list[str]]:
    """(chunk ids, relation-edge ids) of S, in discovery order."""
    chunks = [n for n in nodes if (node := kg.node(n)) is not None and node.kind == "chunk"]
    facts = [e for e in edges if (edge := kg.edge(e)) is not None and edge.kind == "relation"]
    return chunks, facts



def s_adjacency(kg: "KnowledgeGraph", view: GraphView, edges: Sequence[str]) -> dict[str, list[tuple[str, str]]]:
    """Undirected adjacency of subgraph S over evidence units: unit -> [(neighbour unit, edge id)],
    edges gone from the KG skipped."""
    adj: dict[str, list[tuple[str, str]]] = {}
    for eid in edges:
        e = kg.edge(eid)
        if e is None:
            continue
        a, b = view.unit(e.src), view.unit(e.dst)
        adj.setdefault(a, []).append((b, eid))
        adj.setdefault(b, []).append((a, eid))
    return adj


def effective_edges(adj: dict[str, list[tuple[str, str]]], seeds: Sequence[str], targets: Sequence[str]) -> list[str]:
    """Edges of S on the paths from the seeds to each target node (BFS tree of S from the seeds)."""
    parent: dict[str, tuple[str, str] | None] = {s: None for s in seeds}
    queue = list(dict.fromkeys(seeds))
    for u in queue:  # BFS: queue grows while iterating
        for v, eid in adj.get(u, []):
            if v not in parent:
                parent[v] = (u, eid)
                queue.append(v)
    out: dict[str, None] = {}
    for t in targets:
        cur = t
        while parent.get(cur) is not None:
            u, eid = parent[cur]  # type: ignore[misc]
            out[eid] = None
            cur = u
    return list(out)


def hop_distances(kg: "KnowledgeGraph", targets: Sequence[str], max_depth: int = 12) -> dict[str, int]:
    """Hops from each node (evidence units: chunk ids stand for chunk+anchor) to the nearest target,
    over the edges a traversal may cross. For scripted/oracle deciders and diagnostics, not retrieval."""
    view = GraphView(kg)
    dist = {view.unit(t): 0 for t in targets}
    frontier = list(dist)
    for d in range(1, max_depth + 1):
        nxt = []
        for u in frontier:
            for b in view.expand(u).nbr_ids:
                if b not in dist:
                    dist[b] = d
                    nxt.append(b)
        if not nxt:
            break
        frontier = nxt
    return dist
