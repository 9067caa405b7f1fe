"""The knowledge-graph layer: typed nodes/edges, the storage backends, caches, transactions, PPR.

The public :class:`langgraph_kgmem.KnowledgeGraph` builds on :class:`KnowledgeGraphCore` and adds
ingestion and the methods' persistence; this package imports nothing above it.
"""

from langgraph_kgmem.kg.graph import KgWriter, KnowledgeGraphCore
from langgraph_kgmem.kg.backends.postgres import LazyPushPpr
from langgraph_kgmem.kg.ppr import GraphSnapshot, personalized_pagerank
from langgraph_kgmem.kg.types import EDGE_KINDS, NODE_KINDS, Edge, Node, Triple, edge_id, entity_id, node_id


__all__ = ["KnowledgeGraphCore", "KgWriter", "LazyPushPpr", "GraphSnapshot", "personalized_pagerank", "Node", "Edge",
           "Triple", "edge_id", "entity_id", "node_id"]
