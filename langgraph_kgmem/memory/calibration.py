"""Per-tenant retrieval calibration learned from feedback: which of a method's vetted ranking
settings ranks the evidence a tenant marked useful highest. Unlike passage credit
(:mod:`~langgraph_kgmem.memory.experience`), which helps only questions near the ones fed back,
a calibration is a property of the tenant's questions and KG, so it transfers to questions never
asked before (``docs/memory.md``, "Calibration").

One record per method under ``("kgmem", kg, *scope, "calibration")``, key = the method's name:
``{"params": the chosen setting, "setting": its index in the grid, "scores": each setting's
score, "questions": fed-back questions it was fit on, "at": the tenant's feedback count then,
"fits": fits so far, "rankings": rankings computed by them, "provenance": the documents of the
marked passages}``; and one bookkeeping record, key :data:`LEDGER_KEY`: the tenant's feedback
count and the keys of its latest :data:`MAX_FIT_QUESTIONS` feedback records
(:func:`note_feedback`, called by :func:`~langgraph_kgmem.memory.feedback.record_feedback`).

How a fit works (:meth:`Calibration.fit`, the method supplies the ranking): every fed-back
question of the ledger whose feedback marked any evidence useful or wrong is ranked again under
each setting of the method's grid (at most :data:`MAX_GRID` settings, the first being the
shipped default); a setting scores, per question, the reciprocal rank of each useful passage minus
:data:`WRONG_WEIGHT` × that of each wrong one (:func:`setting_score`). The best
setting wins only if it beats the default by :data:`MIN_GAIN` per question, question by question
significantly (:data:`MIN_T`, :func:`paired_t`); with fewer than
:data:`MIN_QUESTIONS` such questions, or a tie, the default stays. So nothing moves without
evidence, and the most any amount of feedback can do is pick another of the grid's settings,
which the method's authors vetted (the documented bound of a tenant's influence).

Cost: a fit reads one ledger and at most :data:`MAX_FIT_QUESTIONS` feedback records, and ranks at
most ``MAX_FIT_QUESTIONS × MAX_GRID`` times; it runs only when :data:`REFIT_EVERY` feedback
records have arrived since the last fit (:meth:`Calibration.due`); each record counts its fits and
rankings. The record names the documents of the passages it was fit on; replacing or deleting
one invalidates it (the next run fits again from the feedback that still holds).
"""

from __future__ import annotations

import math
import time
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

from langgraph.store.base import BaseStore, GetOp, PutOp

from langgraph_kgmem.memory import namespace
from langgraph_kgmem.memory.locks import memory_lock
from langgraph_kgmem.memory.provenance import put_records, record_holds
from langgraph_kgmem.memory.runs import evidence_provenance

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore

CALIBRATION_KIND = "calibration"
FEEDBACK_KIND = "feedback"      # memory.feedback's kind (that module imports this one)
LEDGER_KEY = "_ledger"          # the tenant's feedback count and latest feedback keys
MAX_FIT_QUESTIONS = 40          # latest fed-back questions a fit ranks again
MAX_GRID = 16                   # settings a fit may try (the default included)
REFIT_EVERY = 10                # feedback records between two fits
MIN_QUESTIONS = 8               # fed-back questions (with a mark) before a setting can move
MIN_GAIN = 0.02                 # a setting must beat the default by this much per question
MIN_T = 2.0                     # ... with a paired t statistic at least this (the textbook bar; docs/memory.md)
WRONG_WEIGHT = 0.5              # a wrong passage's reciprocal rank costs half a useful one's

Ranker = Callable[[str, Sequence[Mapping[str, Any]]], Sequence[Sequence[str]]]


def setting_score(ranking: Sequence[str], useful: Sequence[str], wrong: Sequence[str]) -> float:
    """One question's score of a ranking: the reciprocal rank of each useful passage in it minus
    :data:`WRONG_WEIGHT` × that of each wrong one (a passage not in the ranking adds nothing)."""
    rank = {}
    for r, pid in enumerate(ranking, 1):
        rank.setdefault(pid, r)
    return (sum(1.0 / rank[u] for u in useful if u in rank)
            - WRONG_WEIGHT * sum(1.0 / rank[w] for w in wrong if w in rank))


def choose(scores: Sequence[Sequence[float]]) -> int:
    """The index of the winning setting given each question's score under each setting
    (``scores[q][i]``): 0, the default, unless the setting with the highest total beats it by
    :data:`MIN_GAIN` per question over at least :data:`MIN_QUESTIONS` questions *and* its
    per-question gains over the default are significant (a paired t statistic of at least
    :data:`MIN_T`); ties go to the earliest setting of the grid."""
    rows = [list(r) for r in scores]
    if len(rows) < MIN_QUESTIONS or not rows[0]:
        return 0
    totals = [sum(r[i] for r in rows) for i in range(len(rows[0]))]
    best = max(range(len(totals)), key=lambda i: (totals[i], -i))
    if best == 0 or totals[best] - totals[0] < MIN_GAIN * len(rows) - 1e-9:
        return 0
    return best if paired_t([r[best] - r[0] for r in rows]) >= MIN_T else 0


def paired_t(diffs: Sequence[float]) -> float:
    """The t statistic of paired differences (mean ÷ its standard error); infinite when every
    difference is the same positive number, 0 when there is none."""
    n = len(diffs)
    if n == 0:
        return 0.0
    mean = sum(diffs) / n
    var = sum((d - mean) ** 2 for d in diffs) / max(1, n - 1)
    if var <= 1e-18:
        return math.inf if mean > 0 else 0.0
    return mean / math.sqrt(var / n)


def note_feedback(store: BaseStore, kg_name: str, scope: Sequence[str], key: str) -> None:
    """Count one feedback record (key ``key``) of tenant ``scope`` in its ledger, under the memory
    lock so concurrent feedback loses no count."""
    ns = namespace(kg_name, CALIBRATION_KIND, scope)
    with memory_lock(store, "calibration:" + "/".join((kg_name, *scope))):
        item = store.get(ns, LEDGER_KEY, refresh_ttl=False)
        old = dict(item.value) if item is not None else {}
        recent = [k for k in old.get("recent", []) if k != key] + [key]
        store.put(ns, LEDGER_KEY, {"count": int(old.get("count", 0)) + 1, "recent": recent[-MAX_FIT_QUESTIONS:],
                                   "t": time.time()}, index=False)


class Calibration:
    """The calibration records of one KG and tenant (see the module docstring)."""

    def __init__(self, store: BaseStore, kg_name: str, scope: Sequence[str] = (), *,
                 kg: "KnowledgeGraphCore | None" = None) -> None:
        self.store = store
        self.kg_name = kg_name
        self.scope = tuple(scope)
        self.ns = namespace(kg_name, CALIBRATION_KIND, scope)
        self.kg = kg

    def read(self, method: str) -> tuple[dict[str, Any] | None, dict[str, Any]]:
        """(the method's record, None when absent or its provenance no longer holds; the ledger),
        one batched read."""
        rec, ledger = self.store.batch([GetOp(self.ns, method, refresh_ttl=False),
                                        GetOp(self.ns, LEDGER_KEY, refresh_ttl=False)])
        value = dict(rec.value) if rec is not None else None
        if value is not None and self.kg is not None and not record_holds(self.kg, value):
            value = None
        return value, dict(ledger.value) if ledger is not None else {}

    @staticmethod
    def due(record: Mapping[str, Any] | None, ledger: Mapping[str, Any]) -> bool:
        """Whether a fit is due: :data:`REFIT_EVERY` feedback records since the last fit (or
        since none, for a method never fit)."""
        return int(ledger.get("count", 0)) - int((record or {}).get("at", 0)) >= REFIT_EVERY

    def examples(self, ledger: Mapping[str, Any]) -> list[dict[str, Any]]:
        """The ledger's latest feedback records that still hold and marked some evidence:
        ``{"question", "useful", "wrong"}`` each, one per question (the latest)."""
        keys = list(ledger.get("recent", []))[-MAX_FIT_QUESTIONS:]
        ns = namespace(self.kg_name, FEEDBACK_KIND, self.scope)
        out: dict[str, dict[str, Any]] = {}
        for item in self.store.batch([GetOp(ns, k, refresh_ttl=False) for k in keys]):
            if item is None or not (item.value.get("useful") or item.value.get("wrong")) or not item.value.get("question"):
                continue
            if self.kg is not None and not record_holds(self.kg, item.value):
                continue
            v = item.value
            out[str(v["question"])] = {"question": str(v["question"]), "useful": list(v["useful"]),
                                       "wrong": list(v.get("wrong", []))}
        return list(out.values())

    def fit(self, method: str, grid: Sequence[Mapping[str, Any]], rank: Ranker, *,
            ledger: Mapping[str, Any], previous: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Fit ``method``'s setting from the tenant's feedback and store it (see the module
        docstring). ``grid``: the settings, the default first (at most :data:`MAX_GRID` are
        tried); ``rank(question, settings)``: the ranked passage ids of each setting."""
        grid = [dict(g) for g in list(grid)[:MAX_GRID]]
        examples = self.examples(ledger)
        per_question = [[setting_score(ranking, ex["useful"], ex["wrong"]) for ranking in rank(ex["question"], grid)]
                        for ex in examples]
        scores = [sum(r[i] for r in per_question) for i in range(len(grid))]
        best = choose(per_question)
        prev = dict(previous or {})
        marked = sorted({i for ex in examples for i in ex["useful"] + ex["wrong"]})
        record = {"params": grid[best], "setting": best, "scores": [round(s, 3) for s in scores],
                  "questions": len(examples), "at": int(ledger.get("count", 0)),
                  "fits": int(prev.get("fits", 0)) + 1,
                  "rankings": int(prev.get("rankings", 0)) + len(examples) * len(grid), "t": time.time(),
                  "provenance": evidence_provenance(self.kg, marked) if self.kg is not None else []}
        put_records(self.store, self.kg_name, CALIBRATION_KIND, {method: record}, self.scope)
        return record
