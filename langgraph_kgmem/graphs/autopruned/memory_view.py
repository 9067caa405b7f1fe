"""AutoPrunedRetriever's memory kind as ``kgmem memory`` shows it: the codebook summarised as a
whole (its raw items are pages of integer rows) — its entities, relations, runs and the questions
it stored with their answers and provenance (the cited passages, the decider, whether the passages
still hold the answer, which is when it is served again)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

from langgraph_kgmem.graphs.autopruned.codebook import Codebook, grounded_in
from langgraph_kgmem.memory.kinds import MemoryKind
from langgraph_kgmem.memory.view import cut, node_label

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph


def summarise_codebook(kg: "KnowledgeGraph", store: "BaseStore", scope: Sequence[str] = (), limit: int = 20
                       ) -> dict[str, Any]:
    """The codebook of ``kg`` in tenant ``scope``: its sizes and up to ``limit`` stored questions
    (most recent first), each with its answers' text, cited passages, decider and whether those
    passages still hold the answer (``grounded``: only then is it served again)."""
    book = Codebook.load(store, kg.name, scope)
    size = book.size()

    def text_of(pid: str) -> str | None:
        node = kg.node(pid)
        return node.text if node is not None else None

    questions = []
    for run in sorted(book.runs_of("Q"), key=lambda r: -r.seq)[:limit]:
        answers = []
        for aid in run.links:
            a = book.runs.get(aid)
            if a is None or a.channel != "A":
                continue
            answers.append({"answer": a.text, "by": a.by or "(unknown: stored before provenance was kept)",
                            "passages": [{"id": c, "label": node_label(kg, c)} for c in a.chunks],
                            "grounded": bool(a.by) and grounded_in(a.text, a.chunks, text_of)})
        questions.append({"question": run.text, "answers": answers})
    return {"entities": size["entities"], "relations": size["relations"], "edges": size["edges"],
            "runs": {"facts": size["fact_runs"], "questions": size["question_runs"], "answers": size["answer_runs"]},
            "documents": size["documents"], "questions": questions}


def format_codebook(summary: dict[str, Any]) -> list[str]:
    """A codebook summary's lines in ``kgmem memory``."""
    runs = summary["runs"]
    lines = [f"  {summary['entities']} entities, {summary['relations']} relations, {summary['edges']} facts "
             f"from {summary['documents']} document(s); runs: {runs['facts']} fact, {runs['questions']} question, "
             f"{runs['answers']} answer"]
    for q in summary["questions"]:
        lines.append(f"  Q: {cut(q['question'], 120)}")
        if not q["answers"]:
            lines.append("      no stored answer (its answer was not grounded in the passages it cited)")
        for a in q["answers"]:
            cited = ", ".join(p["label"] for p in a["passages"]) or "(none)"
            served = "served again" if a["grounded"] else "not served: its passages no longer hold it"
            lines.append(f"      A: {cut(a['answer'], 100)}  (by {a['by']}; {served})")
            lines.append(f"         from {cut(cited, 140)}")
    return lines


CODEBOOK = MemoryKind(label="codebook", short="codebook",
                      title="AutoPrunedRetriever codebook: symbols, runs and stored answers",
                      summarise=summarise_codebook, format_summary=format_codebook)
