"""The router's factory: validates the options, builds and compiles every method's graph once,
wires ``route_question`` → ``run_<method>`` (→ ``run_<costlier>``) → ``finish_route``."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Unpack

from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy

from langgraph_kgmem.errors import KgmemInputError, MissingRequirementError
from langgraph_kgmem.graphs.common import InputState, method_model
from langgraph_kgmem.graphs.router import nodes
from langgraph_kgmem.graphs.router.options import DEFAULT_METHODS, RouterKwargs, RouterOptions
from langgraph_kgmem.graphs.router.policy import family
from langgraph_kgmem.graphs.router.schemas import RouterOutput, RouterState

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph

ROUTER = "router"


def _build_methods(kg: Any, model: Any, store: Any, retry_policy: Any,
                   opts: RouterOptions) -> tuple[dict[str, Any], dict[str, str], dict[str, str]]:
    """Compile each method's graph once: (compiled apps, methods left out and why, summaries).
    A method named explicitly that cannot be built raises; a default one is left out, with its reason."""
    from langgraph_kgmem.graphs.registry import get_method

    explicit = opts.methods is not None
    names = list(dict.fromkeys(opts.methods or DEFAULT_METHODS))
    if ROUTER in names:
        raise KgmemInputError("router: methods cannot include the router itself; name the methods it routes to")
    apps: dict[str, Any] = {}
    unavailable: dict[str, str] = {}
    summaries: dict[str, str] = {}
    for name in names:
        try:
            entry = get_method(name)
        except KgmemInputError:
            if explicit:
                raise
            unavailable[name] = "not installed"
            continue
        options = {**entry.preset, **dict(opts.method_options.get(name, {}))}
        if opts.memory_scope and "memory_scope" in entry.spec.options.model_fields:
            options.setdefault("memory_scope", tuple(opts.memory_scope))
        if retry_policy is not None:
            options["retry_policy"] = retry_policy
        try:
            builder = entry.factory(kg, model=model, store=store, **options)
        except MissingRequirementError as exc:
            if explicit:
                raise
            unavailable[name] = str(exc)
            continue
        apps[name] = builder.compile(store=store, name=name) if store is not None else builder.compile(name=name)
        summaries[name] = entry.summary
    unknown = set(opts.method_options) - set(names)
    if unknown:
        raise KgmemInputError(f"router: method_options names {sorted(unknown)}, which the router does not run "
                              f"(methods: {', '.join(names)})")
    if not apps:
        raise MissingRequirementError(f"router: none of {', '.join(names)} can be built here: "
                                      + "; ".join(f"{k}: {v}" for k, v in unavailable.items()))
    return apps, unavailable, summaries


def create_router_graph(kg: "KnowledgeGraph", *, model: Any = None, store: Any = None,
                        retry_policy: RetryPolicy | None = None, **options: Unpack[RouterKwargs]) -> StateGraph:
    """Build the router graph (uncompiled): one question, the method that fits it.

    Args:
        kg: the knowledge graph (documents, records, a typed graph, or all three).
        model: a LangChain chat model, ``"offline"`` (rules and learned statistics only; every
            method offline) or ``None`` (``$KGMEM_MODEL``); the routed methods use it too.
            Overridable per run with ``context={"model": m}``.
        store: BaseStore for the route statistics and the methods' memories (default: the compiled
            graph's store). Without one the router routes by its rules alone and learns nothing.
        retry_policy: passed to every method's factory (``None``: their default).
        **options: :class:`~langgraph_kgmem.graphs.router.options.RouterOptions` (each described
            there): ``methods`` (default
            :data:`~langgraph_kgmem.graphs.router.options.DEFAULT_METHODS`, those the model can
            drive; each compiled once, here), ``budget``, ``escalate``, ``escalate_below``,
            ``ask_model``, ``cover_top``, ``cover_keep``, ``learn``, ``min_runs``, ``memory_scope``,
            ``method_options``.

    Returns:
        An uncompiled ``StateGraph``; output keys: answer, evidence, usage (the methods' calls and
        the routing call, if any), method (``"router"``), model, route, run_id, result, passages (the
        router's passage ranking: :mod:`~langgraph_kgmem.graphs.router.cover`).

    Raises:
        KgmemInputError: an unknown option or method, or one out of range (the message names it).
        MissingRequirementError: a method named in ``methods`` cannot run with this model (e.g.
            R3-Cycle without tool calling), or no method can be built.

    Example:
        >>> from langgraph_kgmem import KnowledgeGraph
        >>> from langgraph.store.memory import InMemoryStore
        >>> kg = KnowledgeGraph.in_memory(name="doc")
        >>> _ = kg.add_documents([{"title": "Warsaw", "text": "Warsaw is the capital of Poland."}], model="offline")
        >>> app = create_router_graph(kg, model="offline", methods=("hipporag2", "catrag")).compile(store=InMemoryStore())
        >>> out = app.invoke({"question": "What is the capital of Poland?"})
        >>> out["method"], out["route"]["form"], out["route"]["first"]
        ('router', 'lookup', 'catrag')
    """
    opts = RouterOptions.build(**options)
    mdl = method_model(model, retry_policy)
    apps, unavailable, summaries = _build_methods(kg, mdl, store, retry_policy, opts)
    deps = nodes.RouterDeps(kg=kg, model=mdl, options=opts, store=store, apps=apps, unavailable=unavailable,
                            summaries=summaries)
    runs = [nodes.node_name(m) for m in apps]
    builder = StateGraph(RouterState, input_schema=InputState, output_schema=RouterOutput, context_schema=RouterOptions)
    builder.add_node("route_question", partial(nodes.route_question, deps=deps), destinations=tuple(runs))
    for m in apps:   # a run escalates to a method of another family (policy.ladder), or finishes
        others = sorted(c for c in apps if family(c) != family(m))
        builder.add_node(nodes.node_name(m), partial(nodes.run_method, name=m, deps=deps),
                         destinations=tuple(nodes.node_name(c) for c in others) + (nodes.FINISH,))
    builder.add_node(nodes.FINISH, partial(nodes.finish_route, deps=deps))
    builder.add_edge(START, "route_question")
    builder.add_edge(nodes.FINISH, END)
    return builder
