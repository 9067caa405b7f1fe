"""R3-Cycle's constants, run state and the pydantic decisions its LLM calls answer."""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypedDict, runtime_checkable

from pydantic import BaseModel, Field

from langgraph_kgmem.graphs.common import BaseState, ModelText

FINISH = "Finish"
TOOL_CALLS = "tool_calls"     # the endpoint record of a model that answers in prose where a tool call is needed
GRAPH_TOOLS = ("RetrieveNode", "NodeFeature", "NeighbourCheck", "NodeDegree")
HALT_GROWTH = 1.5            # budget multiplier after a halted attempt
NO_ANSWER = "no answer"
MAX_OBSERVATION_CHARS = 1500
MAX_THOUGHT_CHARS = 1000      # a thought (the text beside a tool call) is cut to this
MAX_TOOL_ARGS = 8             # a tool call with more arguments is malformed
MAX_ARG_CHARS = 500           # ... so is one with a longer text argument, or a non-scalar one
FailureType = Literal["incorrect_answer", "halted"]
Outcome = Literal["correct", "incorrect_answer", "halted", "finished"]   # "finished" = not verified (Graph-CoT)



class R3State(BaseState, total=False):
    """R3-Cycle's working state: the current attempt (budget, steps, path, visited nodes, pending tool
    call, answer, verdict) and the closed attempts and reflections of the run."""
    run_id: str
    reused: dict[str, Any] | None      # reuse: the earlier run answered from (graphs/reuse.py), else None
    attempt: int                       # 0-based index of the current attempt
    budget: int                        # step budget of the current attempt
    steps: list[dict[str, Any]]        # current attempt's log: thought, tool, args, observation
    path: list[dict[str, Any]]         # current attempt's knowledge path (hops actually taken)
    visited: list[str]                 # node ids the current attempt touched, in order
    pending: dict[str, Any] | None     # the tool call emitted by `reason`, executed by `act`
    final: str | None                  # the current attempt's Finish answer (None until it finishes)
    guidance: str                      # the reflection advice the current attempt starts from
    verdict: dict[str, Any] | None
    retry: bool
    attempts: list[dict[str, Any]]     # closed attempts: steps, path, outcome, budget, answer
    reflections: list[dict[str, Any]]


class R3Output(TypedDict, total=False):
    """What an R3-Cycle (or Graph-CoT) run returns: the answer, evidence and usage, the method and
    model, the run id and every attempt and reflection."""
    answer: str
    evidence: list[dict[str, Any]]
    usage: dict[str, Any]
    method: str
    model: str
    run_id: str
    attempts: list[dict[str, Any]]
    reflections: list[dict[str, Any]]
    reused: dict[str, Any] | None



class Verdict(BaseModel):
    """Judge whether a proposed answer is right. Say ok=true only if the evidence gathered from the
    graph supports the answer and the answer actually answers the question asked."""

    ok: bool = Field(description="true if the answer is supported by the evidence and answers the question")
    reason: ModelText = Field(default="", description="one sentence: why the answer is or is not acceptable")


class VerifierState(TypedDict, total=False):
    """State of a verifier *graph* (``verifier=`` a compiled LangGraph graph): it is invoked with
    ``question``, ``answer`` and ``evidence`` and must return ``ok`` (and optionally ``reason``)."""

    question: str
    answer: str
    evidence: list[dict[str, Any]]
    ok: bool
    reason: str


class Reflection(BaseModel):
    """Diagnose a failed attempt to answer a question over a graph, and advise the next attempt.
    The next attempt sees only the question and your advice, not the old log, so the advice must
    be self-contained: name the node to start from, the relation or feature to use, and when to
    call Finish."""

    root_cause: ModelText = Field(description="what went wrong, e.g. 'followed the genre relation instead of author'")
    advice: ModelText = Field(description="concrete corrective guidance for a fresh attempt (tools, relations, features)")
    retry: bool = Field(default=True, description="true if a new attempt following the advice is likely to succeed")


class ToolStep(BaseModel):
    """The agent's next action, for a model that answers in prose where a tool call is needed:
    one of the listed tools, by name, with its arguments."""

    thought: str = Field(default="", max_length=MAX_THOUGHT_CHARS, description="one sentence: why this action")
    tool: str = Field(max_length=64, description="the tool to call: exactly one of the listed tool names")
    args: dict[str, str | int | float | bool | None] = Field(
        default_factory=dict, description="the tool's arguments by name, e.g. {\"keyword\": \"Marie Curie\"}")


class FinishArgs(BaseModel):
    """The arguments of the Finish tool: the attempt's final answer."""
    answer: str = Field(max_length=MAX_ARG_CHARS,
                        description="the final short answer: a name, a number, a date or a short phrase")


@runtime_checkable
class Verifier(Protocol):
    """Anything that judges ``(question, answer, evidence)`` and returns a :class:`Verdict`, a bool,
    an ``(ok, reason)`` pair or a dict with ``ok``/``reason``. ``evidence`` is the attempt's visited
    nodes as evidence items plus its tool observations as items of kind ``"observation"``.

    A compiled LangGraph graph (a separate verifier agent) is accepted too: it is invoked with
    ``{"question", "answer", "evidence"}`` and its output must contain ``ok`` (optionally ``reason``
    and ``usage``, which is added to the run's usage) or a ``verdict`` dict."""

    def __call__(self, question: str, answer: str, evidence: list[dict[str, Any]]) -> Any: ...
