"""Time-stamped records → temporal KG (the index of KG-IRAG, docs/methods/kgirag.md).

A record is one observation d_i = (t_i, l_i, e_i): a timestamp, a location and the measured
values, plus whether it is an *abnormal event* under an event rule (rain > 0 mm, traffic volume
above a percentile, ...). :func:`add_records` writes, per record,

- a ``time`` node per timestamp (shared by all locations; hourly — finer timestamps are floored
  to the hour), linked to its successor by a ``time_next`` edge so neighbourhoods along time exist;
- a ``location`` node per location;
- an ``event`` node per (time, location) holding the values and the ``abnormal`` flag;
- the edges (t —temporal→ l), (l —spatial→ e), (t —causal→ e).

Input: a CSV path, a list/iterable of dict rows, or a pandas DataFrame (pandas is not required).
Rows that repeat a (time, location) — the metro traffic set has one row per weather condition —
are merged: numeric values take the maximum, text values are joined with "/".
Idempotent per source (document id); time/location/event nodes are not embedded.

:func:`normalize_records` exposes the parsed :class:`Observation` list (the question generator in
:mod:`langgraph_kgmem.ingest.temporal_questions` works on it). The lookup the KG-IRAG graph reads at
query time is its own (:mod:`langgraph_kgmem.graphs.kgirag.index`).
"""

from __future__ import annotations

import calendar
import csv
import math
import numbers
import operator
import re
import time as _time
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from langgraph_kgmem.errors import KgmemInputError, check_storable, check_storable_values
from langgraph_kgmem.kg.types import Edge, Node, content_hash, edge_id, node_id

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph

TIME_FORMAT = "%Y-%m-%d %H:%M"
DEFAULT_LOCATION = "site"
BATCH_SIZE = 5000
TEMPORAL_TEXT = "has an observation at"
SPATIAL_TEXT = "recorded"
CAUSAL_TEXT = "observed"
_NUMBER = re.compile(r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$")
_OPS: dict[str, Callable[[float, float], bool]] = {
    ">=": operator.ge, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt, "<": operator.lt}
_CONDITION = re.compile(r"^\s*([A-Za-z_][\w.()%-]*)\s*(>=|<=|==|!=|>|<)\s*([-+]?\d+(?:\.\d*)?)\s*$")


# ------------------------------------------------------------------------------------ time


def format_time(dt: datetime) -> str:
    """``dt`` as the KG's time text, ``"YYYY-MM-DD HH:MM"`` (time node texts and ids are built from it)."""
    return dt.strftime(TIME_FORMAT)


def slot_of(dt: datetime) -> int:
    """Hours since the epoch of a naive timestamp (timezone-independent)."""
    return calendar.timegm(dt.replace(minute=0, second=0, microsecond=0).timetuple()) // 3600


def time_of_slot(slot: int) -> datetime:
    """The naive timestamp at the start of hour ``slot`` (the inverse of :func:`slot_of`)."""
    return datetime(1970, 1, 1) + timedelta(hours=int(slot))


def parse_time(value: Any, *, time_format: str | None = None) -> datetime:
    """A datetime from a datetime/date, pandas Timestamp, or a string (ISO or ``time_format``)."""
    if isinstance(value, datetime):
        dt = value
    elif hasattr(value, "to_pydatetime"):
        dt = value.to_pydatetime()
    else:
        text = str(value).strip()
        try:
            dt = datetime.strptime(text, time_format) if time_format else datetime.fromisoformat(text.replace("Z", ""))
        except ValueError as exc:
            raise KgmemInputError(f"cannot read timestamp {text!r}"
                                  + (f" with format {time_format!r}" if time_format else
                                     " (expected ISO like '2016-01-01 05:00'; pass time_format=...)")) from exc
    if dt.tzinfo is not None:
        dt = dt.replace(tzinfo=None) - (dt.utcoffset() or timedelta(0))
    return dt.replace(minute=0, second=0, microsecond=0)


def time_node_id(slot: int) -> str:
    """Id of the time node of hour ``slot`` (the same hour gives the same node in every records batch)."""
    return node_id("time", format_time(time_of_slot(slot)))


def location_node_id(name: str) -> str:
    """Id of the location node named ``name`` (surrounding whitespace ignored)."""
    return node_id("location", name.strip())


def event_node_id(slot: int, location: str) -> str:
    """Id of the event node of ``location`` in hour ``slot``: one event per place and hour."""
    return node_id("event", f"{location.strip()}@{format_time(time_of_slot(slot))}")


# ------------------------------------------------------------------------------------ event rules


class ThresholdRule:
    """``"RAIN > 0"`` style rule: one comparison, or several joined by ``or`` or by ``and``
    (not both: write mixed logic as a callable)."""

    def __init__(self, text: str) -> None:
        self.description = text.strip()
        joiners = set(re.findall(r"\s+(and|or)\s+", text.strip()))
        if len(joiners) > 1:
            raise KgmemInputError(
                f"event_rule {text!r} mixes 'and' and 'or', which would need precedence rules: join all "
                "conditions with one of them, or pass a callable(row) -> bool, e.g. "
                "lambda r: (r['a'] > 1 and r['b'] > 2) or r['c'] > 3")
        self.joiner = joiners.pop() if joiners else "or"
        self.conditions: list[tuple[str, str, float]] = []
        for part in re.split(r"\s+(?:and|or)\s+", text.strip()):
            m = _CONDITION.match(part)
            if not m:
                raise KgmemInputError(
                    f"event_rule {text!r}: cannot read condition {part!r}; write e.g. 'RAIN > 0' or "
                    "'rain_1h > 0 or snow_1h > 0', or pass a callable(row) -> bool")
            self.conditions.append((m.group(1), m.group(2), float(m.group(3))))

    @property
    def columns(self) -> list[str]:
        """The columns the rule compares, in the order written (they are kept even when not value columns)."""
        return [c for c, _, _ in self.conditions]

    def __call__(self, row: Mapping[str, Any]) -> bool:
        hits = []
        for col, op, thr in self.conditions:
            v = row.get(col)
            if v is not None and not isinstance(v, numbers.Real):
                raise KgmemInputError(f"event_rule {self.description!r}: column {col!r} holds {v!r}, not a number; "
                                      "compare numeric columns only, or pass a callable(row) -> bool")
            hits.append(v is not None and not math.isnan(v) and _OPS[op](float(v), thr))
        return all(hits) if self.joiner == "and" else any(hits)


class HourOfWeekPercentileRule:
    """Abnormal when ``column`` exceeds its ``q``-th percentile for that hour of the week
    (168 thresholds, fitted on the first records it is applied to unless ``thresholds`` are given;
    a fitted rule keeps its thresholds for later batches)."""

    def __init__(self, column: str, q: float = 85.0, thresholds: Sequence[float] | None = None) -> None:
        if not 0 < q < 100:
            raise KgmemInputError(f"HourOfWeekPercentileRule: q must be in (0, 100), got {q}")
        self.column = column
        self.q = float(q)
        self.thresholds = list(thresholds) if thresholds is not None else None
        self.description = f"{column} above its {q:g}th percentile for that hour of the week"

    @property
    def columns(self) -> list[str]:
        """The one column the rule reads."""
        return [self.column]

    @staticmethod
    def hour_of_week(dt: datetime) -> int:
        """0 (Monday 00:00) to 167 (Sunday 23:00): which of the 168 thresholds applies to ``dt``."""
        return dt.weekday() * 24 + dt.hour

    def fit(self, observations: Sequence["Observation"]) -> "HourOfWeekPercentileRule":
        """Set the 168 thresholds to the ``q``-th percentile of the column's numeric values in each hour of
        the week of ``observations``; an hour without values gets ``inf`` (nothing there is abnormal).
        Returns the rule itself."""
        buckets: list[list[float]] = [[] for _ in range(168)]
        for o in observations:
            v = o.values.get(self.column)
            if isinstance(v, (int, float)) and not math.isnan(v):
                buckets[self.hour_of_week(o.time)].append(float(v))
        self.thresholds = [float(np.percentile(b, self.q)) if b else math.inf for b in buckets]
        return self

    def __call__(self, row: Mapping[str, Any]) -> bool:
        if self.thresholds is None:
            raise KgmemInputError("HourOfWeekPercentileRule used before fit(observations)")
        v = row.get(self.column)
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return False
        return float(v) > self.thresholds[self.hour_of_week(row["time"])]


EventRule = Callable[[Mapping[str, Any]], bool]


def compile_rule(rule: Any) -> tuple[EventRule | None, str]:
    """(callable or None, description) from a rule string, a {column: threshold} dict (value >
    threshold), a callable(row) -> bool (row = values + "time" + "location"), or None (no events)."""
    if rule is None:
        return None, "none (no record is abnormal)"
    if isinstance(rule, str):
        r = ThresholdRule(rule)
        return r, r.description
    if isinstance(rule, Mapping):
        r = ThresholdRule(" or ".join(f"{k} > {float(v)}" for k, v in rule.items()))
        return r, r.description
    if callable(rule):
        return rule, str(getattr(rule, "description", None) or getattr(rule, "__name__", "custom rule"))
    raise KgmemInputError(f"event_rule must be a string like 'RAIN > 0', a dict, a callable or None; got {rule!r}")


# ------------------------------------------------------------------------------------ rows


@dataclass
class Observation:
    """One place in one hour: the records of that ``(slot, location)`` merged (numbers by their
    maximum, other values joined with ``/``), whether the event rule finds it abnormal, and how many
    records were merged into it."""
    slot: int
    time: datetime
    location: str
    values: dict[str, Any]
    abnormal: bool = False
    duplicates: int = 1

    @property
    def time_text(self) -> str:
        """The observation's hour as the KG's time text (:func:`format_time`)."""
        return format_time(self.time)


def read_rows(records: Any) -> list[dict[str, Any]]:
    """Rows as dicts from a CSV path, a pandas DataFrame, or an iterable of mappings."""
    if isinstance(records, (str, Path)):
        path = Path(records)
        if not path.is_file():
            raise KgmemInputError(f"records file {path} does not exist")
        with path.open(newline="", encoding="utf-8") as fh:
            return [dict(r) for r in csv.DictReader(fh)]
    if hasattr(records, "to_dict") and hasattr(records, "columns"):
        return [dict(r) for r in records.to_dict("records")]
    try:
        rows = [dict(r) for r in records]
    except (TypeError, ValueError) as exc:
        raise KgmemInputError("records must be a CSV path, a list of dict rows or a pandas DataFrame, "
                              f"got {type(records).__name__}") from exc
    return rows


def _number(v: Any) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float, np.integer, np.floating)):
        f = float(v)
        return None if math.isnan(f) else f
    s = str(v).strip()
    if s.upper() in {"", "NA", "NAN", "NONE", "NULL"}:
        return None
    return float(s) if _NUMBER.match(s) else None


def _row_time(row: Mapping[str, Any], time_col: Any, time_format: str | None) -> datetime:
    if callable(time_col):
        return parse_time(time_col(row), time_format=time_format)
    if isinstance(time_col, str):
        if time_col not in row:
            raise KgmemInputError(f"time column {time_col!r} not in the records (columns: {', '.join(list(row)[:20])})")
        return parse_time(row[time_col], time_format=time_format)
    cols = list(time_col)
    missing = [c for c in cols if c not in row]
    if missing:
        raise KgmemInputError(f"time columns {missing} not in the records (columns: {', '.join(list(row)[:20])})")
    if len(cols) < 3:
        raise KgmemInputError(f"time_col as columns needs at least (year, month, day), got {cols}")
    try:
        return datetime(*[int(float(row[c])) for c in cols][:6])
    except (TypeError, ValueError, OverflowError) as exc:
        raise KgmemInputError(f"cannot build a timestamp from time columns {cols} = {[row[c] for c in cols]} ({exc}): "
                              "each must be a whole number (year, month, day[, hour, minute, second])") from exc


def normalize_records(records: Any, *, time_col: Any = "time", location_col: str | None = "location",
                      location: str | None = None, value_cols: Sequence[str] | None = None,
                      event_rule: Any = None, time_format: str | None = None,
                      dropna: bool = True) -> tuple[list[Observation], str]:
    """Parse, merge repeated (time, location) rows and apply the event rule.

    Returns (observations sorted by time then location, rule description). A list of
    :class:`Observation` passes through unchanged (``event_rule`` then only names the rule). ``time_col`` is a column
    name, a sequence of columns (year, month, day, hour) or a callable(row) -> timestamp.
    ``location_col=None`` puts every row at ``location`` (default "site"). ``value_cols`` default:
    every other column whose first non-empty value is numeric. Rows whose rule columns are all
    empty are dropped when ``dropna`` (a missing reading is not "no event").
    """
    if isinstance(records, (list, tuple)) and records and all(isinstance(r, Observation) for r in records):
        # already parsed (e.g. a subset of a larger normalised set): keep their abnormal flags
        desc = event_rule if isinstance(event_rule, str) else str(getattr(event_rule, "description", "") or "given")
        return sorted(records, key=lambda o: (o.slot, o.location)), desc
    rows = read_rows(records)
    rule, description = compile_rule(event_rule)
    if not rows:
        return [], description
    if location_col is not None and location_col not in rows[0]:
        if location is None:
            raise KgmemInputError(f"location column {location_col!r} not in the records; pass location_col=... "
                                  "or location_col=None with location='<name>' for single-site data")
        location_col = None
    time_cols = {time_col} if isinstance(time_col, str) else set() if callable(time_col) else set(time_col)
    if value_cols is None:
        skip = time_cols | {location_col}
        value_cols = [c for c in rows[0] if c not in skip and any(
            _number(r.get(c)) is not None for r in rows[:50] if str(r.get(c, "")).strip())]
    else:
        absent = [c for c in value_cols if c not in rows[0]]
        if absent:
            raise KgmemInputError(f"value columns {absent} not in the records (columns: {', '.join(list(rows[0])[:20])})")
    rule_cols = list(getattr(rule, "columns", []) or [])
    merged: dict[tuple[int, str], Observation] = {}
    for i, row in enumerate(rows):
        dt = _row_time(row, time_col, time_format)
        if location_col is None:
            loc = location or DEFAULT_LOCATION
        else:
            loc = str(row.get(location_col) or "").strip()
            if not loc:
                raise KgmemInputError(f"record {i + 1} has no {location_col!r} value: fill it in, or pass "
                                      "location_col=None with location='<name>' for single-site data")
        values: dict[str, Any] = {}
        for c in dict.fromkeys(list(value_cols) + rule_cols):
            raw = row.get(c)
            num = _number(raw)
            if num is not None:
                values[c] = num
            elif raw is not None and str(raw).strip() and str(raw).strip().upper() not in {"NA", "NAN"}:
                values[c] = str(raw).strip()
        if dropna and rule_cols and all(not isinstance(values.get(c), float) for c in rule_cols):
            continue
        key = (slot_of(dt), loc)
        cur = merged.get(key)
        if cur is None:
            merged[key] = Observation(key[0], dt, loc, values)
            continue
        cur.duplicates += 1
        for c, v in values.items():
            old = cur.values.get(c)
            if old is None:
                cur.values[c] = v
            elif isinstance(old, float) and isinstance(v, float):
                cur.values[c] = max(old, v)
            elif str(v) not in str(old).split("/"):
                cur.values[c] = f"{old}/{v}"
    obs = sorted(merged.values(), key=lambda o: (o.slot, o.location))
    if rule is not None:
        if hasattr(rule, "fit") and getattr(rule, "thresholds", None) is None:
            rule.fit(obs)
        for o in obs:
            o.abnormal = bool(rule({**o.values, "time": o.time, "location": o.location}))
    return obs, description


# ------------------------------------------------------------------------------------ writing


@dataclass
class RecordsReport:
    """What :func:`add_records` wrote: counts of observations (``records``, one per place and hour),
    time points, locations, events, abnormal events and edges, the time taken, the rule's
    description, and ``skipped`` when the same records were already in the KG."""
    document_id: str
    records: int = 0
    time_nodes: int = 0
    locations: int = 0
    events: int = 0
    abnormal: int = 0
    edges: int = 0
    skipped: bool = False
    seconds: float = 0.0
    event_rule: str = ""

    def __str__(self) -> str:
        if self.skipped:
            return f"records {self.document_id} already present (skipped)"
        return (f"added {self.records} records as {self.events} events ({self.abnormal} abnormal: "
                f"{self.event_rule}) at {self.locations} location(s), {self.time_nodes} time points, "
                f"{self.edges} edges in {self.seconds:.2f}s")


def _values_text(values: Mapping[str, Any], limit: int = 6) -> str:
    parts = []
    for k, v in list(values.items())[:limit]:
        parts.append(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}")
    return ", ".join(parts)


def event_text(o: Observation, event_name: str) -> str:
    """The text of an observation's event node: place, time, up to six values and whether it is abnormal."""
    status = f"{event_name} (abnormal)" if o.abnormal else f"no {event_name}"
    return f"{o.location} at {o.time_text}: {_values_text(o.values)} — {status}"


def add_records(kg: "KnowledgeGraph", records: Any, *, time_col: Any = "time",
                location_col: str | None = "location", location: str | None = None,
                value_cols: Sequence[str] | None = None, event_rule: Any = None, event_name: str = "event",
                time_format: str | None = None, source: str | None = None, title: str | None = None,
                batch_size: int = BATCH_SIZE, dropna: bool = True) -> RecordsReport:
    """Write time-stamped records into ``kg`` as time/location/event nodes (module docstring).

    Args:
        records: CSV path, list of dict rows, or a pandas DataFrame.
        time_col: timestamp column, a sequence of (year, month, day, hour) columns, or a callable(row).
        location_col / location: the location column, or None and one location name for single-site data.
        value_cols: measured columns to keep (default: the numeric ones).
        event_rule: what counts as abnormal: ``"RAIN > 0"``, ``{"rain_1h": 0}``,
            :class:`HourOfWeekPercentileRule` ("traffic_volume", 85), or a callable(row) -> bool.
        event_name: the event's name in questions and texts ("rain", "heavy traffic").
        source: document id (default: a content hash); re-adding the same source is a no-op.
    """
    if batch_size < 1:
        raise KgmemInputError(f"batch_size must be >= 1, got {batch_size}")
    t0 = _time.perf_counter()
    obs, description = normalize_records(records, time_col=time_col, location_col=location_col, location=location,
                                         value_cols=value_cols, event_rule=event_rule, time_format=time_format,
                                         dropna=dropna)
    if not obs:
        raise KgmemInputError("add_records got no usable records (empty input, or every rule column empty)")
    # names are stored as given: refused before anything is written, the same on every backend
    for what, value in (("source", source), ("title", title), ("event_name", event_name)):
        if value is not None:
            check_storable(value, f"add_records {what}")
    for name in {o.location for o in obs}:
        check_storable(name, f"the location {name[:40]!r} of a record")
    check_storable_values(sorted({k for o in obs for k in o.values}), "a record's column names")
    doc_id = source or "doc-" + content_hash(
        "records", event_name, description,
        *(f"{o.slot}|{o.location}|{sorted(o.values.items())}|{o.abnormal}" for o in obs))
    report = RecordsReport(doc_id, event_rule=description)
    existing = kg.document(doc_id)
    if existing and existing["status"] == "done":
        report.skipped = True
        return report
    if existing:
        kg.remove_document(doc_id)
    slots = sorted({o.slot for o in obs})
    locs = sorted({o.location for o in obs})
    ttext = {s: format_time(time_of_slot(s)) for s in slots}
    tids = {s: time_node_id(s) for s in slots}
    lids = {name: location_node_id(name) for name in locs}
    nodes: list[Node] = [Node(tids[s], "time", ttext[s], {"time": ttext[s], "slot": s}) for s in slots]
    nodes += [Node(lids[name], "location", name, {"location": name}) for name in locs]
    edges: list[Edge] = []
    seen_tl: set[tuple[int, str]] = set()
    for o in obs:
        tid, lid = tids[o.slot], lids[o.location]
        eid = event_node_id(o.slot, o.location)
        nodes.append(Node(eid, "event", event_text(o, event_name),
                          {"time": o.time_text, "slot": o.slot, "location": o.location, "values": o.values,
                           "abnormal": o.abnormal, "event": event_name, "duplicates": o.duplicates}))
        if (o.slot, o.location) not in seen_tl:
            seen_tl.add((o.slot, o.location))
            edges.append(Edge(edge_id(tid, lid, "temporal", TEMPORAL_TEXT), tid, lid, "temporal", TEMPORAL_TEXT))
        edges.append(Edge(edge_id(lid, eid, "spatial", SPATIAL_TEXT), lid, eid, "spatial", SPATIAL_TEXT))
        edges.append(Edge(edge_id(tid, eid, "causal", CAUSAL_TEXT), tid, eid, "causal", CAUSAL_TEXT))
    meta = {"kind": "records", "event_name": event_name, "event_rule": description, "records": len(obs),
            "locations": locs, "start": format_time(time_of_slot(slots[0])),
            "end": format_time(time_of_slot(slots[-1]))}
    with kg.transaction():
        kg.writer.put_document(doc_id, title=title or f"records: {event_name}", status="pending", meta=meta)
        for off in range(0, len(nodes), batch_size):
            kg.add_nodes(nodes[off:off + batch_size], source=doc_id, embed=False)
        for off in range(0, len(edges), batch_size):
            kg.add_edges(edges[off:off + batch_size], source=doc_id, embed_facts=False)
        chained = kg.writer.relink_time_chain([tids[s] for s in slots], batch_size=batch_size)
        kg.writer.put_document(doc_id, title=title or f"records: {event_name}", status="done", meta=meta)
    report.records = len(obs)
    report.time_nodes = len(slots)
    report.locations = len(locs)
    report.events = len(obs)
    report.abnormal = sum(o.abnormal for o in obs)
    report.edges = len(edges) + chained
    report.seconds = _time.perf_counter() - t0
    return report
