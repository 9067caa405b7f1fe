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
from langgraph_kgmem.graphs.prompt_overrides import PromptOptions
from langgraph_kgmem.graphs.reuse import ReuseOptions

_INT_FLOORS = {"max_steps": 1, "max_cycles": 0, "top_n": 1}


class R3cycleOptions(PromptOptions, ReuseOptions):
    """R3-Cycle (and Graph-CoT: ``reflection=False``) options (see
    :func:`~langgraph_kgmem.graphs.r3cycle.create_r3cycle_graph`)."""

    INT_FLOORS: ClassVar[Mapping[str, int]] = _INT_FLOORS

    METHOD: ClassVar[str] = "create_r3cycle_graph"
    PROMPTS_MODULE: ClassVar[str] = "langgraph_kgmem.graphs.r3cycle.prompts"
    BUILD_ONLY: ClassVar[frozenset[str]] = frozenset({"reflection", "memory_scope"})

    memory_scope: Sequence[str] | None = Field(None, description="tenant labels of the memory namespace, e.g. "
                                                                 "('{user_id}',)")
    verifier: SkipJsonSchema[Any] = Field(None, description="judges an attempt: a callable (question, answer, "
                                                            "evidence) or a compiled graph; default: an LLM self-check")
    max_steps: int = Field(10, description="step budget of the first attempt (tool calls including Finish)")
    max_cycles: int = Field(1, description="retries after a failed attempt (0: never retry)")
    reflection: bool = Field(True, description="False: Graph-CoT (no verification, reflection or retry)")
    top_n: int = Field(1, description="node ids RetrieveNode returns")
    reuse_similarity: float = Field(1.01, description="reuse: cosine at which a stored question counts as this one "
                                                      "reworded (default above 1: the same question only, since the "
                                                      "answer is given again with no walk to correct a wrong match)")

    @classmethod
    def check_values(cls, opts: Mapping[str, Any]) -> None:
        """See :meth:`MethodOptions.check_values`."""
        super().check_values(opts)
        verifier = opts["verifier"]
        if verifier is not None and not (callable(verifier) or isinstance(verifier, Runnable)):
            raise KgmemInputError(f"verifier must be a callable (question, answer, evidence) or a compiled graph, "
                                  f"got {type(verifier).__name__}")
        scope = opts["memory_scope"]
        if scope is not None and (isinstance(scope, str) or not all(isinstance(x, str) for x in scope)):
            raise KgmemInputError(f"memory_scope must be a tuple of labels such as ('{{user_id}}',), got {scope!r}")
