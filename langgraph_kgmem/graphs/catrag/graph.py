"""CatRAG's factory: validates the options, prepares the KG once, wires the nodes."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Unpack

from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy

from langgraph_kgmem.graphs.catrag import nodes
from langgraph_kgmem.graphs.catrag.calibration import calibrated
from langgraph_kgmem.graphs.catrag.index import kg_index, prepare_catrag_kg
from langgraph_kgmem.graphs.catrag.options import CatragKwargs, CatragOptions
from langgraph_kgmem.graphs.catrag.schemas import CatragOutput, CatragState
from langgraph_kgmem.graphs.common import InputState, method_model

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


def create_catrag_graph(kg: "KnowledgeGraph", *, model: Any = None, store: Any = None,
                        retry_policy: RetryPolicy | None = None, **options: Unpack[CatragKwargs]) -> StateGraph:
    """Build the CatRAG graph (uncompiled); all three switches off = plain HippoRAG 2.

    Args:
        kg: the knowledge graph (synonym edges are added once here, see :func:`prepare_catrag_kg`).
        model: a LangChain chat model, ``"offline"`` (heuristics, extractive answer) or ``None``
            (``$KGMEM_MODEL``). Overridable per run with ``context={"model": m}``.
        retry_policy: a LangGraph ``RetryPolicy`` for every LLM call of the graph (timeouts, rate
            limits and 5xx errors are retried with backoff, then the step falls back); ``None``:
            :data:`~langgraph_kgmem.llm.DEFAULT_RETRY_POLICY`.
        store: BaseStore for the cached neighbour summaries (default: the compiled graph's store).
        **options: :class:`~langgraph_kgmem.graphs.catrag.options.CatragOptions` (each described
            there), validated here; each is the run's default, and every one but the three switches,
            ``answer``, the synonym edges and ``memory_scope`` can be overridden per run:
            ``app.invoke(inputs, context={"top_passages": 3})``.

    Returns:
        An uncompiled ``StateGraph``; output keys: answer, evidence, usage, method, run_id
        (``"catrag"`` or ``"hipporag2"``), facts, anchors, edge_weights, passages, ppr, fallback.
        With ``dense_fusion`` each passage carries its ``score`` (1 / its place), its ``ppr`` mass and its
        ``dense`` cosine.

    Raises:
        KgmemInputError: an unknown option, or one out of range (the message names it); at run
            start, the same for the run's ``context``.

    Example:
        >>> from langgraph_kgmem import KnowledgeGraph
        >>> kg = KnowledgeGraph.in_memory(name="doc")
        >>> _ = kg.add_documents([{"title": "Warsaw", "text": "Warsaw is the capital of Poland."}], model="offline")
        >>> app = create_catrag_graph(kg, model="offline").compile(store=kg.persistence()[1])
        >>> app.invoke({"question": "What is the capital of Poland?"})["method"]
        'catrag'
    """
    opts = CatragOptions.build(**options)
    deps = nodes.CatragDeps(kg=kg, model=method_model(model, retry_policy), options=opts, store=store,
                            calibrate=calibrated)
    prepare_catrag_kg(kg, threshold=opts.synonym_threshold, weight_scale=opts.synonym_weight)
    # the KG-wide index (PPR snapshot, passage rows, hubs) is built here, once per process, rather
    # than by the first question: a served graph is built at start-up, and its first user should
    # not wait for O(KG) work (a write since rebuilds it at the next question, as before)
    kg_index(kg)

    def bound(fn: Any) -> Any:
        return partial(fn, deps=deps)

    chain: list[tuple[str, Any]] = [("anchor_entities", nodes.anchor_entities)] if opts.anchoring else []
    if opts.dynamic_weighting:
        chain.append(("weight_edges", nodes.weight_edges))
    if opts.key_fact_boost:
        chain.append(("boost_key_facts", nodes.boost_key_facts))
    chain.append(("run_ppr", nodes.run_ppr))
    after_filter = chain[0][0]
    builder = StateGraph(CatragState, input_schema=InputState, output_schema=CatragOutput,
                         context_schema=CatragOptions)
    builder.add_node("retrieve_facts", bound(nodes.retrieve_facts))
    builder.add_node("filter_facts", bound(nodes.filter_facts))
    builder.add_node("rank_passages", bound(nodes.rank_passages))
    for name, fn in chain:
        builder.add_node(name, bound(fn))
    final = "answer" if opts.answer else END
    if opts.answer:
        builder.add_node("answer", bound(nodes.answer))
    builder.add_edge(START, "retrieve_facts")
    builder.add_edge("retrieve_facts", "filter_facts")
    builder.add_conditional_edges("filter_facts", partial(nodes.route_after_filter, after=after_filter),
                                  ["rank_passages", after_filter])
    for (a, _), (b, _) in zip(chain, chain[1:]):
        builder.add_edge(a, b)
    builder.add_edge("run_ppr", final)
    builder.add_edge("rank_passages", final)
    if opts.answer:
        builder.add_edge("answer", END)
    return builder
