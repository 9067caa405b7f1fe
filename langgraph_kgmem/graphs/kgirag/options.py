"""KG-IRAG's options: the factory's keyword arguments, validated once, and the graph's
``context_schema`` (every knob can change per run: ``context={"t_max": 6}``)."""

from __future__ import annotations

from typing import Any, ClassVar, Mapping

from pydantic import Field

from langgraph_kgmem.errors import check_int
from langgraph_kgmem.graphs.prompt_overrides import PromptOptions


class KgiragOptions(PromptOptions):
    """KG-IRAG (and the single-pass baseline, which reads only ``kappa`` and ``prompts``) options."""

    METHOD: ClassVar[str] = "create_kgirag_graph"
    PROMPTS_MODULE: ClassVar[str] = "langgraph_kgmem.graphs.kgirag.prompts"

    t_max: int = Field(12, description="maximum retrieval rounds (T_max)")
    kappa: int = Field(400, description="triple budget: at or above it the answer is 'no answer'")
    step: int | None = Field(None, description="hours of the time chain per hop (default: the plan's)")
    k0: int | None = Field(None, description="hops of round 0, 1 to 3 (default: the plan's)")

    INT_FLOORS: ClassVar[Mapping[str, int]] = {"t_max": 1, "kappa": 1}
    OPTIONAL_INT_FLOORS: ClassVar[Mapping[str, int]] = {"step": 1}

    @classmethod
    def check_values(cls, opts: Mapping[str, Any]) -> None:
        """See :meth:`MethodOptions.check_values`."""
        check_int("k0", opts["k0"], 1, 3, optional=True)
