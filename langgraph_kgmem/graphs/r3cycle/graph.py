"""R3-Cycle's factory: validates the options and the environment, binds the shared state, wires
the nodes."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any, Unpack

from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.common import InputState, method_model, require
from langgraph_kgmem.graphs.r3cycle import nodes
from langgraph_kgmem.graphs.r3cycle.deps import R3Deps
from langgraph_kgmem.graphs.r3cycle.options import R3cycleKwargs, R3cycleOptions
from langgraph_kgmem.graphs.r3cycle.schemas import R3Output, R3State
from langgraph_kgmem.llm import is_offline
from langgraph_kgmem.agent_tools.graph_env import GraphEnv

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


def create_r3cycle_graph(kg_or_graph_env: "KnowledgeGraph | GraphEnv", *, model: Any = None,
                         store: "BaseStore | None" = None, retry_policy: RetryPolicy | None = None,
                         **options: Unpack[R3cycleKwargs]) -> StateGraph:
    """Build the R3-Cycle graph (uncompiled); ``reflection=False`` gives plain Graph-CoT.

    Args:
        kg_or_graph_env: a :class:`~langgraph_kgmem.KnowledgeGraph` or a
            :class:`~langgraph_kgmem.agent_tools.GraphEnv` over one (e.g. loaded with ``load_grbench``);
            the tools run on the environment's methods.
        model: a chat model that supports ``bind_tools``, ``None`` (``$KGMEM_MODEL``) or
            ``"offline"`` (heuristic agent :func:`~.offline.offline_action`, offline self-check and
            reflection). Overridable per run with ``context={"model": m}``.
        retry_policy: a LangGraph ``RetryPolicy`` for every LLM call of the graph (timeouts, rate
            limits and 5xx errors are retried with backoff, then the step falls back); ``None``:
            :data:`~langgraph_kgmem.llm.DEFAULT_RETRY_POLICY`.
        store: BaseStore for trajectories/reflections (default: the compiled graph's store).
        **options: :class:`~langgraph_kgmem.graphs.r3cycle.options.R3cycleOptions` (each described
            there: the verifier, the step and retry budgets, reflection, prompts, reuse), validated
            here; each is the run's default, and every one but ``reflection`` and ``memory_scope``
            can be overridden per run: ``app.invoke(inputs, context={"max_steps": 4})``.

    Returns:
        An uncompiled ``StateGraph``; output keys ``answer``, ``evidence``, ``usage``, ``method``
        (``"r3cycle"`` or ``"graphcot"``), ``run_id``, ``attempts``, ``reflections``.

    Raises:
        KgmemInputError: an option is out of range or the environment/verifier has the wrong type
            (the message names it); at run start, the same for the run's ``context``, or an option
            fixed at build in it.
        ConfigurationError: no model is configured, or the model cannot call tools.

    Example:
        >>> from langgraph_kgmem import KnowledgeGraph
        >>> from langgraph_kgmem.agent_tools.graphqa import make_domain_graph
        >>> from langgraph_kgmem.agent_tools import load_grbench
        >>> kg = KnowledgeGraph.in_memory(name="books")
        >>> _ = load_grbench(kg, make_domain_graph(seed=0))
        >>> cp, st = kg.persistence()
        >>> app = create_r3cycle_graph(kg, model="offline").compile(checkpointer=cp, store=st)
        >>> out = app.invoke({"question": 'Who is the author of the book "The Last Letters"?'},
        ...                  {"configurable": {"thread_id": "doc"}})
        >>> out["answer"], out["method"]
        ('Clara Novak', 'r3cycle')
    """
    if isinstance(kg_or_graph_env, GraphEnv):
        env = kg_or_graph_env
    elif hasattr(kg_or_graph_env, "nearest") and hasattr(kg_or_graph_env, "edges_of"):
        env = GraphEnv(kg_or_graph_env)  # type: ignore[arg-type]
    else:
        raise KgmemInputError(f"kg_or_graph_env must be a KnowledgeGraph or a GraphEnv, got "
                              f"{type(kg_or_graph_env).__name__}")
    opts = R3cycleOptions.build(**options)
    deps = R3Deps(env, method_model(model, retry_policy), store, opts)
    require(deps.label, model=deps.model, tool_calling=True)   # the factory's model: refused when the graph is built
    if not is_offline(deps.model):
        deps.bind(deps.model)

    def bound(fn: Any) -> Any:
        return partial(fn, deps=deps)

    builder = StateGraph(R3State, input_schema=InputState, output_schema=R3Output, context_schema=R3cycleOptions)
    for name in ("start_run", "reason", "act", "record", "verify", "reflect", "replan", "finish_run"):
        builder.add_node(name, bound(getattr(nodes, name)))
    builder.add_edge(START, "start_run")
    builder.add_conditional_edges("start_run", nodes.after_start, ["reason", "finish_run"])
    builder.add_edge("reason", "act")
    builder.add_edge("act", "record")
    builder.add_conditional_edges("record", partial(nodes.after_record, reflection=opts.reflection),
                                  ["reason", "verify", "finish_run"])
    builder.add_conditional_edges("verify", bound(nodes.after_verify), ["reflect", "finish_run"])
    builder.add_conditional_edges("reflect", nodes.after_reflect)
    builder.add_edge("replan", "reason")
    builder.add_edge("finish_run", END)
    return builder
