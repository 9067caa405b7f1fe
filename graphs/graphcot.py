"""LangGraph Server entry point: Graph-CoT (R3-Cycle without reflection), configured from KGMEM_* environment variables."""

from langgraph_kgmem.serve import graph_factory

graph = graph_factory("graphcot")
