"""Reading KG-IRAG's questions and answers without a model: the generator's templates parsed back
exactly (:func:`parse_question`), else a regex reading of the time, duration and "before/after"
(:func:`offline_plan`); the bounds a plan must keep (:func:`plan_problem`); a model's free-text answer
in the questions' answer forms (:func:`clean_answer`)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.graphs.kgirag.index import TemporalIndex
from langgraph_kgmem.graphs.kgirag.schemas import MAX_HORIZON_HOURS, MAX_TRIP_HOURS, NO_ANSWER
from langgraph_kgmem.ingest.records import format_time, parse_time, slot_of, time_of_slot
from langgraph_kgmem.ingest.temporal_questions import NO, NO_DEPARTURE, YES

_TIME_RE = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{1,2}(?::\d{2})?")
_HOURS_RE = re.compile(r"(\d+)[- ]?(?:hours?|h)\b", re.I)
_WITHIN_RE = re.compile(r"(?:within|at most|up to)\s+(\d+)\s*hours?", re.I)
# the question generator's templates (ingest.temporal_questions Q1_TEMPLATE ... Q3_TEMPLATE), read back
_TIME = r"(\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2})"
_Q1_RE = re.compile(r"avoid (?P<event>.+?) at (?P<location>.+?) if I leave at " + _TIME.replace("(", "(?P<time>", 1)
                    + r" and travel for (?P<hours>\d+) hours?", re.I)
_Q23_RE = re.compile(r"meet (?P<event>.+?) at (?P<location>.+?) on a (?P<hours>\d+)-hour trip leaving at "
                     + _TIME.replace("(", "(?P<time>", 1) + r"\. What is the (?P<which>latest|earliest) departure "
                     r"time (?:before|after) then, at most (?P<horizon>\d+) hours", re.I)


@dataclass
class ParsedQuestion:
    """What :func:`parse_question` reads back from a question's text: the task, place, departure time
    (``"YYYY-MM-DD HH:MM"``), trip hours, horizon (0 for Q1) and event name."""
    task: str
    location: str
    time: str
    hours: int
    horizon: int
    event: str


def parse_question(text: str) -> ParsedQuestion | None:
    """The fields of a question written with the question generator's templates (None when it is not one)."""
    m = _Q1_RE.search(text)
    if m:
        return ParsedQuestion("detect", m["location"].strip(), format_time(parse_time(m["time"])), int(m["hours"]),
                              0, m["event"].strip())
    m = _Q23_RE.search(text)
    if m:
        task = "latest" if m["which"].lower() == "latest" else "earliest"
        return ParsedQuestion(task, m["location"].strip(), format_time(parse_time(m["time"])), int(m["hours"]),
                              int(m["horizon"]), m["event"].strip())
    return None


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
