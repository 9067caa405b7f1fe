"""LangGraph Server entry point: R3-Cycle (reason, retrieve, reflect), configured from KGMEM_* environment variables."""

from langgraph_kgmem.serve import graph_factory

graph = graph_factory("r3cycle")
