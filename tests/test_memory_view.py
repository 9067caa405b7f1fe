"""Memory a person can read: kg.memory() and `kgmem memory` show facts, strengths, uses, the
questions that made each memory, reflections with their question, and the codebook summarised."""

from __future__ import annotations

import numpy as np
import pytest

from langgraph_kgmem.graphs.registry import get_factory
from langgraph_kgmem.memory import EDGE_QUESTIONS_KEPT, EdgeMemory, RecordMemory
from langgraph_kgmem.memory.view import edge_fact, format_memory

Q_BORN = "Where was Marie Curie born?"
Q_RIVER = "Which river flows through the capital of Poland?"


def ask(kg, method, *questions):
    factory, preset = get_factory(method)
    cp, store = kg.persistence()
    app = factory(kg, model="offline", **preset).compile(checkpointer=cp, store=store)
    return [app.invoke({"question": q}, {"configurable": {"thread_id": f"{method}-{i}"}})
            for i, q in enumerate(questions)]


def test_a_fact_reads_as_subject_relation_object(kg):
    born = next(e for e in kg.edges("relation") if "born" in e.text and kg.node(e.src).text == "Marie Curie")
    assert edge_fact(kg, born.id) == f"Marie Curie — {born.text} → {kg.node(born.dst).text}"
    context = next(e for e in kg.edges("context"))
    assert " — mentioned in → passage \"" in edge_fact(kg, context.id)
    assert "no longer in the KG" in edge_fact(kg, "rel-gone")


def test_edge_memories_show_fact_strength_uses_and_questions(kg):
    ask(kg, "remindrag", Q_BORN)
    (ns,) = kg.memory("edge")
    assert {"namespace", "kind", "scope", "items", "sample"} <= set(ns)          # the keys it always had
    assert {"updates", "norm"} == set(ns["sample"][0]["value"])
    strengths = [r["strength"] for r in ns["records"]]
    assert strengths == sorted(strengths, reverse=True) and strengths[0] > 0      # strongest first
    credited = [r for r in ns["records"] if r["questions"]]
    assert credited and all(r["questions"] == [Q_BORN] and r["uses"] == 1 for r in credited)
    assert all(r["fact"] == edge_fact(kg, r["edge"]) for r in ns["records"])
    text = format_memory(kg.memory("edge"), kg.name)
    assert credited[0]["fact"] in text and f"asked: {Q_BORN}" in text


def test_an_edge_keeps_its_most_recent_questions(store):
    mem = EdgeMemory(store, "kg", 2)
    for i in range(EDGE_QUESTIONS_KEPT + 2):
        mem.update(["e1", "e2"], lambda k, old: old + 0.1, question=f"question {i}?", credited=["e1"])
    mem.update(["e1"], lambda k, old: old + 0.1, question="question 3?", credited=["e1"])   # asked again: moves last
    kept = store.get(mem.ns, "e1").value["q"]
    assert kept[-1] == "question 3?" and len(kept) == EDGE_QUESTIONS_KEPT and kept.count("question 3?") == 1
    assert "q" not in store.get(mem.ns, "e2").value                     # penalised or uncredited: no question
    assert np.allclose(mem.get("e1"), [0.8, 0.8])


def test_reflections_show_their_question_and_advice(kg):
    _, store = kg.persistence()
    RecordMemory(store, kg.name, "reflections").put("run-1", {
        "run_id": "run", "question": Q_RIVER, "attempt": 1, "failure_type": "wrong_entity", "answer": "Oder",
        "root_cause": "followed the wrong river", "advice": "start from Warsaw", "retry": True})
    (ns,) = kg.memory("reflection")
    assert ns["records"] == [{"question": Q_RIVER, "attempt": 1, "failure": "wrong_entity", "answer": "Oder",
                              "root_cause": "followed the wrong river", "advice": "start from Warsaw"}]
    text = format_memory([ns], kg.name)
    assert f"Q: {Q_RIVER}" in text and "advice kept: start from Warsaw" in text and "wrong_entity" in text


def test_the_codebook_is_summarised_with_stored_questions_and_provenance(kg):
    ask(kg, "autopruned", Q_BORN)
    (ns,) = kg.memory("codebook")
    summary = ns["summary"]
    assert summary["entities"] > 0 and summary["relations"] > 0 and summary["runs"]["questions"] == 1
    (stored,) = summary["questions"]
    assert stored["question"] == Q_BORN
    (answer,) = stored["answers"]
    assert "Warsaw" in answer["answer"] and answer["by"].startswith("offline") and answer["grounded"]
    assert answer["passages"] and all(kg.node(p["id"]) is not None for p in answer["passages"])
    assert ns["sample"] == []     # no raw pages of integer rows
    text = format_memory([ns], kg.name)
    assert f"Q: {Q_BORN}" in text and "served again" in text and "{" not in text


@pytest.mark.parametrize("kind", [None, "edge"])
def test_an_empty_memory_says_so(kg, kind):
    assert kg.memory(kind) == []
    of_kind = f" of kind {kind}" if kind else ""
    assert format_memory([], kg.name, kind) == f"KG {kg.name!r} has no memory{of_kind} yet"
