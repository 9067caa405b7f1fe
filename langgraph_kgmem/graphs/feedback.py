"""Feedback from a person or an agent on a method's run: :func:`give_feedback` and
:func:`feedback_tool`.

A run is named by the ``run_id`` its result carries, or by the thread it ran in; ``useful`` and
``wrong`` name ids of its evidence; ``verdict`` says whether the answer was right. The feedback is
stored in the tenant's scope and becomes experience credit that CatRAG and HippoRAG 2 read as a
bounded prior (see ``docs/memory.md`` for the bounds); then the hook ``on_feedback`` of the
method that ran (its :class:`~langgraph_kgmem.graphs.spec.MethodSpec`) is called, if it has one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Literal, Sequence

from langgraph_kgmem.memory import resolve_store
from langgraph_kgmem.memory.feedback import record_feedback

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph

HOOK_KEYS = ("run_id", "question", "method", "useful", "wrong", "verdict", "source")


def _hook_of(method: str) -> Any:
    from langgraph_kgmem.graphs.registry import registered

    entry = registered().get(method)
    if entry is None:   # a preset's runs name the preset: the spec is the same
        entry = next((e for e in registered().values() if e.spec.name == method), None)
    return None if entry is None else entry.spec.on_feedback


def give_feedback(kg: "KnowledgeGraph", run: str, *, useful: Iterable[str] | str = (), wrong: Iterable[str] | str = (),
                  verdict: Literal["correct", "wrong", "partial"] | None = None, store: Any = None,
                  scope: Sequence[str] = (), source: Literal["user", "agent"] = "user") -> dict[str, Any]:
    """Say which evidence of a run helped (``useful``), which misled (``wrong``) and whether its
    answer was right (``verdict``).

    Args:
        kg: the knowledge graph the run asked.
        run: the ``run_id`` of the method's result, or the ``thread_id`` it ran in (its latest run).
        useful / wrong: evidence ids of that run (``[e["id"] for e in out["evidence"]]``).
        verdict: ``"correct"``, ``"wrong"``, ``"partial"`` or None.
        store: the store the graph was compiled with (default: the running graph's).
        scope: the tenant's memory scope, as the run filled it (e.g. ``("alice",)``); () without tenants.
        source: ``"user"`` (a person) or ``"agent"`` (half a user's weight).

    Returns:
        The stored feedback record.

    Raises:
        KgmemInputError: an unknown run (in this tenant's scope), an id not in the run's evidence,
            a bad verdict or source, or a run that has had its share of feedback.

    Example:
        >>> from langgraph_kgmem import KnowledgeGraph, create_catrag_graph
        >>> kg = KnowledgeGraph.in_memory(name="fb")
        >>> _ = kg.add_documents(["Warsaw is the capital of Poland."], model="offline")
        >>> store = kg.persistence()[1]
        >>> out = create_catrag_graph(kg, model="offline").compile(store=store).invoke({"question": "Capital of Poland?"})
        >>> ids = [e["id"] for e in out["evidence"]]
        >>> give_feedback(kg, out["run_id"], useful=ids[:1], store=store)["useful"] == ids[:1]
        True
    """
    found = resolve_store(store)
    record = record_feedback(kg, found, run, useful=useful, wrong=wrong, verdict=verdict, scope=scope, source=source)
    hook = _hook_of(record["method"])
    if hook is not None:
        hook(found, kg.name, tuple(scope), {k: record[k] for k in HOOK_KEYS})
    return record


def feedback_tool(kg: "KnowledgeGraph", *, store: Any = None, scope: Sequence[str] = (), name: str = "feedback") -> Any:
    """A LangChain tool an agent calls to report which evidence of an earlier run helped, which
    misled, and whether the answer held (``source="agent"``). Bad ids come back as an observation
    the agent can act on, not an exception."""
    from langchain_core.tools import StructuredTool
    from pydantic import BaseModel, Field

    from langgraph_kgmem.errors import KgmemInputError

    class Args(BaseModel):
        run_id: str = Field(description="the run_id of the knowledge-graph answer this feedback is about")
        useful: list[str] = Field(default_factory=list, description="evidence ids that helped answer")
        wrong: list[str] = Field(default_factory=list, description="evidence ids that were wrong or misleading")
        verdict: Literal["correct", "wrong", "partial"] | None = Field(
            None, description="whether the answer turned out correct, wrong or partly right")

    def run(run_id: str, useful: list[str] | None = None, wrong: list[str] | None = None,
            verdict: str | None = None) -> str:
        try:
            rec = give_feedback(kg, run_id, useful=useful or (), wrong=wrong or (), verdict=verdict,  # type: ignore[arg-type]
                                store=store, scope=scope, source="agent")
        except KgmemInputError as exc:
            return f"feedback not recorded: {exc}"
        return f"feedback recorded for run {rec['run_id']}: {len(rec['useful'])} useful, {len(rec['wrong'])} wrong"

    return StructuredTool.from_function(
        run, name=name, args_schema=Args,
        description="Report which evidence of an earlier knowledge-graph answer helped or misled, by its run_id "
                    "and evidence ids; later answers to similar questions rank that evidence accordingly.")
