"""The router's options: the factory's keyword arguments, validated once, and the graph's
``context_schema``. Which methods exist (``methods``, ``method_options``) and the tenant scope are
fixed when the graph is built (the subgraphs are compiled then); the budget, the escalation
threshold and the learning switches may change per run: ``context={"budget": 4}``."""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Sequence

from pydantic import Field

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.spec import AT_BUILD, MethodKwargs, MethodOptions, memory_scope_field

# the methods a router runs when none are named: every method of the registry but the router itself,
# left out where the KG or the model cannot serve them (graph.py says why, in ``route["unavailable"]``)
DEFAULT_METHODS: tuple[str, ...] = ("hipporag2", "catrag", "kgirag", "r3cycle", "remindrag", "autopruned")




class RouterOptions(MethodOptions):
    """Router options: the keyword arguments of
    :func:`~langgraph_kgmem.graphs.router.create_router_graph`. Which methods exist (``methods``,
    ``method_options``) and ``memory_scope`` are fixed when the graph is built; the rest may change
    per run."""

    METHOD: ClassVar[str] = "router"

    methods: Sequence[str] | None = Field(
        None, json_schema_extra=AT_BUILD,
        description="registry names the router may run, each compiled once when the graph is built (default: "
                    "DEFAULT_METHODS that the KG and model serve)")
    method_options: Mapping[str, Mapping[str, Any]] = Field(
        default_factory=dict, json_schema_extra=AT_BUILD,
        description="options per method, on top of its preset, e.g. {'catrag': {'top_passages': 3}}")
    budget: int | None = Field(
        None, ge=0, description="most LLM calls a question may cost (routing included); a method whose expected cost "
                                "does not fit is not started (the next best that fits is; if none does, the choice "
                                "runs offline), an escalation that does not fit is skipped; None: no cap")
    escalate: bool = Field(True, description="run a cheap method first where the question's form allows, a "
                                             "costlier one only when the cheap result's confidence is low")
    escalate_below: float = Field(0.5, ge=0.0, le=1.0, description="confidence under which a cheap method's result escalates")
    ask_model: bool = Field(True, description="with a chat model, ask it to pick when the rules are not sure "
                                              "(a typed decision; the rules are its fallback)")
    learn: bool = Field(True, description="read and write the per-KG route statistics (outcomes, feedback)")
    cover_top: int = Field(5, ge=0, description="places at the head of the router's passage ranking (``passages``) "
                                                "that question coverage completes: after the answering method's "
                                                "first ``cover_keep``, each goes to the passage of any run that names "
                                                "the most question words the places above miss (0: the method's own "
                                                "ranking as it is)")
    cover_keep: int = Field(3, ge=0, description="places at the head of ``passages`` that stay the answering method's")
    min_runs: int = Field(3, ge=1, description="runs of a method on a form before its statistics move the choice")
    memory_scope: Sequence[str] | None = memory_scope_field("the routes namespace and of every method's memory")

    @classmethod
    def check_values(cls, opts: Mapping[str, Any]) -> None:
        """See :meth:`MethodOptions.check_values`: ``methods`` not empty, ``method_options`` a mapping of
        mappings."""
        methods = opts["methods"]
        if methods is not None and (isinstance(methods, str) or not methods
                                    or not all(isinstance(m, str) for m in methods)):
            raise KgmemInputError(f"methods must be a non-empty tuple of registry names such as ('catrag', 'kgirag'), "
                                  f"got {methods!r}")
        per = opts["method_options"]
        if not isinstance(per, Mapping) or not all(isinstance(v, Mapping) for v in per.values()):
            raise KgmemInputError(f"method_options must map a method name to its options dict, got {per!r}")


class RouterKwargs(MethodKwargs, total=False):
    """:func:`~langgraph_kgmem.graphs.router.create_router_graph`'s keyword options: the names and
    types of :class:`RouterOptions` (defaults, bounds and descriptions: there)."""

    methods: Sequence[str] | None
    method_options: Mapping[str, Mapping[str, Any]]
    budget: int | None
    escalate: bool
    escalate_below: float
    ask_model: bool
    learn: bool
    cover_top: int
    cover_keep: int
    min_runs: int
    memory_scope: Sequence[str] | None
