"""KG-IRAG's factories: :func:`create_kgirag_graph` (the iterative loop) and
:func:`create_singlepass_graph` (the one-window baseline)."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Unpack

from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy

from langgraph_kgmem.graphs.common import InputState, method_model
from langgraph_kgmem.graphs.kgirag.nodes import (KgiragDeps, judge_retrieval, plan_query, retrieve_triples,
                                                 retrieve_window, route_after_judge, route_after_plan,
                                                 route_after_plan_singlepass, synthesize_answer)
from langgraph_kgmem.graphs.kgirag.options import KgiragKwargs, KgiragOptions, SinglepassKwargs
from langgraph_kgmem.graphs.kgirag.schemas import KgiragOutput, KgiragState

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


def create_kgirag_graph(kg: "KnowledgeGraph", *, model: Any = None, store: Any = None,
                        retry_policy: RetryPolicy | None = None, **options: Unpack[KgiragKwargs]) -> StateGraph:
    """Build the KG-IRAG graph (uncompiled).

    Args:
        kg: a KG holding records (``kg.add_records(...)``).
        model: a LangChain chat model, ``"offline"`` (rule-based plan/judge/answer, no LLM) or
            ``None`` (``$KGMEM_MODEL``). Overridable per run with ``context={"model": m}``.
        retry_policy: a LangGraph ``RetryPolicy`` for every LLM call of the graph (timeouts, rate
            limits and 5xx errors are retried with backoff, then the step falls back); ``None``:
            :data:`~langgraph_kgmem.llm.DEFAULT_RETRY_POLICY`.
        store: accepted for the common factory signature; KG-IRAG keeps no cross-session memory.
        **options: :class:`~langgraph_kgmem.graphs.kgirag.options.KgiragOptions` (each described
            there: ``t_max``, ``kappa``, ``step``, ``k0``, ``prompts``), validated here; each is the
            run's default and can be overridden per run: ``context={"t_max": 6}``.

    Returns:
        An uncompiled ``StateGraph``. Output keys: answer, evidence (the retrieved triples),
        usage, method ("kgirag"), plan, iterations, retrieved_triples, anchors, hops, stopped, events.

    Raises:
        KgmemInputError: an option is out of range, or a prompt override names no prompt or uses a
            placeholder its step does not fill.

    Example:
        >>> from langgraph_kgmem import KnowledgeGraph
        >>> kg = KnowledgeGraph.in_memory(name="doc")
        >>> rows = [{"time": f"2025-01-01 {h:02d}:00", "location": "Pier", "rain": r}
        ...         for h, r in enumerate([0, 0, 1.2, 0.4, 0, 0])]
        >>> _ = kg.add_records(rows, event_rule="rain > 0", event_name="rain")
        >>> app = create_kgirag_graph(kg, model="offline").compile()
        >>> q = ("I would meet rain at Pier on a 2-hour trip leaving at 2025-01-01 01:00. What is the earliest "
        ...      "departure time after then, at most 4 hours later, that avoids rain for the whole trip?")
        >>> out = app.invoke({"question": q})
        >>> out["answer"], out["anchors"]
        ('2025-01-01 04:00', ['2025-01-01 02:00', '2025-01-01 04:00'])
    """
    deps = KgiragDeps(kg=kg, model=method_model(model, retry_policy),
                      options=KgiragOptions.build(**options))

    builder = StateGraph(KgiragState, input_schema=InputState, output_schema=KgiragOutput,
                         context_schema=KgiragOptions)
    builder.add_node("plan_query", partial(plan_query, deps=deps))
    builder.add_node("retrieve_triples", partial(retrieve_triples, deps=deps))
    builder.add_node("judge_retrieval", partial(judge_retrieval, deps=deps))
    builder.add_node("synthesize_answer", partial(synthesize_answer, deps=deps))
    builder.add_edge(START, "plan_query")
    builder.add_conditional_edges("plan_query", route_after_plan, ["retrieve_triples", "synthesize_answer"])
    builder.add_edge("retrieve_triples", "judge_retrieval")
    builder.add_conditional_edges("judge_retrieval", partial(route_after_judge, deps=deps),
                                  ["retrieve_triples", "synthesize_answer"])
    builder.add_edge("synthesize_answer", END)
    return builder


def create_singlepass_graph(kg: "KnowledgeGraph", *, model: Any = None, store: Any = None,
                            retry_policy: RetryPolicy | None = None,
                            **options: Unpack[SinglepassKwargs]) -> StateGraph:
    """Single-pass baseline: the same plan, one retrieval of the whole horizon window (detect:
    the trip window; earliest: t+1 .. t+L+Δt−1; latest: t−L .. t+Δt−2), the same answer step.
    Output keys and ``prompts`` as :func:`create_kgirag_graph` (method "singlepass"); of
    :class:`~langgraph_kgmem.graphs.kgirag.options.KgiragOptions` it reads ``kappa`` and ``prompts``."""
    deps = KgiragDeps(kg=kg, model=method_model(model, retry_policy),
                      options=KgiragOptions.build(**{**options, "t_max": 1}), method="singlepass")

    builder = StateGraph(KgiragState, input_schema=InputState, output_schema=KgiragOutput,
                         context_schema=KgiragOptions)
    builder.add_node("plan_query", partial(plan_query, deps=deps))
    builder.add_node("retrieve_window", partial(retrieve_window, deps=deps))
    builder.add_node("synthesize_answer", partial(synthesize_answer, deps=deps))
    builder.add_edge(START, "plan_query")
    builder.add_conditional_edges("plan_query", route_after_plan_singlepass, ["retrieve_window", "synthesize_answer"])
    builder.add_edge("retrieve_window", "synthesize_answer")
    builder.add_edge("synthesize_answer", END)
    return builder
