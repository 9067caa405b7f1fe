"""``tools/bench.py --graph-quality``: gold passages within 1-3 hops of a question's linked entities."""

from __future__ import annotations

import json

from bench_helpers import FIXTURE, offline_kg  # also puts tools/ on sys.path

from benchlib import corpus as corpora
from benchlib import datasets, runner
from benchlib.graph_quality import link_question, measure, question_reach, reached_within
from langgraph_kgmem.kg.types import entity_id


def test_reached_within_counts_hops_from_the_nearest_seed():
    adj = {"a": {"b"}, "b": {"a", "c"}, "c": {"b", "d"}, "d": {"c"}, "x": {"d"}}
    assert reached_within(adj, ["a"], 2) == {"a": 0, "b": 1, "c": 2}
    assert reached_within(adj, ["a", "d"], 1) == {"a": 0, "d": 0, "b": 1, "c": 1}
    assert reached_within(adj, [], 3) == {}


def test_question_reach_is_the_share_of_gold_passages_per_hop_limit():
    adj = {"e1": {"p1", "e2"}, "p1": {"e1"}, "e2": {"e1", "p2"}, "p2": {"e2", "e3"}, "e3": {"p2", "p3"},
           "p3": {"e3"}}
    by_title = {"P1": ["p1"], "P2": ["p2"], "P3": ["p3"]}
    reach, spread = question_reach(adj, by_title, ["e1"], ["P1", "P2", "P3", "not in the KG"],
                                   {"p1": "P1", "p2": "P2", "p3": "P3"})
    assert reach == {1: 1 / 3, 2: 2 / 3, 3: 2 / 3}
    assert spread == 2
    assert question_reach(adj, by_title, ["e1"], ["absent"], {})[0] == {}


def test_a_bridge_passage_is_two_hops_from_the_question_entity():
    """q2 names the Nobel Prize; Marie Curie's passage says she won it ("She won ..."), and the
    polonium passage names her: one hop to her passage, two to polonium's through her entity."""
    questions = datasets.load_questions(str(FIXTURE))
    q2 = next(q for q in questions if q.id == "q2")
    kg = offline_kg(q2.passages)
    assert entity_id("Nobel Prize") in link_question(kg, q2.question)
    row = measure(kg, [q2])
    assert row["reach@1"] == 0.5 and row["reach@2"] == 1.0
    assert row["linked_share"] == 1.0 and row["scored"] == 1
    assert 0 < row["spread@2"] <= 1


def test_graph_quality_command_writes_its_row(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(corpora, "CACHE_DIR", tmp_path / "cache")
    out = tmp_path / "gq.json"
    code = runner.main(["--graph-quality", "--dataset", str(FIXTURE), "--embeddings", "hash", "--json", str(out)])
    assert code == 0
    row = json.loads(out.read_text())["results"][0]
    assert row["dataset"] == "bench_tiny" and row["questions"] == 3
    assert 0 <= row["reach@1"] <= row["reach@2"] <= row["reach@3"] <= 1
    assert "| bench_tiny |" in capsys.readouterr().out


def test_graph_quality_names_an_unknown_dataset(capsys):
    assert runner.main(["--graph-quality", "--dataset", "no-such-set", "--embeddings", "hash"]) == 2
    assert "unknown dataset 'no-such-set'" in capsys.readouterr().err
