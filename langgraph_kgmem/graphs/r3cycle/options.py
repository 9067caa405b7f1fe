"""R3-Cycle's options: the factory's keyword arguments, validated once, and the graph's
``context_schema``.

Per run (``app.invoke(inputs, context={"max_steps": 4})``): ``max_steps`` (the first attempt's
step budget), ``max_cycles`` (retries after a failed attempt), ``top_n`` (ids RetrieveNode
returns) and ``verifier``. Fixed at build, and refused in a run's context: ``reflection`` (R3-Cycle
or the Graph-CoT baseline: another method, with its own name in the output and the memory) and
``memory_scope`` (whose memory the graph writes).
"""

from __future__ import annotations

from typing import Any, ClassVar, Mapping, Sequence

from langchain_core.runnables import Runnable
from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.prompt_overrides import PromptKwargs, PromptOptions
from langgraph_kgmem.graphs.reuse import ReuseKwargs, ReuseOptions
from langgraph_kgmem.graphs.spec import AT_BUILD, MethodKwargs, memory_scope_field



class R3cycleOptions(PromptOptions, ReuseOptions):
    """R3-Cycle (and Graph-CoT: ``reflection=False``) options: the keyword arguments of
    :func:`~langgraph_kgmem.graphs.r3cycle.create_r3cycle_graph`, each the run's default.

    Prompts (``prompts``): overrides of ``reason_system``, ``verify`` and ``reflect``, the
    ``PROMPTS`` of :mod:`~langgraph_kgmem.graphs.r3cycle.prompts`, which lists their placeholders.

    Reuse (:class:`~langgraph_kgmem.graphs.reuse.ReuseOptions`; off by default): a question this
    tenant asked before (any method), answered and still holding, is answered again from that run,
    without a walk (``docs/memory.md``); ``reused`` names the run. ``reuse_similarity`` defaults
    above 1 here: the same question only, since the answer is given again with no walk to correct a
    wrong match; a cosine admits rewordings.
    """

    METHOD: ClassVar[str] = "create_r3cycle_graph"
    PROMPTS_MODULE: ClassVar[str] = "langgraph_kgmem.graphs.r3cycle.prompts"

    memory_scope: Sequence[str] | None = memory_scope_field("the memory namespace (trajectories and reflections)")
    verifier: SkipJsonSchema[Any] = Field(None, description="judges a finished attempt: None (an LLM self-check "
                                                            "against the observations), a callable (question, "
                                                            "answer, evidence) -> Verdict | bool | (ok, reason) | "
                                                            "dict (e.g. exact_match_verifier), or a compiled "
                                                            "LangGraph graph (a verifier agent)")
    max_steps: int = Field(10, ge=1, description="step budget of the first attempt (tool calls including Finish)")
    max_cycles: int = Field(1, ge=0, description="retries after a failed attempt (0: never retry)")
    reflection: bool = Field(True, json_schema_extra=AT_BUILD,
                             description="False: Graph-CoT (one attempt, no verification, reflection or retry)")
    top_n: int = Field(1, ge=1, description="node ids RetrieveNode returns")
    reuse_similarity: float = ReuseOptions.with_default("reuse_similarity", 1.01)

    @classmethod
    def check_values(cls, opts: Mapping[str, Any]) -> None:
        """See :meth:`MethodOptions.check_values`: the verifier's type."""
        super().check_values(opts)
        verifier = opts["verifier"]
        if verifier is not None and not (callable(verifier) or isinstance(verifier, Runnable)):
            raise KgmemInputError(f"verifier must be a callable (question, answer, evidence) or a compiled graph, "
                                  f"got {type(verifier).__name__}")


class R3cycleKwargs(MethodKwargs, PromptKwargs, ReuseKwargs, total=False):
    """:func:`~langgraph_kgmem.graphs.r3cycle.create_r3cycle_graph`'s keyword options: the names and
    types of :class:`R3cycleOptions` (defaults, bounds and descriptions: there)."""

    memory_scope: Sequence[str] | None
    verifier: Any
    max_steps: int
    max_cycles: int
    reflection: bool
    top_n: int
