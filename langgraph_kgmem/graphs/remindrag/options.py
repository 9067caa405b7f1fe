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

from typing import Any, ClassVar, Literal, Mapping, Sequence

from pydantic import Field

from langgraph_kgmem.errors import KgmemInputError, check_int, check_number
from langgraph_kgmem.graphs.prompt_overrides import PromptOptions
from langgraph_kgmem.graphs.reuse import ReuseOptions

_INT_FLOORS = {"seeds_k": 1, "max_hops": 0, "max_replay_nodes": 0, "chunk_chars": 50, "top_passages": 1}


class RemindragOptions(PromptOptions, ReuseOptions):
    """ReMindRAG options (see :func:`~langgraph_kgmem.graphs.remindrag.create_remindrag_graph`)."""

    INT_FLOORS: ClassVar[Mapping[str, int]] = _INT_FLOORS

    METHOD: ClassVar[str] = "create_remindrag_graph"
    PROMPTS_MODULE: ClassVar[str] = "langgraph_kgmem.graphs.remindrag.prompts"
    BUILD_ONLY: ClassVar[frozenset[str]] = frozenset({"memory_scope", "synonym_threshold", "human_in_the_loop"})

    memory_scope: Sequence[str] | None = Field(None, description="tenant labels of the memory namespace, e.g. "
                                                                 "('{user_id}',)")
    seeds_k: int = Field(2, description="seed entities per (sub-)question")
    alpha: float = Field(0.1, description="weight of node-embedding similarity in the replay weight")
    lam: float = Field(0.55, description="replay threshold: an edge is replayed when its weight exceeds it")
    max_hops: int = Field(10, description="traversal moves per question, backward moves included")
    max_steps: int | None = Field(None, description="total loop decisions (default 2*max_hops + 2)")
    max_replay_nodes: int = Field(64, description="nodes memory replay may add")
    synonym_threshold: float | None = Field(None, description="add synonym edges at this cosine once, at build")
    decompose: bool = Field(False, description="split the question into sub-questions (one extra LLM call)")
    chunk_chars: int = Field(800, description="passages longer than this are condensed in prompts")
    human_in_the_loop: bool = Field(False, description="a person chooses each traversal move (interrupt)")
    replay: bool = Field(True, description="follow remembered edges first (False: every question is walked)")
    experience: bool = Field(False, description="share the experience layer: replay also follows edges credited by "
                                                "feedback or other runs, and confirmed walks credit their edges")
    dense_fusion: bool = Field(True, description="fuse the walk's passages with the dense passage ranking")
    top_passages: int = Field(5, description="passages in the evidence (at least)")
    fusion: Literal["fixed", "adaptive"] = Field(
        "fixed", description="with dense_fusion: 'fixed' opens with vector search's best passage, then takes turns; "
                             "'adaptive' gives the walk one place, every other place or all of them by its confidence")
    fusion_weak: float = Field(0.0, description="adaptive fusion: below this confidence the walk gets one "
                                                "evidence place")
    fusion_strong: float = Field(1.01, description="adaptive fusion: from this confidence on, the walk's own order")

    @classmethod
    def check_values(cls, opts: Mapping[str, Any]) -> None:
        """See :meth:`MethodOptions.check_values`."""
        super().check_values(opts)
        check_int("max_steps", opts["max_steps"], 1, optional=True)
        check_number("alpha", opts["alpha"], 0.0, 1.0)
        check_number("lam (the replay threshold λ)", opts["lam"], -1.0, 1.0)
        check_number("synonym_threshold", opts["synonym_threshold"], 0.0, 1.0, low_open=True, optional=True)
        check_number("fusion_weak", opts["fusion_weak"], 0.0)
        if opts["fusion_strong"] < opts["fusion_weak"]:
            raise KgmemInputError(f"fusion_strong ({opts['fusion_strong']}) must be >= fusion_weak "
                                  f"({opts['fusion_weak']})")
        scope = opts["memory_scope"]
        if scope is not None and (isinstance(scope, str) or not all(isinstance(x, str) for x in scope)):
            raise KgmemInputError(f"memory_scope must be a tuple of labels such as ('{{user_id}}',), got {scope!r}")

    @property
    def step_cap(self) -> int:
        """The loop's decisions at most: ``max_steps``, else ``2 * max_hops + 2``."""
        return self.max_steps if self.max_steps is not None else 2 * self.max_hops + 2
