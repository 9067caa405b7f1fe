"""R3-Cycle's options: its factory's keyword arguments as a typed model (the CLI, the served
graphs and the docs read the fields) and the graph's ``context_schema``. The nodes read these
knobs once, when the graph is built, so a run's context may set the model and the tenant ids
only; a knob in ``context=`` is refused with a message naming it."""

from __future__ import annotations

from typing import Any, ClassVar, Sequence

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from langgraph_kgmem.graphs.spec import MethodOptions


class R3cycleOptions(MethodOptions):
    """R3-Cycle (and Graph-CoT: ``reflection=False``) options (see
    :func:`~langgraph_kgmem.graphs.r3cycle.create_r3cycle_graph`)."""

    METHOD: ClassVar[str] = "create_r3cycle_graph"
    FIXED_AT_BUILD: ClassVar[bool] = True

    memory_scope: Sequence[str] | None = Field(None, description="tenant labels of the memory namespace, e.g. "
                                                                 "('{user_id}',)")
    verifier: SkipJsonSchema[Any] = Field(None, description="judges an attempt: a callable (question, answer, "
                                                            "evidence) or a compiled graph; default: an LLM self-check")
    max_steps: int = Field(10, description="tool steps per attempt")
    max_cycles: int = Field(1, description="retries after a failed attempt")
    reflection: bool = Field(True, description="False: Graph-CoT (no reflection, no retry)")
    top_n: int = Field(1, description="nodes RetrieveNode returns")


__all__ = ["R3cycleOptions"]
