"""CatRAG's constants, run state and the pydantic decisions its LLM calls answer."""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, Field

from langgraph_kgmem.graphs.common import MAX_LIST_ITEMS, BaseState, ModelName

# ------------------------------------------------------------------------------------ constants

PPR_EDGE_KINDS: tuple[str, ...] = ("relation", "synonym", "context")
SUMMARY_KIND = "summaries"            # RecordMemory kind of the cached neighbour summaries
WEAK_MULTIPLIER = 0.2                 # Stage I rest and the "unparsable → 4" score
UNPARSABLE_SCORE = 4
HUB_FRACTION = 0.01                   # hubs = top 1% weighted-degree entity nodes
HUB_TOP = 10                          # hub mass is read on the top-10 PPR nodes
MAX_SUMMARY_FACTS = 40                # facts shown to the summariser
MAX_CONTEXT_FACTS = 8                 # facts shown per neighbour when it has ≤ τ facts
MAX_SUMMARY_CHARS = 600               # a cached summary is cut to this: it is shown in every later prompt
Tier = Literal["pruned", "weak", "strong", "key", "stage1_weak"]


def score_multiplier(score: Any) -> tuple[float, Tier]:
    """Edge multiplier and tier for a 0–10 relevance score (anything unparsable counts as 4)."""
    try:
        value = float(score)
        if not math.isfinite(value) or value < 0 or value > 10:
            raise ValueError
        s = int(round(value))
    except (TypeError, ValueError, OverflowError):
        s = UNPARSABLE_SCORE
    if s <= 3:
        return 0.0, "pruned"
    if s <= 6:
        return 0.2 + 0.05 * (s - 4), "weak"
    if s <= 9:
        return 2.0 + 0.5 * (s - 7), "strong"
    return 5.0, "key"


class CatragState(BaseState, total=False):
    """CatRAG's working state: candidate and verified facts, anchors, per-query edge weight overrides,
    the ranked passages, PPR diagnostics, the fallback taken and step timings."""
    candidates: list[dict[str, Any]]      # retrieved facts {id, text, score, src, dst, chunks}
    facts: list[dict[str, Any]]           # verified seed facts T_seed
    anchors: list[dict[str, Any]]         # {name, id, text, passages, weight}
    overrides: list[list[Any]]            # [src, dst, multiplier] (per query, never stored)
    edge_weights: dict[str, int]          # edges per tier
    passages: list[dict[str, Any]]        # ranked passages {id, score} (deeper than evidence)
    ppr: dict[str, Any]                   # hub_mass, top_nodes, seeds, overrides, ms
    fallback: str | None                  # "dense" when no fact survived the filter
    timings: dict[str, float]             # non-LLM ms per step
    reused: dict[str, Any] | None         # reuse: the earlier run started from (graphs/reuse.py), else None
    calibration: dict[str, Any]           # the tenant's calibrated setting (graphs/catrag/calibration.py), or {}


class CatragOutput(BaseState, total=False):  # answer, evidence, usage, method, model + these
    """What a CatRAG run returns besides the common keys: facts, anchors, edge tiers, ranked passages,
    PPR diagnostics, the fallback taken and timings."""
    facts: list[dict[str, Any]]
    anchors: list[dict[str, Any]]
    edge_weights: dict[str, int]
    passages: list[dict[str, Any]]
    ppr: dict[str, Any]
    fallback: str | None
    timings: dict[str, float]
    reused: dict[str, Any] | None


# ------------------------------------------------------------------------------------ decisions


class RecognizedFacts(BaseModel):
    """Which of the numbered candidate facts help answer the question. Keep only facts that are
    directly relevant (at most the allowed number); an empty list means none is."""

    keep: list[int] = Field(default_factory=list, max_length=MAX_LIST_ITEMS,
                            description="numbers of the relevant facts, most useful first")


class QueryEntities(BaseModel):
    """The named entities (people, places, organisations, works, dates) mentioned in the question,
    spelled as in the question."""

    names: list[ModelName] = Field(default_factory=list, max_length=20, description="entity names found in the question")


class NeighbourScore(BaseModel):
    """One numbered neighbour and its score."""
    neighbour: int = Field(ge=1, le=10_000, description="the neighbour's number")
    score: Any = Field(description="0-10: how useful following this edge is for answering the question")


class NeighbourScores(BaseModel):
    """Relevance of each numbered neighbour of the seed entity for answering the question:
    0-3 irrelevant, 4-6 weak, 7-9 useful, 10 essential. Score every neighbour."""

    scores: list[NeighbourScore] = Field(default_factory=list, max_length=MAX_LIST_ITEMS)
