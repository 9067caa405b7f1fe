"""The in-memory copy of a KG's structure: adjacency dicts and the cached CSR snapshots PPR runs on.

The facade keeps every node and edge here (a cache of the stored graph, refreshed from the
database's change log when another process writes). Snapshots are built lazily and, after
writes, extended from a log of the structure changes rather than rebuilt.
"""

from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np

from langgraph_kgmem.kg.ppr import GraphSnapshot, NodeTable, build_snapshot, degree_order, extend_snapshot
from langgraph_kgmem.kg.types import Edge, Node


class GraphIndex:
    """Nodes, edges and adjacency (edge ids per node, insertion order), plus the snapshot cache."""

    def __init__(self) -> None:
        self.nodes: dict[str, Node] = {}
        self.edges: dict[str, Edge] = {}
        self.out: dict[str, list[str]] = {}
        self.into: dict[str, list[str]] = {}
        self._snapshots: dict[tuple, GraphSnapshot] = {}
        self._node_table: NodeTable | None = None      # rows of the cached snapshots
        self._graph_log: list[tuple] = []              # structure changes the snapshots have not seen yet

    def load(self, nodes: Iterable[Node], edges: Iterable[Edge]) -> None:
        """Replace everything with this graph (snapshots go too)."""
        self.drop_snapshots()
        self.nodes, self.edges, self.out, self.into = {}, {}, {}, {}
        for n in nodes:
            self.index_node(n)
        for e in edges:
            self.index_edge(e)

    def index_node(self, n: Node) -> None:
        """Add or replace a node (a new one is logged for the cached snapshots)."""
        if self._snapshots and n.id not in self.nodes:
            self.log_change(("node", n.id, n.kind))
        self.nodes[n.id] = n
        self.out.setdefault(n.id, [])
        self.into.setdefault(n.id, [])

    def index_edge(self, e: Edge) -> None:
        """Add an edge to the adjacency lists, or replace a known one in place (a change of its ends,
        kind or weight is logged for the cached snapshots)."""
        if e.id in self.edges:
            old = self.edges[e.id]
            if self._snapshots and (old.src, old.dst, old.kind, old.weight) != (e.src, e.dst, e.kind, e.weight):
                self.log_change(("edge", old.src, old.dst, old.kind, -old.weight))
                self.log_change(("edge", e.src, e.dst, e.kind, e.weight))
            self.edges[e.id] = e
            return
        if self._snapshots:
            self.log_change(("edge", e.src, e.dst, e.kind, e.weight))
        self.edges[e.id] = e
        self.out.setdefault(e.src, []).append(e.id)
        self.into.setdefault(e.dst, []).append(e.id)

    def unindex_edge(self, eid: str) -> None:
        """Forget an edge (no-op when unknown), logging its removal for the cached snapshots."""
        e = self.edges.pop(eid, None)
        if e is None:
            return
        if self._snapshots:
            self.log_change(("edge", e.src, e.dst, e.kind, -e.weight))
        self.out[e.src].remove(eid)
        self.into[e.dst].remove(eid)

    def unindex_node(self, nid: str) -> None:
        """Forget a node (its edges are unindexed first by the caller)."""
        if self.nodes.pop(nid, None) is not None and self._snapshots:
            self.log_change(("drop",))   # rows cannot be taken out of a snapshot: rebuild it
        self.out.pop(nid, None)
        self.into.pop(nid, None)

    def log_change(self, change: tuple) -> None:
        """Record a structure change for the cached snapshots (see :meth:`snapshot`); past a
        quarter of the graph replaying it costs more than a rebuild, so the snapshots go."""
        self._graph_log.append(change)
        if change[0] == "drop" or len(self._graph_log) > max(50_000, len(self.edges) // 4):
            self.drop_snapshots()

    def drop_snapshots(self) -> None:
        """Forget the cached PPR snapshots, their change log and node table (the next one is rebuilt)."""
        self._snapshots.clear()
        self._graph_log.clear()
        self._node_table = None


    def apply(self, nodes: Iterable[Node], dead_nodes: Iterable[str], edges: Iterable[Edge],
              dead_edges: Iterable[str]) -> None:
        """Bring in another process's committed writes (see ``GraphBackend.changes_since``)."""
        for n in nodes:
            self.index_node(n)
        for eid in dead_edges:
            self.unindex_edge(eid)
        for e in edges:
            old = self.edges.get(e.id)
            if old is not None and (old.src, old.dst) != (e.src, e.dst):
                self.unindex_edge(e.id)
            self.index_edge(e)
        for nid in dead_nodes:
            for eid in list(self.out.get(nid, [])) + list(self.into.get(nid, [])):
                self.unindex_edge(eid)
            self.unindex_node(nid)

    def snapshot(self, edge_kinds: Sequence[str] | None = None, *, symmetric: bool = True) -> GraphSnapshot:
        """CSR snapshot over the given edge kinds (all by default), cached.

        Writes after it was built are not a rebuild: the nodes they add become new rows and the
        edge weights they add, change or remove go into the snapshot's small ``delta`` matrix (see
        :func:`~langgraph_kgmem.kg.ppr.extend_snapshot`), replayed here on the next call — also
        for another process's writes, which :meth:`apply` brings in as the same changes. Only a
        removed node, or more changes than a quarter of the graph, rebuilds it."""
        if self._graph_log:
            self._replay_graph_log()
        key = (tuple(sorted(edge_kinds)) if edge_kinds is not None else None, symmetric)
        snap = self._snapshots.get(key)
        if snap is None:
            table = self._node_table
            fresh = table is None or len(table) != len(self.nodes)
            ids = list(self.nodes)
            index = {nid: i for i, nid in enumerate(ids)} if fresh else table.index
            es = [e for e in self.edges.values() if edge_kinds is None or e.kind in edge_kinds]
            src = np.fromiter((index[e.src] for e in es), dtype=np.int64, count=len(es))
            dst = np.fromiter((index[e.dst] for e in es), dtype=np.int64, count=len(es))
            w = np.fromiter((e.weight for e in es), dtype=np.float64, count=len(es))
            if fresh:
                # rows by falling degree: the hubs' scores, read by most of the power iteration's
                # gathers, sit together in cache (sweeps get faster the more skewed the degrees)
                order = degree_order(len(ids), src, dst)
                rank = np.empty(len(ids), dtype=np.int64)
                rank[order] = np.arange(len(ids))
                src, dst = rank[src], rank[dst]
                ids = [ids[i] for i in order.tolist()]
                table = self._node_table = NodeTable(ids, [self.nodes[i].kind for i in ids])
            snap = build_snapshot(table.ids, (), src, dst, w, symmetric=symmetric, table=table)
            self._snapshots[key] = snap
        return snap

    def _replay_graph_log(self) -> None:
        log, self._graph_log = self._graph_log, []
        table = self._node_table
        if not self._snapshots or table is None:
            self.drop_snapshots()
            return
        added = [c for c in log if c[0] == "node"]
        if added:
            table.append([c[1] for c in added], [c[2] for c in added])
        edges = [c for c in log if c[0] == "edge"]
        if len(table) != len(self.nodes) or any(c[1] not in table.index or c[2] not in table.index for c in edges):
            self.drop_snapshots()   # the cache changed in a way the log did not see: start over
            return
        for (kinds, symmetric), snap in list(self._snapshots.items()):
            mine = [c for c in edges if kinds is None or c[3] in kinds]
            src = np.fromiter((table.index[c[1]] for c in mine), dtype=np.int64, count=len(mine))
            dst = np.fromiter((table.index[c[2]] for c in mine), dtype=np.int64, count=len(mine))
            dw = np.fromiter((c[4] for c in mine), dtype=np.float64, count=len(mine))
            if symmetric:
                src, dst, dw = np.concatenate([src, dst]), np.concatenate([dst, src]), np.concatenate([dw, dw])
            self._snapshots[(kinds, symmetric)] = extend_snapshot(snap, len(table), src, dst, dw)
