"""The knowledge-graph layer: typed nodes/edges, SQLite structure, vector index, PPR."""

from langgraph_kgmem.kg.graph import KnowledgeGraph, open_persistence
from langgraph_kgmem.kg.pg_push import LazyPushPpr
from langgraph_kgmem.kg.ppr import GraphSnapshot, personalized_pagerank
from langgraph_kgmem.kg.types import EDGE_KINDS, NODE_KINDS, Edge, Node, Triple, edge_id, entity_id, node_id

__all__ = ["KnowledgeGraph", "open_persistence", "LazyPushPpr", "GraphSnapshot", "personalized_pagerank", "Node",
           "Edge", "Triple", "NODE_KINDS", "EDGE_KINDS", "edge_id", "entity_id", "node_id"]
