"""LangGraph Server entry point: HippoRAG 2 (CatRAG with its additions off: plain PPR baseline), configured from KGMEM_* environment variables."""

from langgraph_kgmem.serve import graph_factory

graph = graph_factory("hipporag2")
