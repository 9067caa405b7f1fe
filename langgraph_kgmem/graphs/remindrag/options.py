"""ReMindRAG's options: the factory's keyword arguments, validated once, and the graph's
``context_schema``.

Per run (``app.invoke(inputs, context={"max_hops": 3, "lam": 0.7})``): the seeds, the replay
weight and threshold, the walk's caps, decomposition, passage condensing and the evidence's
fusion and size. Fixed at build, and refused in a run's context: ``memory_scope`` (whose edge
memory the graph reads and writes), ``synonym_threshold`` (synonym edges are written into the KG
once, when the graph is built) and ``human_in_the_loop`` (whether a run stops for a person's
moves: the graph's contract with its caller, which needs a checkpointer).
"""

from __future__ import annotations

from typing import ClassVar, Sequence

from pydantic import Field

from langgraph_kgmem.graphs.fusion import FusionKwargs, FusionOptions
from langgraph_kgmem.graphs.prompt_overrides import PromptKwargs, PromptOptions
from langgraph_kgmem.graphs.reuse import ReuseKwargs, ReuseOptions
from langgraph_kgmem.graphs.spec import AT_BUILD, MethodKwargs, memory_scope_field



class RemindragOptions(PromptOptions, ReuseOptions, FusionOptions):
    """ReMindRAG options: the keyword arguments of
    :func:`~langgraph_kgmem.graphs.remindrag.create_remindrag_graph`, each the run's default.

    Prompts (``prompts``): overrides by name of the ``PROMPTS`` of
    :mod:`~langgraph_kgmem.graphs.remindrag.prompts`.

    Dense fusion (:class:`~langgraph_kgmem.graphs.fusion.FusionOptions`): with ``dense_fusion``
    (default) the passages handed to the answer step (and returned as ``evidence``) are the walk's
    passages fused with the dense ranking of every passage by cosine with the question
    (:func:`~langgraph_kgmem.graphs.common.fuse_with_dense`), cut at ``max(top_passages, passages
    the walk collected)``: vector search's top two, then the walk's finds (in discovery order) and
    vector search's next passages in turns. The walk and its memory are unchanged; no LLM call.
    ``fusion="adaptive"`` lets the walk's confidence decide its share of the evidence
    (:func:`~langgraph_kgmem.ranking.adaptive_fuse`; docs: dense fusion); ``fusion_strong``
    defaults above 1 here, so the walk never has the evidence to itself.

    Reuse (:class:`~langgraph_kgmem.graphs.reuse.ReuseOptions`): a confirmed earlier run (any
    method) of this question or one at cosine ``reuse_similarity`` (``docs/memory.md``): its
    passages join S, no first sufficiency check for its own run (another method's is checked, and
    the walk's own finds rank before its passages); for the same question (not reworded) whose
    evidence is all among those passages, its answer is given again without a call.

    Human in the loop: a person chooses each traversal move instead of the LLM: the step calls
    LangGraph's ``interrupt`` with the candidates (forward neighbours, backward nodes, the offline
    heuristic's suggestion); resume with ``Command(resume="<node id>")`` or
    ``Command(resume={"direction": ..., "node_id": ...})``. A value that is not one of the offered
    ids interrupts again with the same candidates and an ``error`` saying what was wrong. Needs a
    checkpointer. A question that memory replay already answers is answered without a walk, so no
    interrupt happens: pass ``replay=False`` for a person to choose the moves of every question.
    """

    METHOD: ClassVar[str] = "create_remindrag_graph"
    PROMPTS_MODULE: ClassVar[str] = "langgraph_kgmem.graphs.remindrag.prompts"

    memory_scope: Sequence[str] | None = memory_scope_field("the memory namespace (edge memories)")
    seeds_k: int = Field(2, ge=1, description="seed entities per (sub-)question: of the 5 x seeds_k entities nearest "
                                              "it by embedding, those it names (every content word of the name in "
                                              "it) first")
    alpha: float = Field(0.1, ge=0.0, le=1.0, description="weight of node-embedding similarity in the replay weight w")
    lam: float = Field(0.55, ge=-1.0, le=1.0, description="replay threshold λ: memory replay follows an edge only "
                                                          "when its weight w exceeds it")
    max_hops: int = Field(10, ge=0, description="traversal moves per question, backward moves included")
    max_steps: int | None = Field(None, ge=1, description="total loop decisions (sufficiency checks + moves); None: "
                                                          "2*max_hops + 2")
    max_replay_nodes: int = Field(64, ge=0, description="nodes memory replay may add (a bound on the DFS)")
    synonym_threshold: float | None = Field(
        None, gt=0.0, le=1.0, json_schema_extra=AT_BUILD,
        description="if set, synonym edges at this cosine are added to the KG once, when the graph is built "
                    "(kg.add_synonym_edges), so the walk can cross near-duplicate entities")
    decompose: bool = Field(False, description="split the question into sub-questions and seed each (one extra LLM "
                                               "call)")
    chunk_chars: int = Field(800, ge=50, description="passages longer than this are condensed to their most "
                                                     "question-related sentences in prompts")
    human_in_the_loop: bool = Field(False, json_schema_extra=AT_BUILD,
                                    description="a person chooses each traversal move (interrupt; see the class "
                                                "docstring); needs a checkpointer")
    replay: bool = Field(True, description="follow remembered edges first and walk only when what replay found is "
                                           "not sufficient; False: every question starts from its seeds and walks "
                                           "(the memory is still written after each walk, and still ranks the "
                                           "candidates)")
    experience: bool = Field(False, description="share the experience layer (docs/memory.md): replay also follows "
                                                "credited edges; a confirmed walk credits its effective edges and "
                                                "useful passages")
    top_passages: int = Field(5, ge=1, description="with dense_fusion, the least number of passages in the evidence")
    fusion_strong: float = FusionOptions.with_default("fusion_strong", 1.01)

    @property
    def step_cap(self) -> int:
        """The loop's decisions at most: ``max_steps``, else ``2 * max_hops + 2``."""
        return self.max_steps if self.max_steps is not None else 2 * self.max_hops + 2


class RemindragKwargs(MethodKwargs, PromptKwargs, ReuseKwargs, FusionKwargs, total=False):
    """:func:`~langgraph_kgmem.graphs.remindrag.create_remindrag_graph`'s keyword options: the names
    and types of :class:`RemindragOptions` (defaults, bounds and descriptions: there)."""

    memory_scope: Sequence[str] | None
    seeds_k: int
    alpha: float
    lam: float
    max_hops: int
    max_steps: int | None
    max_replay_nodes: int
    synonym_threshold: float | None
    decompose: bool
    chunk_chars: int
    human_in_the_loop: bool
    replay: bool
    experience: bool
    top_passages: int
