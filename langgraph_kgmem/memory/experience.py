"""The experience layer: per-passage and per-edge credit that every method can read, learned from
feedback (:mod:`langgraph_kgmem.memory.feedback`) and from the methods' own confirmed results
(ReMindRAG's effective walks).

One record per credited item (a passage id, an edge id or a node id) under ``("kgmem", kg,
*scope, "experience")``: ``{"u": useful direction, "x": wrong direction, "n": credits applied,
"t": last update}``. ``u`` and ``x`` are sums of the unit embeddings of the questions the item
helped (or misled), each step damped as ReMindRAG damps its edge memories, so their norm never
exceeds 1. Credit is therefore *question-conditional*: for a new question ``q`` an item's credit is

    credit(item | q) = g(q̂·u) − g(q̂·x) − s(item),   g(c) = |v| · max(0, (cos(q, v) − gate) / (1 − gate))

in [−1, 1]: an item marked useful for questions like ``q`` gains, one marked for unrelated
questions gains nothing (their cosine stays under ``gate``), and credit halves every
``half_life_days`` without new feedback.

``s`` is the one question-independent part, the *distractor* penalty: each record also counts
(decayed like the vectors) the runs that marked it wrong (``"w"``) and useful (``"h"``); an item
marked wrong in ``distractor_after`` or more runs, each useful mark cancelling two wrong ones,
reads ``s = 1 − 2^−(w − 2h − distractor_after + 1)`` (0.5 at the threshold, under 1 always), for
any question. Measured on the shipped sets (``docs/memory.md``), passages retrieved for several
questions that never helped any were almost never a later question's gold passage, while
question-conditional credit had nothing to transfer (no later gold passage was an earlier one).

A method reads credit as a bounded prior (CatRAG and HippoRAG 2 shift a passage's dense score by
at most ``experience_weight`` × credit), so no amount of feedback moves a ranking further than
that weight, and a tenant's records live in its own scope.

With the KG given (``kg=``), every record names the documents and content hashes its item rests
on (``"provenance"``, :mod:`~langgraph_kgmem.memory.provenance`), is indexed under them in the
batch that writes it, so replacing or deleting one of them invalidates it in the same call, and
is read as absent (and learnt again from nothing) once its provenance no longer holds.
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

import numpy as np
from langgraph.store.base import BaseStore, GetOp, PutOp

from langgraph_kgmem.memory import namespace
from langgraph_kgmem.memory.locks import memory_lock
from langgraph_kgmem.memory.provenance import index_ops, record_holds
from langgraph_kgmem.memory.runs import evidence_provenance

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore

EXPERIENCE_KIND = "experience"
DEFAULT_GATE = 0.5            # cosine with the credited questions below which credit is zero
DEFAULT_HALF_LIFE_DAYS = 30.0
DEFAULT_DISTRACTOR_AFTER = 2  # runs marking an item wrong (and none useful) before it reads as a distractor
MAX_CREDIT_ITEMS = 50         # items one credit call may touch (a run's evidence is capped the same)


def damping(x: float) -> float:
    """ReMindRAG's step size δ(x) = (2/π)·cos(π·x/2) on [0, 1], 0 beyond: a full step on an empty
    memory, none on a full one."""
    return (2.0 / math.pi) * math.cos(math.pi * x / 2.0) if 0.0 <= x < 1.0 else 0.0


def _step(v: np.ndarray, q: np.ndarray, weight: float) -> np.ndarray:
    """``v`` moved towards unit ``q`` by the damped step (× ``weight`` in [0, 1]). The norm stays
    ≤ 1 with no clipping: ‖v + δ(‖v‖)·q‖ ≤ x + δ(x) for x = ‖v‖, which rises to 1 at x = 1."""
    return v + weight * damping(float(np.linalg.norm(v))) * q


def _gated(vecs: np.ndarray, q: np.ndarray, gate: float) -> np.ndarray:
    norms = np.linalg.norm(vecs, axis=1)
    cos = (vecs @ q) / np.maximum(norms, 1e-12)
    return norms * np.clip((cos - gate) / max(1e-9, 1.0 - gate), 0.0, 1.0)


def distractor_penalty(wrong: float, useful: float, after: int) -> float:
    """The question-independent penalty of an item marked wrong in ``wrong`` runs and useful in
    ``useful`` (both decayed): 0 below ``after`` net wrong marks (a useful mark cancels two), then
    1 − 2^−(net − after + 1), so 0.5 at the threshold and never 1. ``after`` 0: no penalty."""
    if after <= 0:
        return 0.0
    net = float(wrong) - 2.0 * float(useful)
    # counts decay continuously: marks a few hours old still count whole (a day takes 2.3% off)
    return 0.0 if net < after - 0.025 else 1.0 - 0.5 ** (max(net, after) - after + 1.0)


class ExperienceMemory:
    """Question-conditional credit per item of one KG and tenant (see the module docstring)."""

    def __init__(self, store: BaseStore, kg_name: str, scope: Sequence[str] = (), *,
                 gate: float = DEFAULT_GATE, half_life_days: float = DEFAULT_HALF_LIFE_DAYS,
                 distractor_after: int = DEFAULT_DISTRACTOR_AFTER, kg: "KnowledgeGraphCore | None" = None) -> None:
        self.store = store
        self.kg_name = kg_name
        self.scope = tuple(scope)
        self.ns = namespace(kg_name, EXPERIENCE_KIND, scope)
        self.gate = gate
        self.half_life_days = half_life_days
        self.distractor_after = int(distractor_after)
        self.kg = kg

    def _holds(self, value: Mapping[str, Any]) -> bool:
        """Whether a record's provenance still holds (always, without the KG)."""
        return self.kg is None or record_holds(self.kg, value)

    def _decay(self, t: float, now: float) -> float:
        if self.half_life_days <= 0:
            return 1.0
        return 0.5 ** (max(0.0, now - t) / (86400.0 * self.half_life_days))

    def credit(self, ids: Sequence[str], query: np.ndarray) -> np.ndarray:
        """Each item's credit for a question with embedding ``query``, in [−1, 1], 0 for items
        without a record; one batched store read."""
        ids = list(ids)
        out = np.zeros(len(ids))
        if not ids:
            return out
        q = np.asarray(query, dtype=np.float64)
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        now = time.time()
        rows, us, xs, decays, penalties = [], [], [], [], []
        for i, item in enumerate(self.store.batch([GetOp(self.ns, e, refresh_ttl=False) for e in ids])):
            if item is None or len(item.value.get("u", ())) != len(q) or not self._holds(item.value):
                continue
            rows.append(i)
            us.append(item.value["u"])
            xs.append(item.value["x"])
            decay = self._decay(float(item.value.get("t", now)), now)
            decays.append(decay)
            penalties.append(distractor_penalty(decay * float(item.value.get("w", 0.0)),
                                                decay * float(item.value.get("h", 0.0)), self.distractor_after))
        if rows:
            u, x = np.asarray(us, dtype=np.float64), np.asarray(xs, dtype=np.float64)
            # stored vectors are rounded to 7 decimals: a norm may read a hair over 1
            conditional = np.asarray(decays) * (_gated(u, q, self.gate) - _gated(x, q, self.gate))
            out[rows] = np.clip(conditional - np.asarray(penalties), -1.0, 1.0)
        return out

    def add(self, useful: Iterable[str], wrong: Iterable[str], query: np.ndarray, *, weight: float = 1.0,
            kinds: Mapping[str, str] | None = None) -> int:
        """Credit ``useful`` items (and debit ``wrong`` ones) for a question with embedding
        ``query``: one damped step of size ``weight`` (0, 1] each, under the memory lock so
        concurrent writers lose nothing. At most :data:`MAX_CREDIT_ITEMS` items. Returns how many
        were written."""
        plus = list(dict.fromkeys(useful))[:MAX_CREDIT_ITEMS]
        minus = [w for w in dict.fromkeys(wrong) if w not in set(plus)][:MAX_CREDIT_ITEMS]
        ids = plus + minus
        if not ids:
            return 0
        weight = min(1.0, max(0.0, float(weight)))
        q = np.asarray(query, dtype=np.float64)
        q = q / max(float(np.linalg.norm(q)), 1e-12)
        now = time.time()
        with memory_lock(self.store, "experience:" + "/".join(self.ns[1:-1])):
            items = self.store.batch([GetOp(self.ns, e, refresh_ttl=False) for e in ids])
            records: dict[str, dict[str, Any]] = {}
            for k, (eid, item) in enumerate(zip(ids, items)):
                old = dict(item.value) if item is not None and len(item.value.get("u", ())) == len(q) else {}
                if old and not self._holds(old):   # rests on a version that is gone: learnt again from nothing
                    old = {}
                decay = self._decay(float(old.get("t", now)), now) if old else 1.0
                u = np.asarray(old.get("u", np.zeros(len(q))), dtype=np.float64) * decay
                x = np.asarray(old.get("x", np.zeros(len(q))), dtype=np.float64) * decay
                h, w = float(old.get("h", 0.0)) * decay, float(old.get("w", 0.0)) * decay
                if k < len(plus):
                    u, h = _step(u, q, weight), h + weight
                else:
                    x, w = _step(x, q, weight), w + weight
                rec = {"u": [round(float(v), 7) for v in u], "x": [round(float(v), 7) for v in x],
                       "h": round(h, 6), "w": round(w, 6), "n": int(old.get("n", 0)) + 1, "t": now}
                if kinds and eid in kinds:
                    rec["kind"] = kinds[eid]
                if self.kg is not None:
                    rec["provenance"] = evidence_provenance(self.kg, [eid])
                records[eid] = rec
            self.store.batch(self._write_ops(records))
        return len(ids)

    def _write_ops(self, records: Mapping[str, Mapping[str, Any]]) -> list[Any]:
        """The puts of ``records`` and, with the KG, their provenance index entries: one batch,
        so a record and what invalidates it land together."""
        ops: list[Any] = [PutOp(self.ns, eid, dict(rec), index=False) for eid, rec in records.items()]
        if self.kg is not None:
            ops += index_ops(self.kg_name, self.scope, EXPERIENCE_KIND,
                             {eid: rec.get("provenance") for eid, rec in records.items()})
        return ops
