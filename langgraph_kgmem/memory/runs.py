"""Run records: what one method run answered and from which evidence, so that feedback given
later (by a person, an agent or a verifier) can name the run by its ``run_id`` or its thread.

Every method's last node writes one small record under ``("kgmem", kg, *scope, "runs")``, key =
the run id: the question, the method, the evidence ids, the answer, the thread id and the
provenance (the documents and content hashes the evidence rests on) and, for a run that found no
answer, the corpus hash (every document's id and version at the time,
:meth:`~langgraph_kgmem.kg.graph.KnowledgeGraphCore.corpus_hash`: what such a run rests on, since any
document added later may hold the answer; ``None`` otherwise). Records are bounded (ids,
question and answer are capped) so a run record never grows with the KG.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from langgraph.store.base import BaseStore, PutOp

from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.kg.types import content_hash
from langgraph_kgmem.memory import namespace
from langgraph_kgmem.memory.provenance import index_ops, provenance_of_edges, provenance_of_nodes, put_records

if TYPE_CHECKING:
    from langgraph_kgmem.kg.graph import KnowledgeGraphCore

RUNS_KIND = "runs"
MAX_RUN_IDS = 50              # evidence ids kept per run record
MAX_RUN_QUESTION_CHARS = 1000
MAX_RUN_ANSWER_CHARS = 2000
MAX_RUN_ID_CHARS = 200        # a run or thread id given to feedback


def evidence_key(evidence_ids: Iterable[str]) -> str:
    """One hash of a run's whole evidence list, in order (the record keeps only the first
    :data:`MAX_RUN_IDS` ids): two runs with equal keys read the same evidence."""
    return content_hash("evidence", *(str(e) for e in dict.fromkeys(evidence_ids)))


def evidence_provenance(kg: "KnowledgeGraphCore", evidence_ids: Iterable[str]) -> list[dict[str, str]]:
    """``[{"doc": document id, "hash": content hash of its current version}]`` for what a run's
    evidence rests on: a passage's own document, an entity's or a fact's contributing documents
    (:mod:`~langgraph_kgmem.memory.provenance`), so replacing one invalidates the run record."""
    ids = list(dict.fromkeys(str(i) for i in evidence_ids))
    nodes = [i for i in ids if kg.node(i) is not None]
    edges = [i for i in ids if kg.node(i) is None]
    merged = {(p["doc"], p["hash"]): p for p in provenance_of_nodes(kg, nodes) + provenance_of_edges(kg, edges)}
    return [merged[k] for k in sorted(merged)]


def run_record(*, question: str, method: str, evidence_ids: Sequence[str], answer: Any, thread_id: str | None,
               provenance: Sequence[Mapping[str, str]], corpus: str | None = None) -> dict[str, Any]:
    """The bounded record of one run (see the module docstring)."""
    return {"question": " ".join(str(question).split())[:MAX_RUN_QUESTION_CHARS], "method": str(method),
            "evidence_key": evidence_key(evidence_ids),
            "evidence": [str(e) for e in list(dict.fromkeys(evidence_ids))[:MAX_RUN_IDS]],
            "answer": None if answer is None else str(answer)[:MAX_RUN_ANSWER_CHARS],
            "thread_id": None if thread_id is None else str(thread_id)[:MAX_RUN_ID_CHARS],
            "ts": time.time(), "provenance": [dict(p) for p in provenance[:MAX_RUN_IDS]],
            "corpus": None if corpus is None else str(corpus)[:MAX_RUN_ID_CHARS]}


def save_run(store: BaseStore, kg_name: str, scope: Sequence[str], run_id: str, record: Mapping[str, Any]) -> None:
    """Write run ``run_id``'s record in tenant ``scope``'s run namespace."""
    put_records(store, kg_name, RUNS_KIND, {run_id: record}, scope)   # indexed: a replaced document takes it along


def run_record_ops(kg_name: str, scope: Sequence[str], run_id: str, record: Mapping[str, Any]) -> list[PutOp]:
    """The writes :func:`save_run` makes (the record and its index entries), for a caller's own batch."""
    return ([PutOp(namespace(kg_name, RUNS_KIND, scope), run_id, dict(record), index=False)]
            + index_ops(kg_name, scope, RUNS_KIND, {run_id: record.get("provenance")}))


def find_run(store: BaseStore, kg_name: str, scope: Sequence[str], run: str) -> tuple[str, dict[str, Any]]:
    """The run named by ``run``: a run id, else a thread id (that thread's latest run), in tenant
    ``scope`` only.

    Raises:
        KgmemInputError: ``run`` is not text, or names no run of this tenant."""
    if not isinstance(run, str) or not run or len(run) > MAX_RUN_ID_CHARS:
        raise KgmemInputError(f"feedback needs the run: the result's run_id or its thread id (text of at most "
                              f"{MAX_RUN_ID_CHARS} characters), got {run!r}")
    ns = namespace(kg_name, RUNS_KIND, scope)
    item = store.get(ns, run)
    if item is not None:
        return item.key, dict(item.value)
    found = store.search(ns, filter={"thread_id": run}, limit=1000)
    if found:
        best = max(found, key=lambda it: (float(it.value.get("ts", 0.0)), it.key))
        return best.key, dict(best.value)
    where = f" of tenant {'/'.join(scope)!r}" if scope else ""
    raise KgmemInputError(f"no run {run!r}{where} in KG {kg_name!r}: give the run_id a method's result carries, "
                          "or the thread_id it ran in (runs are recorded when the graph has a store)")
