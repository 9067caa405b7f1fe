"""The sentence-fill record and replay (tools/benchlib/apr_fill_replay.py): replaying a recorded
question with no change gives the groups the graph showed, so fill rules compared on a record are
compared against what the graph does; and a variant is really re-filled, not copied."""

from __future__ import annotations

import pytest
from bench_helpers import TOOLS  # noqa: F401  (puts tools/ on sys.path)
from benchlib.apr_fill_replay import recording, replay_one
from langgraph.store.memory import InMemoryStore

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.graphs.autopruned import create_autopruned_graph

DOCS = [
    {"title": "Pierre Curie", "text": "Pierre Curie was a physicist who taught at the Sorbonne. Pierre Curie died in "
                                      "Paris. His death came on 19 April 1906. He married Marie Curie in 1895."},
    {"title": "Marie Curie", "text": "Marie Curie was born in Warsaw. She won the Nobel Prize in Physics in 1903 "
                                     "with Pierre Curie. She later led the Radium Institute."},
    {"title": "Warsaw", "text": "Warsaw is the capital of Poland. Warsaw lies on the Vistula river."},
    {"title": "Vistula", "text": "The Vistula flows into the Baltic Sea near Gdansk. It is the longest river of Poland."},
]
QUESTIONS = ["When did Pierre Curie die?", "Which river flows through the city where Marie Curie was born?"]


def _records(**opts) -> list[dict]:
    kg = KnowledgeGraph.in_memory(name="fill-replay")
    kg.add_documents(DOCS, model="offline")
    app = create_autopruned_graph(kg, model="offline", extraction="offline", phrase_facts="always", memorize=False,
                                  consolidate=False, **opts).compile(store=InMemoryStore())
    recs: list[dict] = []
    with recording(recs):
        for q in QUESTIONS:
            app.invoke({"question": q})
    return recs


@pytest.mark.parametrize("budget", [12, 20, 30, 45])
def test_replay_reproduces_the_graphs_fill_and_a_variant_refills(budget):
    """At budgets from one sentence to most of them, the replay shows what the graph showed."""
    recs = _records(sentence_budget=budget)
    assert [r["question"] for r in recs] == QUESTIONS
    for r in recs:
        groups, _ = replay_one(r, {})
        assert [(g["chunk"], g["place"], g["sentences"]) for g in groups] == \
               [(g["chunk"], g["place"], g["sentences"]) for g in r["groups"]]
        small, _ = replay_one(r, {"budget": 1})   # the best sentence alone, as the fill keeps it
        assert sum(len(g["sentences"]) for g in small) == 1
    assert budget < 30 or any(sum(len(g["sentences"]) for g in r["groups"]) > 1 for r in recs)


def test_replay_refuses_a_record_it_cannot_reproduce():
    """A record of a fill the replay does not implement (here a sentence cover) is refused."""
    rec = _records(sentence_budget=40, sentence_cover=2)[0]
    with pytest.raises(ValueError, match="cover"):
        replay_one(rec, {})


def test_named_variants_recompute_the_answer_term_and_refill_with_every_candidate():
    """``ans8-w0.5`` recomputes the recorded answer term (the answer step's 8 candidates, weight
    0.5): the same fill order as the record's. The greedy re-rankings keep every candidate once;
    an unknown name is refused."""
    from benchlib.apr_fill_replay import variant

    for r in _records(sentence_budget=30):
        assert replay_one(r, variant("ans8-w0.5"))[1] == replay_one(r, {})[1]
        for name in ("pdecay0.1", "novel0.2", "qcover0.5"):
            order = replay_one(r, variant(name))[1]
            assert sorted(order) == sorted(tuple(x) for x in r["cands"])
    with pytest.raises(ValueError, match="unknown fill variant"):
        variant("bogus")
