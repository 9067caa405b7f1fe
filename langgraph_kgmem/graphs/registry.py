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


# one line per method, for people choosing one (the demo, `kgmem ask --help`)
SUMMARIES: dict[str, str] = {
    "remindrag": "ReMindRAG: an LLM walks the graph hop by hop from the question's entities; the edges that "
                 "helped are remembered, so the same question is answered again by replaying them",
    "catrag": "CatRAG: personalised PageRank from the question's facts, with the graph's edge weights "
              "adapted to the question, over HippoRAG 2's graph of passages, entities and facts",
    "hipporag2": "HippoRAG 2: personalised PageRank from the question's facts over a static graph of "
                 "passages, entities and facts (CatRAG without its query-time additions)",
    "autopruned": "AutoPrunedRetriever: a compact symbolic codebook of facts, pruned to the few that fit the "
                  "question; grounded answers are stored and replayed for the same question",
    "kgirag": "KG-IRAG: reads time-stamped records along the time chain, a few hours per round, until "
              "they settle whether (or when) a trip avoids an event",
    "r3cycle": "R3-Cycle: an agent answers with graph tools, a verifier checks, and a failed attempt is "
               "reflected on and retried with the lesson kept",
    "graphcot": "Graph-CoT: R3-Cycle's tool-using agent, one attempt, without reflection",
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
