"""AutoPrunedRetriever's factory: validates the options, binds the shared state, wires the nodes;
and :func:`sync_codebook`, the codebook's indexing outside a run."""

from __future__ import annotations

from functools import partial
from typing import Any, Literal, Sequence, Unpack

from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy

from langgraph_kgmem.graphs.autopruned import nodes
from langgraph_kgmem.graphs.autopruned.codebook import ALIAS_THRESHOLD, LAYER2_FLOOR, Codebook
from langgraph_kgmem.graphs.autopruned.deps import AutoprunedDeps
from langgraph_kgmem.graphs.autopruned.options import AutoprunedKwargs, AutoprunedOptions
from langgraph_kgmem.graphs.autopruned.schemas import AutoPrunedState
from langgraph_kgmem.graphs.common import InputState, method_model

NODE_ORDER = ("sync_facts", "encode_question", "retrieve_coarse", "rerank_fine", "select_runs", "pack_prompt",
              "answer", "memorize")


def create_autopruned_graph(kg: Any, *, model: Any = None, store: Any = None, retry_policy: RetryPolicy | None = None,
                            **options: Unpack[AutoprunedKwargs]) -> StateGraph:
    """Build the AutoPrunedRetriever graph (uncompiled) over ``kg``.

    Args:
        kg: the :class:`~langgraph_kgmem.KnowledgeGraph`; its relation edges become the fact runs.
        model: a LangChain chat model, ``None`` ($KGMEM_MODEL) or ``"offline"`` (no LLM: offline
            triple parser and extractive answers); a run may override it with
            ``app.invoke(..., context={"model": m})``.
        store: the LangGraph ``BaseStore`` for the codebook; default: the store the graph is compiled with.
        retry_policy: a LangGraph ``RetryPolicy`` for every LLM call of the graph (timeouts, rate
            limits and 5xx errors are retried with backoff, then the step falls back); ``None``:
            :data:`~langgraph_kgmem.llm.DEFAULT_RETRY_POLICY`.
        **options: :class:`~langgraph_kgmem.graphs.autopruned.options.AutoprunedOptions` (each
            described there, at length in its module's docstring), validated here; each is the run's
            default, and every one but ``consolidate``, ``memory_scope`` and the options that shape
            the stored codebook (``tau_run``, ``phrase_facts``, ``alias_threshold``,
            ``entity_budget``, ``layer2_min_cos``) can be overridden per run:
            ``app.invoke(inputs, context={"fine_m": 5})``.

    Returns:
        An uncompiled ``StateGraph``; output keys ``answer``, ``evidence``, ``usage``, ``method``,
        ``packed_prompt``, ``encoding``, ``prompt_tokens_packed``, ``selected_runs``, ``reused``,
        ``replayed_answer``, ``answer_by``, ``answer_memory``, ``codebook_size`` and more (see
        :class:`~langgraph_kgmem.graphs.autopruned.schemas.AutoPrunedState`).

    Raises:
        KgmemInputError: an unknown option, or one out of range (the message names it); at run
            start, the same for the run's ``context``, or an option fixed at build in it.

    Example:
        >>> from langgraph_kgmem import KnowledgeGraph
        >>> from langgraph.store.memory import InMemoryStore
        >>> kg = KnowledgeGraph.in_memory(name="doc")
        >>> _ = kg.add_documents([{"title": "Warsaw", "text": "Warsaw is the capital of Poland."}], model="offline")
        >>> app = create_autopruned_graph(kg, model="offline").compile(store=InMemoryStore())
        >>> out = app.invoke({"question": "What is the capital of Poland?"})
        >>> out["method"], out["encoding"], out["packed_prompt"].splitlines()[1]
        ('autopruned', 'sentences', '[Warsaw] Warsaw is the capital of Poland.')
    """
    opts = AutoprunedOptions.build(**options)
    deps = AutoprunedDeps(kg, method_model(model, retry_policy), store, opts)
    if store is not None and deps.memory_scope is None:
        # the stored codebook and the tables the coarse stage reads whole are made here, once per
        # process (O(codebook)), not by the first question; with the compiled graph's store or a
        # per-tenant scope the codebook is known only at run time
        deps.warm(())
    builder = StateGraph(AutoPrunedState, input_schema=InputState, context_schema=AutoprunedOptions)
    order = [*NODE_ORDER, *(["consolidate"] if opts.consolidate else [])]
    for name in order:
        builder.add_node(name, partial(getattr(nodes, name), deps=deps))
    builder.add_edge(START, order[0])
    for a, b in zip(NODE_ORDER, NODE_ORDER[1:]):
        builder.add_edge(a, b)
    if opts.consolidate:
        builder.add_conditional_edges("memorize", nodes.route_after_memorize, ["consolidate", END])
        builder.add_edge("consolidate", END)
    else:
        builder.add_edge("memorize", END)
    return builder


def sync_codebook(kg: Any, store: Any, *, tau_run: float = 0.7,
                  phrase_facts: Literal["uncovered", "always", "never"] = "uncovered",
                  alias_threshold: float = ALIAS_THRESHOLD, entity_budget: int | None = None,
                  layer2_min_cos: float = LAYER2_FLOOR, scope: Sequence[str] = ()) -> dict[str, int]:
    """Index every KG document not yet in the codebook (of tenant ``scope``: the labels a graph's
    ``memory_scope`` fills in) and consolidate, outside a graph run (e.g. right after ingestion,
    so the first question does not pay for it): its entity, relation and line vectors are embedded
    here and kept in the KG's vector store (:meth:`~langgraph_kgmem.kg.graph.KnowledgeGraphCore.text_vectors`),
    where every later run and process reads them. Returns the codebook size."""
    book = Codebook.load(store, kg.name, tuple(scope))
    book.sync_facts(kg, phrase_facts=phrase_facts, segment_opts={"tau": tau_run})
    book.consolidate(kg, alias_threshold=alias_threshold, entity_budget=entity_budget, layer2_min_cos=layer2_min_cos)
    # the relation table too (entity and line vectors were made above): every symbol is embedded
    # here, once, and kept in the KG's vector store, so no question pays for the KG's size
    book.relation_vectors(kg)
    book.save(store)
    return book.size()
