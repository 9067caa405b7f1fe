"""What first-half feedback touched of the second half (``tools/benchlib/feedback_reach.py``): the
channels count only missed gold passages, each by what it reads, and the propagation re-ranking."""

from __future__ import annotations

import numpy as np

from bench_helpers import SPLIT_PASSAGES, offline_kg, split_question  # noqa: I001  (puts tools/ on sys.path)
from benchlib.feedback_reach import Entities, Taught, keys, propagate, reach, reach_rows

from langgraph_kgmem.embeddings import get_embeddings

PASSAGES = SPLIT_PASSAGES
question = split_question


def docs_by_title(ents):
    return {ents.kg.node(ids[0]).attrs["title"]: d for d, ids in ents.nodes.items()}


def test_each_channel_counts_a_missed_gold_passage_by_what_it_reads():
    kg = offline_kg(PASSAGES)
    ents = Entities(kg)
    d = docs_by_title(ents)
    assert ents.of(d["Ulm"]) & ents.of(d["Bern"])          # Albert Einstein: an entity both passages mention
    second = [question("q", "Where did Albert Einstein work?", ["Bern"])]
    cold = [[d["Paris"], d["Seine"], d["Danube"], d["Vistula"], d["Warsaw"], d["Bern"]]]   # Bern missed (6th)
    # marked useful: Ulm, which shares Albert Einstein with the missed gold passage Bern
    row = reach(Taught(useful=[{d["Ulm"]}], wrong=[{d["Paris"]}], vectors=[np.ones(1)]), second, cold, ents)
    assert row["recall@5_cold"] == 0.0 and row["gold_missed"] == 1 and row["gold_missed_outside_depth"] == 0
    assert (row["reached_passage"], row["reached_entity"], row["reached_edge"]) == (0, 1, 1)
    assert ents.relations(d["Ulm"]) & ents.relations(d["Bern"]) and row["reached_relation"] == 1
    assert row["ceiling_entity"] == row["ceiling_entity_in_depth"] == 100.0 and row["ceiling_passage"] == 0.0
    # the same passage marked wrong instead: it is touched itself, but no useful passage names its entities
    row = reach(Taught(useful=[{d["Seine"]}], wrong=[{d["Ulm"], d["Bern"]}], vectors=[np.ones(1)]), second, cold, ents)
    assert (row["reached_passage"], row["reached_entity"], row["reached_relation"]) == (1, 0, 0)
    assert (row["gold_marked_useful"], row["gold_marked_wrong"], row["marked_wrong"]) == (0, 1, 2)
    # a gold passage in the top 5 is not missed, and one beyond the ranking's depth is outside it
    row = reach(Taught(useful=[{d["Ulm"]}], wrong=[set()], vectors=[np.ones(1)]), second, [[d["Bern"]]], ents)
    assert row["gold_missed"] == 0 and row["recall@5_cold"] == 100.0
    row = reach(Taught(useful=[{d["Ulm"]}], wrong=[set()], vectors=[np.ones(1)]), second, [[d["Paris"]]], ents)
    assert row["gold_missed_outside_depth"] == 1 and row["ceiling_entity"] == 100.0
    assert row["ceiling_entity_in_depth"] == 0.0
    kg.close()


def test_propagation_lifts_what_shares_a_useful_passages_entities_and_its_gate_closes_it():
    kg = offline_kg(PASSAGES)
    ents = Entities(kg)
    d = docs_by_title(ents)
    second = [question("q", "Where did Albert Einstein work?", ["Bern"])]
    cold = [[d["Paris"], d["Seine"], d["Danube"], d["Vistula"], d["Warsaw"], d["Bern"]]]
    taught = Taught(useful=[{d["Ulm"]}], wrong=[set()], vectors=[np.array([1.0, 0.0])])
    v = [np.array([1.0, 0.0])]
    assert propagate(taught, second, cold, v, ents, weight=0.0, gate=None, penalise=False) == 0.0
    assert propagate(taught, second, cold, v, ents, weight=0.01, gate=None, penalise=False) == 100.0
    # a first-half question unlike this one (cosine 0 < gate) teaches it nothing
    assert propagate(taught, second, cold, [np.array([0.0, 1.0])], ents, weight=0.01, gate=0.5, penalise=False) == 0.0
    # the entities of passages marked wrong pull down what shares them (penalise)
    wrong = Taught(useful=[set()], wrong=[{d["Ulm"]}], vectors=[np.array([1.0, 0.0])])
    top = [[d["Danube"], d["Bern"], d["Paris"], d["Seine"], d["Vistula"], d["Warsaw"]]]
    assert propagate(wrong, second, top, v, ents, weight=0.01, gate=None, penalise=True) == 0.0
    assert propagate(wrong, second, top, v, ents, weight=0.01, gate=None, penalise=False) == 100.0
    kg.close()


def test_the_rows_run_on_the_splits_own_rankings():
    kg = offline_kg(PASSAGES)
    first = [question("q1", "Which sea does the river of Albert Einstein's birthplace flow into?", ["Ulm", "Danube"])]
    second = [question("q2", "Where did Albert Einstein work?", ["Bern"]),
              question("q3", "Which sea does the river of Marie Curie's birthplace flow into?", ["Warsaw", "Vistula"])]
    (row,) = reach_rows(kg, get_embeddings("hash"), "toy", first, second, methods=("hipporag2",))
    assert row["recall@5_check"] == row["recall@5_cold"]   # passages as R@5 counts them
    assert row["reached_passage"] <= row["gold_missed"] and row["reached_entity"] <= row["reached_edge"]
    assert all(0 <= v <= 100 for v in row["propagate"].values())
    ents = Entities(kg)
    assert keys(ents, [i for ids in ents.nodes.values() for i in ids]) == list(ents.nodes)
    kg.close()
