"""KG-IRAG's state, output keys and typed decisions (the plan and the judge's verdict), and the
bounds a plan must keep."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from langgraph_kgmem.graphs.common import BaseState

Task = Literal["detect", "latest", "earliest"]
NO_ANSWER = "no answer"
RECORD_EDGE_KINDS = ("temporal", "spatial", "causal", "time_next")
# bounds on what a plan may ask for (a model's or a question's): beyond them the plan is refused
MAX_TRIP_HOURS = 168          # a week
MAX_HORIZON_HOURS = 744       # a month
MAX_STEP_HOURS = 168
MAX_TIME_CHARS = 40


class KgiragState(BaseState, total=False):
    """KG-IRAG's working state: the plan, the current anchor hour and scan direction, the rounds'
    hop counts and sizes, the triples and events read so far, and the judge's notes."""
    plan: dict[str, Any]              # task, location, time, hours, horizon, step, k0, reasoning, event
    anchor: int | None                # current anchor slot τ(t) (hours since epoch)
    direction: str                    # forward | backward
    k: int                            # K(t) of the last round
    hops: list[int]                   # K per round
    round_sizes: list[int]            # |R(t)|: new triples per round
    triples: list[str]                # retrieved edge ids (unique, in retrieval order)
    events: list[str]                 # event node ids read (unique)
    anchors: list[str]                # anchors visited ("YYYY-MM-DD HH:MM")
    iterations: int
    stopped: bool
    retrieved_triples: int
    notes: list[str]                  # the judge's reasons
    no_answer_reason: str             # why the answer is "no answer" (absent otherwise)


class KgiragOutput(BaseState, total=False):  # answer, evidence, usage, method, model + these
    """What a KG-IRAG run returns besides the common keys: its plan, rounds, anchors, hop counts,
    triples and events read, and why there is no answer when there is none."""
    plan: dict[str, Any]
    no_answer_reason: str
    iterations: int
    retrieved_triples: int
    anchors: list[str]
    hops: list[int]
    stopped: bool
    events: list[str]


class TemporalPlan(BaseModel):
    """Read the question and plan the search through the time-stamped records."""

    task: Task = Field(description="detect: does an abnormal event occur during the trip window; "
                                   "latest: latest departure before the given time avoiding it; "
                                   "earliest: earliest departure after the given time avoiding it")
    location: str = Field(max_length=200, description="the location exactly as listed")
    departure_time: str = Field(max_length=MAX_TIME_CHARS,
                                description="the departure time asked about, 'YYYY-MM-DD HH:MM'")
    trip_hours: int = Field(ge=1, le=MAX_TRIP_HOURS, description="trip length in hours (the window is [t, t + hours))")
    horizon_hours: int = Field(0, ge=0, le=MAX_HORIZON_HOURS,
                               description="how far before/after the departure time to search (0 for detect)")
    step_hours: int = Field(2, ge=1, le=MAX_STEP_HOURS, description="hours of records to read per retrieval round")
    k0: int = Field(1, ge=1, le=3, description="hops of the first retrieval round (1 is usually enough)")
    reasoning: str = Field("", max_length=2000, description="the instruction for the judge: what counts as an "
                                                            "abnormal event and when to stop searching")


class JudgeDecision(BaseModel):
    """Decide whether the records read so far settle the question."""

    stop: bool = Field(description="true when the records read so far are enough to answer")
    next_time: str | None = Field(None, max_length=MAX_TIME_CHARS,
                                  description="when not stopping: the time ('YYYY-MM-DD HH:MM') to read "
                                              "next; you may jump past an abnormal event")
    reason: str = Field("", max_length=500, description="one short sentence")
