"""Every method as a tool for a ReAct-style agent (``langchain.agents.create_agent``, ``ToolNode``, ...).

- :func:`create_method_tool`: one method compiled over a KG (with a store, so its cross-session
  memory keeps working between calls) and wrapped by :func:`~langgraph_kgmem.graphs.common.method_as_tool`.
  The tool takes ``{"question": str}`` and returns ``{"answer", "evidence_ids", "evidence", "llm_calls"}``
  (JSON in the agent's ``ToolMessage``), so the agent can cite the KG ids it relied on; the answer
  and evidence are document text and come inside the prompt fence (``<data>...</data>``).
- :func:`create_all_tools`: the available methods' tools plus the graph-access tools
  (``RetrieveNode``, ``NodeFeature``, ``NeighbourCheck``, ``NodeDegree``) of ``create_kgmem_tools``.

Example:
    from langchain.agents import create_agent
    from langgraph_kgmem.agents import create_all_tools
    agent = create_agent(model, create_all_tools(kg, model="offline"))
    agent.invoke({"messages": [("user", "Where was Marie Curie born?")]})
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Sequence

from langchain_core.tools import BaseTool

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.common import method_as_tool
from langgraph_kgmem.graphs.registry import METHODS, get_factory, get_method, registered

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

    from langgraph_kgmem.knowledge_graph import KnowledgeGraph

_RESULT = (" Input: one self-contained question. Returns JSON: `answer` (short text), `evidence_ids` (KG ids "
           "of the chunks/facts used) and `evidence` (their first lines); answer and evidence come between "
           "<data> and </data>.")



def _descriptions() -> dict[str, str]:
    return {name: entry.agent_description for name, entry in registered().items()}


def __getattr__(name: str) -> Any:
    # METHOD_DESCRIPTIONS (what an agent reads per method) and RECORD_METHODS come from the
    # methods' specs, read when first asked for: importing this module imports no method
    if name == "METHOD_DESCRIPTIONS":
        return _descriptions()
    if name == "RECORD_METHODS":
        return frozenset(n for n, e in registered().items() if "records" in e.spec.requirements)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _tool_name(method: str) -> str:
    return "ask_" + re.sub(r"[^a-zA-Z0-9_-]", "_", method)


def method_available(method: str) -> bool:
    """Whether ``method`` is registered and its package imported in this installation (the
    registry leaves out a package whose dependencies are missing)."""
    return method in registered()


def create_method_tool(kg: "KnowledgeGraph", method: str, *, model: Any = None, store: "BaseStore | None" = None,
                       name: str | None = None, description: str | None = None, **options: Any) -> BaseTool:
    """Method ``method`` over ``kg`` as a LangChain tool.

    Args:
        kg: the knowledge graph to answer from.
        method: a registry name (``remindrag``, ``catrag``, ``hipporag2``, ``autopruned``, ``kgirag``,
            ``r3cycle``, ``graphcot``).
        model: the method's own model (chat model, ``"offline"``, or ``None`` for ``$KGMEM_MODEL``);
            independent of the agent's model.
        store: where the method keeps cross-session memory; default: the KG's own store
            (``kg.persistence()[1]``), so memory persists between calls and sessions.
        name: tool name (default ``ask_<method>``); description: what the agent reads (default: a
            per-method description saying when to use it and what it returns).
        **options: method options, on top of the registry preset.

    Returns:
        A ``StructuredTool`` (sync and async) returning ``{answer, evidence_ids, evidence, llm_calls}``.

    Raises:
        KgmemInputError: unknown or unavailable method, or invalid options (named by the method).
    """
    factory, preset = get_factory(method)
    preset.update(options)
    if store is None:
        store = kg.persistence()[1]
    builder = factory(kg, model=model, store=store, **preset)
    from langgraph_kgmem.tracing import with_tracing

    app = with_tracing(builder.compile(store=store, name=method), method, kg, model=model)
    desc = description or (get_method(method).agent_description + _RESULT)
    return method_as_tool(app, name=name or _tool_name(method), description=desc)


def create_all_tools(kg: "KnowledgeGraph", *, methods: Sequence[str] | None = None, model: Any = None,
                     store: "BaseStore | None" = None, graph_tools: bool = True) -> list[BaseTool]:
    """Tools for every method (default: every available one, baselines included) plus the graph tools.

    Explicitly requested ``methods`` must exist; with ``methods=None`` the ones whose module is not
    installed are left out, and KG-IRAG too when the KG holds no time-stamped records. ``graph_tools`` adds ``create_kgmem_tools(kg)``.
    """
    if methods is None:
        # KG-IRAG answers from time-stamped records: not offered on a KG that has none
        has_records = kg.stats()["nodes_by_kind"].get("time", 0) > 0
        chosen = [m for m, entry in registered().items()
                  if has_records or "records" not in entry.spec.requirements]
    else:
        unknown = [m for m in methods if m not in METHODS]
        if unknown:
            raise KgmemInputError(f"unknown method {unknown[0]!r}; choose from: {', '.join(METHODS)}")
        chosen = list(dict.fromkeys(methods))
    if store is None:
        store = kg.persistence()[1]
    tools = [create_method_tool(kg, m, model=model, store=store) for m in chosen]
    if graph_tools:
        from langgraph_kgmem.agent_tools import create_kgmem_tools

        tools.extend(create_kgmem_tools(kg))
    return tools


__all__ = ["create_method_tool", "create_all_tools"]
