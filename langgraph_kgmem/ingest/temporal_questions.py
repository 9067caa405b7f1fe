"""Temporal questions with exact ground truth over any records (the KG-IRAG paper's Algorithm 3).

Given observations (see :func:`langgraph_kgmem.ingest.records.normalize_records`) with an
``abnormal`` flag per (hour, location), a trip leaving at hour t for Δt hours occupies the hours
t, t+1, …, t+Δt−1 (the half-open window [t, t+Δt)). Three question kinds:

- **Q1** "Can I avoid <event> at <location> if I leave at t and travel for Δt hours?" →
  ``"yes"`` when no abnormal record lies in [t, t+Δt), else ``"no"``.
- **Q2** (asked when Q1 is "no") the latest departure t' in [t−L, t−1] whose window
  [t', t'+Δt) is clear → that time (``"YYYY-MM-DD HH:MM"``), or ``"none"`` within the horizon L.
- **Q3** the earliest departure t' in [t+1, t+L] with a clear window → that time, or ``"none"``.

Anchors are sampled (seeded) only where every hour of [t−L, t+L+Δt) has a record at the location,
so the ground truth never depends on missing data. Each question carries its *required records*
(the minimal sufficient data, used for retrieval precision/recall/hit-rate): the union of the
candidate windows an exact scan reads when it jumps past abnormal hours (Q1: the trip window;
Q3: start at t+1, a window with an abnormal hour h sends the next candidate to h+1; Q2: start at
t−1, go back to h−Δt; until a clear window or the end of the horizon).

KG-IRAG's offline planner reads questions written with the templates below back exactly
(:func:`langgraph_kgmem.graphs.kgirag.questions.parse_question`).
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Mapping, Sequence

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.ingest.records import Observation, format_time, time_of_slot

QuestionKind = Literal["Q1", "Q2", "Q3"]
Task = Literal["detect", "latest", "earliest"]
TASK_OF_KIND: dict[str, str] = {"Q1": "detect", "Q2": "latest", "Q3": "earliest"}
NO_DEPARTURE = "none"          # gold answer of Q2/Q3 when no departure within the horizon works
YES, NO = "yes", "no"

Q1_TEMPLATE = "Can I avoid {event} at {location} if I leave at {time} and travel for {hours} hours?"
Q2_TEMPLATE = ("I would meet {event} at {location} on a {hours}-hour trip leaving at {time}. What is the latest "
               "departure time before then, at most {horizon} hours earlier, that avoids {event} for the whole trip?")
Q3_TEMPLATE = ("I would meet {event} at {location} on a {hours}-hour trip leaving at {time}. What is the earliest "
               "departure time after then, at most {horizon} hours later, that avoids {event} for the whole trip?")


@dataclass
class TemporalQuestion:
    """One generated question with its exact gold ``answer`` and the records it needs (``required``);
    ``kind`` is Q1, Q2 or Q3 (see the module docstring), ``horizon`` is 0 for Q1."""
    id: str
    kind: str                       # Q1 | Q2 | Q3
    question: str
    answer: str
    location: str
    time: str                       # the departure time t asked about
    hours: int                      # Δt
    horizon: int                    # L
    event: str
    required: list[str] = field(default_factory=list)  # "YYYY-MM-DD HH:MM" of the required records

    @property
    def task(self) -> str:
        """The KG-IRAG task of the question's kind: ``"detect"`` (Q1), ``"latest"`` (Q2) or ``"earliest"`` (Q3)."""
        return TASK_OF_KIND[self.kind]

    def to_dict(self) -> dict[str, Any]:
        """The question as a JSON-native dict of its fields (a row of a question file)."""
        return asdict(self)


# ------------------------------------------------------------------------------------ ground truth

Abnormal = Mapping[int, bool]  # slot -> abnormal (missing slot = no record)


def window_clear(abnormal: Abnormal, start: int, hours: int) -> bool | None:
    """True when every hour of [start, start+hours) has a normal record, False when one is
    abnormal, None when a record is missing and none is abnormal."""
    missing = False
    for s in range(start, start + hours):
        v = abnormal.get(s)
        if v is None:
            missing = True
        elif v:
            return False
    return None if missing else True


def q1_truth(abnormal: Abnormal, t: int, hours: int) -> str:
    """Q1's gold answer: ``"yes"`` when the trip window [t, t+hours) is clear, else ``"no"``.

    Raises:
        KgmemInputError: a record in the window is missing (the truth would depend on missing data)."""
    clear = window_clear(abnormal, t, hours)
    if clear is None:
        raise KgmemInputError(f"Q1 at {format_time(time_of_slot(t))}: a record in the window is missing")
    return YES if clear else NO


def q3_truth(abnormal: Abnormal, t: int, hours: int, horizon: int) -> int | None:
    """Earliest slot in [t+1, t+horizon] with a clear window (None when there is none)."""
    for c in range(t + 1, t + horizon + 1):
        if window_clear(abnormal, c, hours):
            return c
    return None


def q2_truth(abnormal: Abnormal, t: int, hours: int, horizon: int) -> int | None:
    """Latest slot in [t−horizon, t−1] with a clear window (None when there is none)."""
    for c in range(t - 1, t - horizon - 1, -1):
        if window_clear(abnormal, c, hours):
            return c
    return None


def required_slots(abnormal: Abnormal, kind: str, t: int, hours: int, horizon: int) -> list[int]:
    """The minimal sufficient records: the union of the candidate windows an exact scan reads
    when it jumps past abnormal hours (Q1: the window; Q3: from t+1, each failing window sends the
    scan past its last abnormal hour; Q2: backwards from t−1, to before the first abnormal hour)."""
    if kind == "Q1":
        return list(range(t, t + hours))
    seen: set[int] = set()
    if kind == "Q3":
        c = t + 1
        while c <= t + horizon:
            window = range(c, c + hours)
            seen.update(window)
            bad = [s for s in window if abnormal.get(s)]
            if not bad:
                break
            c = max(bad) + 1
    else:
        c = t - 1
        while c >= t - horizon:
            window = range(c, c + hours)
            seen.update(window)
            bad = [s for s in window if abnormal.get(s)]
            if not bad:
                break
            c = min(bad) - hours
    return sorted(seen)


def answer_text(slot: int | None) -> str:
    """The gold answer of a Q2/Q3 departure ``slot``: its time text, or ``"none"`` when there is none."""
    return NO_DEPARTURE if slot is None else format_time(time_of_slot(slot))


def ground_truth(abnormal: Abnormal, kind: str, t: int, hours: int, horizon: int) -> tuple[str, list[int]]:
    """(gold answer, required slots) of one question."""
    if kind == "Q1":
        return q1_truth(abnormal, t, hours), required_slots(abnormal, "Q1", t, hours, horizon)
    found = (q2_truth if kind == "Q2" else q3_truth)(abnormal, t, hours, horizon)
    return answer_text(found), required_slots(abnormal, kind, t, hours, horizon)


def make_question(kind: str, *, location: str, t: int, hours: int, horizon: int, event: str,
                  abnormal: Abnormal, qid: str) -> TemporalQuestion:
    """A :class:`TemporalQuestion` of ``kind`` written with its template, with its ground truth and
    required records computed from ``abnormal`` (the location's hour slot -> abnormal map)."""
    template = {"Q1": Q1_TEMPLATE, "Q2": Q2_TEMPLATE, "Q3": Q3_TEMPLATE}[kind]
    when = format_time(time_of_slot(t))
    text = template.format(event=event, location=location, time=when, hours=hours, horizon=horizon)
    answer, req = ground_truth(abnormal, kind, t, hours, horizon)
    return TemporalQuestion(qid, kind, text, answer, location, when, hours, horizon if kind != "Q1" else 0, event,
                            [format_time(time_of_slot(s)) for s in req])


# ------------------------------------------------------------------------------------ generator


def abnormal_by_location(observations: Sequence[Observation]) -> dict[str, dict[int, bool]]:
    """Location -> (hour slot -> abnormal) from ``observations``: the maps the ground truth reads."""
    out: dict[str, dict[int, bool]] = {}
    for o in observations:
        out.setdefault(o.location, {})[o.slot] = bool(o.abnormal)
    return out


def generate_questions(observations: Sequence[Observation], *, n: int, seed: int = 0, event: str = "event",
                       hours: Sequence[int] = (1, 2, 3), horizon: int = 12, kinds: Sequence[str] = ("Q1", "Q2", "Q3"),
                       prefix: str = "tq", max_tries: int = 20000) -> list[TemporalQuestion]:
    """``n`` questions cycling through ``kinds``, seeded. Q1 alternates event/no-event windows;
    Q2/Q3 anchors are windows that contain an event (as in the paper, they follow a "no" to Q1)."""
    if n < 1:
        raise KgmemInputError(f"n must be >= 1, got {n}")
    if horizon < 1 or not hours or min(hours) < 1:
        raise KgmemInputError(f"horizon and hours must be >= 1, got horizon={horizon}, hours={list(hours)}")
    bad = [k for k in kinds if k not in TASK_OF_KIND]
    if bad:
        raise KgmemInputError(f"unknown question kind(s) {bad}; use Q1, Q2, Q3")
    rng = random.Random(seed)
    by_loc = abnormal_by_location(observations)
    if not by_loc:
        raise KgmemInputError("generate_questions got no observations")
    locations = sorted(by_loc)
    events = {loc: sorted(s for s, a in ab.items() if a) for loc, ab in by_loc.items()}
    slots = {loc: sorted(ab) for loc, ab in by_loc.items()}
    reach = horizon + max(hours)

    def covered(ab: Mapping[int, bool], t: int) -> bool:
        return all(s in ab for s in range(t - horizon, t + reach))

    out: list[TemporalQuestion] = []
    used: set[tuple[str, str, int, int]] = set()
    tries = 0
    while len(out) < n:
        tries += 1
        if tries > max_tries:
            raise KgmemInputError(f"could only generate {len(out)} of {n} questions: too few records with full "
                                  f"coverage of ±{horizon} h around an anchor (or too few events)")
        kind = kinds[len(out) % len(kinds)]
        want_event = kind != "Q1" or (len(out) // len(kinds)) % 2 == 0
        loc = rng.choice(locations)
        dt = rng.choice(list(hours))
        ab = by_loc[loc]
        if want_event:
            if not events[loc]:
                continue
            t = rng.choice(events[loc]) - rng.randrange(dt)
        else:
            t = rng.choice(slots[loc])
        if not covered(ab, t) or (window_clear(ab, t, dt) is False) != want_event:
            continue
        key = (kind, loc, t, dt)
        if key in used:
            continue
        used.add(key)
        out.append(make_question(kind, location=loc, t=t, hours=dt, horizon=horizon, event=event, abnormal=ab,
                                 qid=f"{prefix}-{len(out):04d}-{kind}"))
    return out
