"""LangGraph Server entry point: ReMindRAG (LLM-guided traversal with edge memory), configured from KGMEM_* environment variables."""

from langgraph_kgmem.serve import graph_factory

graph = graph_factory("remindrag")
