"""ReMindRAG's constants, run state and the pydantic decisions its LLM calls answer."""

from __future__ import annotations

from typing import Any, Literal, Sequence

from pydantic import BaseModel, Field, ValidationError

from langgraph_kgmem.graphs.common import MAX_LIST_ITEMS, BaseState, ModelId, ModelName

METHOD = "remindrag"
Direction = Literal["forward", "backward"]
# edges a traversal may cross (anchor_chunk is internal to a chunk+anchor evidence unit)
TRAVERSE_KINDS = ("relation", "synonym", "context", "next")
UNIT_KINDS = ("entity", "chunk", "anchor")
MAX_CANDIDATES = 20          # forward candidates shown to the model per step
MAX_BACKWARD = 10            # visited nodes offered for a backward move
SEED_POOL = 5                # seeds are chosen among the SEED_POOL × seeds_k entities nearest the question
OFFLINE_COVERAGE = 0.75      # offline sufficiency: share of question words the evidence must contain
NO_UPDATES: dict[str, Any] = {"enhanced": 0, "penalised": 0, "enhanced_ids": [], "penalised_ids": [],
                              "useful_ids": [], "written": 0}



class ReMindState(BaseState, total=False):
    """ReMindRAG's working state: the seeds, the subgraph S grown so far, what memory replayed, the
    node the traversal stands on, its path, counters, and why it stopped."""
    seed_ids: list[str]
    subgraph_nodes: list[str]          # S: evidence-unit and entity ids, in discovery order
    subgraph_edges: list[str]          # S: edge ids (each joined S together with one node)
    replayed: dict[str, Any]           # what memory supplied: {"nodes", "edges"}
    current: str                       # the node the traversal stands on
    path: list[dict[str, Any]]         # hops: {"step", "direction", "from", "to", "edge", "decided_by"}
    hops: int
    steps: int
    sufficient: bool
    traversed: bool
    stop_reason: str
    memory_updates: dict[str, Any]
    fusion: dict[str, Any]             # adaptive fusion: signals, confidence, the walk's share, both rankings
    reused: dict[str, Any] | None      # reuse: the earlier run started from (graphs/reuse.py), else None


class ReMindOutput(BaseState, total=False):
    """What a ReMindRAG run returns besides the common keys: seeds, path, what memory replayed, the
    memory updates it made and why the traversal stopped."""
    seed_ids: list[str]
    path: list[dict[str, Any]]
    replayed: dict[str, Any]
    memory_updates: dict[str, Any]
    stop_reason: str
    fusion: dict[str, Any]
    reused: dict[str, Any] | None



class SubQuestions(BaseModel):
    """Split the question into the simpler questions that must be answered to answer it."""

    sub_questions: list[ModelName] = Field(max_length=8, description="1 to 4 self-contained sub-questions, in the "
                                                                     "order to answer them")


class Sufficiency(BaseModel):
    """Whether the collected evidence already answers the question."""

    sufficient: bool = Field(description="true only if the evidence contains everything the answer needs")


class NextMove(BaseModel):
    """The next move of the graph walk: go forward to a neighbour of the current node, or go back to a
    node visited earlier and continue from there."""

    direction: Direction = Field(description="'forward' (a listed neighbour) or 'backward' (a listed visited node)")
    node_id: ModelId = Field(description="the id of the chosen node, copied exactly from the lists")


def read_person_move(reply: Any, forward: Sequence[str], backward: Sequence[str]) -> NextMove:
    """A person's resume value as a move, checked against the ids the interrupt offered.

    ``reply`` is a node id (its list gives the direction) or ``{"direction", "node_id"}``.

    Raises:
        ValueError: the value is not a move, or names an id the interrupt did not offer; the
            message says what was given and lists what may be chosen, for the next interrupt.
    """
    offered = {"forward": list(forward), "backward": list(backward)}
    choices = "; ".join(f"{d}: {', '.join(ids) if ids else '(none)'}" for d, ids in offered.items())
    if isinstance(reply, str):
        node_id = reply.strip()
        direction = next((d for d, ids in offered.items() if node_id in ids), None)
        if direction is None:
            raise ValueError(f"{reply!r} is not one of the offered ids; resume with one of them ({choices})")
        return NextMove(direction=direction, node_id=node_id)   # type: ignore[arg-type]
    try:
        move = NextMove.model_validate(reply)
    except ValidationError as exc:
        raise ValueError(f"could not read {reply!r} as a move ({exc.errors()[0]['msg']}); resume with a node id "
                         f"or {{'direction': 'forward'|'backward', 'node_id': ...}} ({choices})") from None
    if move.node_id not in offered[move.direction]:
        raise ValueError(f"{move.node_id!r} is not one of the offered {move.direction} ids; resume with one of "
                         f"them ({choices})")
    return move


class UsefulMarks(BaseModel):
    """The evidence items (passages and facts) that the answer actually relied on."""

    useful_ids: list[ModelId] = Field(max_length=MAX_LIST_ITEMS,
                                      description="ids of the useful items, copied exactly from the list")
