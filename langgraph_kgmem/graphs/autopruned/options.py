"""AutoPrunedRetriever's options: its factory's keyword arguments as a typed model (the CLI, the
served graphs and the docs read the fields) and the graph's ``context_schema``. The nodes read
these knobs once, when the graph is built, so a run's context may set the model and the tenant
ids only; a knob in ``context=`` is refused with a message naming it."""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Mapping, Sequence

from pydantic import Field
from pydantic.json_schema import SkipJsonSchema

from langgraph_kgmem.graphs.autopruned.codebook import ALIAS_THRESHOLD, LAYER2_FLOOR
from langgraph_kgmem.graphs.spec import MethodOptions

Encoding = Literal["words", "ids", "matrix"]
Show = Literal["triples", "sentences"]
ENCODINGS: tuple[Encoding, ...] = ("words", "ids", "matrix")


class AutoprunedOptions(MethodOptions):
    """AutoPrunedRetriever options (see
    :func:`~langgraph_kgmem.graphs.autopruned.create_autopruned_graph`)."""

    METHOD: ClassVar[str] = "create_autopruned_graph"
    FIXED_AT_BUILD: ClassVar[bool] = True

    selection_policy: SkipJsonSchema[Any] = Field(None, description="(channel, candidates, features) -> "
                                                                     "'all'|'unique'|'none'")
    coarse_k: int = Field(200, description="runs kept by the coarse score")
    fine_m: int = Field(20, description="runs kept by the fine score, across channels")
    tau_run: float = Field(0.7, description="a triple joins the current run above this score")
    w_ent: float = Field(1.0, description="coarse score weight of entity similarity")
    w_rel: float = Field(0.3, description="coarse score weight of relation similarity")
    fine: SkipJsonSchema[Any] = Field(None, description="FineScoring weights (default FineScoring())")
    unique_threshold: float = Field(0.9, description="cosine at which two runs are one semantic cluster")
    encodings: Sequence[Encoding] = Field(ENCODINGS, description="prompt encodings tried (the cheapest is used)")
    max_prompt_tokens: int | None = Field(None, description="token budget of the packed prompt")
    edges_per_run: int | None = Field(None, description="edges shown per run at most")
    show: Show = Field("triples", description="facts shown as triples or as source sentences")
    cover_weight: float = Field(0.0, description="weight of question coverage in run selection")
    sentence_budget: int | None = Field(None, description="sentences in the facts block (show='sentences')")
    sentence_rankings: Sequence[str] = Field(("relevance",), description="how sentences are ranked")
    sentence_bridges: bool = Field(True, description="add sentences that bridge two question entities")
    sentence_dense: int = Field(5, description="sentences added from dense passage retrieval")
    relevance_weights: Mapping[str, float] | None = Field(None, description="weights of the relevance terms")
    extraction: Literal["llm", "offline"] = Field("llm", description="question triples by LLM or offline parser")
    phrase_facts: Literal["uncovered", "always", "never"] = Field("uncovered", description="phrase facts use")
    memorize: bool = Field(True, description="store the question's and answer's runs")
    memorize_unanswered: bool = Field(False, description="store runs of 'no answer' replies too")
    replay: bool = Field(True, description="reuse stored question/answer runs")
    memory_scope: Sequence[str] | None = Field(None, description="tenant labels of the codebook namespace, e.g. "
                                                                 "('{user_id}',)")
    consolidate: bool = Field(True, description="merge entity aliases after memorising")
    alias_threshold: float = Field(ALIAS_THRESHOLD, description="cosine at which entities are aliases")
    entity_budget: int | None = Field(None, description="entities kept before k-means refinement")
    layer2_min_cos: float = Field(LAYER2_FLOOR, description="lowest cosine a k-means merge accepts")
    dense_fusion: bool = Field(True, description="fuse the fine ranking with dense passage retrieval")


__all__ = ["AutoprunedOptions", "ENCODINGS", "Encoding", "Show"]
