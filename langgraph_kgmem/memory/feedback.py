"""Feedback on a run: which of its evidence helped, which misled, and whether its answer was right.

:func:`record_feedback` is the storage half of :func:`langgraph_kgmem.graphs.feedback.give_feedback`
(which adds the method's ``on_feedback`` hook): it resolves the run (a run id or a thread id, in
the tenant's own run records), refuses ids the run did not return, stores the feedback record
(kind ``feedback``) with the run's question, method, evidence and provenance, and turns it into
experience credit (:mod:`langgraph_kgmem.memory.experience`).

Bounds, so that no tenant's feedback weighs more than documented:

- only ids of the run's own evidence can be credited (others are refused);
- a run takes at most :data:`MAX_FEEDBACK_PER_RUN` feedback records, and each item is credited
  once per run whatever the number of records (a repeated mark changes nothing);
- each credit is one damped step (:func:`~langgraph_kgmem.memory.experience.damping`), an agent's
  half a user's; an item's credit stays in [−1, 1] and halves every 30 days without new feedback;
- everything is written in the tenant's scope: another tenant's runs cannot be named, and its
  experience is never read.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING, Any, Iterable, Literal, Sequence

from langgraph.store.base import BaseStore

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.memory import RecordMemory
from langgraph_kgmem.memory.calibration import note_feedback
from langgraph_kgmem.memory.experience import ExperienceMemory
from langgraph_kgmem.memory.provenance import put_records
from langgraph_kgmem.memory.runs import MAX_RUN_IDS, find_run

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore

FEEDBACK_KIND = "feedback"
MAX_FEEDBACK_PER_RUN = 3
SOURCE_WEIGHT = {"user": 1.0, "agent": 0.5}
Verdict = Literal["correct", "wrong", "partial"]
VERDICTS = ("correct", "wrong", "partial")


def _ids(name: str, values: Iterable[str] | str, allowed: Sequence[str], run_id: str) -> list[str]:
    if isinstance(values, str):
        values = [values]
    out = list(dict.fromkeys(values))
    if len(out) > MAX_RUN_IDS:
        raise KgmemInputError(f"{name}: {len(out)} ids, more than a run returns (at most {MAX_RUN_IDS})")
    bad = [v for v in out if not isinstance(v, str) or v not in set(allowed)]
    if bad:
        shown = ", ".join(allowed[:20]) or "(none)"
        raise KgmemInputError(f"{name}: {bad[0]!r} is not in the evidence of run {run_id!r}; feedback can name only "
                              f"what the run returned: {shown}")
    return out


def record_feedback(kg: "KnowledgeGraphCore", store: BaseStore, run: str, *, useful: Iterable[str] | str = (),
                    wrong: Iterable[str] | str = (), verdict: str | None = None, scope: Sequence[str] = (),
                    source: str = "user") -> dict[str, Any]:
    """Store feedback on ``run`` (a run id or a thread id) of tenant ``scope`` and credit its
    evidence; returns the stored record (keys ``run_id``, ``question``, ``method``, ``useful``,
    ``wrong``, ``verdict``, ``source``, ``evidence``, ``provenance``, ``credited``, ``ts``).

    Raises:
        KgmemInputError: an unknown run, an id not in the run's evidence, an id marked both
            useful and wrong, an unknown verdict or source, or a run that already had
            :data:`MAX_FEEDBACK_PER_RUN` feedback records. Nothing is stored then."""
    if source not in SOURCE_WEIGHT:
        raise KgmemInputError(f"feedback source {source!r}: use 'user' or 'agent'")
    if verdict is not None and verdict not in VERDICTS:
        raise KgmemInputError(f"verdict {verdict!r}: use one of {', '.join(VERDICTS)} (or None)")
    scope = tuple(scope)
    run_id, rec = find_run(store, kg.name, scope, run)
    evidence = list(rec.get("evidence", []))
    good = _ids("useful", useful, evidence, run_id)
    bad = _ids("wrong", wrong, evidence, run_id)
    both = sorted(set(good) & set(bad))
    if both:
        raise KgmemInputError(f"{both[0]!r} is marked both useful and wrong: mark it once")
    memory = RecordMemory(store, kg.name, FEEDBACK_KIND, scope)
    earlier = [memory.get(f"{run_id}-{i}") for i in range(MAX_FEEDBACK_PER_RUN)]
    earlier = [e for e in earlier if e is not None]
    if len(earlier) >= MAX_FEEDBACK_PER_RUN:
        raise KgmemInputError(f"run {run_id!r} already has {MAX_FEEDBACK_PER_RUN} feedback records, the most one run "
                              "takes: give feedback on a new run")
    done = {i for e in earlier for i in e.get("credited", [])}
    new_good, new_bad = [i for i in good if i not in done], [i for i in bad if i not in done]
    if new_good or new_bad:
        ExperienceMemory(store, kg.name, scope, kg=kg).add(new_good, new_bad, kg.embed_query(rec.get("question", "")),
                                                    weight=SOURCE_WEIGHT[source])
    record = {"run_id": run_id, "question": rec.get("question", ""), "method": rec.get("method", ""),
              "useful": good, "wrong": bad, "verdict": verdict, "source": source, "evidence": evidence,
              "provenance": list(rec.get("provenance", [])), "credited": new_good + new_bad, "ts": time.time(),
              "id": uuid.uuid4().hex[:12]}
    # indexed under the documents it rests on: a replace or delete takes it along
    key = f"{run_id}-{len(earlier)}"
    put_records(store, kg.name, FEEDBACK_KIND, {key: record}, scope)
    note_feedback(store, kg.name, scope, key)   # counted towards the tenant's next calibration fit
    return record
