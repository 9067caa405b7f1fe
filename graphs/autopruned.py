"""LangGraph Server entry point: AutoPrunedRetriever (codebook-compressed fact retrieval), configured from KGMEM_* environment variables."""

from langgraph_kgmem.serve import graph_factory

graph = graph_factory("autopruned")
