"""The one place a method run is given its ``run_id`` and recorded for feedback.

Every method's last node calls :func:`finish_run` with its question, evidence and answer; the
result's ``run_id`` is what :func:`~langgraph_kgmem.graphs.feedback.give_feedback` (and the
``feedback`` tool) takes. With a store, the run's record is written in the tenant's scope
(:mod:`langgraph_kgmem.memory.runs`); without one, the run still gets an id, but nothing can be
said about it later.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Any, Sequence

from langgraph_kgmem.memory import memory_scope
from langgraph_kgmem.memory.prior_runs import index_question_op, no_answer
from langgraph_kgmem.memory.runs import evidence_provenance, run_record, run_record_ops

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


def _run_config() -> dict[str, Any]:
    from langgraph.config import get_config

    try:
        return dict(get_config() or {})
    except RuntimeError:   # outside a run
        return {}


def run_store(store: Any) -> Any:
    """``store`` when given, else the running graph's store, else None (no error: recording a
    run and reading experience are optional)."""
    if store is not None:
        return store
    from langgraph.config import get_store

    try:
        return get_store()
    except RuntimeError:
        return None


def new_run_id(config: dict[str, Any] | None = None) -> str:
    """This run's id: the caller's ``config["configurable"]["run_id"]`` when it gives one (so a
    client can name the run before it ends), else LangGraph's own root run id when the config
    carries one, else a fresh uuid4."""
    config = _run_config() if config is None else config
    given = (config.get("configurable") or {}).get("run_id") or config.get("run_id")
    return str(given) if given else str(uuid.uuid4())


def run_ops(kg: "KnowledgeGraph", *, method: str, question: str, evidence: Sequence[dict[str, Any]] | Sequence[str],
            answer: Any, scope: Sequence[str] | None = None, run_id: str | None = None) -> tuple[str, list[Any]]:
    """``(run_id, the store writes of the run's record and its index entries)``, for a caller that
    adds them to a batch of its own (the router: one write for its route and the run)."""
    config = _run_config()
    rid = run_id or new_run_id(config)
    ids = [e if isinstance(e, str) else str(e.get("id")) for e in evidence]
    thread = (config.get("configurable") or {}).get("thread_id")
    # only a run that found no answer rests on the whole corpus (a document added later may hold
    # it); hashing every document row for the others would put the KG's size on every question
    corpus = kg.corpus_hash() if no_answer(answer) else None
    record = run_record(question=question, method=method, evidence_ids=ids, answer=answer, thread_id=thread,
                        provenance=evidence_provenance(kg, ids), corpus=corpus)
    return rid, run_record_ops(kg.name, memory_scope(scope), rid, record)


def finish_run(kg: "KnowledgeGraph", *, method: str, question: str, evidence: Sequence[dict[str, Any]] | Sequence[str],
               answer: Any, store: Any = None, scope: Sequence[str] | None = None,
               run_id: str | None = None) -> dict[str, str]:
    """``{"run_id": ...}`` for the method's output; with a store (``store`` or the running
    graph's), the run's record is saved in the tenant scope that ``scope`` (the factory's
    ``memory_scope`` template) names for this run."""
    found = run_store(store)
    if found is None:
        return {"run_id": run_id or new_run_id()}
    rid, ops = run_ops(kg, method=method, question=question, evidence=evidence, answer=answer, scope=scope,
                       run_id=run_id)
    # the question index: a later run of this question (any method, reuse=True) finds this one;
    # written after the run's record, in its batch
    asked = " ".join(str(question).split())
    ops.append(index_question_op(found, kg.name, memory_scope(scope), asked, kg.embed_query(asked), method, rid))
    found.batch(ops)
    return {"run_id": rid}
