"""KG-IRAG's query-time index over a KG's temporal part: :class:`TemporalIndex` (time slots, locations,
events by (slot, location), the event name and rules; rebuilt when ``kg.version`` changes) and the
reads along the time chain that the retrieval rounds make (the K-hop neighbourhood of an anchor,
its triples, what the events read say). The records themselves are written by
:func:`langgraph_kgmem.ingest.records.add_records`."""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from langgraph_kgmem.graphs.common import fence

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


@dataclass
class TemporalIndex:
    """Lookup over a KG's temporal part (rebuilt when ``kg.version`` changes)."""

    slots: np.ndarray                                  # sorted time slots (hours since epoch)
    time_ids: list[str]                                # time node id per slot (same order)
    locations: dict[str, str]                          # location name -> node id
    events: dict[tuple[int, str], str]                 # (slot, location name) -> event node id
    event_name: str = "event"
    event_rules: list[str] = field(default_factory=list)

    def position(self, slot: int, direction: str = "forward") -> int | None:
        """Index of the first time slot >= ``slot`` (forward) or last <= ``slot`` (backward)."""
        if direction == "forward":
            p = int(np.searchsorted(self.slots, slot, side="left"))
            return p if p < len(self.slots) else None
        p = int(np.searchsorted(self.slots, slot, side="right")) - 1
        return p if p >= 0 else None

    def location_of(self, name: str | None) -> str | None:
        """The stored location name matching ``name`` case-insensitively (or None)."""
        if name is None:
            return None
        want = name.strip().lower()
        for loc in self.locations:
            if loc.lower() == want:
                return loc
        return None


_INDEXES: "weakref.WeakKeyDictionary[Any, tuple[int, TemporalIndex]]" = weakref.WeakKeyDictionary()


def temporal_index(kg: "KnowledgeGraph") -> TemporalIndex:
    """The KG's :class:`TemporalIndex` (time slots, locations, events, event name and rules), built from
    its nodes once per KG version and cached while the KG lives."""
    cached = _INDEXES.get(kg)
    if cached is not None and cached[0] == kg.version:
        return cached[1]
    times = sorted(((int(n.attrs["slot"]), n.id) for n in kg.nodes("time") if "slot" in n.attrs))
    locations = {n.text: n.id for n in kg.nodes("location")}
    events: dict[tuple[int, str], str] = {}
    names: dict[str, int] = {}
    for n in kg.nodes("event"):
        if "slot" in n.attrs and "location" in n.attrs:
            events[(int(n.attrs["slot"]), str(n.attrs["location"]))] = n.id
            names[str(n.attrs.get("event", "event"))] = names.get(str(n.attrs.get("event", "event")), 0) + 1
    rules = [d["meta"].get("event_rule", "") for d in kg.documents() if (d.get("meta") or {}).get("kind") == "records"]
    idx = TemporalIndex(np.asarray([s for s, _ in times], dtype=np.int64), [i for _, i in times], locations, events,
                        max(names, key=names.get) if names else "event", [r for r in dict.fromkeys(rules) if r])
    _INDEXES[kg] = (kg.version, idx)
    return idx


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
