"""Graph tools and the GRBench loader."""

from __future__ import annotations

import json

import pytest

from langgraph_kgmem import KnowledgeGraph, create_kgmem_tools
from langgraph_kgmem.errors import KgmemInputError
from langgraph_kgmem.agent_tools import load_grbench

GRBENCH = {
    "author": {
        "a1": {"features": {"name": "Ursula Vance", "born": "1931"}, "neighbors": {"author-book": ["b1", "b2"]}},
        "a2": {"features": {"name": "Tomas Lind"}, "neighbors": {"author-book": ["b3"]}},
    },
    "book": {
        "b1": {"features": {"title": "The Salt Road", "year": "1970"}, "neighbors": {"book-author": ["a1"]}},
        "b2": {"features": {"title": "Glass Harbour", "year": "1974"}, "neighbors": {"book-author": ["a1", "zz"]}},
        "b3": {"features": {"title": "North of Nowhere"}, "neighbors": {"book-author": ["a2"]}},
    },
}


@pytest.fixture
def grbench_kg(tmp_path):
    g = KnowledgeGraph.in_memory(name="grb")
    path = tmp_path / "graph.json"
    path.write_text(json.dumps(GRBENCH))
    stats = load_grbench(g, path)
    assert stats == {"nodes": 5, "edges": 6, "dangling_neighbours": 1}
    return g


def test_grbench_tools_roundtrip(grbench_kg):
    t = {x.name: x for x in create_kgmem_tools(grbench_kg)}
    assert "a1" in t["RetrieveNode"].invoke({"keyword": "Ursula Vance"})
    assert t["NodeFeature"].invoke({"node_id": "b2", "feature": "year"}).endswith("<data>1974</data>")
    out = t["NeighbourCheck"].invoke({"node_id": "a1", "relation": "author-book"})
    assert "b1" in out and "b2" in out and "b3" not in out
    assert "2 neighbours" in t["NodeDegree"].invoke({"node_id": "a1", "relation": "author-book"})


def test_tools_explain_unknown_ids_features_relations(grbench_kg):
    t = {x.name: x for x in create_kgmem_tools(grbench_kg)}
    assert "does not exist" in t["NeighbourCheck"].invoke({"node_id": "nope", "relation": "x"})
    feat = t["NodeFeature"].invoke({"node_id": "b1", "feature": "isbn"})
    assert "no feature <data>isbn</data>" in feat and "title" in feat and "year" in feat
    rel = t["NeighbourCheck"].invoke({"node_id": "a1", "relation": "friend"})
    assert "no neighbours" in rel and "author-book" in rel
    assert "0 neighbours" in t["NodeDegree"].invoke({"node_id": "a1", "relation": "friend"})


def test_kg_entities_have_features_from_text(kg):
    t = {x.name: x for x in create_kgmem_tools(kg)}
    warsaw = kg.nearest("Warsaw", 1)[0][0]
    desc = t["NodeFeature"].invoke({"node_id": warsaw.id, "feature": "description"})
    assert "Warsaw" in desc


def test_grbench_loader_rejects_bad_shape(tmp_path):
    g = KnowledgeGraph.in_memory()
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(KgmemInputError, match="GRBench"):
        load_grbench(g, bad)
    with pytest.raises(KgmemInputError, match="cannot read"):
        load_grbench(g, tmp_path / "missing.json")


def test_remember_writes_a_fact_with_provenance(kg):
    from langgraph_kgmem.agent_tools import create_kgmem_tools

    assert "Remember" not in {t.name for t in create_kgmem_tools(kg)}
    tools = {t.name: t for t in create_kgmem_tools(kg, writable=True)}
    out = tools["Remember"].invoke({"subject": "Marie Curie", "relation": "was a member of",
                                    "object": "the Solvay Conferences", "source": "https://example.org/solvay"})
    assert out.startswith("Remembered:")
    fact = [e for e in kg.edges("relation") if e.text == "was a member of"]
    assert len(fact) == 1 and kg.node(fact[0].src).text == "Marie Curie"   # merged into the known entity
    doc = kg.graph_store.document(kg.graph_store.edge_sources(fact[0].id)[0])
    assert doc["meta"]["remembered_from"] == "https://example.org/solvay"
    assert tools["Remember"].invoke({"subject": "Marie Curie", "relation": "was a member of",
                                     "object": "the Solvay Conferences",
                                     "source": "https://example.org/solvay"}).startswith("Already remembered")
    assert "non-empty" in tools["Remember"].invoke({"subject": " ", "relation": "r", "object": "o", "source": "s"})
    assert "longer than" in tools["Remember"].invoke({"subject": "x" * 300, "relation": "r", "object": "o",
                                                      "source": "s"})
    found = tools["RetrieveNode"].invoke({"keyword": "Solvay Conferences"})
    assert "Solvay" in found


def test_all_tools_leave_out_kgirag_without_records(kg):
    from langgraph.store.memory import InMemoryStore

    from langgraph_kgmem.agents import create_all_tools

    names = {t.name for t in create_all_tools(kg, model="offline", store=InMemoryStore())}
    assert not any("kgirag" in n for n in names) and any("catrag" in n for n in names)
