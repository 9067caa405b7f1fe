"""What R3-Cycle's nodes share for the graph's lifetime: :class:`R3Deps` — the graph environment
and its tools, the build's model (and each run model with the tools bound, once), store and
options, and where the run's trajectories and reflections are written."""

from __future__ import annotations

from typing import Any, Sequence

from langchain_core.tools import BaseTool, StructuredTool

from langgraph_kgmem.errors import MissingRequirementError
from langgraph_kgmem.graphs.r3cycle.options import R3cycleOptions
from langgraph_kgmem.graphs.r3cycle.schemas import FINISH, GRAPH_TOOLS, FinishArgs
from langgraph_kgmem.llm import through_wrappers, unwrap, with_retry_policy
from langgraph_kgmem.memory import RecordMemory, resolve_store
from langgraph_kgmem.memory import memory_scope as scope_of
from langgraph_kgmem.memory.provenance import provenance_of_nodes, put_records
from langgraph_kgmem.agent_tools import create_kgmem_tools
from langgraph_kgmem.agent_tools.graph_env import GraphEnv

MAX_BOUND_MODELS = 8      # models swapped per run: the tool-bound copies of a few are kept
RECORDS_INDEXED = 64      # records whose index entries are remembered at once (R3Deps.remember)


class R3Deps:
    """The graph environment, its tools, the build's model, store and options (bound to the nodes
    with ``functools.partial``; a run's context may replace the model and the per-run options)."""

    def __init__(self, env: GraphEnv, model: Any, store: Any, options: R3cycleOptions) -> None:
        self.env = env
        self.kg = env.kg
        self.model = model          # the build's model, resolved once
        self.store = store          # the factory's store; None: the compiled graph's
        self.options = options      # the build's options (the run's context on top)
        self.method = "r3cycle" if options.reflection else "graphcot"
        self.label = "R3-Cycle" if options.reflection else "Graph-CoT"
        self.finish_tool = StructuredTool.from_function(lambda answer: answer, name=FINISH, args_schema=FinishArgs,
                                                        description="End the attempt with the final short answer.")
        self._tools: dict[int, dict[str, BaseTool]] = {}
        self._bound: dict[int, Any] = {}
        # per (kind, key): the index entries already put for a record rewritten after every step,
        # valid for one KG version (put_records' ``indexed``)
        self._indexed: dict[tuple[str, str], dict[str, str]] = {}
        self._indexed_at = -1
        menu = self.graph_tools(options.top_n)
        self.tool_names = [*menu, FINISH]
        self.tool_menu = "\n".join(
            f"- {t.name}({', '.join(t.args)}): {t.description.splitlines()[0] if t.description else ''}"
            for t in [*menu.values(), self.finish_tool])

    def graph_tools(self, top_n: int) -> dict[str, BaseTool]:
        """The foundation's tool schemas and descriptions, executed on *this* environment (a
        GraphEnv subclass counts), RetrieveNode returning ``top_n`` ids; built once per ``top_n``."""
        if top_n not in self._tools:
            env = self.env
            run_on_env = {"RetrieveNode": lambda keyword: env.retrieve_node(keyword, top_n),
                          "NodeFeature": env.node_feature, "NeighbourCheck": env.neighbour_check,
                          "NodeDegree": env.node_degree}
            self._tools[top_n] = {
                t.name: StructuredTool.from_function(run_on_env[t.name], name=t.name, description=t.description,
                                                     args_schema=t.args_schema)
                for t in create_kgmem_tools(self.kg, top_n=top_n) if t.name in GRAPH_TOOLS}
        return self._tools[top_n]

    def bind(self, mdl: Any) -> Any:
        """``mdl`` with the graph tools and Finish bound (beneath retry/fallback wrappers), once per
        model. The tools' schemas do not depend on ``top_n``: the build's are bound."""
        inner, policy = unwrap(mdl)
        if id(inner) not in self._bound:
            tools = [*self.graph_tools(self.options.top_n).values(), self.finish_tool]
            try:
                tools_bound = through_wrappers(inner, lambda m: m.bind_tools(tools))
            except (NotImplementedError, AttributeError) as exc:
                raise MissingRequirementError(f"{self.label} needs a chat model with tool calling (bind_tools); "
                                              f"{type(inner).__name__} has none. Use another model or 'offline'.") from exc
            if len(self._bound) >= MAX_BOUND_MODELS:
                self._bound.pop(next(iter(self._bound)))
            self._bound[id(inner)] = (inner, tools_bound)
        bound = self._bound[id(inner)][1]
        return with_retry_policy(bound, policy) if policy else bound

    def memory(self, kind: str) -> RecordMemory:
        """The run's records of ``kind`` (``trajectories``, ``reflections``) in its tenant scope."""
        return RecordMemory(resolve_store(self.store), self.kg.name, kind, scope_of(self.options.memory_scope))

    def remember(self, kind: str, key: str, value: dict[str, Any], visited: Sequence[str]) -> dict[str, Any]:
        """Write a record of ``kind`` in the run's tenant scope naming, as its ``provenance``, the
        documents (and versions) of the nodes the attempt ``visited``, and index it, so a delete or
        replace of one of them invalidates it (:mod:`langgraph_kgmem.memory.provenance`). A record
        rewritten as the attempt grows puts only the index entries its earlier writes did not.
        Returns the record as written."""
        rec = {**value, "provenance": provenance_of_nodes(self.kg, visited)}
        scope = scope_of(self.options.memory_scope)
        if self.kg.version != self._indexed_at:
            self._indexed_at = self.kg.version
            self._indexed.clear()
        rkey = (kind, "/".join((*scope, key)))
        done = {key: self._indexed.pop(rkey, {})}
        while len(self._indexed) >= RECORDS_INDEXED:
            self._indexed.pop(next(iter(self._indexed)))
        put_records(resolve_store(self.store), self.kg.name, kind, {key: rec}, scope, indexed=done)
        self._indexed[rkey] = done[key]
        return rec
