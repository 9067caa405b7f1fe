"""ReMindRAG's options: its factory's keyword arguments as a typed model (the CLI, the served
graphs and the docs read the fields) and the graph's ``context_schema``. The nodes read these
knobs once, when the graph is built, so a run's context may set the model and the tenant ids
only; a knob in ``context=`` is refused with a message naming it."""

from __future__ import annotations

from typing import ClassVar, Sequence

from pydantic import Field

from langgraph_kgmem.graphs.spec import MethodOptions


class RemindragOptions(MethodOptions):
    """ReMindRAG options (see :func:`~langgraph_kgmem.graphs.remindrag.create_remindrag_graph`)."""

    METHOD: ClassVar[str] = "create_remindrag_graph"
    FIXED_AT_BUILD: ClassVar[bool] = True

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
    dense_fusion: bool = Field(True, description="fuse the walk's passages with the dense passage ranking")
    top_passages: int = Field(5, description="passages in the evidence (at least)")


__all__ = ["RemindragOptions"]
