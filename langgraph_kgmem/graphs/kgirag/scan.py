"""KG-IRAG's rule-based reasoning over the records read: the hop count K(t) of each round and the
scan that settles a question or names the hour to read next (the offline judge; exact on the
question generator's questions)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.ingest.records import format_time, time_of_slot
from langgraph_kgmem.ingest.temporal_questions import NO, NO_DEPARTURE, YES


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
