"""The router's memory: per-KG, per-tenant route statistics in the LangGraph store.

Namespace ``("kgmem", <kg name>, *scope, "routes")`` (:data:`ROUTES_KIND`), three kinds of record:

- ``stats``: per question form, per method, sums over the runs the router made: ``runs``,
  ``confidence`` (the result's own confidence), ``calls`` (LLM calls), ``seconds``, and the
  feedback received: ``useful`` (runs judged right) and ``wrong`` (runs judged wrong on a question
  that another method then answered right: a question no method answers says nothing about which
  method suits its form, so it moves no form's statistics).
- ``run-<run_id>``: which method the router answered that run with and which it tried, for which
  question and form, so that feedback given later on the run reaches them (:func:`on_feedback`).
- ``q-<hash>``: per question (its normalised text), per method that ran on it: runs, the last
  confidence, the verdicts, and ``pending`` (methods judged wrong on it whose ``wrong`` waits for
  another method's right answer) — a question asked again is routed by what happened to it.

Every record is bounded: one entry per method and form. The store calls a routed question adds
are one read (:func:`load_route_memory`, before the pick) and one read and one write (after the
run, :func:`save_outcome`), each a single batch. Writes are read-modify-write of small records;
two concurrent runs of one tenant may lose one run's counts (the figures are statistics, not an
audit trail). A tenant's records live in its own namespace: no tenant's verdicts reach another's.
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


def _entry(rec: dict[str, Any], method: str) -> dict[str, Any]:
    return rec["methods"].setdefault(method, {"runs": 0, "useful": 0, "wrong": 0, "confidence": 0.0})


def save_outcome(mem: RecordMemory, *, run_id: str, question: str, form: str, method: str,
                 tried: Sequence[Mapping[str, Any]], also: Sequence[Any] = ()) -> None:
    """Count each run of ``tried`` (``{method, confidence, calls, seconds}``) in the statistics of
    ``form`` and in the question's own record, and keep which ``method`` answered run ``run_id``
    and which ran (the run record): one read and one write round trip to the store, the write
    carrying ``also`` (the caller's own writes: the router's run record) in the same batch."""
    stats, rec = load_route_memory(mem, question)
    rec = rec or {"question": question[:QUESTION_CHARS], "methods": {}}
    for t in tried:
        row = stats.setdefault(form, {}).setdefault(t["method"], {k: 0.0 for k in COUNTERS})
        for k, v in (("runs", 1.0), ("confidence", t["confidence"]), ("calls", float(t["calls"])),
                     ("seconds", t["seconds"])):
            row[k] = float(row.get(k, 0.0)) + float(v)
        entry = _entry(rec, t["method"])
        entry["runs"] += 1
        entry["confidence"] = round(float(t["confidence"]), 4)
    rec["last"] = method
    run = {"run_id": run_id, "question": question[:QUESTION_CHARS], "form": form, "method": method,
           "tried": list(dict.fromkeys(t["method"] for t in tried))}
    mem.store.batch([PutOp(mem.ns, STATS_KEY, stats, index=False), PutOp(mem.ns, f"run-{run_id}", run, index=False),
                     PutOp(mem.ns, question_key(question), rec, index=False), *also])


def question_record(mem: RecordMemory, question: str) -> dict[str, Any] | None:
    """What the router remembers of ``question`` (None: never routed for this tenant)."""
    return mem.get(question_key(question))


def verdict_of(record: Mapping[str, Any]) -> bool | None:
    """A feedback record read as a verdict on the run: ``verdict`` when given (``"correct"`` or True is
    positive, ``"wrong"`` or False negative, ``"partial"`` none); else useful evidence and none wrong
    is positive, wrong evidence and none useful is negative; else None (no verdict)."""
    verdict = record.get("verdict")
    if isinstance(verdict, bool):
        return verdict
    if verdict in ("correct", "wrong"):
        return verdict == "correct"
    if verdict == "partial":
        return None

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
    """The router's ``MethodSpec.on_feedback`` hook: a verdict on a run the router made.

    Wrong: every method the run tried (the one that answered and any that lost to it) is marked
    wrong on the run's question, so the question goes to another family next time; at the form's
    level they wait (``pending``). Right: the method that answered gains ``useful`` on the question
    and on its form, and the methods judged wrong on that question before now count ``wrong`` on
    the form — the evidence that moves similar questions. A run the router has no record of, or
    feedback without a verdict, changes nothing."""
    verdict = verdict_of(record)
    if verdict is None or not record.get("run_id"):
        return
    mem = routes(store, kg_name, scope)
    run = mem.get(f"run-{record['run_id']}")
    if run is None:
        return
    stats, rec = load_route_memory(mem, run["question"])
    rec = rec or {"question": run["question"], "methods": {}}
    form = stats.setdefault(run["form"], {})
    pending = list(rec.get("pending", []))
    if verdict:
        _entry(rec, run["method"])["useful"] += 1
        for m, counter in [(run["method"], "useful")] + [(w, "wrong") for w in pending if w != run["method"]]:
            row = form.setdefault(m, {k: 0.0 for k in COUNTERS})
            row[counter] = float(row.get(counter, 0.0)) + 1.0
        pending = []
    else:
        for m in run.get("tried") or [run["method"]]:
            _entry(rec, m)["wrong"] += 1
            pending = pending if m in pending else pending + [m]
    rec["pending"] = pending
    mem.store.batch([PutOp(mem.ns, STATS_KEY, stats, index=False),
                     PutOp(mem.ns, question_key(run["question"]), rec, index=False)])
