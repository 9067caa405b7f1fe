"""langgraph_kgmem: knowledge-graph memory for LangGraph agents.

Five published retrieval methods as LangGraph state machines over one shared knowledge graph and
one persistent memory. Imports are lazy: nothing heavy (models, stores) loads at import time.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "KnowledgeGraph": "langgraph_kgmem.knowledge_graph",
    "create_kgmem_tools": "langgraph_kgmem.tools",
    "create_remindrag_graph": "langgraph_kgmem.graphs.remindrag",
    "create_r3cycle_graph": "langgraph_kgmem.graphs.r3cycle",
    "create_catrag_graph": "langgraph_kgmem.graphs.catrag",
    "create_kgirag_graph": "langgraph_kgmem.graphs.kgirag",
    "create_autopruned_graph": "langgraph_kgmem.graphs.autopruned",
    "get_embeddings": "langgraph_kgmem.config",
    "resolve_model": "langgraph_kgmem.llm",
    "KgmemError": "langgraph_kgmem.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'langgraph_kgmem' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
