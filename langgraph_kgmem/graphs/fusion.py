"""Dense fusion's options, declared and checked once for the three methods that fuse their own
passage ranking with vector search's (CatRAG and HippoRAG 2: PageRank; ReMindRAG: the walk;
AutoPrunedRetriever: the fine ranking of its runs).

The mechanism is :func:`~langgraph_kgmem.graphs.common.fuse_with_dense` /
:func:`~langgraph_kgmem.graphs.common.fuse_with_dense_adaptive` over
:func:`~langgraph_kgmem.ranking.interleave` and :func:`~langgraph_kgmem.ranking.adaptive_fuse`;
each method's options class says who opens the turns and what its own ranking's confidence is.
A method whose thresholds differ declares only the new default:
``fusion_strong: float = FusionOptions.with_default("fusion_strong", 1.01)``.
"""

from __future__ import annotations

from typing import Literal, TypedDict

from pydantic import Field

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.spec import MethodOptions


class FusionOptions(MethodOptions):
    """The four dense-fusion options (defaults: CatRAG's; ReMindRAG and AutoPrunedRetriever set their
    own thresholds)."""

    dense_fusion: bool = Field(True, description="fuse the method's own passage ranking with vector search's "
                                                 "(cosine with the question) by taking turns; no LLM call. False: "
                                                 "the method's own ranking alone (the paper)")
    fusion: Literal["fixed", "adaptive"] = Field(
        "fixed", description="with dense_fusion: 'fixed' takes turns always; 'adaptive' gives the method's own "
                             "ranking one evidence place, every other place or all of them by its confidence "
                             "(fusion_weak, fusion_strong; the output's fusion record says why)")
    fusion_weak: float = Field(0.0, ge=0.0, description="adaptive fusion: below this confidence the method's own "
                                                        "ranking gets one evidence place")
    fusion_strong: float = Field(0.8, description="adaptive fusion: from this confidence on, the method's own "
                                                  "ranking alone (above 1: never)")

    def check_together(self) -> None:
        """Refuse fusion thresholds out of order (see :meth:`MethodOptions.check_together`).

        Raises:
            KgmemInputError: naming both values."""
        super().check_together()
        if self.fusion_weak > self.fusion_strong:
            raise KgmemInputError(f"fusion_weak ({self.fusion_weak}) and fusion_strong ({self.fusion_strong}) need "
                                  "0 <= fusion_weak <= fusion_strong")


class FusionKwargs(TypedDict, total=False):
    """:class:`FusionOptions`' keyword arguments, for a factory's ``Unpack[...]``."""

    dense_fusion: bool
    fusion: Literal["fixed", "adaptive"]
    fusion_weak: float
    fusion_strong: float
