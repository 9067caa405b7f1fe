"""LangGraph Server entry point: CatRAG (anchored, query-weighted PPR), configured from KGMEM_* environment variables."""

from langgraph_kgmem.serve import graph_factory

graph = graph_factory("catrag")
