"""What a KG remembers, in words a person can read (``kg.memory()``, ``kgmem memory``).

The store holds memory in the shape the methods need: an edge memory is a vector keyed by an edge
id, the codebook is pages of integer rows. :func:`describe_memory` lists every namespace as
:func:`~langgraph_kgmem.memory.list_memory` does and adds, for each item, what it means:

- an edge memory (ReMindRAG) as its fact (``Marie Curie — born in → Warsaw``), its strength (the
  memory vector's length, 0 to 1: how far replay can lean on the edge), its uses (updates applied)
  and the questions that strengthened it;
- a reflection (R3-Cycle) with its question, what went wrong and the advice kept for next time;
  a trajectory with its question, answer and outcome; a neighbour summary (CatRAG) with its entity;
- the codebook (AutoPrunedRetriever) summarised: its entities, relations, runs and the questions it
  stored with their answers and provenance (the cited passages, the decider, whether the passages
  still hold the answer, which is when it is served again).

:func:`format_memory` renders that listing as the text ``kgmem memory`` prints.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from langgraph_kgmem.memory import KINDS, list_items, memory_namespaces

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

    from langgraph_kgmem.kg.graph import KnowledgeGraphCore as KnowledgeGraph

# how a structural edge reads between its two ends (a relation edge reads as its own relation text)
EDGE_WORDS = {"context": "mentioned in", "anchor_chunk": "titles", "next": "followed by", "synonym": "same as"}
LABEL_CHARS = 60   # a node's label in a fact is cut here: a fact is one line
TITLES = {"edge_memory": "ReMindRAG edge memory: edges that helped answer",
          "reflections": "R3-Cycle reflections: lessons from failed attempts",
          "trajectories": "R3-Cycle trajectories: the steps of each attempt",
          "codebook": "AutoPrunedRetriever codebook: symbols, runs and stored answers",
          "summaries": "CatRAG neighbour summaries"}


def node_label(kg: "KnowledgeGraph", node_id: str) -> str:
    """An entity's name; a passage or anchor as its title (else its opening words), in quotes."""
    node = kg.node(node_id)
    if node is None:
        return node_id
    if node.kind in ("chunk", "anchor"):
        title = str(node.attrs.get("title") or "") if node.kind == "chunk" else node.text
        text = title or node.text
        label = " ".join(text.split())
        label = label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "…"
        return f"passage \"{label}\"" if node.kind == "chunk" else f"section \"{label}\""
    label = " ".join(node.text.split())
    return label if len(label) <= LABEL_CHARS else label[:LABEL_CHARS - 1] + "…"


def edge_fact(kg: "KnowledgeGraph", edge_id: str) -> str:
    """``edge_id`` as a sentence-like fact: ``Marie Curie — born in → Warsaw``."""
    edge = kg.edge(edge_id)
    if edge is None:
        return f"(edge {edge_id} is no longer in the KG)"
    words = edge.text if edge.kind == "relation" and edge.text else EDGE_WORDS.get(edge.kind, edge.kind)
    return f"{node_label(kg, edge.src)} — {words} → {node_label(kg, edge.dst)}"


def _edge_record(kg: "KnowledgeGraph", key: str, value: dict[str, Any]) -> dict[str, Any]:
    v = np.asarray(value.get("v", []), dtype=np.float64)
    return {"edge": key, "fact": edge_fact(kg, key), "strength": round(float(np.linalg.norm(v)), 3),
            "uses": int(value.get("n", 0)), "questions": list(value.get("q", []))}


def _record(kg: "KnowledgeGraph", kind: str, key: str, value: dict[str, Any]) -> dict[str, Any]:
    """One stored item as a person reads it (see the module docstring)."""
    if kind == "edge_memory":
        return _edge_record(kg, key, value)
    if kind == "reflections":
        return {"question": value.get("question", ""), "attempt": value.get("attempt"),
                "failure": value.get("failure_type", ""), "answer": value.get("answer"),
                "root_cause": value.get("root_cause", ""), "advice": value.get("advice", "")}
    if kind == "trajectories":
        return {"question": value.get("question", ""), "attempt": value.get("attempt"),
                "answer": value.get("answer"), "outcome": value.get("outcome"),
                "steps": len(value.get("steps", []))}
    if kind == "summaries":
        return {"entity": node_label(kg, key), "summary": value.get("summary", ""), "facts": value.get("facts")}
    return {"key": key, **value}


def summarise_codebook(kg: "KnowledgeGraph", store: "BaseStore", scope: Sequence[str] = (), *,
                       limit: int = 20) -> dict[str, Any]:
    """The codebook of ``kg`` in tenant ``scope``: its sizes and up to ``limit`` stored questions
    (most recent first), each with its answers' text, cited passages, decider and whether those
    passages still hold the answer (``grounded``: only then is it served again)."""
    from langgraph_kgmem.graphs.autopruned.codebook import Codebook, grounded_in

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


def describe_memory(kg: "KnowledgeGraph", store: "BaseStore", kind: str | None = None, *,
                    limit: int = 20) -> list[dict[str, Any]]:
    """What ``kg`` remembers, per namespace: the keys of
    :func:`~langgraph_kgmem.memory.list_memory` (``namespace``, ``kind``, ``scope``, ``items``,
    ``sample``) plus ``records``: up to ``limit`` items as a person reads them (edge memories
    strongest first, other records most recent first), and for the codebook ``summary``
    (:func:`summarise_codebook`) instead of its raw pages."""
    out = []
    for ns in memory_namespaces(store, kg.name, kind):
        label, scope = ns[-1], list(ns[2:-1])
        items = list_items(store, ns)
        entry: dict[str, Any] = {"namespace": list(ns), "kind": label, "scope": scope, "items": len(items)}
        if label == "codebook":
            entry["summary"] = summarise_codebook(kg, store, scope, limit=limit)
            entry["sample"] = []   # raw pages of integer rows say nothing to a person
        else:
            records = [(it, _record(kg, label, it.key, dict(it.value))) for it in items]
            if label == "edge_memory":
                records.sort(key=lambda p: (-p[1]["strength"], -p[1]["uses"], p[0].key))
            else:
                records.sort(key=lambda p: (str(p[0].updated_at), p[0].key), reverse=True)
            records = records[:limit]
            entry["records"] = [r for _, r in records]
            entry["sample"] = [{"key": it.key, "value": _raw(label, dict(it.value)), "updated_at": str(it.updated_at)}
                               for it, _ in records]
        out.append(entry)
    return out


def _raw(kind: str, value: dict[str, Any]) -> dict[str, Any]:
    """An item as :func:`~langgraph_kgmem.memory.list_memory` shows it (an edge memory's vector
    as its update count and norm)."""
    if kind == "edge_memory" and "v" in value:
        return {"updates": int(value.get("n", 0)),
                "norm": round(float(np.linalg.norm(np.asarray(value["v"], dtype=np.float64))), 4)}
    return value


def _cut(text: Any, n: int = 160) -> str:
    s = " ".join(str(text if text is not None else "").split())
    return s if len(s) <= n else s[:n - 1] + "…"


def _format_records(kind: str, records: list[dict[str, Any]]) -> list[str]:
    lines: list[str] = []
    for r in records:
        if kind == "edge_memory":
            lines.append(f"  {r['fact']}")
            lines.append(f"      strength {r['strength']:.2f}, used {r['uses']} time(s)  [{r['edge']}]")
            lines.extend(f"      asked: {_cut(q, 120)}" for q in r["questions"])
        elif kind == "reflections":
            lines.append(f"  Q: {_cut(r['question'], 120)}  (attempt {r['attempt']}, {r['failure'] or 'no failure'})")
            lines.append(f"      answered {_cut(r['answer'], 60)!s}; why it failed: {_cut(r['root_cause'])}")
            lines.append(f"      advice kept: {_cut(r['advice'])}")
        elif kind == "trajectories":
            lines.append(f"  Q: {_cut(r['question'], 120)}  (attempt {r['attempt']}, {r['steps']} step(s))")
            lines.append(f"      answer {_cut(r['answer'], 80)}; outcome {r['outcome']}")
        elif kind == "summaries":
            lines.append(f"  {r['entity']} ({r['facts']} facts): {_cut(r['summary'])}")
        else:
            lines.append(f"  {_cut(r)}")
    return lines


def _format_codebook(summary: dict[str, Any]) -> list[str]:
    runs = summary["runs"]
    lines = [f"  {summary['entities']} entities, {summary['relations']} relations, {summary['edges']} facts "
             f"from {summary['documents']} document(s); runs: {runs['facts']} fact, {runs['questions']} question, "
             f"{runs['answers']} answer"]
    for q in summary["questions"]:
        lines.append(f"  Q: {_cut(q['question'], 120)}")
        if not q["answers"]:
            lines.append("      no stored answer (its answer was not grounded in the passages it cited)")
        for a in q["answers"]:
            cited = ", ".join(p["label"] for p in a["passages"]) or "(none)"
            served = "served again" if a["grounded"] else "not served: its passages no longer hold it"
            lines.append(f"      A: {_cut(a['answer'], 100)}  (by {a['by']}; {served})")
            lines.append(f"         from {_cut(cited, 140)}")
    return lines


def format_memory(listing: list[dict[str, Any]], kg_name: str, kind: str | None = None) -> str:
    """The listing of :func:`describe_memory` as text for a person (``kgmem memory``)."""
    if not listing:
        return f"KG {kg_name!r} has no memory" + (f" of kind {kind}" if kind else "") + " yet"
    lines: list[str] = []
    for ns in listing:
        scope = "/".join(ns["scope"]) or "(shared)"
        short = next((k for k, v in KINDS.items() if v == ns["kind"]), ns["kind"])
        count = ""
        if ns["kind"] != "codebook":   # a codebook's items are storage pages: its summary gives the counts
            shown = len(ns["records"])
            count = f" {ns['items']} item(s)" + (f", {shown} shown" if shown < ns["items"] else "")
        lines.append(f"{TITLES.get(ns['kind'], ns['kind'])} (--kind {short}), scope {scope}:{count}")
        if ns["kind"] == "codebook":
            lines.extend(_format_codebook(ns["summary"]))
        else:
            lines.extend(_format_records(ns["kind"], ns["records"]))
    return "\n".join(lines)


__all__ = ["EDGE_WORDS", "describe_memory", "edge_fact", "format_memory", "node_label", "summarise_codebook"]
