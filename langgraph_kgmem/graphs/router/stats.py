"""The router's memory: per-KG, per-tenant route statistics in the LangGraph store.

Namespace ``("kgmem", <kg name>, *scope, "routes")`` (:data:`ROUTES_KIND`), three kinds of record:

- ``stats``: per question form, per method, sums over the runs the router made: ``runs``,
  ``confidence`` (the result's own confidence), ``calls`` (LLM calls), ``seconds``, and the
  feedback received: ``useful`` and ``wrong`` (counts of runs judged so).
- ``run-<run_id>``: which method the router ran for that run, for which question and form, so
  that feedback given later on the run reaches the right method (:func:`on_feedback`).
- ``q-<hash>``: per question (its normalised text), per method that answered it: runs, the last
  confidence, and the feedback — a question asked again is routed by what happened to it.

Writes are read-modify-write of one small record each; two concurrent runs of one tenant may
lose one run's counts (the figures are statistics, not an audit trail).
"""

from __future__ import annotations

import hashlib
from typing import Any, Mapping, Sequence

from langgraph.store.base import BaseStore, GetOp, PutOp

from langgraph_kgmem.graphs.common import normalize_answer
from langgraph_kgmem.memory import RecordMemory

ROUTES_KIND = "routes"
STATS_KEY = "stats"
COUNTERS = ("runs", "confidence", "calls", "seconds", "useful", "wrong")
QUESTION_CHARS = 300      # a run record keeps at most this much of its question


def routes(store: BaseStore, kg_name: str, scope: Sequence[str] = ()) -> RecordMemory:
    """The router's records of KG ``kg_name`` for tenant ``scope``."""
    return RecordMemory(store, kg_name, ROUTES_KIND, scope)


def question_key(question: str) -> str:
    """``q-<hash>`` of the question's normalised text (case, punctuation and articles ignored)."""
    return "q-" + hashlib.sha256(normalize_answer(question).encode()).hexdigest()[:24]


def read_stats(mem: RecordMemory) -> dict[str, dict[str, dict[str, float]]]:
    """``{form: {method: {counter: sum}}}`` as stored (empty when nothing was recorded)."""
    return mem.get(STATS_KEY) or {}


def means(row: Mapping[str, float] | None) -> dict[str, float]:
    """A stats row's runs, mean confidence / calls / seconds and its feedback counts."""
    row = row or {}
    runs = float(row.get("runs", 0.0))
    out = {"runs": runs, "useful": float(row.get("useful", 0.0)), "wrong": float(row.get("wrong", 0.0))}
    for k in ("confidence", "calls", "seconds"):
        out[k] = float(row.get(k, 0.0)) / runs if runs else 0.0
    return out


def load_route_memory(mem: RecordMemory, question: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(the statistics, the question's own record) in one store round trip."""
    stats, rec = mem.store.batch([GetOp(mem.ns, STATS_KEY), GetOp(mem.ns, question_key(question))])
    return (dict(stats.value) if stats else {}), (dict(rec.value) if rec else None)


def save_outcome(mem: RecordMemory, *, run_id: str, question: str, form: str, method: str,
                 tried: Sequence[Mapping[str, Any]]) -> None:
    """Count each run of ``tried`` (``{method, confidence, calls, seconds}``) in the statistics of
    ``form``, and keep which ``method`` answered run ``run_id`` (the run record) and the question's
    own record: one read and one write round trip to the store."""
    stats, rec = load_route_memory(mem, question)
    for t in tried:
        row = stats.setdefault(form, {}).setdefault(t["method"], {k: 0.0 for k in COUNTERS})
        for k, v in (("runs", 1.0), ("confidence", t["confidence"]), ("calls", float(t["calls"])),
                     ("seconds", t["seconds"])):
            row[k] = float(row.get(k, 0.0)) + float(v)
    rec = rec or {"question": question[:QUESTION_CHARS], "methods": {}}
    entry = rec["methods"].setdefault(method, {"runs": 0, "useful": 0, "wrong": 0, "confidence": 0.0})
    entry["runs"] += 1
    entry["confidence"] = round(float(next((t["confidence"] for t in reversed(tried) if t["method"] == method),
                                           0.0)), 4)
    rec["last"] = method
    run = {"run_id": run_id, "question": question[:QUESTION_CHARS], "form": form, "method": method,
           "tried": [t["method"] for t in tried]}
    mem.store.batch([PutOp(mem.ns, STATS_KEY, stats, index=False), PutOp(mem.ns, f"run-{run_id}", run, index=False),
                     PutOp(mem.ns, question_key(question), rec, index=False)])


def question_record(mem: RecordMemory, question: str) -> dict[str, Any] | None:
    """What the router remembers of ``question`` (None: never routed for this tenant)."""
    return mem.get(question_key(question))


def verdict_of(record: Mapping[str, Any]) -> bool | None:
    """A feedback record read as a verdict on the run: ``verdict`` when given; else useful evidence and
    none wrong is positive, wrong evidence and none useful is negative; else None (no verdict)."""
    verdict = record.get("verdict")
    if isinstance(verdict, bool):
        return verdict

    def amount(x: Any) -> int:
        if isinstance(x, bool):
            return int(x)
        return len(x) if isinstance(x, (list, tuple, set, frozenset)) else 0

    useful, wrong = amount(record.get("useful")), amount(record.get("wrong"))
    if useful and not wrong:
        return True
    if wrong and not useful:
        return False
    return None


def on_feedback(store: BaseStore, kg_name: str, scope: tuple[str, ...], record: dict[str, Any]) -> None:
    """The router's ``MethodSpec.on_feedback`` hook: feedback on a run the router made counts for the
    method it routed that run to, in the route statistics of the run's question form and in the
    question's own record (so the same question is routed elsewhere after a negative verdict).
    A run the router has no record of, or feedback without a verdict, changes nothing."""
    verdict = verdict_of(record)
    if verdict is None:
        return
    mem = routes(store, kg_name, scope)
    run = mem.get(f"run-{record.get('run_id')}") if record.get("run_id") else None
    if run is None:
        return
    counter = "useful" if verdict else "wrong"
    stats = read_stats(mem)
    row = stats.setdefault(run["form"], {}).setdefault(run["method"], {k: 0.0 for k in COUNTERS})
    row[counter] = float(row.get(counter, 0.0)) + 1.0
    mem.put(STATS_KEY, stats)
    key = question_key(run["question"])
    rec = mem.get(key) or {"question": run["question"], "methods": {}}
    entry = rec["methods"].setdefault(run["method"], {"runs": 0, "useful": 0, "wrong": 0, "confidence": 0.0})
    entry[counter] += 1
    mem.put(key, rec)


__all__ = ["COUNTERS", "ROUTES_KIND", "STATS_KEY", "load_route_memory", "means", "on_feedback", "question_key", "question_record",
           "read_stats", "routes", "save_outcome", "verdict_of"]
