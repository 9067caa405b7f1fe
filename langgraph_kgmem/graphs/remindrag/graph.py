"""ReMindRAG's factory: validates the options, adds synonym edges once, wires the nodes."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Unpack

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.types import RetryPolicy

from langgraph_kgmem.graphs.common import InputState, method_model
from langgraph_kgmem.graphs.remindrag import nodes
from langgraph_kgmem.graphs.remindrag.deps import RemindragDeps
from langgraph_kgmem.graphs.remindrag.options import RemindragKwargs, RemindragOptions
from langgraph_kgmem.graphs.remindrag.schemas import ReMindOutput, ReMindState
from langgraph_kgmem.graphs.remindrag.view import GraphView

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


def create_remindrag_graph(kg: "KnowledgeGraph", *, model: Any = None, store: BaseStore | None = None,
                           retry_policy: RetryPolicy | None = None, **options: Unpack[RemindragKwargs]) -> StateGraph:
    """Build ReMindRAG's state machine over ``kg`` (uncompiled).

    Args:
        kg: the knowledge graph.
        model: a LangChain chat model, ``None`` (``$KGMEM_MODEL``) or ``"offline"`` (no LLM:
            embedding/word-overlap heuristics for every decision, extractive answer). Overridable
            per run with ``context={"model": m}``.
        retry_policy: a LangGraph ``RetryPolicy`` for every LLM call of the graph (timeouts, rate
            limits and 5xx errors are retried with backoff, then the step falls back); ``None``:
            :data:`~langgraph_kgmem.llm.DEFAULT_RETRY_POLICY`.
        store: the BaseStore holding edge memories; default: the store the graph is compiled with.
        **options: :class:`~langgraph_kgmem.graphs.remindrag.options.RemindragOptions` (each described
            there), validated here; each is the run's default, and every one but ``memory_scope``,
            ``synonym_threshold`` and ``human_in_the_loop`` can be overridden per run:
            ``app.invoke(inputs, context={"max_hops": 3})``.

    Returns:
        An uncompiled ``StateGraph``; input ``{"question"}``, output ``answer``, ``evidence``,
        ``usage``, ``method``, ``path``, ``replayed``, ``memory_updates``, ``seed_ids``, ``stop_reason``
        (and ``fusion`` with adaptive fusion).

    Raises:
        KgmemInputError: an option is out of range (the message names it); at run start, the same
            for the run's ``context``, or an option fixed at build in it.

    Example:
        >>> from langgraph_kgmem import KnowledgeGraph, create_remindrag_graph
        >>> kg = KnowledgeGraph.in_memory(name="doc")
        >>> _ = kg.add_documents(["Ada Lovelace worked with Charles Babbage."], model="offline")
        >>> cp, st = kg.persistence()
        >>> app = create_remindrag_graph(kg, model="offline").compile(checkpointer=cp, store=st)
        >>> out = app.invoke({"question": "Who worked with Ada Lovelace?"}, {"configurable": {"thread_id": "1"}})
        >>> out["method"]
        'remindrag'
    """
    opts = RemindragOptions.build(**options)
    if opts.synonym_threshold is not None:
        kg.add_synonym_edges(threshold=opts.synonym_threshold)
    # its seed searches (entities, passages) run on a server KG's in-process copies of those
    # vectors: read them now, not at the first question
    kg.prefetch_scores(("entity",))
    kg.prefetch_scores(("chunk",))
    deps = RemindragDeps(kg=kg, view=GraphView(kg), model=method_model(model, retry_policy), options=opts,
                         store=store)

    def bound(fn: Any) -> Any:
        return partial(fn, deps=deps)

    builder = StateGraph(ReMindState, input_schema=InputState, output_schema=ReMindOutput,
                         context_schema=RemindragOptions)
    for name in ("retrieve_seeds", "replay_memory", "check_sufficiency", "traverse_step", "answer", "memorize"):
        builder.add_node(name, bound(getattr(nodes, name)))
    builder.add_edge(START, "retrieve_seeds")
    builder.add_edge("retrieve_seeds", "replay_memory")
    builder.add_edge("replay_memory", "check_sufficiency")
    builder.add_conditional_edges("check_sufficiency", bound(nodes.after_check), ["traverse_step", "answer"])
    builder.add_conditional_edges("traverse_step", bound(nodes.after_move), ["check_sufficiency", "traverse_step", "answer"])
    builder.add_conditional_edges("answer", nodes.after_answer, ["memorize", END])
    builder.add_edge("memorize", END)
    return builder
