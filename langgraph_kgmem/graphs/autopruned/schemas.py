"""AutoPrunedRetriever's constants, run state, scoring weights and the pydantic decision its LLM
calls answer (a text's triples)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Callable, Literal

from pydantic import BaseModel, Field

from langgraph_kgmem.graphs.autopruned.codebook import MAX_ENTITY_CHARS, MAX_RELATION_CHARS, Channel
from langgraph_kgmem.graphs.common import BaseState

METHOD = "autopruned"
# The compact reader setting (its measurements are in the docs' benchmarks page): the passages of
# the 20 best runs (fused with the dense ranking) and vector search's top 5, their most relevant
# sentences ("relevance" ranking, and the bridges they name) up to 245 tokens (the default reader).
# create_autopruned_graph(kg, **SENTENCES_PRESET)
SENTENCES_PRESET: dict[str, Any] = {"fine_m": 20, "show": "sentences", "sentence_budget": 245}
SelectionMode = Literal["all", "unique", "none"]
SELECTION_MODES: tuple[str, ...] = ("all", "unique", "none")
SelectionPolicy = Callable[[Channel, list[dict[str, Any]], dict[str, Any]], SelectionMode]
CHANNEL_SECTION = {"F": "facts", "A": "known answers", "Q": "earlier questions"}
SECTION_CHANNEL = {v: k for k, v in CHANNEL_SECTION.items()}
PACK_ORDER: tuple[Channel, ...] = ("F", "A", "Q")
QUESTION_WORDS = frozenset("what which who whom whose when where why how is was are were did does do the a an".split())
NO_ANSWER = re.compile(r"^\s*(no answer|unknown|i don'?t know|n/?a)\W*$", re.I)


@dataclass(frozen=True)
class FineScoring:
    """Weights and thresholds of the fine re-ranking score (cosines of the embedding model)."""

    top_t: int = 3               # mean of the t best line pairs
    tau_cov: float = 0.6         # a query line is covered by a run line at this cosine
    tau_pair: float = 0.5        # centre of the soft many-to-many sigmoid, floor of 1:1 matches
    temperature: float = 0.05    # sigmoid temperature
    tau_whole: float = 0.4       # whole-run similarity counts only above this (and with coverage)
    w_cov: float = 0.3
    w_many: float = 0.2
    w_one: float = 0.2
    w_whole: float = 0.2


class AutoPrunedState(BaseState, total=False):
    """AutoPrunedRetriever's working state: the question's triples and edges in the codebook, the
    coarse and fine candidates, the runs selected per channel and shown, answer memory (replayed,
    stored or not), and the packed prompt with its encoding."""
    query_triples: list[list[str]]
    query_edges: list[int]
    codebook_revision: int                  # the codebook revision query_edges index into
    coarse: list[dict[str, Any]]            # [{"run", "score"}], best first
    candidates: list[dict[str, Any]]        # [{"run", "channel", "score", "via"?}], best first
    fusion: dict[str, Any]                  # adaptive fusion: signals, confidence, share, both rankings
    selection: dict[str, str]               # channel → all / unique / none
    selected_runs: dict[str, list[str]]     # channel → run ids, best first
    shown_edges: dict[str, list[int]]       # run id → its edges in the prompt (all, or pruned: edges_per_run)
    reused: list[str]                       # stored Q/A runs put into the prompt (retrieval atoms)
    replayed_answer: dict[str, Any] | None  # the stored answer given as this answer, with its provenance
    answer_by: str                          # the decider that produced ``answer``
    answer_memory: str                      # replayed / stored / not grounded / unanswered / off
    packed_prompt: str
    encoding: str
    encoding_tokens: dict[str, int]
    prompt_tokens_packed: int
    memorized: list[str]
    consolidation: dict[str, int]
    codebook_size: dict[str, int]


# ------------------------------------------------------------------------------------ decisions


class TextTriple(BaseModel):
    """One fact; its symbols within the codebook's limits (a longer one is malformed output)."""

    subject: str = Field(max_length=MAX_ENTITY_CHARS, description="a short entity name as it appears")
    relation: str = Field(max_length=MAX_RELATION_CHARS, description="a short relation phrase, e.g. 'was born in'")
    object: str = Field(max_length=MAX_ENTITY_CHARS, description="a short entity name, a value, or '?'")


class TextTriples(BaseModel):
    """The facts in the text as [subject, relation, object] triples. Use short entity names as they
    appear; for a question, write the unknown it asks for as "?" (e.g. ["Marie Curie", "born in", "?"])."""

    triples: list[TextTriple] = Field(max_length=16, description="one triple per fact, at most 8")
