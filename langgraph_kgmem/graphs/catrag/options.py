"""CatRAG's options: the factory's keyword arguments, validated once, and the graph's
``context_schema`` (every knob but the three switches and ``answer`` can change per run)."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Mapping, Sequence

from pydantic import Field

from langgraph_kgmem.errors import KgmemInputError, check_number
from langgraph_kgmem.graphs.prompt_overrides import PromptOptions
from langgraph_kgmem.graphs.reuse import ReuseOptions
from langgraph_kgmem.kg.ppr import PprMethod

_INT_FLOORS = {"top_facts": 1, "filter_keep": 1, "n_seed": 0, "k_edge": 1, "tau": 0, "top_passages": 1,
               "rank_depth": 1, "llm_concurrency": 1}


class CatragOptions(PromptOptions, ReuseOptions):
    """CatRAG (and HippoRAG 2: the three additions off) options."""

    PROMPTS_MODULE: ClassVar[str] = "langgraph_kgmem.graphs.catrag.prompts"

    INT_FLOORS: ClassVar[Mapping[str, int]] = _INT_FLOORS

    METHOD: ClassVar[str] = "create_catrag_graph"
    BUILD_ONLY: ClassVar[frozenset[str]] = frozenset({"anchoring", "dynamic_weighting", "key_fact_boost", "answer",
                                                      "synonym_threshold", "synonym_weight", "memory_scope"})

    anchoring: bool = Field(True, description="symbolic anchoring: the question's named entities as weak seeds")
    dynamic_weighting: bool = Field(True, description="query-aware weights on the relation edges leaving the seeds")
    key_fact_boost: bool = Field(True, description="boost context edges from a seed to its verified facts' passages")
    top_facts: int = Field(5, description="facts retrieved for the recognition filter")
    filter_keep: int = Field(4, description="facts the recognition filter keeps at most")
    passage_weight: float = Field(0.05, description="reset weight of every passage (x its normalised dense score)")
    damping: float = Field(0.5, description="PPR probability of following an edge")
    epsilon: float = Field(0.2, description="anchor reset mass (divided by the anchor's passage count)")
    n_seed: int = Field(5, description="seed entities whose edges are re-weighted")
    k_edge: int = Field(15, description="neighbours scored per seed (the rest get the weak multiplier)")
    tau: int = Field(3, description="a neighbour with more facts than this is shown as an LLM summary")
    beta: float = Field(2.5, description="key-fact passage boost: x (1 + beta)")
    top_passages: int = Field(5, description="passages in the evidence")
    rank_depth: int = Field(20, description="ranked passages reported in `passages` (>= top_passages)")
    synonym_threshold: float = Field(0.8, description="cosine at which two entities get a synonym edge")
    synonym_weight: float = Field(2.0, description="synonym edge weight = this x cosine")
    offline_fact_threshold: float = Field(0.2, description="offline fact filter: minimum cosine of a kept fact")
    anchor_threshold: float = Field(0.5, description="minimum cosine mapping a question entity to an entity node")
    answer: bool = Field(True, description="False: retrieval only, no answer step")
    llm_concurrency: int = Field(4, description="independent LLM calls of the weighting step made at once")
    ppr_method: PprMethod = Field("auto", description="PPR algorithm: auto, exact or push")
    ppr_eps: float = Field(1e-7, description="push's residual threshold")
    dense_fusion: bool = Field(True, description="fuse the PPR ranking with the dense passage ranking")
    fusion: Literal["fixed", "adaptive"] = Field(
        "fixed", description="with dense_fusion: 'fixed' takes turns always; 'adaptive' gives PPR one place, every "
                             "other place or all of them by its confidence (fusion_weak, fusion_strong)")
    fusion_weak: float = Field(0.0, description="adaptive fusion: below this confidence PPR gets one evidence place")
    fusion_strong: float = Field(0.8, description="adaptive fusion: from this confidence on, PPR's own ranking")
    experience: bool = Field(True, description="read the experience layer: passages credited by feedback on similar "
                                               "questions, or marked wrong in several runs, get a bounded prior "
                                               "(docs/memory.md; the hipporag2 preset turns it off)")
    experience_weight: float = Field(1.0, description="experience: the most a passage's dense score moves (cosine units)")
    experience_gate: float = Field(0.5, description="experience: cosine with the credited questions below which a "
                                                    "passage's credit reads as zero")
    experience_distractor_after: int = Field(2, description="experience: runs that marked a passage wrong (none "
                                                            "useful) before it is demoted for every question; 0: never")
    calibration: bool = Field(True, description="read the tenant's calibration: the ranking setting (of a small "
                                                "vetted grid) its feedback ranks best, refit every few feedback "
                                                "records; the shipped default until feedback says otherwise "
                                                "(docs/memory.md)")
    memory_scope: Sequence[str] | None = Field(None, description="tenant labels of the run records and experience "
                                                                 "namespaces, e.g. ('{user_id}',)")

    @classmethod
    def check_values(cls, opts: Mapping[str, Any]) -> None:
        """See :meth:`MethodOptions.check_values`."""
        super().check_values(opts)
        for name in ("passage_weight", "epsilon", "beta", "synonym_weight"):
            check_number(name, opts[name], 0.0)
        check_number("damping", opts["damping"], 0.0, 1.0, low_open=True, high_open=True)
        check_number("ppr_eps", opts["ppr_eps"], 0.0, 1.0, low_open=True, high_open=True)
        if opts["ppr_method"] not in ("auto", "exact", "push"):
            raise KgmemInputError(f"ppr_method {opts['ppr_method']!r}: use 'auto', 'exact' or 'push'")
        check_number("synonym_threshold", opts["synonym_threshold"], 0.0, 1.0, low_open=True)
        check_number("experience_weight", opts["experience_weight"], 0.0, 1.0)
        check_number("experience_gate", opts["experience_gate"], 0.0, 1.0, high_open=True)
        check_number("experience_distractor_after", opts["experience_distractor_after"], 0.0)
        scope = opts["memory_scope"]
        if scope is not None and (isinstance(scope, str) or not all(isinstance(x, str) for x in scope)):
            raise KgmemInputError(f"memory_scope must be a tuple of labels such as ('{{user_id}}',), got {scope!r}")

    def check_together(self) -> None:
        """Refuse ``rank_depth`` below ``top_passages`` (the evidence passages head the ranked list) and
        fusion thresholds out of order.

        Raises:
            KgmemInputError: naming the values."""
        if not 0.0 <= self.fusion_weak <= self.fusion_strong:
            raise KgmemInputError(f"fusion_weak ({self.fusion_weak}) and fusion_strong ({self.fusion_strong}) need "
                                  "0 <= fusion_weak <= fusion_strong")
        if self.rank_depth < self.top_passages:
            raise KgmemInputError(f"rank_depth ({self.rank_depth}) must be ≥ top_passages ({self.top_passages})")

    @property
    def method(self) -> str:
        """``"catrag"``, or ``"hipporag2"`` when every addition is off."""
        return "catrag" if (self.anchoring or self.dynamic_weighting or self.key_fact_boost) else "hipporag2"


__all__ = ["CatragOptions"]
