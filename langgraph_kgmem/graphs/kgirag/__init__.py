"""KG-IRAG: iterative retrieval over a temporal knowledge graph (docs/methods/kgirag.md).

The KG holds time-stamped records as ``time``/``location``/``event`` nodes with
(t —temporal→ l), (l —spatial→ e), (t —causal→ e) and (t —time_next→ t+1) edges
(see :func:`langgraph_kgmem.ingest.records.add_records`). Questions ask whether a trip of Δt
hours leaving at t meets an abnormal event (rain, heavy traffic), and if so the latest departure
before t or the earliest after t that avoids it within a horizon L.

Nodes:

- ``plan_query`` (LLM1): the task (detect / latest / earliest), location, departure time, trip
  length, horizon, the step (hours of time chain per hop), K(0), and a reasoning prompt stating
  the event rule and the stop criterion. The initial anchor (τ0, ℓ0) follows from them.
  Offline: the question generator's templates parsed exactly, else a regex reading of the time,
  duration and "before/after".
- ``retrieve_triples``: the triples of the K(t)-hop neighbourhood of the anchor along the time
  chain — K(t)·step time nodes from τ(t) in the search direction, with, for each, its
  temporal/causal edges to location ℓ and its event, the event's spatial edge and the time_next
  links — where K(t) = ⌈2 − log2(1 + |R(t−1)| / |R(0)|)⌉ (K ≥ 1; :func:`hop_count`).
- ``judge_retrieval`` (LLM2): stop (the records read so far settle the answer) or the next anchor,
  which may jump past an abnormal event instead of stepping by one. Offline: a rule-based scan
  (:func:`scan_records`) over the records read, using each event's ``abnormal`` flag (the ingest
  event rule); it is exact on the generator's questions.
- ``synthesize_answer`` (LLM1): the answer from all retrieved triples when the judge stopped and
  fewer than κ triples were read; otherwise "no answer". Offline: the same scan.

The loop runs at most ``t_max`` retrieval rounds. :func:`create_singlepass_graph` is the
baseline: the same plan, one retrieval of the whole horizon window, the same answer step.
Every option can be set per run without recompiling: ``app.invoke(inputs, context={"model": m, "t_max": 6})``
(:class:`~langgraph_kgmem.graphs.kgirag.options.KgiragOptions`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal, Mapping, Sequence

from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy
from langgraph.runtime import Runtime
from pydantic import BaseModel, Field

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.common import (DATA_NOTE, BaseState, InputState, check_question, emit_progress,
                                           evidence_item, fence, method_model, require, run_model)
from langgraph_kgmem.graphs.kgirag.options import KgiragOptions
from langgraph_kgmem.graphs.runs import finish_run
from langgraph_kgmem.graphs.spec import MethodSpec, options_of
from langgraph_kgmem.ingest.records import (TemporalIndex, format_time, parse_time, slot_of, temporal_index,
                                            time_of_slot)
from langgraph_kgmem.ingest.temporal_questions import NO_DEPARTURE, NO, YES, parse_question
from langgraph_kgmem.llm import decide, fresh_usage, generate, is_offline, model_label, render

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph

# ------------------------------------------------------------------------------------ constants

Task = Literal["detect", "latest", "earliest"]
NO_ANSWER = "no answer"
RECORD_EDGE_KINDS = ("temporal", "spatial", "causal", "time_next")
_TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{1,2}(?::\d{2})?")
_HOURS_RE = re.compile(r"(\d+)[- ]?(?:hours?|h)\b", re.I)
_WITHIN_RE = re.compile(r"(?:within|at most|up to)\s+(\d+)\s*hours?", re.I)
# bounds on what a plan may ask for (a model's or a question's): beyond them the plan is refused
MAX_TRIP_HOURS = 168          # a week
MAX_HORIZON_HOURS = 744       # a month
MAX_STEP_HOURS = 168
MAX_TIME_CHARS = 40


# ------------------------------------------------------------------------------------ state


KgiragContext = KgiragOptions  # the graph's context_schema (the name earlier releases exported)


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


# ------------------------------------------------------------------------------------ decisions


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


# ------------------------------------------------------------------------------------ prompts

PLAN_PROMPT = """You plan a search through hourly records ({event_name} data). An abnormal event
means: {rule}. Known locations: {locations}. Records span {start} to {end}.
""" + DATA_NOTE + """

A trip leaving at hour t for Δt hours covers the hours t .. t+Δt-1. Extract from the question
the task (detect / latest / earliest), the location, the departure time, the trip length, the
search horizon in hours, how many hours to read per round, and write a reasoning instruction
stating what counts as an abnormal event and when the search can stop.

Question: {question}"""

REASONING_TEXT = {
    "detect": ("An abnormal event is: {rule}. Read the records of {location} for the hours {start} to {end}. "
               "Stop as soon as one of them is abnormal (answer no) or all are normal (answer yes)."),
    "latest": ("An abnormal event is: {rule}. Find the latest departure t' before {time} (at most {horizon} "
               "hours earlier) such that the hours t' .. t'+{last} at {location} are all normal. Search backwards; "
               "when an abnormal hour h is found, jump to t' = h - {hours}. Stop when a clear window is "
               "confirmed or the horizon is exhausted (answer none)."),
    "earliest": ("An abnormal event is: {rule}. Find the earliest departure t' after {time} (at most {horizon} "
                 "hours later) such that the hours t' .. t'+{last} at {location} are all normal. Search forwards; "
                 "when an abnormal hour h is found, jump to t' = h + 1. Stop when a clear window is confirmed "
                 "or the horizon is exhausted (answer none)."),
}

JUDGE_PROMPT = """{reasoning}
""" + DATA_NOTE + """

Question: {question}

Records read so far ({count} records, {triples} triples):
{records}

Newly read this round: {new} triples around {anchor}.
Decide: stop (enough to answer), or give the next time to read (you may skip past an abnormal event)."""

ANSWER_PROMPT = """{reasoning}
""" + DATA_NOTE + """

Records:
{records}

Question: {question}
Answer with only: "yes" or "no" for whether the event can be avoided; or the departure time as
YYYY-MM-DD HH:MM; or "none" if no departure within the horizon avoids it."""


# ------------------------------------------------------------------------------------ pure functions


def hop_count(previous: int, first: int, *, k_min: int = 1) -> int:
    """K(t) = ⌈2 − log2(1 + |R(t−1)| / |R(0)|)⌉, at least ``k_min`` (1).

    Few new triples last round (a gap, or overlap with what was read) widen the next
    neighbourhood to 2 hops; as many as in round 0 keep it at 1. ``first == 0`` counts as ratio 0.
    """
    if previous < 0 or first < 0:
        raise KgmemInputError(f"hop_count needs non-negative counts, got previous={previous}, first={first}")
    ratio = previous / first if first > 0 else 0.0
    return max(k_min, math.ceil(2.0 - math.log2(1.0 + ratio) - 1e-12))


@dataclass
class ScanResult:
    """What the rule-based judge (:func:`scan_records`) found: ``done`` with the ``answer``, or not done
    with the hour to read next (``need``) and the direction of the scan."""
    done: bool
    answer: str | None = None       # when done
    need: int | None = None         # when not done: the next slot to read
    direction: str = "forward"


def scan_records(task: str, t: int, hours: int, horizon: int, known: Mapping[int, bool]) -> ScanResult:
    """The rule-based judge: settle the question from ``known`` (slot → abnormal) or name the next
    hour to read. Jumps past abnormal hours (earliest: to h + 1; latest: to h − hours)."""
    if task == "detect":
        window = range(t, t + hours)
        if any(known.get(s) for s in window):
            return ScanResult(True, NO)
        missing = [s for s in window if s not in known]
        return ScanResult(False, need=missing[0]) if missing else ScanResult(True, YES)
    if task == "earliest":
        c = t + 1
        while c <= t + horizon:
            window = range(c, c + hours)
            bad = [s for s in window if known.get(s)]
            if bad:
                c = max(bad) + 1
                continue
            missing = [s for s in window if s not in known]
            if missing:
                return ScanResult(False, need=missing[0])
            return ScanResult(True, format_time(time_of_slot(c)))
        return ScanResult(True, NO_DEPARTURE)
    if task == "latest":
        c = t - 1
        while c >= t - horizon:
            window = range(c, c + hours)
            bad = [s for s in window if known.get(s)]
            if bad:
                c = min(bad) - hours
                continue
            missing = [s for s in window if s not in known]
            if missing:
                return ScanResult(False, need=max(missing), direction="backward")
            return ScanResult(True, format_time(time_of_slot(c)))
        return ScanResult(True, NO_DEPARTURE, direction="backward")
    raise KgmemInputError(f"unknown task {task!r}; expected detect, latest or earliest")


def horizon_window(task: str, t: int, hours: int, horizon: int) -> tuple[int, int]:
    """[first, last] slots a single pass must read to answer any question of this kind."""
    if task == "detect":
        return t, t + hours - 1
    if task == "earliest":
        return t + 1, t + horizon + hours - 1
    return t - horizon, t + hours - 2


def default_step(task: str, hours: int) -> int:
    """The offline planner's step: the trip window itself for detection; at least 2 hours per
    round when stepping through a horizon (fewer rounds, little over-reading)."""
    return int(hours) if task == "detect" else max(2, int(hours))


def neighbourhood_slots(idx: TemporalIndex, anchor: int, k: int, step: int, direction: str) -> list[int]:
    """The time slots within K hops of the anchor: K·step consecutive time nodes of the time chain
    starting at (forward) or ending at (backward) the anchor."""
    p = idx.position(anchor, direction)
    if p is None:
        return []
    n = max(1, k * step)
    lo, hi = (p, min(len(idx.slots), p + n)) if direction == "forward" else (max(0, p - n + 1), p + 1)
    return [int(s) for s in idx.slots[lo:hi]]


def collect_triples(kg: "KnowledgeGraph", idx: TemporalIndex, slots: Sequence[int],
                    location: str | None) -> tuple[list[str], list[str]]:
    """(edge ids, event ids) of the records at ``location`` (all locations when None) in ``slots``:
    temporal, causal and spatial edges plus the time_next links between the slots."""
    pos = {int(s): i for i, s in enumerate(idx.slots.tolist())} if len(slots) > 64 else None
    want = set(slots)
    edges: list[str] = []
    events: list[str] = []
    loc_ids = {idx.locations[location]} if location is not None and location in idx.locations else set(
        idx.locations.values())
    for s in slots:
        i = pos[s] if pos is not None else idx.position(s, "forward")
        if i is None:
            continue
        tid = idx.time_ids[i]
        for e in kg.edges_of(tid, direction="out"):
            if e.kind == "temporal" and e.dst in loc_ids:
                edges.append(e.id)
            elif e.kind == "time_next":
                node = kg.node(e.dst)
                if node is not None and int(node.attrs.get("slot", -1)) in want:
                    edges.append(e.id)
            elif e.kind == "causal":
                ev = kg.node(e.dst)
                if ev is None or (location is not None and ev.attrs.get("location") != location):
                    continue
                edges.append(e.id)
                events.append(ev.id)
                edges.extend(x.id for x in kg.edges_of(ev.id, direction="in") if x.kind == "spatial")
    return edges, events


def known_records(kg: "KnowledgeGraph", event_ids: Sequence[str]) -> dict[int, bool]:
    """slot → abnormal for the events read (several locations: abnormal if any of them is)."""
    out: dict[int, bool] = {}
    for eid in event_ids:
        n = kg.node(eid)
        if n is not None:
            s = int(n.attrs["slot"])
            out[s] = out.get(s, False) or bool(n.attrs.get("abnormal"))
    return out


def record_lines(kg: "KnowledgeGraph", event_ids: Sequence[str], limit: int = 400) -> str:
    """The texts of these event nodes, in time order, at most ``limit``, fenced as data for a prompt."""
    nodes = sorted((kg.node(e) for e in dict.fromkeys(event_ids) if kg.node(e) is not None),
                   key=lambda n: int(n.attrs["slot"]))
    return fence([f"- {n.text}" for n in nodes[:limit]])


def clean_answer(text: str) -> str:
    """A model's free-text answer in the questions' answer forms: a timestamp "YYYY-MM-DD HH:MM",
    "yes", "no", "none" or "no answer" (anything else is kept, stripped)."""
    t = text.strip().strip('".').strip()
    low = t.lower()
    if low.startswith(NO_ANSWER):
        return NO_ANSWER
    m = _TIME_RE.search(t)
    if m:
        try:
            return format_time(parse_time(m.group(0) if ":" in m.group(0) else m.group(0) + ":00"))
        except KgmemInputError:
            pass
    for word in (NO_DEPARTURE, YES, NO):
        if re.match(rf"{word}\b", low):
            return word
    return t or NO_ANSWER


def offline_plan(question: str, idx: TemporalIndex) -> dict[str, Any] | None:
    """The plan from the generator's templates (exact), else a regex reading; None if no time."""
    parsed = parse_question(question)
    if parsed is not None:
        loc = idx.location_of(parsed.location) or parsed.location
        return {"task": parsed.task, "location": loc, "time": parsed.time, "hours": parsed.hours,
                "horizon": parsed.horizon, "event": parsed.event}
    m = _TIME_RE.search(question)
    if not m:
        return None
    try:
        when = format_time(parse_time(m.group(0) if ":" in m.group(0) else m.group(0) + ":00"))
    except KgmemInputError:
        return None
    low = question.lower()
    task = "latest" if ("latest" in low or "before" in low) else "earliest" if (
        "earliest" in low or "after" in low) else "detect"
    hours = _HOURS_RE.search(question)
    within = _WITHIN_RE.search(question)
    loc = next((name for name in sorted(idx.locations, key=len, reverse=True) if name.lower() in low), None)
    if loc is None and len(idx.locations) == 1:
        loc = next(iter(idx.locations))
    return {"task": task, "location": loc, "time": when, "hours": int(hours.group(1)) if hours else 1,
            "horizon": int(within.group(1)) if within else (12 if task != "detect" else 0), "event": idx.event_name}



def plan_problem(idx: TemporalIndex, time: str, hours: int, horizon: int) -> str | None:
    """Why a plan (a model's, or read from the question) cannot be searched, or None: a departure
    time that is not a timestamp or lies more than :data:`MAX_HORIZON_HOURS` +
    :data:`MAX_TRIP_HOURS` outside the records, a trip or horizon beyond its bound."""
    try:
        t = slot_of(parse_time(time))
    except (KgmemInputError, OverflowError, ValueError) as exc:
        return str(exc) if isinstance(exc, KgmemInputError) else f"cannot read timestamp {time!r}"
    if not 1 <= hours <= MAX_TRIP_HOURS:
        return f"trip_hours must be in [1, {MAX_TRIP_HOURS}], got {hours}"
    if not 0 <= horizon <= MAX_HORIZON_HOURS:
        return f"horizon_hours must be in [0, {MAX_HORIZON_HOURS}], got {horizon}"
    if len(idx.slots):
        margin = MAX_HORIZON_HOURS + MAX_TRIP_HOURS
        lo, hi = int(idx.slots[0]) - margin, int(idx.slots[-1]) + margin
        if not lo <= t <= hi:
            return (f"departure time {time} is too far from the records "
                    f"({format_time(time_of_slot(int(idx.slots[0])))} to {format_time(time_of_slot(int(idx.slots[-1])))})")
    return None


def _reasoning(plan: Mapping[str, Any], rule: str) -> str:
    t = slot_of(parse_time(plan["time"]))
    hours = int(plan["hours"])
    return REASONING_TEXT[plan["task"]].format(
        rule=rule, location=fence(plan.get("location") or "every location", inline=True), time=plan["time"],
        horizon=plan.get("horizon", 0), hours=hours, last=f"{hours - 1}" if hours > 1 else "0",
        start=plan["time"], end=format_time(time_of_slot(t + hours - 1)))


def _evidence(kg: "KnowledgeGraph", edge_ids: Sequence[str]) -> list[dict[str, Any]]:
    return [evidence_item(kg, eid) for eid in edge_ids if kg.edge(eid) is not None]


# ------------------------------------------------------------------------------------ shared nodes


@dataclass(frozen=True)
class KgiragDeps:
    """What the nodes share for the graph's lifetime (bound with ``functools.partial``)."""

    kg: "KnowledgeGraph"
    model: Any                  # the build's model, resolved once (a run's context may replace it)
    options: KgiragOptions      # the build's options (a run's context overrides them)
    method: str = "kgirag"      # or "singlepass"


def plan_query(state: KgiragState, runtime: Runtime[KgiragOptions], *, deps: KgiragDeps) -> dict[str, Any]:
    """LLM1: the task, location, time, trip length, horizon, step, K(0) and the reasoning prompt."""
    question = check_question(state)
    opts = options_of(runtime, deps.options)   # a bad per-run option fails here, before any work
    mdl = run_model(runtime, deps.model)
    kg, step, k0 = deps.kg, opts.step, opts.k0
    require("KG-IRAG", kg=kg, records=True)   # a KG without records would only ever answer "no answer"
    idx = temporal_index(kg)
    rule = "; ".join(idx.event_rules) or "the record is flagged abnormal"
    try:
        guess = offline_plan(question, idx)
        unreadable = None if guess is not None else "the question names no departure time"
    except KgmemInputError as exc:  # a time in the question that is no timestamp: no plan from the question
        guess, unreadable = None, str(exc)
    if guess is not None:
        unreadable = plan_problem(idx, guess["time"], int(guess["hours"]), int(guess["horizon"]))
        if unreadable:
            guess = None  # the question itself asks for what no plan may: only a model's valid plan is usable

    def offline() -> TemporalPlan:
        g = guess or {"task": "detect", "location": next(iter(idx.locations), ""), "time": "1970-01-01 00:00",
                      "hours": 1, "horizon": 0}
        # the question's own values (bounded by plan_problem above): not validated as model output
        return TemporalPlan.model_construct(
            task=g["task"], location=g["location"] or "", departure_time=g["time"], trip_hours=g["hours"],
            horizon_hours=g["horizon"], step_hours=step or default_step(g["task"], g["hours"]), k0=k0 or 1,
            reasoning="")

    def validate(p: TemporalPlan) -> str | None:
        if idx.location_of(p.location) is None and len(idx.locations) > 1:
            # the record locations are the data's own words: fenced in the retry's feedback too
            return (f"location {fence(p.location, inline=True, empty=repr(p.location))} is not one of: "
                    f"{fence(', '.join(sorted(idx.locations)), inline=True)}")
        problem = plan_problem(idx, p.departure_time, p.trip_hours, p.horizon_hours)
        if problem:
            return problem
        if p.task != "detect" and p.horizon_hours < 1:
            return "horizon_hours must be >= 1 for latest/earliest"
        return None

    span = (format_time(time_of_slot(int(idx.slots[0]))), format_time(time_of_slot(int(idx.slots[-1])))) \
        if len(idx.slots) else ("-", "-")
    names = sorted(idx.locations)
    shown = ", ".join(names[:50]) + (f" (and {len(names) - 50} more)" if len(names) > 50 else "")
    prompt = render(PLAN_PROMPT, event_name=idx.event_name, rule=rule, locations=fence(shown, inline=True),
                    start=span[0], end=span[1], question=state["question"])
    decision, usage = decide(mdl, TemporalPlan, prompt, step="plan_query", offline=offline, validate=validate,
                             context={"question": state["question"], "offline_plan": guess,
                                      "locations": sorted(idx.locations)})
    # without a readable time in the question, only a model's own (non-fallback) plan is usable
    ok = guess is not None or (not is_offline(mdl) and not usage.get("fallbacks"))
    loc = idx.location_of(decision.location) or (next(iter(idx.locations)) if len(idx.locations) == 1 else None)
    plan = {"task": decision.task, "location": loc, "time": format_time(parse_time(decision.departure_time)),
            "hours": int(decision.trip_hours), "horizon": int(decision.horizon_hours),
            "step": int(step or decision.step_hours), "k0": int(k0 or decision.k0),
            "event": (guess or {}).get("event") or idx.event_name, "valid": bool(ok and len(idx.slots))}
    plan["reasoning"] = decision.reasoning.strip() or _reasoning(plan, rule)
    if not plan["valid"]:   # said in the output: a bare "no answer" leaves the user guessing why
        plan["problem"] = (f"{unreadable or 'the model gave no usable plan'}; ask about a departure time "
                           f"within the records ({span[0]} to {span[1]}), e.g. 'if I leave at {span[0]} and "
                           "travel for 2 hours'")
    start = scan_records(plan["task"], slot_of(parse_time(plan["time"])), plan["hours"], plan["horizon"], {})
    emit_progress({"event": "plan", "plan": plan})
    return {"plan": plan, "anchor": start.need, "direction": start.direction, "iterations": 0, "triples": [],
            "events": [], "anchors": [], "hops": [], "round_sizes": [], "notes": [], "stopped": False,
            "usage": fresh_usage(usage), "method": deps.method, "model": model_label(mdl)}



def no_answer_reason(state: Mapping[str, Any], kappa: int) -> str:
    """Why the answer step answers "no answer" without asking (see :func:`synthesis_prompt`)."""
    plan = state.get("plan", {})
    if not plan.get("valid"):
        return f"the question could not be planned as a search of the records: {plan.get('problem', '')}"
    if len(state.get("triples", [])) >= kappa:
        return f"the records read reached kappa={kappa} triples before the question was settled"
    return "the retrieval rounds ran out (t_max) before the records read settled the question"


def synthesis_prompt(kg: "KnowledgeGraph", question: str, plan: Mapping[str, Any], events: Sequence[str], *,
                      stopped: bool, n_triples: int, kappa: int) -> str | None:
    """The prompt the answer step sends, or None when it answers "no answer" without asking: the
    judge never stopped the loop, the triples reached κ, or the plan is not valid."""
    if not stopped or n_triples >= kappa or not plan.get("valid"):
        return None
    return render(ANSWER_PROMPT, reasoning=plan["reasoning"], records=record_lines(kg, events), question=question)


def synthesize_answer(state: KgiragState, runtime: Runtime[KgiragOptions], *, deps: KgiragDeps) -> dict[str, Any]:
    """LLM1: the answer from every retrieved record, or "no answer" (unstopped, over κ, invalid plan);
    the run gets its ``run_id`` and record for feedback here."""
    out = _synthesize(state, runtime, deps=deps)
    return {**out, **finish_run(deps.kg, method=deps.method, question=state["question"],
                                evidence=out.get("evidence", []), answer=out.get("answer"))}


def _synthesize(state: KgiragState, runtime: Runtime[KgiragOptions], *, deps: KgiragDeps) -> dict[str, Any]:
    """The answer step itself (see :func:`synthesize_answer`)."""
    opts = options_of(runtime, deps.options)
    mdl = run_model(runtime, deps.model)
    kg, kappa, method = deps.kg, opts.kappa, deps.method
    plan = state["plan"]
    triples = state.get("triples", [])
    evidence = _evidence(kg, triples)
    base = {"evidence": evidence, "retrieved_triples": len(triples), "method": method}
    prompt = synthesis_prompt(kg, state["question"], plan, state.get("events", []),
                              stopped=bool(state.get("stopped")), n_triples=len(triples), kappa=kappa)
    if prompt is None:
        return {**base, "answer": NO_ANSWER, "no_answer_reason": no_answer_reason(state, kappa)}
    known = known_records(kg, state.get("events", []))
    res = scan_records(plan["task"], slot_of(parse_time(plan["time"])), plan["hours"], plan["horizon"], known)
    offline_answer = res.answer if res.done else NO_ANSWER
    if is_offline(mdl):
        return {**base, "answer": offline_answer}
    text, usage = generate(mdl, prompt, step="synthesize_answer",
                           context={"question": state["question"], "evidence_ids": [e["id"] for e in evidence],
                                    "event_ids": list(state.get("events", [])), "plan": plan,
                                    "offline_answer": offline_answer},
                           fallback=lambda: offline_answer)
    return {**base, "answer": clean_answer(text), "usage": usage}



def retrieve_triples(state: KgiragState, *, deps: KgiragDeps) -> dict[str, Any]:
    """The triples of the K(t)-hop neighbourhood of the anchor along the time chain."""
    kg = deps.kg
    idx = temporal_index(kg)
    plan = state["plan"]
    sizes = state.get("round_sizes", [])
    k = int(plan["k0"]) if not sizes else hop_count(sizes[-1], sizes[0])
    anchor = state.get("anchor")
    slots = neighbourhood_slots(idx, anchor, k, int(plan["step"]), state.get("direction", "forward")) \
        if anchor is not None else []
    edges, events = collect_triples(kg, idx, slots, plan.get("location"))
    seen = set(state.get("triples", []))
    new = [e for e in dict.fromkeys(edges) if e not in seen]
    seen_ev = set(state.get("events", []))
    new_ev = [e for e in dict.fromkeys(events) if e not in seen_ev]
    it = state.get("iterations", 0) + 1
    where = format_time(time_of_slot(anchor)) if anchor is not None else "-"
    emit_progress({"event": "retrieve", "round": it, "anchor": where, "k": k, "new_triples": len(new)})
    return {"triples": state.get("triples", []) + new, "events": state.get("events", []) + new_ev,
            "round_sizes": sizes + [len(new)], "hops": state.get("hops", []) + [k], "k": k,
            "anchors": state.get("anchors", []) + [where], "iterations": it,
            "retrieved_triples": len(seen) + len(new)}

def judge_retrieval(state: KgiragState, runtime: Runtime[KgiragOptions], *, deps: KgiragDeps) -> dict[str, Any]:
    """LLM2: stop (the records read settle the answer) or the next anchor."""
    mdl = run_model(runtime, deps.model)
    kg = deps.kg
    idx = temporal_index(kg)
    plan = state["plan"]
    known = known_records(kg, state.get("events", []))
    res = scan_records(plan["task"], slot_of(parse_time(plan["time"])), plan["hours"], plan["horizon"], known)

    def offline() -> JudgeDecision:
        if res.done:
            return JudgeDecision(stop=True, reason=f"settled: {res.answer}")
        return JudgeDecision(stop=False, next_time=format_time(time_of_slot(res.need)),
                             reason="records missing for the current candidate window")

    def validate(d: JudgeDecision) -> str | None:
        if d.stop:
            return None
        if not d.next_time:
            return "next_time is required when stop is false"
        try:
            s = slot_of(parse_time(d.next_time))
        except KgmemInputError as exc:
            return str(exc)
        if not len(idx.slots) or not int(idx.slots[0]) <= s <= int(idx.slots[-1]):
            return f"{d.next_time} is outside the records"
        return None

    prompt = render(JUDGE_PROMPT, reasoning=plan["reasoning"], question=state["question"], count=len(known),
                    triples=len(state.get("triples", [])), records=record_lines(kg, state.get("events", [])),
                    new=(state.get("round_sizes") or [0])[-1], anchor=(state.get("anchors") or ["-"])[-1])
    decision, usage = decide(mdl, JudgeDecision, prompt, step="judge_retrieval", offline=offline,
                             validate=validate,
                             context={"question": state["question"], "plan": plan, "known": known,
                                      "offline": offline().model_dump()})
    out: dict[str, Any] = {"usage": usage, "notes": state.get("notes", []) + [decision.reason]}
    if decision.stop:
        out["stopped"] = True
    else:
        nxt = slot_of(parse_time(decision.next_time or ""))
        out["anchor"] = nxt
        out["direction"] = res.direction if not res.done else state.get("direction", "forward")
    emit_progress({"event": "judge", "round": state.get("iterations", 0), "stop": decision.stop,
           "next": decision.next_time})
    return out

def route_after_plan(state: KgiragState) -> str:
    """Retrieve when the plan is valid and has an anchor hour, else go straight to the answer."""
    return "retrieve_triples" if state["plan"].get("valid") and state.get("anchor") is not None \
        else "synthesize_answer"

def route_after_judge(state: KgiragState, runtime: Runtime[KgiragOptions], *, deps: KgiragDeps) -> str:
    """Answer once the judge stopped or a limit is reached (``t_max`` rounds, ``kappa`` triples), else
    retrieve another round."""
    opts = options_of(runtime, deps.options)
    if state.get("stopped") or state.get("iterations", 0) >= opts.t_max or \
            len(state.get("triples", [])) >= opts.kappa:
        return "synthesize_answer"
    return "retrieve_triples"


def retrieve_window(state: KgiragState, *, deps: KgiragDeps) -> dict[str, Any]:
    """Single pass: every record of the whole horizon window at once."""
    kg = deps.kg
    idx = temporal_index(kg)
    plan = state["plan"]
    lo, hi = horizon_window(plan["task"], slot_of(parse_time(plan["time"])), plan["hours"], plan["horizon"])
    p, q = idx.position(lo, "forward"), idx.position(hi, "backward")
    slots = [int(s) for s in idx.slots[p:q + 1]] if p is not None and q is not None and q >= p else []
    edges, events = collect_triples(kg, idx, slots, plan.get("location"))
    edges, events = list(dict.fromkeys(edges)), list(dict.fromkeys(events))
    emit_progress({"event": "retrieve", "round": 1, "anchor": format_time(time_of_slot(lo)), "new_triples": len(edges)})
    return {"triples": edges, "events": events, "round_sizes": [len(edges)], "hops": [1], "iterations": 1,
            "anchors": [format_time(time_of_slot(lo))], "stopped": True, "retrieved_triples": len(edges),
            "method": "singlepass"}

def route_after_plan_singlepass(state: KgiragState) -> str:
    """Single pass: read the whole window when the plan is valid, else go straight to the answer."""
    return "retrieve_window" if state["plan"].get("valid") else "synthesize_answer"


# ------------------------------------------------------------------------------------ factories


def create_kgirag_graph(
    kg: "KnowledgeGraph",
    *,
    model: Any = None,
    store: Any = None,
    retry_policy: RetryPolicy | None = None,
    t_max: int = 12,
    kappa: int = 400,
    step: int | None = None,
    k0: int | None = None,
) -> StateGraph:
    """Build the KG-IRAG graph (uncompiled).

    Args:
        kg: a KG holding records (``kg.add_records(...)``).
        model: a LangChain chat model, ``"offline"`` (rule-based plan/judge/answer, no LLM) or
            ``None`` (``$KGMEM_MODEL``). Overridable per run with ``context={"model": m}``.
        retry_policy: a LangGraph ``RetryPolicy`` for every LLM call of the graph (timeouts, rate
            limits and 5xx errors are retried with backoff, then the step falls back); ``None``:
            :data:`~langgraph_kgmem.llm.DEFAULT_RETRY_POLICY`.
        store: accepted for the common factory signature; KG-IRAG keeps no cross-session memory.
        t_max: maximum retrieval rounds (T_max). kappa: the triple budget κ; at or above it the
            answer is "no answer".
        step: hours of the time chain per hop (default: the plan's; offline Δt for detection,
            max(2, Δt) for latest/earliest).
        k0: hops of round 0 (default: the plan's, offline 1).

    Returns:
        An uncompiled ``StateGraph``. Output keys: answer, evidence (the retrieved triples),
        usage, method ("kgirag"), plan, iterations, retrieved_triples, anchors, hops, stopped, events.

    Raises:
        KgmemInputError: an option is out of range.

    Example:
        >>> from langgraph_kgmem import KnowledgeGraph
        >>> kg = KnowledgeGraph.in_memory(name="doc")
        >>> rows = [{"time": f"2025-01-01 {h:02d}:00", "location": "Pier", "rain": r}
        ...         for h, r in enumerate([0, 0, 1.2, 0.4, 0, 0])]
        >>> _ = kg.add_records(rows, event_rule="rain > 0", event_name="rain")
        >>> app = create_kgirag_graph(kg, model="offline").compile()
        >>> q = ("I would meet rain at Pier on a 2-hour trip leaving at 2025-01-01 01:00. What is the earliest "
        ...      "departure time after then, at most 4 hours later, that avoids rain for the whole trip?")
        >>> out = app.invoke({"question": q})
        >>> out["answer"], out["anchors"]
        ('2025-01-01 04:00', ['2025-01-01 02:00', '2025-01-01 04:00'])
    """
    deps = KgiragDeps(kg=kg, model=method_model(model, retry_policy),
                      options=KgiragOptions.build(t_max=t_max, kappa=kappa, step=step, k0=k0))

    builder = StateGraph(KgiragState, input_schema=InputState, output_schema=KgiragOutput,
                         context_schema=KgiragOptions)
    builder.add_node("plan_query", partial(plan_query, deps=deps))
    builder.add_node("retrieve_triples", partial(retrieve_triples, deps=deps))
    builder.add_node("judge_retrieval", partial(judge_retrieval, deps=deps))
    builder.add_node("synthesize_answer", partial(synthesize_answer, deps=deps))
    builder.add_edge(START, "plan_query")
    builder.add_conditional_edges("plan_query", route_after_plan, ["retrieve_triples", "synthesize_answer"])
    builder.add_edge("retrieve_triples", "judge_retrieval")
    builder.add_conditional_edges("judge_retrieval", partial(route_after_judge, deps=deps),
                                  ["retrieve_triples", "synthesize_answer"])
    builder.add_edge("synthesize_answer", END)
    return builder


def create_singlepass_graph(kg: "KnowledgeGraph", *, model: Any = None, store: Any = None,
                            retry_policy: RetryPolicy | None = None, kappa: int = 400) -> StateGraph:
    """Single-pass baseline: the same plan, one retrieval of the whole horizon window (detect:
    the trip window; earliest: t+1 .. t+L+Δt−1; latest: t−L .. t+Δt−2), the same answer step.
    Output keys as :func:`create_kgirag_graph` (method "singlepass")."""
    deps = KgiragDeps(kg=kg, model=method_model(model, retry_policy), options=KgiragOptions.build(t_max=1, kappa=kappa),
                      method="singlepass")

    builder = StateGraph(KgiragState, input_schema=InputState, output_schema=KgiragOutput,
                         context_schema=KgiragOptions)
    builder.add_node("plan_query", partial(plan_query, deps=deps))
    builder.add_node("retrieve_window", partial(retrieve_window, deps=deps))
    builder.add_node("synthesize_answer", partial(synthesize_answer, deps=deps))
    builder.add_edge(START, "plan_query")
    builder.add_conditional_edges("plan_query", route_after_plan_singlepass, ["retrieve_window", "synthesize_answer"])
    builder.add_edge("retrieve_window", "synthesize_answer")
    builder.add_edge("synthesize_answer", END)
    return builder


SPEC = MethodSpec(
    name="kgirag",
    factory=create_kgirag_graph,
    options=KgiragOptions,
    summary="KG-IRAG: iterative retrieval over time-stamped records (temporal KG).",
    description="Plans a search over a temporal KG built from time-stamped records, then reads the records "
                "around a moving time anchor round by round, a judge deciding after each round whether they "
                "settle the question or where to look next (it may jump past an abnormal event). For 'when', "
                "'before/after' and 'during' questions about events and measurements.",
    agent_description="Answer a question about time-stamped records (events, measurements, schedules) by searching "
                      "the temporal knowledge graph step by step (KG-IRAG). Use for 'when', 'before/after', "
                      "'during' and trend questions.",
    requirements=frozenset({"records"}),
    output_keys=("answer", "evidence", "usage", "method", "model", "run_id", "plan", "iterations", "retrieved_triples",
                 "anchors", "hops", "stopped", "events"),
)


__all__ = ["SPEC", "KgiragContext", "KgiragOptions", "create_kgirag_graph", "create_singlepass_graph", "hop_count", "scan_records", "horizon_window",
           "neighbourhood_slots", "default_step", "collect_triples", "synthesis_prompt", "offline_plan", "clean_answer", "TemporalPlan", "JudgeDecision", "NO_ANSWER"]
