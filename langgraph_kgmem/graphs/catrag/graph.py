"""CatRAG's factory: validates the options, prepares the KG once, wires the nodes."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy

from langgraph_kgmem.graphs.catrag import nodes
from langgraph_kgmem.graphs.catrag.calibration import calibrated
from langgraph_kgmem.graphs.catrag.index import prepare_catrag_kg
from langgraph_kgmem.graphs.catrag.options import CatragOptions
from langgraph_kgmem.graphs.catrag.schemas import CatragOutput, CatragState
from langgraph_kgmem.graphs.common import InputState, method_model

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


def create_catrag_graph(kg: "KnowledgeGraph", *, model: Any = None, store: Any = None,
                        retry_policy: RetryPolicy | None = None, **options: Any) -> StateGraph:
    """Build the CatRAG graph (uncompiled); all three switches off = plain HippoRAG 2.

    Args:
        kg: the knowledge graph (synonym edges are added once here, see :func:`prepare_catrag_kg`).
        model: a LangChain chat model, ``"offline"`` (heuristics, extractive answer) or ``None``
            (``$KGMEM_MODEL``). Overridable per run with ``context={"model": m}``.
        retry_policy: a LangGraph ``RetryPolicy`` for every LLM call of the graph (timeouts, rate
            limits and 5xx errors are retried with backoff, then the step falls back); ``None``:
            :data:`~langgraph_kgmem.llm.DEFAULT_RETRY_POLICY`.
        store: BaseStore for the cached neighbour summaries (default: the compiled graph's store).
        **options: :class:`~langgraph_kgmem.graphs.catrag.options.CatragOptions`, validated here; each
            is the run's default, and every one but the three switches, ``answer`` and the synonym
            edges can be overridden per run: ``app.invoke(inputs, context={"top_passages": 3})``.
        prompts: prompt overrides, name -> template (``filter``, ``ner``, ``score``, ``summary``: the
            ``PROMPTS`` of :mod:`~langgraph_kgmem.graphs.catrag.prompts`, which lists their placeholders).
        anchoring / dynamic_weighting / key_fact_boost: CatRAG's three additions.
        top_facts, filter_keep: facts retrieved / kept by the recognition filter.
        passage_weight: reset weight of every passage (× its min-max normalised dense score).
        damping: PPR probability of following an edge. epsilon: anchor reset mass (÷ its passages).
        n_seed, k_edge, tau: seeds re-weighted, neighbours scored per seed, summary threshold.
        beta: key-fact passage boost (× (1 + β)). top_passages: evidence size; rank_depth: ranked
            passages reported in ``passages``.
        offline_fact_threshold, anchor_threshold: offline fact filter cutoff (a fact must also
            have an entity the question names) and the minimum cosine for mapping a query entity
            to an entity node.
        answer: ``False`` skips the answer step (retrieval only).
        llm_concurrency: how many of the dynamic-weighting step's independent LLM calls (the
            neighbour summaries, then one score per seed) run at once; 1 = one after another.
        ppr_method, ppr_eps: the PPR algorithm (see ``KnowledgeGraph.ppr``): ``"auto"`` (default) is
            forward push only where push's own error bound certifies the top passages and push costs
            less; ``"exact"`` / ``"push"`` force one. ``ppr_eps``: push's residual threshold.
        dense_fusion: ``True`` (default): the final passage ranking takes the PPR ranking and the
            dense ranking of the passages by cosine with the question in turns, PPR first
            (:func:`~langgraph_kgmem.ranking.interleave`): the top ``2n`` holds PPR's top ``n`` and
            vector search's top ``n``, so a passage vector search ranks high is not lost when the
            walk's mass sits elsewhere; it costs no LLM call and one sort of the dense scores the
            PPR reset already computed. ``False``: passages ranked by PPR mass alone (the paper).
        fusion / fusion_weak / fusion_strong: with ``dense_fusion``, ``"fixed"`` (default) is the
            turn-taking above; ``"adaptive"`` lets PPR decide per question: its confidence is the
            top two passages' share of the top ``2 · top_passages`` passages' mass (0 when no
            question entity linked); below ``fusion_weak`` PPR gets one of the ``top_passages``
            evidence places (vector search keeps all but one of its top passages), from
            ``fusion_strong`` on the evidence is PPR's own ranking, between them the two take
            turns; ``ppr["fusion"]`` records the signals, the confidence and PPR's share
            (:func:`~langgraph_kgmem.ranking.adaptive_fuse`).

        experience / experience_weight / experience_gate: read the shared experience layer
            (``docs/memory.md``; on by default, off in the hipporag2 preset): passages credited by
            feedback on questions whose cosine with this one passes ``experience_gate`` become PPR
            seeds, discredited ones lose
            their in-edges, each by at most ``experience_weight``; ``ppr["experience"]`` lists the
            credit read. experience_distractor_after: a passage marked wrong in this many runs
            (and useful in none) reads as a distractor for every question (0: never).
            memory_scope: tenant labels of the run records and experience namespaces.
        calibration: use the ranking setting the tenant's feedback chose (``docs/memory.md``).
        reuse / reuse_similarity: start from a confirmed earlier run of the same question, or of one
            reworded (cosine at least ``reuse_similarity``), by any method of this tenant
            (``docs/memory.md``; off by default): its passages seed PageRank, the fact filter,
            anchoring and edge scoring take their offline heuristics, and where the evidence is
            all among the passages that run was given its answer is given again without a call;
            ``reused`` says which run.

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


__all__ = ["create_catrag_graph"]
