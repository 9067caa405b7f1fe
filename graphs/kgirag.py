"""LangGraph Server entry point: KG-IRAG (iterative temporal retrieval), configured from KGMEM_* environment variables."""

from langgraph_kgmem.serve import graph_factory

graph = graph_factory("kgirag")
