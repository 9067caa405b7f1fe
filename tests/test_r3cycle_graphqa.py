"""The synthetic GRBench-format graph and its templated questions (exact answers, gold paths)."""

from __future__ import annotations

import pytest

from langgraph_kgmem import KnowledgeGraph
from langgraph_kgmem.agent_tools.graphqa import LEVELS, make_domain_graph, make_questions
from langgraph_kgmem.agent_tools import GraphEnv, load_grbench


def test_graph_is_seeded_and_mirrored():
    a, b = make_domain_graph(seed=7), make_domain_graph(seed=7)
    assert a == b and a != make_domain_graph(seed=8)
    for bid, rec in a["book"].items():
        author = rec["neighbors"]["author"][0]
        assert bid in a["author"][author]["neighbors"]["written_books"]
        assert bid in a["publisher"][rec["neighbors"]["publisher"][0]]["neighbors"]["published_books"]
    titles = [r["features"]["title"] for r in a["book"].values()]
    assert len(set(titles)) == len(titles)


def test_questions_cover_levels_and_gold_paths_reach_the_answer():
    data = make_domain_graph(seed=0)
    kg = KnowledgeGraph.in_memory(name="gqa")
    assert load_grbench(kg, data)["dangling_neighbours"] == 0
    env = GraphEnv(kg)
    qs = make_questions(data, n=30, seed=0)
    assert [q.question for q in qs] == [q.question for q in make_questions(data, n=30, seed=0)]
    assert {q.level for q in qs} == set(LEVELS) and len({q.question for q in qs}) == 30
    run = {"RetrieveNode": lambda a: env.retrieve_node(a["keyword"]),
           "NodeFeature": lambda a: env.node_feature(a["node_id"], a["feature"]),
           "NeighbourCheck": lambda a: env.neighbour_check(a["node_id"], a["relation"]),
           "NodeDegree": lambda a: env.node_degree(a["node_id"], a["relation"])}
    for q in qs:
        assert q.gold_path[-1] == {"tool": "Finish", "args": {"answer": q.answer}}
        observations = [run[s["tool"]](s["args"]) for s in q.gold_path[:-1]]
        first_id = q.gold_path[1]["args"]["node_id"]
        assert first_id in observations[0], (q.question, observations[0])   # retrieval finds the gold node
        assert q.answer in observations[-1], (q.question, observations[-1])
        if q.level == "hard":
            assert q.gold_path[-2]["tool"] == "NodeDegree"
        if q.level == "medium":
            assert any(s["tool"] == "NeighbourCheck" for s in q.gold_path)
    kg.close()


def test_bad_sizes_are_rejected():
    with pytest.raises(ValueError, match="at least one node"):
        make_domain_graph(books=0)
    with pytest.raises(ValueError, match="unknown levels"):
        make_questions(make_domain_graph(), levels=("trivial",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="too small"):
        make_questions(make_domain_graph(books=2, authors=1, publishers=1, genres=1), n=200)
