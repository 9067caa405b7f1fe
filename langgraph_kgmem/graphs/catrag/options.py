"""CatRAG's options: the factory's keyword arguments, validated once, and the graph's
``context_schema`` (every knob but the three switches and ``answer`` can change per run)."""

from __future__ import annotations

from typing import ClassVar, Sequence

from pydantic import Field

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.fusion import FusionKwargs, FusionOptions
from langgraph_kgmem.graphs.prompt_overrides import PromptKwargs, PromptOptions
from langgraph_kgmem.graphs.reuse import ReuseKwargs, ReuseOptions
from langgraph_kgmem.graphs.spec import AT_BUILD, MethodKwargs, memory_scope_field
from langgraph_kgmem.kg.ppr import PprMethod



class CatragOptions(PromptOptions, ReuseOptions, FusionOptions):
    """CatRAG (and HippoRAG 2: the three additions off) options: the keyword arguments of
    :func:`~langgraph_kgmem.graphs.catrag.create_catrag_graph`, each the run's default. Every one
    but the three switches, ``answer``, the synonym edges and ``memory_scope`` can be overridden
    per run: ``app.invoke(inputs, context={"top_passages": 3})``.

    Prompts (``prompts``): overrides of ``filter``, ``ner``, ``score`` and ``summary``, the
    ``PROMPTS`` of :mod:`~langgraph_kgmem.graphs.catrag.prompts`, which lists their placeholders.

    Dense fusion (:class:`~langgraph_kgmem.graphs.fusion.FusionOptions`): with ``dense_fusion``
    (default) the final passage ranking takes the PPR ranking and the dense ranking of the passages
    by cosine with the question in turns, PPR first (:func:`~langgraph_kgmem.ranking.interleave`):
    the top ``2n`` holds PPR's top ``n`` and vector search's top ``n``, so a passage vector search
    ranks high is not lost when the walk's mass sits elsewhere; it costs no LLM call and one sort of
    the dense scores the PPR reset already computed. ``fusion="adaptive"`` lets PPR decide per
    question: its confidence is the top two passages' share of the top ``2 · top_passages``
    passages' mass (0 when no question entity linked); below ``fusion_weak`` PPR gets one of the
    ``top_passages`` evidence places (vector search keeps all but one of its top passages), from
    ``fusion_strong`` on the evidence is PPR's own ranking, between them the two take turns;
    ``ppr["fusion"]`` records the signals, the confidence and PPR's share
    (:func:`~langgraph_kgmem.ranking.adaptive_fuse`).

    Experience (``docs/memory.md``; on by default, off in the hipporag2 preset): passages credited
    by feedback on questions whose cosine with this one passes ``experience_gate`` become PPR
    seeds, discredited ones lose their in-edges, each by at most ``experience_weight``;
    ``ppr["experience"]`` lists the credit read.

    Reuse (:class:`~langgraph_kgmem.graphs.reuse.ReuseOptions`; off by default): the earlier run's
    passages seed PageRank, the fact filter, anchoring and edge scoring take their offline
    heuristics, and where the question is the same (not reworded) and the evidence is all among
    the passages that run was given, its answer is given again without a call; ``reused`` says
    which run.
    """

    PROMPTS_MODULE: ClassVar[str] = "langgraph_kgmem.graphs.catrag.prompts"
    METHOD: ClassVar[str] = "create_catrag_graph"

    anchoring: bool = Field(True, json_schema_extra=AT_BUILD,
                            description="symbolic anchoring: the question's named entities as weak seeds")
    dynamic_weighting: bool = Field(True, json_schema_extra=AT_BUILD,
                                    description="query-aware weights on the relation edges leaving the seeds")
    key_fact_boost: bool = Field(True, json_schema_extra=AT_BUILD,
                                 description="boost context edges from a seed to its verified facts' passages")
    top_facts: int = Field(5, ge=1, description="facts retrieved for the recognition filter")
    filter_keep: int = Field(4, ge=1, description="facts the recognition filter keeps at most")
    passage_weight: float = Field(0.05, ge=0.0, description="reset weight of every passage (x its min-max "
                                                            "normalised dense score)")
    damping: float = Field(0.5, gt=0.0, lt=1.0, description="PPR probability of following an edge")
    epsilon: float = Field(0.2, ge=0.0, description="anchor reset mass (divided by the anchor's passage count)")
    n_seed: int = Field(5, ge=0, description="seed entities whose edges are re-weighted")
    k_edge: int = Field(15, ge=1, description="neighbours scored per seed (the rest get the weak multiplier)")
    tau: int = Field(3, ge=0, description="a neighbour with more facts than this is shown as an LLM summary")
    beta: float = Field(2.5, ge=0.0, description="key-fact passage boost: x (1 + beta)")
    top_passages: int = Field(5, ge=1, description="passages in the evidence")
    rank_depth: int = Field(20, ge=1, description="ranked passages reported in `passages` (>= top_passages)")
    synonym_threshold: float = Field(0.8, gt=0.0, le=1.0, json_schema_extra=AT_BUILD,
                                     description="cosine at which two entities get a synonym edge (added to the "
                                                 "KG once, when the graph is built)")
    synonym_weight: float = Field(2.0, ge=0.0, json_schema_extra=AT_BUILD,
                                  description="synonym edge weight = this x cosine")
    offline_fact_threshold: float = Field(0.2, description="offline fact filter: minimum cosine of a kept fact (a "
                                                           "fact must also have an entity the question names)")
    anchor_threshold: float = Field(0.5, description="minimum cosine mapping a question entity to an entity node")
    answer: bool = Field(True, json_schema_extra=AT_BUILD, description="False: retrieval only, no answer step")
    llm_concurrency: int = Field(4, ge=1, description="independent LLM calls of the weighting step (the neighbour "
                                                      "summaries, then one score per seed) made at once; 1: one "
                                                      "after another")
    ppr_method: PprMethod = Field("auto", description="PPR algorithm (KnowledgeGraph.ppr): 'auto' is forward push "
                                                      "only where push's own error bound certifies the top passages "
                                                      "and push costs less; 'exact' or 'push' force one")
    ppr_eps: float = Field(1e-7, gt=0.0, lt=1.0, description="push's residual threshold")
    experience: bool = Field(True, description="read the experience layer: passages credited by feedback on similar "
                                               "questions, or marked wrong in several runs, get a bounded prior "
                                               "(docs/memory.md; the hipporag2 preset turns it off)")
    experience_weight: float = Field(1.0, ge=0.0, le=1.0,
                                     description="experience: the most a passage's dense score moves (cosine units)")
    experience_gate: float = Field(0.5, ge=0.0, lt=1.0,
                                   description="experience: cosine with the credited questions below which a "
                                               "passage's credit reads as zero")
    experience_distractor_after: int = Field(2, ge=0,
                                             description="experience: runs that marked a passage wrong (none useful) "
                                                         "before it is demoted for every question; 0: never")
    calibration: bool = Field(True, description="read the tenant's calibration: the ranking setting (of a small "
                                                "vetted grid) its feedback ranks best, refit every few feedback "
                                                "records; the shipped default until feedback says otherwise "
                                                "(docs/memory.md)")
    memory_scope: Sequence[str] | None = memory_scope_field("the run records and experience namespaces")

    def check_together(self) -> None:
        """Refuse ``rank_depth`` below ``top_passages`` (the evidence passages head the ranked list) and
        fusion thresholds out of order.

        Raises:
            KgmemInputError: naming the values."""
        super().check_together()
        if self.rank_depth < self.top_passages:
            raise KgmemInputError(f"rank_depth ({self.rank_depth}) must be ≥ top_passages ({self.top_passages})")

    @property
    def method(self) -> str:
        """``"catrag"``, or ``"hipporag2"`` when every addition is off."""
        return "catrag" if (self.anchoring or self.dynamic_weighting or self.key_fact_boost) else "hipporag2"


class CatragKwargs(MethodKwargs, PromptKwargs, ReuseKwargs, FusionKwargs, total=False):
    """:func:`~langgraph_kgmem.graphs.catrag.create_catrag_graph`'s keyword options: the names and
    types of :class:`CatragOptions` (defaults, bounds and descriptions: there)."""

    anchoring: bool
    dynamic_weighting: bool
    key_fact_boost: bool
    top_facts: int
    filter_keep: int
    passage_weight: float
    damping: float
    epsilon: float
    n_seed: int
    k_edge: int
    tau: int
    beta: float
    top_passages: int
    rank_depth: int
    synonym_threshold: float
    synonym_weight: float
    offline_fact_threshold: float
    anchor_threshold: float
    answer: bool
    llm_concurrency: int
    ppr_method: PprMethod
    ppr_eps: float
    experience: bool
    experience_weight: float
    experience_gate: float
    experience_distractor_after: int
    calibration: bool
    memory_scope: Sequence[str] | None
