"""KG-IRAG's options: the factory's keyword arguments, validated once, and the graph's
``context_schema`` (every knob can change per run: ``context={"t_max": 6}``)."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from langgraph_kgmem.graphs.prompt_overrides import PromptKwargs, PromptOptions
from langgraph_kgmem.graphs.spec import MethodKwargs


class KgiragOptions(PromptOptions):
    """KG-IRAG (and the single-pass baseline, which reads only ``kappa`` and ``prompts``) options:
    the keyword arguments of :func:`~langgraph_kgmem.graphs.kgirag.create_kgirag_graph`.

    Prompts (``prompts``): overrides of ``plan``, ``reasoning_detect``, ``reasoning_latest``,
    ``reasoning_earliest``, ``judge`` and ``answer``, the ``PROMPTS`` of
    :mod:`~langgraph_kgmem.graphs.kgirag.prompts`, which lists each one's placeholders."""

    METHOD: ClassVar[str] = "create_kgirag_graph"
    PROMPTS_MODULE: ClassVar[str] = "langgraph_kgmem.graphs.kgirag.prompts"

    t_max: int = Field(12, ge=1, description="maximum retrieval rounds (T_max)")
    kappa: int = Field(400, ge=1, description="the triple budget κ: at or above it the answer is 'no answer'")
    step: int | None = Field(None, ge=1, description="hours of the time chain per hop (default: the plan's; offline "
                                                     "Δt for detection, max(2, Δt) for latest/earliest)")
    k0: int | None = Field(None, ge=1, le=3, description="hops of round 0, 1 to 3 (default: the plan's, offline 1)")


class KgiragKwargs(MethodKwargs, PromptKwargs, total=False):
    """:func:`~langgraph_kgmem.graphs.kgirag.create_kgirag_graph`'s keyword options: the names and
    types of :class:`KgiragOptions` (defaults, bounds and descriptions: there)."""

    t_max: int
    kappa: int
    step: int | None
    k0: int | None


class SinglepassKwargs(MethodKwargs, PromptKwargs, total=False):
    """:func:`~langgraph_kgmem.graphs.kgirag.create_singlepass_graph`'s keyword options: the two of
    :class:`KgiragOptions` the single-pass baseline reads."""

    kappa: int
