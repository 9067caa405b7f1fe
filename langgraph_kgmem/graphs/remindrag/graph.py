"""ReMindRAG's factory: validates the options, adds synonym edges once, wires the nodes."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Mapping, Sequence

from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.types import RetryPolicy

from langgraph_kgmem.graphs.common import InputState, method_model
from langgraph_kgmem.graphs.remindrag import nodes
from langgraph_kgmem.graphs.remindrag.deps import RemindragDeps
from langgraph_kgmem.graphs.remindrag.options import RemindragOptions
from langgraph_kgmem.graphs.remindrag.schemas import ReMindOutput, ReMindState
from langgraph_kgmem.graphs.remindrag.view import GraphView

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


def create_remindrag_graph(
    kg: "KnowledgeGraph",
    *,
    model: Any = None,
    store: BaseStore | None = None,
    retry_policy: RetryPolicy | None = None,
    memory_scope: Sequence[str] | None = None,
    seeds_k: int = 2,
    alpha: float = 0.1,
    lam: float = 0.55,
    max_hops: int = 10, max_steps: int | None = None, max_replay_nodes: int = 64,
    synonym_threshold: float | None = None,
    decompose: bool = False, chunk_chars: int = 800,
    human_in_the_loop: bool = False,
    replay: bool = True, dense_fusion: bool = True, top_passages: int = 5,
    fusion: str = "fixed", fusion_weak: float = 0.0, fusion_strong: float = 1.01, experience: bool = False,
    reuse: bool = False, reuse_similarity: float = 0.8, prompts: Mapping[str, str] | None = None,
) -> StateGraph:
    """Build ReMindRAG's state machine over ``kg`` (uncompiled).

    Every option but ``memory_scope``, ``synonym_threshold`` and ``human_in_the_loop`` can be
    overridden per run: ``app.invoke(inputs, context={"max_hops": 3})``
    (:class:`~langgraph_kgmem.graphs.remindrag.options.RemindragOptions`).

    Args:
        kg: the knowledge graph.
        model: a LangChain chat model, ``None`` (``$KGMEM_MODEL``) or ``"offline"`` (no LLM:
            embedding/word-overlap heuristics for every decision, extractive answer). Overridable
            per run with ``context={"model": m}``.
        retry_policy: a LangGraph ``RetryPolicy`` for every LLM call of the graph (timeouts, rate
            limits and 5xx errors are retried with backoff, then the step falls back); ``None``:
            :data:`~langgraph_kgmem.llm.DEFAULT_RETRY_POLICY`.
        store: the BaseStore holding edge memories; default: the store the graph is compiled with.
        memory_scope: tenant labels inserted in the memory namespace, filled per run from
            ``config["configurable"]``: ``("{user_id}",)`` gives each user their own memory of this
            KG (``("kgmem", kg name, user, kind)``); ``None``: one memory per KG.
        seeds_k: seed entities per (sub-)question: of the ``5 × seeds_k`` entities nearest it by
            embedding, those it names (every content word of the name in it) first.
        alpha: weight of the node-embedding similarity in the replay weight ``w``.
        lam: replay threshold λ: memory replay follows an edge only when ``w > lam``.
        max_hops: traversal moves allowed per question, backward moves included.
        max_steps: total loop decisions (sufficiency checks + moves); default ``2*max_hops + 2``.
        max_replay_nodes: nodes memory replay may add (a bound on the DFS).
        synonym_threshold: if set, synonym edges at this cosine are added to ``kg`` once, now
            (``kg.add_synonym_edges``), so the walk can cross near-duplicate entities.
        decompose: split the question into sub-questions and seed each (one extra LLM call).
        chunk_chars: passages longer than this are condensed to their most question-related
            sentences in prompts.
        human_in_the_loop: a person chooses each traversal move instead of the LLM: the step
            calls LangGraph's ``interrupt`` with the candidates (forward neighbours, backward
            nodes, the offline heuristic's suggestion); resume with
            ``Command(resume="<node id>")`` or ``Command(resume={"direction": ..., "node_id": ...})``.
            A value that is not one of the offered ids interrupts again with the same candidates
            and an ``error`` saying what was wrong. Needs a checkpointer. A question that memory
            replay already answers is answered without a walk, so no interrupt happens: pass
            ``replay=False`` for a person to choose the moves of every question.
        experience: share the experience layer (``docs/memory.md``): replay also follows credited
            edges; a confirmed walk credits its effective edges and useful passages.
        replay: ``True`` (default): follow remembered edges first and walk only when what replay
            found is not sufficient. ``False``: every question starts from its seeds and walks (the
            memory is still written after each walk, and still ranks the candidates).
        dense_fusion: ``True`` (default): the passages handed to the answer step (and returned as
            ``evidence``) are the walk's passages fused with the dense ranking of every passage by
            cosine with the question (:func:`~langgraph_kgmem.graphs.common.fuse_with_dense`), cut
            at ``max(top_passages, passages the walk collected)``: vector search's top two, then the
            walk's finds (in discovery order) and vector search's next passages in turns. The walk
            and its memory are unchanged; no LLM call. ``False``: the walk's passages alone (the paper).
        top_passages: with ``dense_fusion``, the least number of passages in the evidence.
        reuse, reuse_similarity: start from a confirmed earlier run (any method) of this question or one at cosine
            ``reuse_similarity`` (``docs/memory.md``): its passages join S, no first sufficiency check.
        fusion, fusion_weak, fusion_strong: ``"adaptive"`` lets the walk's confidence decide its
            share of the evidence (:func:`~langgraph_kgmem.ranking.adaptive_fuse`; docs: dense fusion).
        prompts: prompt overrides by name (``PROMPTS`` of :mod:`~langgraph_kgmem.graphs.remindrag.prompts`).

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
    options = RemindragOptions.build(
        memory_scope=memory_scope, seeds_k=seeds_k, alpha=alpha, lam=lam, max_hops=max_hops, max_steps=max_steps,
        max_replay_nodes=max_replay_nodes, synonym_threshold=synonym_threshold, decompose=decompose,
        chunk_chars=chunk_chars, human_in_the_loop=human_in_the_loop, replay=replay, experience=experience, dense_fusion=dense_fusion,
        fusion=fusion, fusion_weak=fusion_weak, fusion_strong=fusion_strong,
        top_passages=top_passages, reuse=reuse, reuse_similarity=reuse_similarity, prompts=prompts or {})
    if synonym_threshold is not None:
        kg.add_synonym_edges(threshold=synonym_threshold)
    deps = RemindragDeps(kg=kg, view=GraphView(kg), model=method_model(model, retry_policy), options=options,
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
