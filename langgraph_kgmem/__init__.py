"""langgraph_kgmem: knowledge-graph memory for LangGraph agents.

Five published retrieval methods as LangGraph state machines over one shared knowledge graph and
one persistent memory. Imports are lazy: nothing heavy (models, stores) loads at import time.
"""

from __future__ import annotations

import logging
from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:   # the lazy exports below, spelled out for type checkers and the API reference
    from langgraph_kgmem.embeddings import get_embeddings
    from langgraph_kgmem.errors import KgmemError
    from langgraph_kgmem.graphs.feedback import feedback_tool, give_feedback
    from langgraph_kgmem.graphs.autopruned import create_autopruned_graph
    from langgraph_kgmem.graphs.catrag import create_catrag_graph
    from langgraph_kgmem.graphs.kgirag import create_kgirag_graph
    from langgraph_kgmem.graphs.r3cycle import create_r3cycle_graph
    from langgraph_kgmem.graphs.remindrag import create_remindrag_graph
    from langgraph_kgmem.graphs.router import create_router_graph
    from langgraph_kgmem.knowledge_graph import KnowledgeGraph
    from langgraph_kgmem.llm import resolve_model
    from langgraph_kgmem.agent_tools import create_kgmem_tools

__version__ = "0.1.0"

# a library logs and leaves output to the application: nothing is printed unless it configures
# logging (e.g. logging.basicConfig(level=logging.INFO) shows decision fallbacks)
logging.getLogger(__name__).addHandler(logging.NullHandler())

# every method's factory (create_<method>_graph) is exported too: the registry names them
_EXPORTS = {
    "KnowledgeGraph": "langgraph_kgmem.knowledge_graph",
    "create_kgmem_tools": "langgraph_kgmem.agent_tools",
    "get_embeddings": "langgraph_kgmem.embeddings",
    "resolve_model": "langgraph_kgmem.llm",
    "KgmemError": "langgraph_kgmem.errors",
    "give_feedback": "langgraph_kgmem.graphs.feedback",
    "feedback_tool": "langgraph_kgmem.graphs.feedback",
}


def _exports() -> dict[str, str]:
    from langgraph_kgmem.graphs.registry import method_exports

    return {**_EXPORTS, **method_exports()}


def __getattr__(name: str) -> Any:
    if name == "__all__":   # computed on first use: listing the methods imports them
        return sorted(_exports())
    module = _EXPORTS.get(name)
    if module is None and name.startswith("create_") and name.endswith("_graph"):
        module = _exports().get(name)
    if module is None:
        raise AttributeError(f"module 'langgraph_kgmem' has no attribute {name!r}")
    return getattr(import_module(module), name)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_exports()))
