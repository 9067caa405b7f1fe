"""Questions each method can answer offline, shared by the tests that run every registered method.

A plain module, not a test file: pytest's default (prepend) import mode puts tests/ on ``sys.path``,
so test modules import it as ``from method_cases import ...``.

Every method in ``METHODS`` is expected to import and run: tests iterate the registry directly, so a
broken method module fails them instead of being skipped.
"""

from __future__ import annotations

from pathlib import Path

from langgraph_kgmem.graphs.registry import METHODS

QUESTION = "Where was Marie Curie born?"
OTHER = "Which river flows into the Baltic Sea?"

RECORDS_CSV = Path(__file__).parent / "fixtures" / "kgirag_records.csv"
RECORD_QUESTIONS = ("Can I avoid rain at Riverside if I leave at 2024-05-01 00:00 and travel for 2 hours?",
                    "Can I avoid rain at Northgate if I leave at 2024-05-01 02:00 and travel for 3 hours?")


def method_case(method, text_kg):
    """(kg, question, other question) a method can answer: KG-IRAG reads time-stamped records."""
    if method != "kgirag":
        return text_kg, QUESTION, OTHER
    from langgraph_kgmem import KnowledgeGraph

    kg = KnowledgeGraph.in_memory(name="records")
    kg.add_records(RECORDS_CSV, event_rule="rain_mm > 0", event_name="rain")
    return kg, *RECORD_QUESTIONS


def compile_method(method, kg, *, model="offline", store=None, checkpointer=None):
    """``method`` (a registry name) built over ``kg`` and compiled; each call gets its own fresh
    InMemoryStore unless ``store`` is given, so two apps start from the same state."""
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem.graphs.registry import get_factory

    factory, preset = get_factory(method)
    store = store if store is not None else InMemoryStore()
    return factory(kg, model=model, store=store, **preset).compile(store=store, checkpointer=checkpointer)


def pick(*preferred: str) -> str:
    """The first of ``preferred`` that is a registered method."""
    for name in preferred:
        if name in METHODS:
            return name
    raise AssertionError(f"none of {preferred} is a registered method (registry: {', '.join(METHODS)})")
