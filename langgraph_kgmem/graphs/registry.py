"""Method names → factories, for the CLI, the served graphs and the demo."""

from __future__ import annotations

from importlib import import_module
from typing import Any, Callable

METHODS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "remindrag": ("langgraph_kgmem.graphs.remindrag", "create_remindrag_graph", {}),
    "catrag": ("langgraph_kgmem.graphs.catrag", "create_catrag_graph", {}),
    "hipporag2": ("langgraph_kgmem.graphs.catrag", "create_catrag_graph",
                  {"anchoring": False, "dynamic_weighting": False, "key_fact_boost": False}),
    "autopruned": ("langgraph_kgmem.graphs.autopruned", "create_autopruned_graph", {}),
    "kgirag": ("langgraph_kgmem.graphs.kgirag", "create_kgirag_graph", {}),
    "r3cycle": ("langgraph_kgmem.graphs.r3cycle", "create_r3cycle_graph", {}),
    "graphcot": ("langgraph_kgmem.graphs.r3cycle", "create_r3cycle_graph", {"reflection": False}),
}


def get_factory(name: str) -> tuple[Callable[..., Any], dict[str, Any]]:
    """The factory and its preset options for method ``name``."""
    from langgraph_kgmem.errors import KgmemInputError, describe_error

    if name not in METHODS:
        raise KgmemInputError(f"unknown method {name!r}; choose one of: {', '.join(METHODS)}")
    module, attr, preset = METHODS[name]
    try:
        return getattr(import_module(module), attr), dict(preset)
    except (ImportError, AttributeError) as exc:
        raise KgmemInputError(f"method {name!r} is not available in this installation: {describe_error(exc)}") from exc
